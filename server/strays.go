package main

import (
	"sort"
	"strings"
)

// strayVariable is a WR_ variable of the environment that is no setting: most often a
// misspelt one, whose setting then keeps its default without a word unless someone says so.
type strayVariable struct {
	name    string
	closest string // the setting it most likely means; empty when none is near
}

func (v strayVariable) String() string {
	if v.closest == "" {
		return v.name + " is not a setting and is ignored (waitroom -h lists them)"
	}
	return v.name + " is not a setting and is ignored; did you mean " + v.closest + "?"
}

// strayVariables finds the WR_ names in env that no setting has, in name order.
func strayVariables(env environ) []strayVariable {
	known := make(map[string]bool, len(settings))
	for _, s := range settings {
		known[s.name] = true
	}
	seen := map[string]bool{}
	var out []strayVariable
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "WR_") || known[name] || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, strayVariable{name: name, closest: closestSetting(name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// closestSetting is the setting at the least edit distance from name (the first in the
// table on a tie), when that distance looks like a slip: at most a third of the name's
// length, and at least 2 allowed (WR_REDIS_URL → REDIS_URL is 3 of 12).
func closestSetting(name string) string {
	best, bestD := "", -1
	for _, s := range settings {
		if d := editDistance(name, s.name); bestD < 0 || d < bestD {
			best, bestD = s.name, d
		}
	}
	if bestD > max(2, len(name)/3) {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions, deletions,
// substitutions and swaps of neighbours each cost 1, so WR_DEMO_RAET is 1 from
// WR_DEMO_RATE (a swap is the commonest typing slip; plain Levenshtein counts it 2).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j].
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
