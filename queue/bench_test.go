package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/rstore"
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

// BenchmarkDrawPlaceBatch is one batch of the draw's placing (drawplace.lua) on a pre-queue
// of 100,000 frozen entries: the time Redis is held by one call, for WR_DRAW_BATCH. Each
// iteration places a fresh batch (the rows are written back as entries between iterations,
// outside the timer).
//
//	go test -run '^$' -bench DrawPlaceBatch -benchtime 20x ./queue
func BenchmarkDrawPlaceBatch(b *testing.B) {
	for _, size := range []int{1000, 5000, 7000} {
		b.Run(fmt.Sprintf("members%d", size), func(b *testing.B) {
			f := newFixture(b)
			ctx := context.Background()
			k := rstore.KeysFor("pl")
			if err := f.rdb.MSet(ctx, k.Lease(), "bench", k.Fence(), "1").Err(); err != nil {
				b.Fatal(err)
			}
			tickets := make([]string, size)
			rows := make([]any, 0, 2*size)
			for i := range tickets {
				tickets[i] = fmt.Sprintf("%032x", i)
				rows = append(rows, tickets[i], fmt.Sprintf("q:%d:", i+1))
			}
			keys := []string{k.Lease(), k.Fence(), k.Tickets(), k.Waiting(), k.Seen(), k.Gone(), k.GoneNew(), k.Draw()}
			args := make([]any, 0, 3+3*size)
			args = append(args, "bench", 1, size)
			for i, tk := range tickets {
				args = append(args, tk, i+1, "")
			}
			for b.Loop() {
				b.StopTimer()
				if err := f.rdb.Del(ctx, k.Waiting(), k.Seen()).Err(); err != nil {
					b.Fatal(err)
				}
				if err := f.rdb.HSet(ctx, k.Tickets(), rows...).Err(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				n, err := rstore.DrawPlace.Run(ctx, f.rdb, keys, args...).Int64()
				if err != nil || n != int64(size) {
					b.Fatalf("placed %d, %v", n, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(size), "µs/member")
		})
	}
}
