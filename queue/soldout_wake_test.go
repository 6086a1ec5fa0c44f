package queue_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// publishCounter is a go-redis hook counting the PUBLISH commands a client sends with one
// message.
type publishCounter struct {
	msg string
	n   atomic.Int64
}

func (h *publishCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *publishCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) == 3 && strings.EqualFold(cmd.Name(), "publish") && a[2] == h.msg {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *publishCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A sold-out flag that changes wakes every instance's snapshot (the index shows sold_out at
// its next refresh, not at its next probe) — the wake reaches a subscriber; setting the flag
// to what it is publishes nothing.
func TestSoldOutChangePublishesAWake(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.mkQueue(t, "so", 10, 10)
	pubs := &publishCounter{msg: "so"}
	f.rdb.AddHook(pubs)
	woke := make(chan string, 16)
	subscribed := make(chan struct{}, 1)
	go f.topo.WatchWakes(ctx, func(n string) { woke <- n }, func() {
		select {
		case subscribed <- struct{}{}:
		default:
		}
	})
	select {
	case <-subscribed:
	case <-ctx.Done():
		t.Fatal("no subscription")
	}
	for _, step := range []struct {
		sold bool
		wake bool
	}{{true, true}, {true, false}, {false, true}} {
		before := pubs.n.Load()
		if err := f.q.SetSoldOut(ctx, "so", step.sold, 0); err != nil {
			t.Fatal(err)
		}
		if got := pubs.n.Load() - before; got != map[bool]int64{true: 1, false: 0}[step.wake] {
			t.Fatalf("sold out %v: %d wakes published, want wake %v", step.sold, got, step.wake)
		}
		if !step.wake {
			continue
		}
		for got := false; !got; {
			select {
			case n := <-woke:
				got = n == "so"
			case <-ctx.Done():
				t.Fatalf("sold out %v: no wake reached the subscriber", step.sold)
			}
		}
	}
}
