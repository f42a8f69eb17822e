// Package suggest finds the name a user most likely meant when they typed one that does
// not exist: the closest candidate by edit distance, when it is close enough to be a
// typo rather than another name.
package suggest

import "unicode/utf8"

// Closest returns the candidate nearest to name (Damerau–Levenshtein distance, an
// adjacent swap counting once), if it is within a typo's reach: at most 1 edit for
// names of up to 4 characters, 2 up to 8, else 3. Ties go to the earlier candidate.
// It returns "" when none is that close, or when name is itself a candidate.
func Closest(name string, candidates []string) string {
	best, bestDist := "", -1
	limit := reach(utf8.RuneCountInString(name))
	for _, c := range candidates {
		if c == name {
			return ""
		}
		d := distance([]rune(name), []rune(c))
		if d <= limit && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// DidYouMean is the suffix an error message about name gets: ` (did you mean "bash"?)`
// for the Closest candidate, or "" when there is none.
func DidYouMean(name string, candidates []string) string {
	c := Closest(name, candidates)
	if c == "" {
		return ""
	}
	return ` (did you mean "` + c + `"?)`
}

func reach(n int) int {
	switch {
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	}
	return 3
}

// distance is the optimal string alignment distance between a and b.
func distance(a, b []rune) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
