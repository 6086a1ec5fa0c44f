package queue_test

import (
	"context"
	"testing"
	"time"
)

// A sold-out flag that changes wakes every instance's snapshot (the index shows sold_out at
// its next refresh, not at its next probe); setting it again to what it is wakes nobody.
func TestSoldOutChangePublishesAWake(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.mkQueue(t, "so", 10, 10)
	woke := make(chan string, 16)
	subscribed := make(chan struct{}, 1)
	go f.q.WatchWakes(ctx, func(n string) { woke <- n }, func() {
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
	for len(woke) > 0 { // wakes of the queue's making
		<-woke
	}
	for _, step := range []struct {
		sold bool
		wake bool
	}{{true, true}, {true, false}, {false, true}} {
		if err := f.q.SetSoldOut(ctx, "so", step.sold); err != nil {
			t.Fatal(err)
		}
		// A marker wake after the step: wakes arrive in order, so whatever came before it
		// is what the step published.
		if err := f.q.Wake(ctx, "marker"); err != nil {
			t.Fatal(err)
		}
		got := false
		for n := range woke {
			if n == "marker" {
				break
			}
			got = got || n == "so"
		}
		if got != step.wake {
			t.Fatalf("sold out %v: woke %v, want %v", step.sold, got, step.wake)
		}
	}
}
