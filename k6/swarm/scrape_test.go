package main

import "testing"

func TestHistQuantilesOverAWindowAndInstances(t *testing.T) {
	t.Parallel()
	bucket := func(le string) string { return `h_seconds_bucket{le="` + le + `"}` }
	// Two instances; at a, instance 1 already holds 10 observations under 1 ms, which the
	// window must not count.
	zero := metricsSample{bucket("0.001"): 0, bucket("0.01"): 0, bucket("0.1"): 0, bucket("+Inf"): 0}
	a := sample{m: []metricsSample{
		{bucket("0.001"): 10, bucket("0.01"): 10, bucket("0.1"): 10, bucket("+Inf"): 10},
		zero,
	}}
	// In the window: 98 observations in (1 ms, 10 ms], 2 in (10 ms, 100 ms].
	b := sample{m: []metricsSample{
		{bucket("0.001"): 10, bucket("0.01"): 60, bucket("0.1"): 61, bucket("+Inf"): 61},
		{bucket("0.001"): 0, bucket("0.01"): 48, bucket("0.1"): 49, bucket("+Inf"): 49},
	}}
	got := histQuantiles(a, b, "h_seconds")
	if got.N != 100 {
		t.Fatalf("n = %v, want 100", got.N)
	}
	// p50: rank 50 of 98 in (1, 10] ms → 1 + 9×50/98.
	if want := round(1+9*50.0/98, 2); got.P50MS != want {
		t.Fatalf("p50 = %v ms, want %v", got.P50MS, want)
	}
	// p99: rank 99 → the 1st of 2 in (10, 100] ms → 10 + 90×1/2.
	if got.P99MS != 55 {
		t.Fatalf("p99 = %v ms, want 55", got.P99MS)
	}
	if empty := histQuantiles(a, a, "h_seconds"); empty.N != 0 {
		t.Fatalf("no observations in the window: %+v", empty)
	}
	// An instance that restarted (counts went down) or whose first scrape failed is left
	// out; the other instance's 49 observations remain.
	restarted := sample{m: []metricsSample{
		{bucket("0.001"): 1, bucket("0.01"): 1, bucket("0.1"): 1, bucket("+Inf"): 1},
		b.m[1],
	}}
	if got := histQuantiles(a, restarted, "h_seconds"); got.N != 49 {
		t.Fatalf("restarted instance: n = %v, want 49", got.N)
	}
	failed := sample{m: []metricsSample{{}, zero}}
	if got := histQuantiles(failed, b, "h_seconds"); got.N != 49 {
		t.Fatalf("failed first scrape: n = %v, want 49", got.N)
	}
}

func TestLabelQuantilesPicksOneRoute(t *testing.T) {
	t.Parallel()
	b := func(route, le string) string {
		return `d_seconds_bucket{route="` + route + `",le="` + le + `"}`
	}
	a := []metricsSample{{b("/join", "0.01"): 5, b("/join", "+Inf"): 5, b("/stream", "0.01"): 0, b("/stream", "+Inf"): 0}}
	z := []metricsSample{{b("/join", "0.01"): 15, b("/join", "+Inf"): 25, b("/stream", "0.01"): 7, b("/stream", "+Inf"): 7}}
	join := labelQuantiles(a, z, "d_seconds", `route="/join"`)
	if join.N != 20 || join.P50MS != 10 {
		t.Fatalf("join: %+v, want n 20, p50 10 ms (10 of 20 under 10 ms)", join)
	}
	if st := labelQuantiles(a, z, "d_seconds", `route="/stream"`); st.N != 7 {
		t.Fatalf("stream: %+v, want n 7", st)
	}
}
