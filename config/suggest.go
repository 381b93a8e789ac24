package config

import "strings"

// levenshtein returns the edit distance (insertions, deletions and
// substitutions, each costing one) between a and b, compared by runes.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// suggest returns the candidate closest to given, or "" when none is close
// enough to be a plausible typo. Ties go to the earlier candidate, so callers
// pass candidates in a stable order.
func suggest(given string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		if c == given {
			continue
		}
		d := levenshtein(given, c)
		// A third of the longer name, at least 2: "snesors" → "sensors" but
		// not "x" → "ack". A prefix one way or the other ("warning" →
		// "warn") is a likely mix-up too.
		limit := max(2, max(len(given), len(c))/3)
		prefix := min(len(given), len(c)) >= 3 && (strings.HasPrefix(given, c) || strings.HasPrefix(c, given))
		if (d <= limit || prefix) && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// didYouMean formats a suggestion as a sentence to append to a Detail, with a
// leading space, or "" when there is none.
func didYouMean(given string, candidates []string) string {
	if s := suggest(given, candidates); s != "" {
		return " Did you mean \"" + s + "\"?"
	}
	return ""
}
