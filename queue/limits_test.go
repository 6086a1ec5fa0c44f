package queue_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
)

// Limits stored by the release before (no status_* fields) keep the configured status limit
// instead of turning it off; a Put is used at once and seen by another instance's store.
func TestLiveLimitsAcrossReleases(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old := `{"order_per_ticket_per_second":5,"order_per_ticket_burst":5,"order_global_per_second":100,` +
		`"order_global_burst":100,"join_per_ip_per_second":7,"join_per_ip_burst":100,"join_global_per_second":0,"join_global_burst":0}`
	if err := f.rdb.Set(ctx, "wr:limits", old, 0).Err(); err != nil {
		t.Fatal(err)
	}
	initial := queue.DefaultLimits()
	a, b := f.q.LiveLimits(initial), f.q.LiveLimits(initial)
	go func() { _ = a.Run(ctx) }()
	go func() { _ = b.Run(ctx) }()
	testwait.For(t, 30*time.Second, "the stored limits", func() bool { return a.Get().JoinPerIP == 7 })
	if got := a.Get(); got.StatusPerTicket != initial.StatusPerTicket || got.StatusPerTicketBurst != initial.StatusPerTicketBurst {
		t.Fatalf("old JSON turned the status limit to %v/%d, want the configured %v/%d",
			got.StatusPerTicket, got.StatusPerTicketBurst, initial.StatusPerTicket, initial.StatusPerTicketBurst)
	}
	next := a.Get()
	next.JoinPerIP = 9
	if _, err := a.Put(ctx, next); err != nil || a.Get().JoinPerIP != 9 {
		t.Fatalf("put: %v, now %v", err, a.Get().JoinPerIP)
	}
	// b reads a stale snapshot without waiting, which asks its loop for a fresh one.
	testwait.For(t, 30*time.Second, "the other store to see the change", func() bool { return b.Get().JoinPerIP == 9 })
	bad := next
	bad.StatusPerTicketBurst = -1
	if _, err := a.Put(ctx, bad); err == nil {
		t.Fatal("a negative burst was stored")
	}
	// -0 is a rate of 0 (off), stored and answered as 0.
	negZero := next
	negZero.JoinGlobal = math.Copysign(0, -1)
	got, err := a.Put(ctx, negZero)
	if err != nil || math.Signbit(got.JoinGlobal) || math.Signbit(a.Get().JoinGlobal) {
		t.Fatalf("-0 stored as %v (now %v), %v", got.JoinGlobal, a.Get().JoinGlobal, err)
	}
}
