package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// Benchmarks against a real redis-server (started privately, like the tests):
//
//	go test -run '^$' -bench . -benchtime 3s ./queue

// BenchmarkJoin is one join — one Lua script — from parallel clients.
func BenchmarkJoin(b *testing.B) {
	f := newFixture(b)
	f.mkQueue(b, "bench", 0, 0)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, _ := f.signer.New("bench")
			if _, _, err := f.q.Join(ctx, tk); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAdmitTick is one admission tick (lease renewal, settings read, then the admit
// script: sweep, pop, tokens, publish) on a line of 100,000: a tick admitting 40 users (as
// at 400 users/s with 100 ms ticks) and an idle tick (paused).
func BenchmarkAdmitTick(b *testing.B) {
	for _, c := range []struct {
		name string
		rate float64
	}{{"admit40", 40000}, {"paused", 0}} {
		b.Run(c.name, func(b *testing.B) {
			f := newFixture(b)
			f.mkQueue(b, "tick", c.rate, 0)
			ctx := context.Background()
			joinN(b, f, "tick", 100000)
			// Each tick counts at most 1 ms of elapsed time: 40,000/s × 1 ms = 40 users.
			a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "bench", MaxElapsed: time.Millisecond})
			b.ResetTimer()
			admitted := int64(0)
			for b.Loop() {
				res, err := a.TickOnce(ctx, "tick")
				if err != nil {
					b.Fatal(err)
				}
				admitted += res.Admitted
			}
			b.ReportMetric(float64(admitted)/float64(b.N), "admitted/tick")
		})
	}
}
