package draw

import "math"

// The chi-square helpers test that a drawn place does not depend on join order. They are
// exported (not in a _test file) so that tests elsewhere, which run real draws end to end,
// apply the same statistic and threshold as this package's own tests.

// ChiSquareUniform returns Pearson's chi-square statistic of a contingency table and its
// degrees of freedom. counts[i][j] is how many times the participant who joined i-th (or
// the i-th group of joiners) was drawn at place j (or in the j-th group of places), summed
// over many draws. Under a fair draw the place is independent of the join rank, so the
// expected count of a cell is its row total times its column total over the grand total —
// uniform, since in a draw every row and every column has the same total. Rows and
// columns with a zero total carry no information and are left out; df is (rows-1)(cols-1)
// of what remains.
//
// Each draw fills the table like a random permutation (both margins are fixed per draw),
// not with independent samples, so under a fair draw the statistic is distributed as
// m/(m-1) times chi-square with df degrees of freedom, m being the number of participants
// per draw: negligible for hundreds of participants, but a caller drawing a handful (5:
// 1.25) should multiply the statistic by (m-1)/m before comparing it.
func ChiSquareUniform(counts [][]int) (stat float64, df int) {
	rows := make([]float64, len(counts))
	var cols []float64
	var total float64
	for i, row := range counts {
		if len(row) > len(cols) {
			cols = append(cols, make([]float64, len(row)-len(cols))...)
		}
		for j, c := range row {
			rows[i] += float64(c)
			cols[j] += float64(c)
			total += float64(c)
		}
	}
	if total == 0 {
		return 0, 0
	}
	for i, row := range counts {
		if rows[i] == 0 {
			continue
		}
		for j, col := range cols {
			if col == 0 {
				continue
			}
			var o float64
			if j < len(row) {
				o = float64(row[j])
			}
			e := rows[i] * col / total
			stat += (o - e) * (o - e) / e
		}
	}
	return stat, (nonZero(rows) - 1) * (nonZero(cols) - 1)
}

func nonZero(xs []float64) int {
	n := 0
	for _, x := range xs {
		if x != 0 {
			n++
		}
	}
	return n
}

// z001 is the standard normal quantile exceeded with probability 0.001.
const z001 = 3.090232306167813

// ChiSquareCritical001 returns the value a chi-square variable with df degrees of freedom
// exceeds with probability 0.001: a test that rejects above it fails a fair draw once in a
// thousand runs. It uses the Wilson–Hilferty approximation,
// df·(1 − 2/(9df) + z·√(2/(9df)))³ with z the normal 0.999 quantile, which needs no table
// and errs on the lenient side by less than 0.6% from df = 10 up (16 df: 39.39 against
// the exact 39.25), 3% at 1 df (11.16 against 10.83). df ≤ 0 returns 0.
func ChiSquareCritical001(df int) float64 {
	if df <= 0 {
		return 0
	}
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+z001*math.Sqrt(a), 3)
}
