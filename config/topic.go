package config

import (
	"errors"
	"strings"
)

// maxTopicLen is MQTT's limit on a topic's UTF-8 length (a 16-bit prefix).
const maxTopicLen = 65535

// validateTopicFilter checks an MQTT 3.1.1 subscription filter (section
// 4.7): not empty, no NUL, "#" only as the whole last level, "+" only as a
// whole level. It returns an error naming the broken rule.
func validateTopicFilter(f string) error {
	if err := validateTopicCommon(f); err != nil {
		return err
	}
	levels := strings.Split(f, "/")
	if levels[0] == "$share" {
		// A shared subscription as MQTT 5 writes it: $share/GROUP/FILTER,
		// the group one level without wildcards.
		if len(levels) < 3 || levels[1] == "" || strings.ContainsAny(levels[1], "+#") {
			return errors.New("config: a shared subscription is \"$share/GROUP/FILTER\", GROUP one level without \"+\" or \"#\", as in \"$share/eddy/sensors/#\"")
		}
		levels = levels[2:]
	}
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return errors.New("config: \"#\" must be the whole last level of a filter, as in \"sensors/#\"")
		}
		if strings.Contains(l, "+") && l != "+" {
			return errors.New("config: \"+\" must be a whole level of a filter, as in \"sensors/+/telemetry\"")
		}
	}
	return nil
}

// validateTopicName checks an MQTT topic to publish to: like a filter, but
// wildcards are not allowed at all.
func validateTopicName(name string) error {
	if err := validateTopicCommon(name); err != nil {
		return err
	}
	if strings.ContainsAny(name, "+#") {
		return errors.New("config: a topic to publish to cannot contain the wildcards \"+\" or \"#\"")
	}
	return nil
}

func validateTopicCommon(s string) error {
	switch {
	case s == "":
		return errors.New("config: a topic cannot be empty")
	case len(s) > maxTopicLen:
		return errors.New("config: a topic is at most 65535 bytes")
	case strings.ContainsRune(s, 0):
		return errors.New("config: a topic cannot contain a NUL character")
	}
	return nil
}
