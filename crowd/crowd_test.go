package crowd_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/crowd"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

type fixture struct {
	rdb redis.UniversalClient
	q   *queue.Queue
}

// newFixture is a private Redis with queue name in it (rate 10/s). Nothing admits unless the
// test ticks (no admission loop runs).
func newFixture(t *testing.T, name string) *fixture {
	t.Helper()
	rdb := redistest.Start(t).Client()
	// Calls may take 10 s: the default, 1 s, fails them on a machine busy with other tests.
	f := &fixture{rdb: rdb, q: queue.New(rdb, queue.Config{OpTimeout: 10 * time.Second}, nil)}
	rate := 10.0
	if _, _, err := f.q.Put(context.Background(), name, queue.SettingsPatch{RatePerSecond: &rate}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) snapshot(t *testing.T, name string) queue.Snapshot {
	t.Helper()
	s, err := f.q.Snapshot(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func step(t *testing.T, c *crowd.Crowd) {
	t.Helper()
	if err := c.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCrowdFillsTheLineOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "line")
	c := crowd.New(f.q, crowd.Config{Queue: "line", Size: 40})
	for range 3 {
		step(t, c)
		if s := f.snapshot(t, "line"); s.Waiting != 40 || s.Tail != 40 {
			t.Fatalf("after a pass: %d waiting, %d places ever made; want 40 and 40", s.Waiting, s.Tail)
		}
	}
}

// Crowds of several instances on one queue keep one crowd: passes at the same time name the
// same tickets, and a join of a ticket with a place makes none.
func TestCrowdsOnOneQueueDoNotAddUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "line")
	crowds := make([]*crowd.Crowd, 3)
	for i := range crowds {
		crowds[i] = crowd.New(f.q, crowd.Config{Queue: "line", Size: 50})
	}
	for range 4 {
		var wg sync.WaitGroup
		errs := make([]error, len(crowds))
		for i, c := range crowds {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = c.Step(context.Background()) }()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if s := f.snapshot(t, "line"); s.Waiting != 50 || s.Tail != 50 {
			t.Fatalf("three crowds of 50: %d waiting, %d places ever made; want 50 and 50", s.Waiting, s.Tail)
		}
	}
}

// Real visitors count towards the crowd's size: the crowd fills what they leave.
func TestCrowdCountsRealVisitors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "line")
	signer := queue.NewSigner([]byte("0123456789abcdef-test-secret"))
	for range 7 {
		tk, _ := signer.New("line")
		if _, _, err := f.q.Join(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
	}
	step(t, crowd.New(f.q, crowd.Config{Queue: "line", Size: 30}))
	if s := f.snapshot(t, "line"); s.Waiting != 30 || s.Tail != 30 {
		t.Fatalf("7 visitors and a crowd of 30: %d waiting, %d places ever made; want 30 and 30", s.Waiting, s.Tail)
	}
}

// Admitted waiters give their tokens back at the next pass (none stays live until it
// lapses), and the line is topped up behind them.
func TestCrowdGivesBackTokensAndTopsUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "line")
	c := crowd.New(f.q, crowd.Config{Queue: "line", Size: 20})
	step(t, c)
	adm := queue.NewAdmitter(f.q, queue.AdmitConfig{})
	testwait.For(t, 30*time.Second, "an admission", func() bool {
		if _, err := adm.TickOnce(context.Background(), "line"); err != nil {
			t.Fatal(err)
		}
		return f.snapshot(t, "line").Head > 0
	})
	st, err := f.q.Stats(context.Background(), "line")
	if err != nil {
		t.Fatal(err)
	}
	admitted := st.AdmittedTotal
	if st.ActiveTokens != admitted || admitted == 0 {
		t.Fatalf("after the ticks: %d live tokens, %d admitted; want the same, above 0", st.ActiveTokens, admitted)
	}
	step(t, c)
	st, err = f.q.Stats(context.Background(), "line")
	if err != nil {
		t.Fatal(err)
	}
	if st.ActiveTokens != 0 || st.Waiting != 20 || st.AdmittedTotal != admitted {
		t.Fatalf("after a pass: %d live tokens, %d waiting, %d admitted; want 0, 20, %d", st.ActiveTokens, st.Waiting, st.AdmittedTotal, admitted)
	}
	if s := f.snapshot(t, "line"); s.Tail != 20+admitted {
		t.Fatalf("after a pass: %d places ever made, want %d (20, and one per admitted waiter)", s.Tail, 20+admitted)
	}
}

// Each pass is a sign of life for every waiting member: none of them is swept as abandoned
// while the crowd runs.
func TestCrowdKeepsItsWaitersAlive(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "line")
	c := crowd.New(f.q, crowd.Config{Queue: "line", Size: 15})
	step(t, c)
	seen := rstore.KeysFor("line").Seen()
	ctx := context.Background()
	members, err := f.rdb.ZRange(ctx, seen, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 15 {
		t.Fatalf("%d waiters have a sign of life, want 15", len(members))
	}
	// Their last sign of life, as if long ago.
	for _, m := range members {
		if err := f.rdb.ZAdd(ctx, seen, redis.Z{Score: 0, Member: m}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	step(t, c)
	for _, m := range members {
		if score, err := f.rdb.ZScore(ctx, seen, m).Result(); err != nil || score == 0 {
			t.Fatalf("waiter %s: last sign of life %v (%v) after a pass; want now", m, score, err)
		}
	}
}

// staleLine answers Snapshot with the counts of an earlier moment while *old is true, as a
// pass that joins long after it read them sees the line.
type staleLine struct {
	*queue.Queue
	then queue.Snapshot
	old  *bool
}

func (s staleLine) Snapshot(ctx context.Context, name string) (queue.Snapshot, error) {
	if *s.old {
		return s.then, nil
	}
	return s.Queue.Snapshot(ctx, name)
}

// A pass working from old counts names tickets that were let in and gave their tokens back
// since: their joins make new places behind the crowd, and the line holds more than the
// crowd's size. That instance's next pass gives them back; the other crowd's members and the
// real visitors keep their places (the two instances of
// server/TestDemoCrowdTwoInstancesKeepOneCrowd, on a busy machine, once left 40 + n waiting
// after admission paused).
func TestCrowdOverfilledByOldCountsShrinksBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "line")
	then := f.snapshot(t, "line")
	c := crowd.New(f.q, crowd.Config{Queue: "line", Size: 3})
	step(t, c) // crowd-1..3
	adm := queue.NewAdmitter(f.q, queue.AdmitConfig{})
	testwait.For(t, 30*time.Second, "the three let in", func() bool {
		if _, err := adm.TickOnce(context.Background(), "line"); err != nil {
			t.Fatal(err)
		}
		return f.snapshot(t, "line").Head >= 3
	})
	step(t, c) // their tokens back; crowd-4..6
	old := true
	late := crowd.New(staleLine{f.q, then, &old}, crowd.Config{Queue: "line", Size: 3})
	step(t, late) // crowd-1..3 again: new places, 4th to 6th
	signer := queue.NewSigner([]byte("0123456789abcdef-test-secret"))
	visitor, _ := signer.New("line")
	if _, _, err := f.q.Join(context.Background(), visitor); err != nil {
		t.Fatal(err)
	}
	if s := f.snapshot(t, "line"); s.Waiting != 7 {
		t.Fatalf("after the pass from old counts and a visitor: %d waiting, want 7 (the case this test is about)", s.Waiting)
	}
	step(t, c) // its members are the first three: nothing to give back
	if s := f.snapshot(t, "line"); s.Waiting != 7 {
		t.Fatalf("after the other crowd's pass: %d waiting, want 7 (its members are within the crowd)", s.Waiting)
	}
	old = false
	step(t, late)
	s := f.snapshot(t, "line")
	if s.Waiting != 4 {
		t.Fatalf("after the late crowd's next pass: %d waiting, want 4 (the crowd's 3 and the visitor)", s.Waiting)
	}
	p, err := f.q.Status(context.Background(), visitor)
	if err != nil || p.Position != 4 {
		t.Fatalf("the visitor: %+v %v, want place 4, behind the crowd", p, err)
	}
	for range 2 {
		step(t, c)
		step(t, late)
		if s := f.snapshot(t, "line"); s.Waiting != 4 {
			t.Fatalf("after more passes: %d waiting, want 4", s.Waiting)
		}
	}
}
