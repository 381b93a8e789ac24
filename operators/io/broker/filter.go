package broker

import (
	"fmt"
	"strings"
)

// ValidateFilter returns an error unless filter is a valid MQTT topic filter:
// not empty, '#' only as the whole last level, '+' only as a whole level.
// Configuration should call it: Subscribe panics on an invalid filter.
func ValidateFilter(filter string) error {
	if filter == "" {
		return fmt.Errorf("broker: empty topic filter")
	}
	levels := strings.Split(filter, "/")
	for i, level := range levels {
		switch {
		case level == "#" && i != len(levels)-1:
			return fmt.Errorf("broker: topic filter %q: '#' must be the last level", filter)
		case level != "#" && level != "+" && strings.ContainsAny(level, "#+"):
			return fmt.Errorf("broker: topic filter %q: wildcards must fill a whole level", filter)
		}
	}
	return nil
}

// matchFilter reports whether topic matches the valid filter, following MQTT
// 3.1.1 section 4.7: '+' matches one level, a trailing '#' matches the parent
// level and everything below, and a wildcard in the first level does not
// match topics that start with '$'. It does not allocate.
func matchFilter(filter, topic string) bool {
	if len(topic) > 0 && topic[0] == '$' && len(filter) > 0 && (filter[0] == '+' || filter[0] == '#') {
		return false
	}
	for {
		fl, frest, fmore := strings.Cut(filter, "/")
		if fl == "#" {
			return true
		}
		tl, trest, tmore := strings.Cut(topic, "/")
		if fl != "+" && fl != tl {
			return false
		}
		switch {
		case !fmore && !tmore:
			return true
		case !tmore:
			// "a/#" matches "a": the rest of the filter must be exactly "#".
			return frest == "#"
		case !fmore:
			return false
		}
		filter, topic = frest, trest
	}
}

// MatchFilter reports whether topic matches the MQTT filter (+ and #
// wildcards; topics starting with $ match no leading wildcard). It does not
// allocate.
func MatchFilter(filter, topic string) bool { return matchFilter(filter, topic) }
