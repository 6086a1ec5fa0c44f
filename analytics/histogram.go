package analytics

import (
	"math"
	"slices"
)

// WaitBounds are the upper bounds, in seconds, of the wait-time histogram's buckets; a last
// bucket (+Inf) follows them. Fixed, so that histograms of any rows merge by adding counts.
var WaitBounds = [...]float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600}

// nBuckets is the number of histogram buckets, +Inf included.
const nBuckets = len(WaitBounds) + 1

// exactSamples is how many wait samples a step keeps for its exact p50/p95; a step that
// admits more answers from its histogram (interpolated within the bucket).
const exactSamples = 1024

// histogram counts wait samples in the WaitBounds buckets.
type histogram [nBuckets]int64

// bucketOf is the index of the bucket holding sec (le: a sample equal to a bound is in it).
func bucketOf(sec float64) int {
	for i, b := range WaitBounds {
		if sec <= b {
			return i
		}
	}
	return nBuckets - 1
}

func (h *histogram) add(sec float64) { h[bucketOf(sec)]++ }

func (h *histogram) merge(o histogram) {
	for i := range h {
		h[i] += o[i]
	}
}

func (h histogram) count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// quantile estimates the q-quantile (0 < q ≤ 1): linear within the bucket that holds it,
// from the bucket's lower bound to its upper bound (the +Inf bucket answers its lower
// bound, 3600 s: nothing better is known). ok is false for an empty histogram.
func (h histogram) quantile(q float64) (v float64, ok bool) {
	n := h.count()
	if n == 0 {
		return 0, false
	}
	rank := q * float64(n)
	var seen float64
	for i, c := range h {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			lo := 0.0
			if i > 0 {
				lo = WaitBounds[i-1]
			}
			if i == nBuckets-1 {
				return lo, true
			}
			hi := WaitBounds[i]
			return lo + (hi-lo)*(rank-seen)/float64(c), true
		}
		seen += float64(c)
	}
	return WaitBounds[len(WaitBounds)-1], true
}

// fromSlice reads a histogram stored as a bigint[]; a shorter array (an older bucket
// list) fills the first buckets.
func histogramOf(v []int64) histogram {
	var h histogram
	copy(h[:], v)
	return h
}

// exactQuantile is the nearest-rank q-quantile of samples (sorted in place).
func exactQuantile(samples []float64, q float64) float64 {
	slices.Sort(samples)
	i := int(math.Ceil(q*float64(len(samples)))) - 1
	return samples[min(max(i, 0), len(samples)-1)]
}

// round3 keeps a number of seconds to the millisecond for the JSON answers.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
