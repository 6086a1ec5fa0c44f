package web

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/topology"
)

// The collector writes one window per second for each queue that had guarded requests in
// it — counted once, failures included — and nothing for a queue without any.
func TestHealthCollector(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	topo := topology.New(rstore.New(rdb, time.Second))
	h := NewHealth(topo, "i1", zerolog.Nop())
	ctx := context.Background()
	for i := range 20 {
		h.Observe("busy", time.Duration(10+i)*time.Millisecond, i < 2)
	}
	h.Observe("", time.Second, true) // no queue: not counted
	now := time.Now()
	h.Flush(ctx, now)
	w, err := topo.Health(ctx, "busy", now.Add(-2*time.Second))
	if err != nil || w.Count != 20 || w.Failures != 2 {
		t.Fatalf("first second: %d requests %d failures (%v), want 20 and 2", w.Count, w.Failures, err)
	}
	// The next second: 5 more; the window holds only them, the hash both seconds.
	for range 5 {
		h.Observe("busy", 300*time.Millisecond, false)
	}
	h.Flush(ctx, now.Add(time.Second))
	w, _ = topo.Health(ctx, "busy", now.Add(-2*time.Second))
	if w.Count != 25 || w.Failures != 2 {
		t.Fatalf("two seconds merged: %d requests %d failures, want 25 and 2", w.Count, w.Failures)
	}
	w, _ = topo.Health(ctx, "busy", now.Add(500*time.Millisecond))
	if w.Count != 5 || w.Quantile(0.5) < 270*time.Millisecond {
		t.Fatalf("second window alone: %d requests p50 %v, want 5 at 300 ms", w.Count, w.Quantile(0.5))
	}
	// A quiet second writes nothing: no command for an idle queue.
	before := rdb.HGetAll(ctx, "wr:{q:busy}:health").Val()
	h.Flush(ctx, now.Add(2*time.Second))
	after := rdb.HGetAll(ctx, "wr:{q:busy}:health").Val()
	if len(after) != len(before) || after["i1/"+parity(now.Add(2*time.Second))] != before["i1/"+parity(now.Add(2*time.Second))] {
		t.Fatalf("an idle second wrote a window: %v → %v", before, after)
	}
	if n := rdb.Exists(ctx, "wr:{q:other}:health").Val(); n != 0 {
		t.Fatal("a queue without guarded requests has a health hash")
	}
}

func parity(t time.Time) string {
	if (t.UnixMilli()/1000)%2 == 0 {
		return "0"
	}
	return "1"
}
