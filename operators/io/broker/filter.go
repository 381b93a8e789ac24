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

// filterCovers reports whether every topic the valid filter requested
// matches is matched by the valid filter allowed as well, so a client
// allowed allowed may subscribe to requested; a topic is a filter without
// wildcards. A wildcard first level of allowed covers no requested filter
// or topic starting with '$', as it matches no such topic (section 4.7.2):
// "#" does not open $SYS, "$SYS/#" does.
func filterCovers(allowed, requested string) bool {
	if len(requested) > 0 && requested[0] == '$' && len(allowed) > 0 && (allowed[0] == '+' || allowed[0] == '#') {
		return false
	}
	for first := true; ; first = false {
		al, arest, amore := strings.Cut(allowed, "/")
		if al == "#" {
			return true
		}
		rl, rrest, rmore := strings.Cut(requested, "/")
		switch {
		case rl == "#":
			// Only "#" covers "#", and "+/#" in the first level (no topic
			// is empty, so a first "#" matches no parent level "+" misses).
			return first && al == "+" && arest == "#"
		case al != "+" && al != rl:
			return false // a literal covers only itself, not "+"
		}
		switch {
		case !amore && !rmore:
			return true
		case !rmore:
			// "a/#" covers "a" (it matches the parent level).
			return arest == "#"
		case !amore:
			return false
		}
		allowed, requested = arest, rrest
	}
}

// sharePrefix starts a shared subscription's filter: $share/GROUP/FILTER.
const sharePrefix = "$share/"

// unshared returns the filter a shared subscription stands for, or filter
// itself when it is not shared.
func unshared(filter string) string {
	if rest, ok := strings.CutPrefix(filter, sharePrefix); ok {
		if _, f, ok := strings.Cut(rest, "/"); ok {
			return f
		}
	}
	return filter
}
