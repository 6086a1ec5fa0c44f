package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/trust"
)

// invites is the trust store on the fixture's Redis, which makes the codes that put joins
// in the lanes.
func (f *fixture) invites() *trust.Store {
	return trust.New(rstore.New(f.rdb, 10*time.Second))
}

func mkInvites(t testing.TB, f *fixture, name string, spec trust.InviteSpec) []trust.Invite {
	t.Helper()
	ins, err := f.invites().CreateInvites(context.Background(), name, spec)
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

func joinInvite(t testing.TB, f *fixture, name, code string) (queue.Ticket, queue.Place) {
	t.Helper()
	tk, _ := f.signer.New(name)
	p, created, err := f.q.JoinWith(context.Background(), tk, queue.JoinOptions{Invite: code})
	if err != nil || !created {
		t.Fatalf("join with invite: created=%v err=%v", created, err)
	}
	return tk, p
}

func TestInviteJoin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "a", 0, 0)
	f.mkQueue(t, "b", 0, 0)
	// A proof of work is required of everyone else.
	if _, _, err := f.q.Put(ctx, "a", queue.SettingsPatch{PowDifficulty: func() *int { d := 20; return &d }()}); err != nil {
		t.Fatal(err)
	}
	joinNormal := func() queue.Ticket {
		tk, _ := f.signer.New("a")
		if _, _, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{Pow: queue.PowProof{ID: tk.ID, Difficulty: 20, Expires: time.Now().Add(time.Minute)}}); err != nil {
			t.Fatal(err)
		}
		return tk
	}
	joinNormal()
	joinNormal()
	refused := func(what, code string) {
		t.Helper()
		tk, _ := f.signer.New("a")
		if _, _, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{Invite: code}); !errors.Is(err, queue.ErrInviteInvalid) {
			t.Fatalf("%s: %v, want ErrInviteInvalid", what, err)
		}
		if _, err := f.q.Status(ctx, tk); !errors.Is(err, queue.ErrNoPlace) {
			t.Fatalf("%s made a place: %v", what, err)
		}
	}

	one := mkInvites(t, f, "a", trust.InviteSpec{Count: 1, Lane: queue.LanePriority})[0]
	tk, p := joinInvite(t, f, "a", one.Code) // no proof of work needed
	if p.Lane != queue.LanePriority || p.Seq != 1 || p.Position != 1 || p.Waiting != 1 || p.State != queue.StateWaiting {
		t.Fatalf("priority place %+v", p)
	}
	refused("used up", one.Code)
	// The holder reloading the invite link keeps the place and spends nothing.
	again, created, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{Invite: one.Code})
	if err != nil || created || again.Seq != 1 || again.Lane != queue.LanePriority {
		t.Fatalf("rejoin with the used code: %+v %v %v", again, created, err)
	}
	st, err := f.q.Status(ctx, tk)
	if err != nil || st.Lane != queue.LanePriority || st.Position != 1 {
		t.Fatalf("status %+v %v", st, err)
	}
	if got, _ := f.q.TicketState(ctx, tk); got.Lane != queue.LanePriority || got.State != queue.StateWaiting || got.Seq != 1 {
		t.Fatalf("ticket state %+v", got)
	}
	// The stored state keeps code w and puts the lane in the fifth field (state.go).
	if v := f.rdb.HGet(ctx, "wr:{q:a}:tickets", tk.ID).Val(); v != "w:1:::p" {
		t.Fatalf("stored state %q", v)
	}

	multi := mkInvites(t, f, "a", trust.InviteSpec{Count: 1, Lane: queue.LaneBypass, MaxUses: 3})[0]
	// A normal waiter who brings a bad code keeps the place and is told the code is bad.
	normal := joinNormal()
	if _, _, err := f.q.JoinWith(ctx, normal, queue.JoinOptions{Invite: "no-such-code-0000000000"}); !errors.Is(err, queue.ErrInviteInvalid) {
		t.Fatalf("bad code on a normal place: %v", err)
	}
	if p, err := f.q.Status(ctx, normal); err != nil || p.Lane != queue.LaneNormal || p.State != queue.StateWaiting {
		t.Fatalf("the normal place after a bad code: %+v %v", p, err)
	}
	// With a good code the place moves to the code's lane (one use spent).
	if p, created, err := f.q.JoinWith(ctx, normal, queue.JoinOptions{Invite: multi.Code}); err != nil || !created || p.Lane != queue.LaneBypass || p.Position != 1 {
		t.Fatalf("invite on a live normal place: %+v %v %v", p, created, err)
	}
	// Its holder's reload (the same link again) spends nothing.
	if p, created, err := f.q.JoinWith(ctx, normal, queue.JoinOptions{Invite: multi.Code}); err != nil || created || p.Lane != queue.LaneBypass {
		t.Fatalf("reload of the invite link: %+v %v %v", p, created, err)
	}
	for i := range 2 {
		_, p := joinInvite(t, f, "a", multi.Code)
		if p.Lane != queue.LaneBypass || p.Position != int64(i+2) {
			t.Fatalf("bypass place %d: %+v", i, p)
		}
	}
	refused("used up after 3 uses", multi.Code)

	rev := mkInvites(t, f, "a", trust.InviteSpec{Count: 1, Lane: queue.LaneBypass})[0]
	if err := f.invites().RevokeInvite(ctx, "a", rev.Code); err != nil {
		t.Fatal(err)
	}
	refused("revoked", rev.Code)
	foreign := mkInvites(t, f, "b", trust.InviteSpec{Count: 1, Lane: queue.LaneBypass})[0]
	refused("another queue's", foreign.Code)
	refused("made up", "AAAAAAAAAAAAAAAAAAAAAA")
	refused("malformed", "not a code: at all")

	short := mkInvites(t, f, "a", trust.InviteSpec{Count: 1, Lane: queue.LaneBypass, ExpiresAt: time.Now().Add(1200 * time.Millisecond)})[0]
	// Waits for Redis's clock to pass the expiry (nothing is timed: the check is after it).
	testwait.For(t, 30*time.Second, "the code's expiry", func() bool {
		now, err := f.rdb.Time(ctx).Result()
		return err == nil && now.After(short.ExpiresAt)
	})
	refused("expired", short.Code)

	// Lane waiters are not in the normal line's count or positions (and the waiter who moved
	// to the bypass lane left the normal line).
	n := joinNormal()
	if p, _ := f.q.Status(ctx, n); p.Lane != queue.LaneNormal || p.Position != 3 || p.Waiting != 3 {
		t.Fatalf("normal place after lane joins: %+v", p)
	}
	stats, err := f.q.Stats(ctx, "a")
	if err != nil || stats.Waiting != 3 || stats.WaitingPriority != 1 || stats.WaitingBypass != 3 {
		t.Fatalf("stats %+v %v", stats, err)
	}
}

// follow subscribes to a queue's ticks; ticksUpTo then returns every message up to event
// number ev (pub/sub keeps the order; nothing is lost on a healthy connection).
func follow(t *testing.T, f *fixture, name string) *queue.Feed {
	t.Helper()
	ctx := context.Background()
	feed := f.q.Feed(ctx)
	t.Cleanup(func() { _ = feed.Close() })
	if err := feed.Follow(ctx, name); err != nil {
		t.Fatal(err)
	}
	if ev, err := feed.Receive(ctx); err != nil || ev.Kind != queue.FeedSubscribed {
		t.Fatalf("subscribe: %+v %v", ev, err)
	}
	return feed
}

func ticksUpTo(t *testing.T, feed *queue.Feed, ev int64) []queue.Tick {
	t.Helper()
	var out []queue.Tick
	for len(out) == 0 || out[len(out)-1].Ev < ev {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := feed.Receive(ctx)
		cancel()
		if err != nil || m.Kind != queue.FeedTick {
			t.Fatalf("receive: %+v %v (have %d messages, want up to event %d)", m, err, len(out), ev)
		}
		out = append(out, m.Tick)
	}
	return out
}

// tickUntil runs admission ticks until done says so, checking each tick against the rate
// and max_active.
func tickUntil(t *testing.T, f *fixture, a *queue.Admitter, name string, maxPerTick, maxActive int64, done func(queue.TickResult) bool) {
	t.Helper()
	for i := 0; ; i++ {
		if i > 200000 {
			t.Fatal("admission did not finish")
		}
		r, err := a.TickOnce(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if r.Admitted > maxPerTick {
			t.Fatalf("tick %d admitted %d, more than the rate allows (%d)", r.Tick, r.Admitted, maxPerTick)
		}
		if maxActive > 0 && r.Active > maxActive {
			t.Fatalf("tick %d: %d active tokens, max_active %d", r.Tick, r.Active, maxActive)
		}
		if done(r) {
			return
		}
	}
}

// 100 bypass codes used at once make 100 places; admission lets exactly those 100 in first,
// each once, never more per tick than the rate allows and never beyond max_active.
func TestBypassInvitesConcurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const name, rate, maxActive = "vip", 200.0, 30
	f.mkQueue(t, name, rate, maxActive)
	normal := joinN(t, f, name, 40)
	codes := mkInvites(t, f, name, trust.InviteSpec{Count: 100, Lane: queue.LaneBypass})
	tickets := make([]queue.Ticket, 100)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i, c := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, _ := f.signer.New(name)
			p, created, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{Invite: c.Code})
			if err != nil || !created || p.Lane != queue.LaneBypass {
				errs <- fmt.Errorf("join: %+v %v %v", p, created, err)
				return
			}
			tickets[i] = tk
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := f.rdb.ZCard(ctx, "wr:{q:vip}:waiting:b").Val(); n != 100 {
		t.Fatalf("bypass line %d, want 100", n)
	}
	if list, _ := f.invites().Invites(ctx, name); len(list) != 0 {
		t.Fatalf("%d codes left after their one use", len(list))
	}

	feed := follow(t, f, name)
	const maxElapsed = 50 * time.Millisecond
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "t", MaxElapsed: maxElapsed})
	perTick := int64(rate*maxElapsed.Seconds()) + 1
	admitted := map[string]bool{}
	var bypass, lastEv int64
	bypassIDs := map[string]bool{}
	for _, tk := range tickets {
		bypassIDs[tk.ID] = true
	}
	everyone := append(append([]queue.Ticket(nil), tickets...), normal...)
	tickUntil(t, f, a, name, perTick, maxActive, func(r queue.TickResult) bool {
		bypass += r.AdmittedBypass
		lastEv = max(lastEv, r.Ev)
		if r.Admitted == 0 {
			return false
		}
		// Orders use the tokens, freeing max_active slots for the next ticks.
		for _, tk := range everyone {
			if admitted[tk.ID] {
				continue
			}
			p, err := f.q.TicketState(ctx, tk)
			if err != nil || p.State != queue.StateAdmitted {
				continue
			}
			admitted[tk.ID] = true
			if bypassIDs[tk.ID] != (p.Lane == queue.LaneBypass) {
				t.Fatalf("admitted ticket says lane %q", p.Lane)
			}
			if err := f.q.ConsumeToken(ctx, tk, p.Token, "order-"+tk.ID); err != nil {
				t.Fatal(err)
			}
		}
		return bypass >= 100 && r.WaitingBypass == 0 && len(admitted) >= 110
	})
	msgs := ticksUpTo(t, feed, lastEv)
	if bypass != 100 {
		t.Fatalf("%d bypass admissions, want 100", bypass)
	}
	seen := map[string]bool{}
	normalSeen := false
	var count int
	for _, m := range msgs {
		for _, ad := range m.Adm {
			if seen[ad.Ticket] {
				t.Fatalf("ticket %s admitted twice", ad.Ticket)
			}
			seen[ad.Ticket] = true
			switch queue.LaneOf(ad.Lane) {
			case queue.LaneBypass:
				count++
				if normalSeen {
					t.Fatal("a bypass waiter admitted after a normal one")
				}
			case queue.LaneNormal:
				normalSeen = true
			default:
				t.Fatalf("admission from lane %q", ad.Lane)
			}
		}
	}
	if count != 100 {
		t.Fatalf("tick messages carry %d bypass admissions, want 100", count)
	}
	for _, tk := range tickets {
		if !seen[tk.ID] {
			t.Fatalf("bypass ticket %s never admitted", tk.ID)
		}
	}
	if !normalSeen {
		t.Fatal("no normal waiter admitted after the bypass line emptied")
	}
}

// With both lines long, the priority line gets priority_share of the admissions: over
// 1,000 admissions within ±5 % (exact up to the carried fraction).
func TestPriorityShare(t *testing.T) {
	t.Parallel()
	for _, share := range []float64{0.5, 0.2} {
		t.Run(strconv.FormatFloat(share, 'f', -1, 64), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			const name = "share"
			f.mkQueue(t, name, 2000, 0)
			if _, _, err := f.q.Put(ctx, name, queue.SettingsPatch{PriorityShare: &share}); err != nil {
				t.Fatal(err)
			}
			code := mkInvites(t, f, name, trust.InviteSpec{Count: 1, Lane: queue.LanePriority, MaxUses: 2200})[0].Code
			rng := rand.New(rand.NewPCG(3, 4))
			for range 2200 { // interleaved, as they would arrive
				if rng.IntN(2) == 0 {
					joinInvite(t, f, name, code)
				} else {
					joinN(t, f, name, 1)
				}
			}
			a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "t", MaxElapsed: 20 * time.Millisecond})
			var total, pri int64
			tickUntil(t, f, a, name, 41, 0, func(r queue.TickResult) bool {
				if r.WaitingPriority == 0 || r.Waiting == 0 {
					t.Fatalf("a line ran empty after %d admissions", total)
				}
				total += r.Admitted
				pri += r.AdmittedPriority
				return total >= 1000
			})
			got := float64(pri) / float64(total)
			t.Logf("share %.2f: %d of %d admissions from the priority line (%.4f)", share, pri, total, got)
			if got < share-0.05 || got > share+0.05 {
				t.Fatalf("priority got %.4f of %d admissions, want %.2f ± 0.05", got, total, share)
			}
		})
	}
}

// A lane with too few waiters leaves its part to the other line, and no carry builds up
// while the priority line is empty.
func TestLanesWorkConserving(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const name = "wc"
	f.mkQueue(t, name, 2000, 0)
	code := mkInvites(t, f, name, trust.InviteSpec{Count: 1, Lane: queue.LanePriority, MaxUses: 100})[0].Code
	joinN(t, f, name, 300)
	for range 5 {
		joinInvite(t, f, name, code)
	}
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "t", MaxElapsed: 20 * time.Millisecond})
	var total, pri int64
	tickUntil(t, f, a, name, 41, 0, func(r queue.TickResult) bool {
		total += r.Admitted
		pri += r.AdmittedPriority
		return total >= 200
	})
	if pri != 5 {
		t.Fatalf("priority admitted %d of its 5", pri)
	}
	if c := f.rdb.HGet(ctx, "wr:{q:wc}:clock", "pcarry").Val(); c != "0" {
		t.Fatalf("carry %q after ticks with an empty priority line, want 0", c)
	}
	// The normal line empties: the priority line takes everything.
	for range 90 {
		joinInvite(t, f, name, code)
	}
	tickUntil(t, f, a, name, 41, 0, func(r queue.TickResult) bool {
		return r.Waiting == 0 && r.WaitingPriority == 0
	})
}

// Positions in every lane stay exact through random joins, leaves and admissions: what an
// instance computes from the snapshot (seq − head − departures between) equals the rank
// in the lane's ZSET, and Status says the same.
func TestLanePositionsExact(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const name = "pos"
	f.mkQueue(t, name, 400, 0)
	share := 0.3
	if _, _, err := f.q.Put(ctx, name, queue.SettingsPatch{PriorityShare: &share}); err != nil {
		t.Fatal(err)
	}
	pc := mkInvites(t, f, name, trust.InviteSpec{Count: 1, Lane: queue.LanePriority, MaxUses: 100000})[0].Code
	bc := mkInvites(t, f, name, trust.InviteSpec{Count: 1, Lane: queue.LaneBypass, MaxUses: 100000})[0].Code
	// Every tick admits what 10 ms at 400/s allow, 4, however long a step took (f.elapse:
	// the tick counts its whole MaxElapsed). (Counted by the time that had passed, the ticks of a slow, busy machine admitted more
	// and left fewer waiters to check.) With the seeded joins and leaves, every run checks
	// the same positions.
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "t", MaxElapsed: 10 * time.Millisecond})
	rng := rand.New(rand.NewPCG(5, 6))
	var live []queue.Ticket
	checks := 0
	for step := range 80 {
		for range rng.IntN(10) {
			code := []string{"", "", pc, bc}[rng.IntN(4)]
			tk, _ := f.signer.New(name)
			if _, _, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{Invite: code}); err != nil {
				t.Fatal(err)
			}
			live = append(live, tk)
		}
		for range rng.IntN(4) {
			if len(live) == 0 {
				break
			}
			i := rng.IntN(len(live))
			_ = f.q.Leave(ctx, live[i]) // may be admitted already
			live = append(live[:i], live[i+1:]...)
		}
		f.elapse(t, name)
		if r, err := a.TickOnce(ctx, name); err != nil {
			t.Fatal(err)
		} else if r.Admitted > 5 {
			t.Fatalf("step %d: a tick admitted %d, want at most 5 (4 and a carried one)", step, r.Admitted)
		}
		s, err := f.q.Snapshot(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []struct {
			key  string
			head int64
			gone []int64
			n    int64
		}{
			{"wr:{q:pos}:waiting", s.Head, s.Gone, s.Waiting},
			{"wr:{q:pos}:waiting:p", s.Priority.Head, s.Priority.Gone, s.Priority.Waiting},
			{"wr:{q:pos}:waiting:b", s.Bypass.Head, s.Bypass.Gone, s.Bypass.Waiting},
		} {
			zs := f.rdb.ZRangeWithScores(ctx, l.key, 0, -1).Val()
			if int64(len(zs)) != l.n {
				t.Fatalf("step %d %s: snapshot says %d waiting, Redis %d", step, l.key, l.n, len(zs))
			}
			sort.Slice(l.gone, func(i, j int) bool { return l.gone[i] < l.gone[j] })
			for i, z := range zs {
				seq := int64(z.Score)
				below := sort.Search(len(l.gone), func(j int) bool { return l.gone[j] >= seq })
				if pos := seq - l.head - int64(below); pos != int64(i+1) {
					t.Fatalf("step %d %s: seq %d at %d from the snapshot, rank %d", step, l.key, seq, pos, i+1)
				}
				if i%7 == 0 {
					tk := queue.Ticket{Queue: name, ID: z.Member.(string)}
					if p, err := f.q.Status(ctx, tk); err != nil || p.Position != int64(i+1) {
						t.Fatalf("step %d %s: status %+v %v, rank %d", step, l.key, p, err, i+1)
					}
				}
				checks++
			}
		}
	}
	t.Logf("%d positions compared", checks)
	// The bar shows the lanes were looked at; every check above is exact.
	if checks < 100 {
		t.Fatalf("only %d checks", checks)
	}
}

// Ticks carry the lanes in fields the release before ignores, under the same version.
func TestTickLanesMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const name = "msg"
	f.mkQueue(t, name, 0, 0)
	feed := follow(t, f, name)
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "t"})
	joinN(t, f, name, 2)
	if _, err := a.TickOnce(ctx, name); err != nil {
		t.Fatal(err)
	}
	code := mkInvites(t, f, name, trust.InviteSpec{Count: 1, Lane: queue.LanePriority, MaxUses: 3})[0].Code
	tk, _ := joinInvite(t, f, name, code)
	joinInvite(t, f, name, code)
	if err := f.q.Leave(ctx, tk); err != nil {
		t.Fatal(err)
	}
	r, err := a.TickOnce(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	msgs := ticksUpTo(t, feed, r.Ev)
	if len(msgs) != 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	if msgs[0].Lanes != nil {
		t.Fatalf("lanes in a message of a queue whose lanes were never used: %+v", msgs[0].Lanes)
	}
	l := msgs[1].Lanes
	if msgs[1].V != 1 || l == nil || l.P == nil || l.B != nil || l.Share != 0.5 ||
		l.P.Tail != 2 || l.P.Head != 0 || l.P.Waiting != 1 || len(l.P.Gone) != 1 || l.P.Gone[0] != 1 ||
		msgs[1].Waiting != 2 || msgs[1].Tail != 2 {
		t.Fatalf("message %+v lanes %+v %+v", msgs[1], l, l.P)
	}
	old, err := queue.DecodeTick([]byte(`{"v":1,"ev":3,"head":1,"tail":2,"waiting":1}`))
	if err != nil || old.Lanes != nil {
		t.Fatalf("a message without lanes: %+v %v", old, err)
	}
}

// A lane waiter with no sign of life for the grace period is swept like a normal one, and
// its departure is published in its lane.
func TestLaneWaiterAbandoned(t *testing.T) {
	t.Parallel()
	srv := newFixture(t).srv
	rdb := srv.Client()
	// A grace of 3 s: the tick below must come within it after kept's sign of life (300 ms
	// was missed on a busy machine, and both were swept).
	q := queue.New(rdb, queue.Config{Grace: 3 * time.Second}, nil)
	f := &fixture{srv: srv, rdb: rdb, q: q, signer: queue.NewSigner([]byte("test-secret"))}
	ctx := context.Background()
	f.mkQueue(t, "gone", 0, 0)
	code := mkInvites(t, f, "gone", trust.InviteSpec{Count: 1, Lane: queue.LanePriority, MaxUses: 2})[0].Code
	left, p1 := joinInvite(t, f, "gone", code)
	kept, _ := joinInvite(t, f, "gone", code)
	start, _ := rdb.Time(ctx).Result()
	testwait.For(t, 30*time.Second, "the grace period to pass on Redis's clock", func() bool {
		now, err := rdb.Time(ctx).Result()
		return err == nil && now.Sub(start) > 3100*time.Millisecond
	})
	if err := q.Touch(ctx, "gone", []string{kept.ID}); err != nil { // kept shows a sign of life
		t.Fatal(err)
	}
	feed := follow(t, f, "gone")
	a := queue.NewAdmitter(q, queue.AdmitConfig{Owner: "t"})
	r, err := a.TickOnce(ctx, "gone")
	if err != nil || r.Abandoned != 1 || r.WaitingPriority != 1 {
		t.Fatalf("tick: %+v %v, want 1 abandoned and 1 left in the priority line", r, err)
	}
	msgs := ticksUpTo(t, feed, r.Ev)
	l := msgs[len(msgs)-1].Lanes
	if l == nil || l.P == nil || len(l.P.Gone) != 1 || l.P.Gone[0] != p1.Seq || l.P.Waiting != 1 || len(msgs[len(msgs)-1].Gone) != 0 {
		t.Fatalf("tick message lanes %+v", l)
	}
	if _, err := q.Status(ctx, left); !errors.Is(err, queue.ErrNoPlace) {
		t.Fatalf("abandoned ticket: %v", err)
	}
	if p, err := q.Status(ctx, kept); err != nil || p.Position != 1 || p.Lane != queue.LanePriority {
		t.Fatalf("kept ticket: %+v %v", p, err)
	}
}

// A lane whose waiters all left costs nothing once a tick has seen it empty: the tick
// moves its head to its tail, and the next ticks run exactly the commands of a queue
// whose lanes were never used.
func TestEmptiedLaneCostsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "plain", 5, 0)
	f.mkQueue(t, "emptied", 5, 0)
	code := mkInvites(t, f, "emptied", trust.InviteSpec{Count: 1, Lane: queue.LanePriority, MaxUses: 2})[0].Code
	a1, _ := joinInvite(t, f, "emptied", code)
	a2, _ := joinInvite(t, f, "emptied", code)
	for _, tk := range []queue.Ticket{a1, a2} {
		if err := f.q.Leave(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "t", PublishEvery: time.Hour})
	// A tick's commands all go to its queue's slot: on a cluster only that master is
	// counted (the sum over every master counted what else reached the others meanwhile:
	// ±2 either way in fresh-clone runs on a busy machine, 2026-12-03).
	tick := func(name string) int64 {
		before := slotCalls(t, f, name)
		if _, err := a.TickOnce(ctx, name); err != nil {
			t.Fatal(err)
		}
		return slotCalls(t, f, name) - before
	}
	for _, name := range []string{"plain", "emptied"} {
		tick(name) // the first tick of each publishes
	}
	if c := f.rdb.HMGet(ctx, "wr:{q:emptied}:clock", "seq_p", "head_p").Val(); c[0] != "2" || c[1] != "2" {
		t.Fatalf("emptied lane: counter %v, head %v; want both 2", c[0], c[1])
	}
	s, err := f.q.Snapshot(ctx, "emptied")
	if err != nil || s.Priority.Head != 2 || s.Priority.Tail != 2 || s.Priority.Waiting != 0 || len(s.Priority.Gone) != 0 {
		t.Fatalf("snapshot %+v %v", s.Priority, err)
	}
	// The least of three ticks each: a tick's own commands are the same every time, while a
	// pooled connection dialled during one (HELLO and the like, on a busy machine) is not
	// the tick's (a fresh-clone run on a cluster beside the fuzz runs, 2026-12-03: 31 vs 29).
	least := func(name string) int64 {
		n := tick(name)
		for range 2 {
			n = min(n, tick(name))
		}
		return n
	}
	p, e := least("plain"), least("emptied")
	if p != e {
		t.Fatalf("an idle tick costs %d commands with an emptied lane, %d without lanes", e, p)
	}
	if p < 3 {
		t.Fatalf("an idle tick counted %d commands: the count missed the tick's server", p)
	}
	t.Logf("an idle tick: %d commands, with or without an emptied lane", p)
}

// slotCalls is cmdCalls of the one server that holds queue name's slot (the master on a
// cluster).
func slotCalls(t testing.TB, f *fixture, name string) int64 {
	t.Helper()
	cc, ok := f.rdb.(*redis.ClusterClient)
	if !ok {
		return cmdCalls(t, f.srv)
	}
	m, err := cc.MasterForKey(context.Background(), "wr:{q:"+name+"}:clock")
	if err != nil {
		t.Fatal(err)
	}
	return commandCalls(t, m)
}

// cmdCalls is every command Redis has run (INFO commandstats, scripts' commands
// included), without INFO itself; on a cluster, the sum over its masters, without what the
// cluster's own machinery sends them (replicas' REPLCONF ACK, clients' CLUSTER and PING) and
// without a new pooled connection's set-up (HELLO, AUTH, SELECT, CLIENT, READONLY).
func cmdCalls(t testing.TB, srv *redistest.Server) int64 {
	var n int64
	var mu sync.Mutex // the masters are asked side by side
	err := srv.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		k := commandCalls(t, c)
		mu.Lock()
		n += k
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// commandCalls is cmdCalls of one server.
func commandCalls(t testing.TB, c *redis.Client) int64 {
	var n int64
	err := func() error {
		s, err := c.Info(context.Background(), "commandstats").Result()
		if err != nil {
			return err
		}
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(l, "cmdstat_") || strings.HasPrefix(l, "cmdstat_info:") ||
				strings.HasPrefix(l, "cmdstat_replconf:") || strings.HasPrefix(l, "cmdstat_cluster|") ||
				strings.HasPrefix(l, "cmdstat_ping:") || strings.HasPrefix(l, "cmdstat_hello:") ||
				strings.HasPrefix(l, "cmdstat_auth:") || strings.HasPrefix(l, "cmdstat_select:") ||
				strings.HasPrefix(l, "cmdstat_client|") || strings.HasPrefix(l, "cmdstat_readonly:") {
				continue
			}
			i := strings.Index(l, "calls=")
			j := strings.Index(l[i:], ",")
			v, _ := strconv.ParseInt(l[i+6:i+j], 10, 64)
			n += v
		}
		return nil
	}()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// BenchmarkAdmitTickCommands counts the Redis commands of one admission tick (lease,
// settings and the admit script with everything it runs) on a line of 20,000, each tick
// admitting exactly 40 (1 ms of 40,000/s: the clock is let run 2 ms between ticks, outside
// the timer): the normal line alone, paused, and with a priority line of 10,000 beside it
// (share 0.5: 20 + 20).
//
//	go test -run '^$' -bench AdmitTickCommands -benchtime 300x ./queue
func BenchmarkAdmitTickCommands(b *testing.B) {
	for _, c := range []struct {
		name  string
		rate  float64
		lanes bool
	}{{"admit40", 40000, false}, {"paused", 0, false}, {"admit40-priority", 40000, true}} {
		b.Run(c.name, func(b *testing.B) {
			f := newFixture(b)
			f.mkQueue(b, "tick", c.rate, 0)
			ctx := context.Background()
			joinN(b, f, "tick", 20000)
			if c.lanes {
				code := mkInvites(b, f, "tick", trust.InviteSpec{Count: 1, Lane: queue.LanePriority, MaxUses: 10000})[0].Code
				for range 10000 {
					joinInvite(b, f, "tick", code)
				}
			}
			a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "bench", MaxElapsed: time.Millisecond})
			if _, err := a.TickOnce(ctx, "tick"); err != nil { // takes the lease
				b.Fatal(err)
			}
			var adm, cmds, pri int64
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				time.Sleep(2 * time.Millisecond)
				before := cmdCalls(b, f.srv)
				b.StartTimer()
				r, err := a.TickOnce(ctx, "tick")
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cmds += cmdCalls(b, f.srv) - before
				b.StartTimer()
				adm += r.Admitted
				pri += r.AdmittedPriority
			}
			b.ReportMetric(float64(adm)/float64(b.N), "admitted/tick")
			b.ReportMetric(float64(pri)/float64(b.N), "priority/tick")
			b.ReportMetric(float64(cmds)/float64(b.N), "redis-cmds/tick")
		})
	}
}
