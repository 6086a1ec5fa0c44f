package topology_test

import (
	"context"
	"testing"
	"time"

	"github.com/waitroom/waitroom/topology"
)

func TestHealthBuckets(t *testing.T) {
	t.Parallel()
	for i := 1; i < topology.HealthBuckets-1; i++ {
		if topology.HealthBound(i) <= topology.HealthBound(i-1) {
			t.Fatalf("bound %d (%v) not above bound %d (%v)", i, topology.HealthBound(i), i-1, topology.HealthBound(i-1))
		}
	}
	for d := 100 * time.Microsecond; d < 20*time.Second; d = d*21/20 + time.Microsecond {
		i := topology.HealthBucket(d)
		if i < topology.HealthBuckets-1 && d > topology.HealthBound(i) {
			t.Fatalf("%v in bucket %d whose bound is %v", d, i, topology.HealthBound(i))
		}
		if i > 0 && d <= topology.HealthBound(i-1) {
			t.Fatalf("%v in bucket %d, but bucket %d (bound %v) holds it", d, i, i-1, topology.HealthBound(i-1))
		}
	}
	if i := topology.HealthBucket(time.Hour); i != topology.HealthBuckets-1 {
		t.Fatalf("an hour went to bucket %d, not the last", i)
	}
}

func TestHealthQuantile(t *testing.T) {
	t.Parallel()
	var w topology.HealthWindow
	if w.Quantile(0.95) != 0 || w.FailureRatio() != 0 {
		t.Fatal("an empty window has a latency or failures")
	}
	// 1..1000 ms, one each: the true p95 is 950 ms, p50 500 ms.
	for ms := 1; ms <= 1000; ms++ {
		w.Observe(time.Duration(ms)*time.Millisecond, ms%100 == 0)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.95, 950 * time.Millisecond}, {0.99, 990 * time.Millisecond}} {
		got := w.Quantile(c.q)
		if diff := got - c.want; diff < -c.want/11 || diff > c.want/11 {
			t.Errorf("p%.0f = %v, want %v within one bucket (9 %%)", 100*c.q, got, c.want)
		}
	}
	if w.Count != 1000 || w.Failures != 10 || w.FailureRatio() != 0.01 {
		t.Fatalf("count %d failures %d ratio %v", w.Count, w.Failures, w.FailureRatio())
	}
}

// Windows of every instance are merged when fresh; old ones are left out; a value this
// build cannot read is skipped, never an error; the hash expires by itself.
func TestHealthWindowsMerge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	win := func(end time.Time, n int, lat time.Duration, fails int) topology.HealthWindow {
		w := topology.HealthWindow{End: end}
		for i := range n {
			w.Observe(lat, i < fails)
		}
		return w
	}
	for _, r := range []struct {
		inst string
		w    topology.HealthWindow
	}{
		{"a", win(now, 10, 20*time.Millisecond, 1)},
		{"a", win(now.Add(-time.Second), 10, 20*time.Millisecond, 0)},
		{"b", win(now, 30, 200*time.Millisecond, 2)},
		{"c", win(now.Add(-5*time.Second), 500, 5*time.Second, 500)}, // an instance that stopped 5 s ago
	} {
		if err := f.topo.ReportHealth(ctx, "h", r.inst, r.w); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.rdb.HSet(ctx, "wr:{q:h}:health", "d/0", "9:garbage").Err(); err != nil {
		t.Fatal(err)
	}
	w, err := f.topo.Health(ctx, "h", now.Add(-2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if w.Count != 50 || w.Failures != 3 || !w.End.Equal(now) {
		t.Fatalf("merged %d requests, %d failures, end %v; want 50, 3, %v", w.Count, w.Failures, w.End, now)
	}
	if p95 := w.Quantile(0.95); p95 < 180*time.Millisecond || p95 > 220*time.Millisecond {
		t.Fatalf("merged p95 %v, want about 200 ms (30 of 50 requests took 200 ms)", p95)
	}
	if ttl := f.rdb.PTTL(ctx, "wr:{q:h}:health").Val(); ttl <= 0 || ttl > 10*time.Second {
		t.Fatalf("health hash TTL %v, want (0, 10 s]", ttl)
	}
	if w, err := f.topo.Health(ctx, "nobody", now.Add(-2*time.Second)); err != nil || w.Count != 0 {
		t.Fatalf("a queue without windows: %+v %v", w, err)
	}
}
