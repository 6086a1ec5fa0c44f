package main

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"
)

// hist is a lock-free, mergeable latency histogram: log buckets of 2 % width over
// microseconds (1 µs … ~5 h), so processes can add theirs up and quantiles stay within
// 2 % of the truth. The maximum is exact.
type hist struct {
	n       atomic.Uint64
	sumUS   atomic.Uint64
	maxUS   atomic.Uint64
	buckets [histBuckets]atomic.Uint64
}

const (
	histBuckets = 1200
	histBase    = 1.02
)

var logBase = math.Log(histBase)

func bucketOf(us float64) int {
	if us < 1 {
		return 0
	}
	i := int(math.Log(us)/logBase) + 1
	return min(i, histBuckets-1)
}

// bucketValue is the representative value of bucket i (its geometric middle).
func bucketValue(i int) float64 {
	if i == 0 {
		return 0.5
	}
	return math.Pow(histBase, float64(i-1)+0.5)
}

// add records one duration; negatives count as 0.
func (h *hist) add(d time.Duration) {
	us := float64(d) / float64(time.Microsecond)
	if us < 0 {
		us = 0
	}
	h.n.Add(1)
	h.sumUS.Add(uint64(us))
	h.buckets[bucketOf(us)].Add(1)
	u := uint64(us)
	for {
		m := h.maxUS.Load()
		if u <= m || h.maxUS.CompareAndSwap(m, u) {
			break
		}
	}
}

// histJSON is the wire and report form: sparse buckets.
type histJSON struct {
	N       uint64            `json:"n"`
	SumUS   uint64            `json:"sum_us"`
	MaxUS   uint64            `json:"max_us"`
	Buckets map[string]uint64 `json:"buckets,omitempty"`
}

func (h *hist) snapshot() histJSON {
	out := histJSON{N: h.n.Load(), SumUS: h.sumUS.Load(), MaxUS: h.maxUS.Load(), Buckets: map[string]uint64{}}
	for i := range h.buckets {
		if c := h.buckets[i].Load(); c > 0 {
			out.Buckets[strconv.Itoa(i)] = c
		}
	}
	return out
}

func (a *histJSON) merge(b histJSON) {
	a.N += b.N
	a.SumUS += b.SumUS
	a.MaxUS = max(a.MaxUS, b.MaxUS)
	if a.Buckets == nil {
		a.Buckets = map[string]uint64{}
	}
	for k, v := range b.Buckets {
		a.Buckets[k] += v
	}
}

// quantileMS returns the q-quantile (0..1) in milliseconds; the maximum for q=1.
func (a histJSON) quantileMS(q float64) float64 {
	if a.N == 0 {
		return 0
	}
	if q >= 1 {
		return float64(a.MaxUS) / 1000
	}
	counts := make([]uint64, histBuckets)
	for k, v := range a.Buckets {
		if i, err := strconv.Atoi(k); err == nil && i >= 0 && i < histBuckets {
			counts[i] += v
		}
	}
	rank := uint64(math.Ceil(q * float64(a.N)))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank && c > 0 {
			return math.Min(bucketValue(i), float64(a.MaxUS)) / 1000
		}
	}
	return float64(a.MaxUS) / 1000
}

func (a histJSON) meanMS() float64 {
	if a.N == 0 {
		return 0
	}
	return float64(a.SumUS) / float64(a.N) / 1000
}

// summary is the short form printed in reports.
type summary struct {
	N      uint64  `json:"n"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
}

func (a histJSON) summary() summary {
	r := func(f float64) float64 { return math.Round(f*1000) / 1000 }
	return summary{N: a.N, MeanMS: r(a.meanMS()), P50MS: r(a.quantileMS(.5)), P90MS: r(a.quantileMS(.9)),
		P99MS: r(a.quantileMS(.99)), MaxMS: r(a.quantileMS(1))}
}
