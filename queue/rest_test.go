package queue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/topology"
)

// TestIdleQueueRests: a queue with nobody waiting and no live token stops ticking (no lease,
// no admit script: the tick counter stands still), a join wakes it at once — long before the
// rest check (an hour here) — and the joiner is admitted; with the token used up it rests again.
func TestIdleQueueRests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	f.mkQueue(t, "calm", 1000, 0)
	// A queue beside it that never rests (a waiter, rate 0): its ticks mark the time in
	// which the resting queue could have ticked.
	f.mkQueue(t, "busy", 0, 0)
	joinN(t, f, "busy", 1)
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "rest-1", RestCheck: time.Hour})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	clock, lease := "wr:{q:calm}:clock", "wr:{q:calm}:lease"
	resting := func() bool {
		idle, _ := f.rdb.HGet(ctx, clock, "idle").Result()
		n, _ := f.rdb.Exists(ctx, lease).Result()
		return idle == "1" && n == 0
	}
	testwait.For(t, 30*time.Second, "the empty queue to rest", resting)
	before, _ := f.rdb.HGet(ctx, clock, "tick").Int64()
	busyTick := func() int64 { n, _ := f.rdb.HGet(ctx, "wr:{q:busy}:clock", "tick").Int64(); return n }
	b0 := busyTick()
	testwait.For(t, 30*time.Second, "five ticks of the busy queue beside it", func() bool { return busyTick() >= b0+5 })
	after, _ := f.rdb.HGet(ctx, clock, "tick").Int64()
	if after != before {
		t.Fatalf("a resting queue ticked: tick %d -> %d", before, after)
	}
	if got := a.Leading(); len(got) != 1 || got[0] != "busy" {
		t.Fatalf("leading %v while the queue rests, want only busy", got)
	}

	tk, _ := f.signer.New("calm")
	p, _, err := f.q.Join(ctx, tk)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != queue.StateWaiting {
		t.Fatalf("join: %+v", p)
	}
	var admitted queue.Place
	testwait.For(t, 30*time.Second, "the joiner admitted after the wake", func() bool {
		admitted, err = f.q.Status(ctx, tk)
		return err == nil && admitted.State == queue.StateAdmitted
	})
	if resting() {
		t.Fatal("the queue rests with a live token")
	}
	if err := f.q.Leave(ctx, tk); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the queue to rest again once the token is given up", resting)
}

// TestLeadershipSpreadsOverInstances: four admitters (four instances) over 40 busy queues
// end up leading 10 ± 1 each — exactly the queues the spread prefers for them — and when one
// stops, the other three take its queues.
func TestLeadershipSpreadsOverInstances(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const nq = 40
	for i := range nq {
		name := fmt.Sprintf("busy-%02d", i)
		f.mkQueue(t, name, 0, 0) // rate 0: the waiter stays, the queue never rests
		tk, _ := f.signer.New(name)
		if _, _, err := f.q.Join(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	type inst struct {
		a      *queue.Admitter
		cancel context.CancelFunc
		done   chan struct{}
	}
	var insts []*inst
	ids := []string{"node-a", "node-b", "node-c", "node-d"}
	report := func(ids []string) {
		for _, id := range ids {
			if err := f.topo.ReportInstance(ctx, topology.Instance{ID: id, StartedAt: time.Now(), LastSeen: time.Now()}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	report(ids)
	for _, id := range ids {
		// A lease of 8 s (renewed every 2 s): the spread is what is tested, and a loop held off
		// its CPU for over 2 s (a busy machine) would otherwise lose leases at random and keep
		// leadership churning.
		a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: id, ViewEvery: 200 * time.Millisecond, Tick: 200 * time.Millisecond, LeaseTTL: 8 * time.Second})
		c, cancel := context.WithCancel(ctx)
		in := &inst{a: a, cancel: cancel, done: make(chan struct{})}
		go func() { defer close(in.done); _ = a.Run(c) }()
		insts = append(insts, in)
	}
	t.Cleanup(func() {
		for _, in := range insts {
			in.cancel()
			<-in.done
		}
	})
	settled := func(live []*inst) bool {
		total := 0
		for _, in := range live {
			l, p := in.a.Leading(), in.a.Preferred()
			if fmt.Sprint(l) != fmt.Sprint(p) {
				return false
			}
			total += len(l)
		}
		return total == nq
	}
	testwait.For(t, time.Minute, "every instance to lead exactly its preferred queues", func() bool { return settled(insts) })
	for i, in := range insts {
		if n := len(in.a.Leading()); n < 9 || n > 11 {
			t.Errorf("%s leads %d of %d queues", ids[i], n, nq)
		}
	}

	// One instance stops (its leases are released) and drops out of the live set.
	insts[3].cancel()
	<-insts[3].done
	if err := f.topo.RemoveInstance(ctx, ids[3]); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "the three others to lead all 40 queues as the spread says", func() bool { return settled(insts[:3]) })
	for i, in := range insts[:3] {
		if n := len(in.a.Leading()); n < 12 || n > 15 {
			t.Errorf("after one left, %s leads %d of %d queues", ids[i], n, nq)
		}
	}
}

// TestRestingQueueKeepsItsSchedule: the schedule's instants of a resting queue happen even
// when the admitter that put it to rest is gone — a new one (a restart, another instance)
// learns them from its rest check: the start of an empty scheduled queue runs its draw (the
// seed is revealed) and the end marks the sale ended, with nobody joining.
func TestRestingQueueKeepsItsSchedule(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	startsAt, endsAt := time.Now().Add(1500*time.Millisecond), time.Now().Add(3*time.Second)
	if _, _, err := f.q.Put(ctx, "sched", queue.SettingsPatch{RatePerSecond: f64(10), StartsAt: &startsAt, EndsAt: &endsAt}); err != nil {
		t.Fatal(err)
	}
	run := func(owner string) func() {
		c, cancel := context.WithCancel(ctx)
		a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: owner, RestCheck: time.Hour})
		done := make(chan struct{})
		go func() { defer close(done); _ = a.Run(c) }()
		return func() { cancel(); <-done }
	}
	stop := run("first")
	testwait.For(t, 30*time.Second, "the scheduled, empty queue to rest", func() bool {
		idle, _ := f.rdb.HGet(ctx, "wr:{q:sched}:clock", "idle").Result()
		return idle == "1"
	})
	stop() // the admitter that knew the instants is gone
	stop = run("second")
	defer stop()
	testwait.For(t, 30*time.Second, "the draw at the start, with nobody joined", func() bool {
		d, err := f.q.Draw(ctx, "sched")
		return err == nil && d.Seed != ""
	})
	testwait.For(t, 30*time.Second, "the end", func() bool {
		s, err := f.q.Settings(ctx, "sched")
		return err == nil && s.Ended
	})
}
