package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/draw"
	"github.com/waitroom/waitroom/trust"
)

func timep(t time.Time) *time.Time { return &t }

// schedule makes queue name start at `at` (rate 1000/s so the line drains fast).
func (f *fixture) schedule(t testing.TB, name string, at time.Time) {
	t.Helper()
	if _, _, err := f.q.Put(context.Background(), name, queue.SettingsPatch{RatePerSecond: f64(1000), StartsAt: timep(at)}); err != nil {
		t.Fatal(err)
	}
}

func TestDrawPlacesEveryPrequeueMemberOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "drop", 0, 0)
	// The start is an hour away while the 300 join, then moved to just ahead.
	f.schedule(t, "drop", time.Now().Add(time.Hour))
	d, err := f.q.Draw(ctx, "drop")
	if err != nil || d.Phase != queue.DrawScheduled || len(d.Commitment) != 64 || d.Seed != "" {
		t.Fatalf("draw before the start: %+v, %v", d, err)
	}

	const n = 300
	tickets := make([]queue.Ticket, n)
	for i := range tickets {
		tickets[i], _ = f.signer.New("drop")
		p, created, err := f.q.Join(ctx, tickets[i])
		if err != nil || !created || p.State != queue.StatePrequeue || p.PrequeueSize != int64(i+1) || p.DrawID != draw.ID(tickets[i].ID) {
			t.Fatalf("pre-queue join %d: %+v %v %v", i, p, created, err)
		}
	}
	// A reload keeps the entry.
	if p, created, err := f.q.Join(ctx, tickets[0]); err != nil || created || p.State != queue.StatePrequeue {
		t.Fatalf("pre-queue reload: %+v %v %v", p, created, err)
	}
	// One leaves before the start.
	if err := f.q.Leave(ctx, tickets[n-1]); err != nil {
		t.Fatal(err)
	}
	// Each admission tick admits at most 10 (1,000/s over a MaxElapsed of 10 ms).
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{DrawBatch: 64, MaxElapsed: 10 * time.Millisecond})
	if r, err := a.TickOnce(ctx, "drop"); err != nil || r.Admitted != 0 || r.Phase != queue.DrawScheduled {
		t.Fatalf("tick before the start admitted: %+v %v", r, err)
	}
	start := time.Now().Add(time.Second) // a second: the schedule must still be in the future when a busy machine gets to the Put
	f.schedule(t, "drop", start)
	f.untilRedisTime(t, start)
	// A joiner after the start (before the leader's tick) freezes the list and queues behind.
	late, _ := f.signer.New("drop")
	lp, _, err := f.q.Join(ctx, late)
	if err != nil || lp.State != queue.StateWaiting || lp.Seq != n {
		t.Fatalf("late join: %+v %v", lp, err)
	}
	r, err := a.TickOnce(ctx, "drop") // runs the draw
	if err != nil || r.Phase != queue.DrawFrozen || r.Admitted != 0 {
		t.Fatalf("start tick: %+v %v", r, err)
	}
	d, err = f.q.Draw(ctx, "drop")
	if err != nil || d.Phase != queue.DrawDone || d.Participants != n-1 || d.Seed == "" {
		t.Fatalf("draw after: %+v %v", d, err)
	}
	order, err := f.q.DrawOrder(ctx, "drop")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(order, "\n"), "\n")
	if err := draw.Verify(d.Seed, d.Commitment, d.ParticipantsHash, lines); err != nil {
		t.Fatalf("published draw does not verify: %v", err)
	}
	// Every member placed once, at its drawn place; positions 1…n-1 exact.
	byID := map[string]int{}
	for i, id := range lines {
		byID[id] = i + 1
	}
	seen := map[int64]bool{}
	for _, tk := range tickets[:n-1] {
		p, err := f.q.Status(ctx, tk)
		if err != nil || p.State != queue.StateWaiting {
			t.Fatalf("status after the draw: %+v %v", p, err)
		}
		if int64(byID[draw.ID(tk.ID)]) != p.Position || seen[p.Position] {
			t.Fatalf("ticket at position %d, drawn place %d", p.Position, byID[draw.ID(tk.ID)])
		}
		seen[p.Position] = true
	}
	if p, _ := f.q.Status(ctx, late); p.Position != n {
		t.Fatalf("late joiner at %d, want %d", p.Position, n)
	}
	if _, _, err := f.q.Put(ctx, "drop", queue.SettingsPatch{StartsAt: timep(time.Now().Add(time.Hour))}); !errors.Is(err, queue.ErrDrawDone) {
		t.Fatalf("changed start after the draw: %v", err)
	}
	// Admission now runs in drawn order: 20 ticks of 10.
	got := map[string]bool{}
	for range 20 {
		f.elapse(t, "drop")
		if _, err := a.TickOnce(ctx, "drop"); err != nil {
			t.Fatal(err)
		}
	}
	var admitted []int
	for _, tk := range tickets[:n-1] {
		if p, _ := f.q.Status(ctx, tk); p.State == queue.StateAdmitted {
			admitted = append(admitted, byID[draw.ID(tk.ID)])
			got[tk.ID] = true
		}
	}
	sort.Ints(admitted)
	for i, v := range admitted {
		if v != i+1 {
			t.Fatalf("admitted drawn places %v: not a prefix", admitted)
		}
	}
	if len(admitted) == 0 {
		t.Fatal("nobody admitted after the draw")
	}
}

// TestDrawIsUniform runs draws of pre-queue members through the real join, freeze and draw
// code and tests, with a chi-square test on a 10 × 10 table (join decile against drawn
// decile), that the drawn place does not depend on the order of joining. In the test
// command: 10 draws of 1,000 (100 expected per cell; the draw algorithm's own uniformity is
// tested on 100,000 orderings in queue/draw); WR_TEST_DRAW_UNIFORM=full runs the benchmark
// size, 40 draws of 2,000 (800 per cell). The draws run side by side, each draw's joins in
// order, one after another: the join order is the variable under test.
func TestDrawIsUniform(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const bins, workers = 10, 8
	draws, members := 10, 1000
	if os.Getenv("WR_TEST_DRAW_UNIFORM") == "full" {
		draws, members = 40, 2000
	}
	counts := make([][]int, bins)
	for i := range counts {
		counts[i] = make([]int, bins)
	}
	// Calls that may wait 30 s for the client's pool: eight draws side by side on a busy
	// machine outlast the default 1 s per call. The default pre-queue shards: on a cluster
	// (WR_TEST_REDIS=cluster) each draw's entries spread over its 3 masters (prequeue.go).
	q := queue.New(f.rdb, queue.Config{OpTimeout: 30 * time.Second}, nil)
	a := queue.NewAdmitter(q, queue.AdmitConfig{})
	// oneDraw joins members to a fresh scheduled queue in order, starts it, runs the draw
	// and returns, per member in join order, the drawn place.
	oneDraw := func(d int) ([]int, error) {
		name := "uniform-" + string(rune('a'+d/26)) + string(rune('a'+d%26))
		if _, _, err := q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: f64(0), MaxActive: i64(0)}); err != nil {
			return nil, err
		}
		if _, _, err := q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: f64(1000), StartsAt: timep(time.Now().Add(time.Hour))}); err != nil {
			return nil, err
		}
		ids := make([]string, members)
		for i := range members {
			tk, _ := f.signer.New(name)
			if _, _, err := q.Join(ctx, tk); err != nil {
				return nil, err
			}
			ids[i] = tk.ID
		}
		// The sale starts now (a cleared start on a scheduled queue).
		if _, _, err := q.Put(ctx, name, queue.SettingsPatch{StartsAt: &time.Time{}}); err != nil {
			return nil, err
		}
		// The draw runs in the first tick; on a busy machine a tick can lose the lease
		// mid-draw, and the next one draws again from the frozen list (as a new leader would).
		for deadline := time.Now().Add(60 * time.Second); ; {
			if _, err := a.TickOnce(ctx, name); err != nil {
				return nil, err
			}
			if d, err := q.Draw(ctx, name); err == nil && d.Phase == queue.DrawDone {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("draw %d not done after a minute of ticks", d)
			}
		}
		order, err := q.DrawOrder(ctx, name)
		if err != nil {
			return nil, err
		}
		place := map[string]int{}
		for i, id := range strings.Split(strings.TrimSuffix(order, "\n"), "\n") {
			place[id] = i
		}
		if len(place) != members {
			return nil, fmt.Errorf("draw %d ordered %d members, want %d", d, len(place), members)
		}
		places := make([]int, members)
		for i, id := range ids {
			p, ok := place[draw.ID(id)]
			if !ok {
				return nil, fmt.Errorf("draw %d lost member %d", d, i)
			}
			places[i] = p
		}
		return places, nil
	}
	next := make(chan int, draws)
	for d := range draws {
		next <- d
	}
	close(next)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range next {
				places, err := oneDraw(d)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for i, p := range places {
					counts[i*bins/members][p*bins/members]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	stat, df := draw.ChiSquareUniform(counts)
	crit := draw.ChiSquareCritical001(df)
	t.Logf("chi-square over %d draws of %d: %.1f with %d degrees of freedom (p = 0.001 critical value %.1f)", draws, members, stat, df, crit)
	if stat > crit {
		t.Fatalf("drawn place depends on join order: chi-square %.1f > %.1f", stat, crit)
	}
}

func TestScheduleRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "busy", 0, 0)
	tk, _ := f.signer.New("busy")
	if _, _, err := f.q.Join(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.q.Put(ctx, "busy", queue.SettingsPatch{StartsAt: timep(time.Now().Add(time.Hour))}); !errors.Is(err, queue.ErrQueueNotEmpty) {
		t.Fatalf("schedule with people waiting: %v", err)
	}
	f.mkQueue(t, "sched", 0, 0)
	for _, c := range []struct {
		p     queue.SettingsPatch
		field string
	}{
		{queue.SettingsPatch{StartsAt: timep(time.Now().Add(-time.Minute))}, "starts_at"},
		{queue.SettingsPatch{EndsAt: timep(time.Now().Add(-time.Minute))}, "ends_at"},
		{queue.SettingsPatch{StartsAt: timep(time.Now().Add(2 * time.Hour)), EndsAt: timep(time.Now().Add(time.Hour))}, "starts_at"},
		{queue.SettingsPatch{Method: methodp("lottery")}, "method"},
		{queue.SettingsPatch{Method: methodp(queue.MethodPassthrough)}, "method"},
	} {
		_, _, err := f.q.Put(ctx, "sched", c.p)
		var ie *queue.InvalidError
		if !errors.As(err, &ie) || ie.Field != c.field {
			t.Fatalf("%+v: %v, want a refusal of %s", c.p, err, c.field)
		}
	}
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	s, _, err := f.q.Put(ctx, "sched", queue.SettingsPatch{StartsAt: timep(at)})
	if err != nil || s.StartsAt == nil || !s.StartsAt.Equal(at) {
		t.Fatalf("schedule: %+v %v", s, err)
	}
	d1, _ := f.q.Draw(ctx, "sched")
	// Moving the start of a scheduled queue keeps its pre-queue and its commitment.
	tk2, _ := f.signer.New("sched")
	if p, _, err := f.q.Join(ctx, tk2); err != nil || p.State != queue.StatePrequeue {
		t.Fatalf("pre-queue join: %+v %v", p, err)
	}
	if _, _, err := f.q.Put(ctx, "sched", queue.SettingsPatch{StartsAt: timep(at.Add(time.Minute))}); err != nil {
		t.Fatal(err)
	}
	if d2, _ := f.q.Draw(ctx, "sched"); d2.Commitment != d1.Commitment {
		t.Fatal("moving the start changed the commitment")
	}
	// Re-sending the same value is accepted; clearing it starts the sale now.
	if _, _, err := f.q.Put(ctx, "sched", queue.SettingsPatch{StartsAt: timep(at.Add(time.Minute))}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.q.Put(ctx, "sched", queue.SettingsPatch{StartsAt: &time.Time{}}); err != nil {
		t.Fatal(err)
	}
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{})
	if r, err := a.TickOnce(ctx, "sched"); err != nil || r.Phase != queue.DrawFrozen {
		t.Fatalf("tick after clearing the start: %+v %v", r, err)
	}
	if p, err := f.q.Status(ctx, tk2); err != nil || p.State != queue.StateWaiting || p.Position != 1 {
		t.Fatalf("member after the draw: %+v %v", p, err)
	}
}

func methodp(m queue.Method) *queue.Method { return &m }

// TestDrawRerunAfterLeaderLoss: a leader that lost its lease in the middle of a draw leaves
// the phase at "drawing"; the next leader draws again and nobody is placed twice or lost,
// including a member who left between the freeze and the draw.
func TestDrawRerunAfterLeaderLoss(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "rerun", 0, 0)
	// The start is an hour away while the 500 join (on a busy machine 500 joins can outlast
	// any short start), then moved to just ahead: all 500 are in the pre-queue at the start.
	f.schedule(t, "rerun", time.Now().Add(time.Hour))
	var tickets []queue.Ticket
	for range 500 {
		tk, _ := f.signer.New("rerun")
		if _, _, err := f.q.Join(ctx, tk); err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	start := time.Now().Add(time.Second)
	f.schedule(t, "rerun", start)
	f.untilRedisTime(t, start)
	// A join after the start freezes the list (nobody has drawn yet).
	late, _ := f.signer.New("rerun")
	if _, _, err := f.q.Join(ctx, late); err != nil {
		t.Fatal(err)
	}
	// One member leaves while the draw has not placed it.
	if err := f.q.Leave(ctx, tickets[7]); err != nil {
		t.Fatal(err)
	}
	// The first leader places part of the list, then its lease is taken away mid-draw.
	first := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "first", DrawBatch: 100})
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		for {
			placed, _ := f.rdb.HGet(ctx, "wr:{q:rerun}:draw", "placed").Int()
			if placed > 0 {
				f.rdb.Del(ctx, "wr:{q:rerun}:lease")
				return
			}
		}
	}()
	_, _ = first.TickOnce(ctx, "rerun")
	<-stop
	// Mid-draw, the late joiner's place counts every reserved sequence not yet processed:
	// 500 drawn ahead of it (501 while the one who left is not yet recorded as gone).
	if p, _ := f.q.Status(ctx, late); p.Position != 501 && p.Position != 500 {
		t.Fatalf("late joiner at %d in the middle of the draw, want 500 or 501", p.Position)
	}
	second := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "second"})
	f.rdb.Del(ctx, "wr:{q:rerun}:lease")
	if _, err := second.TickOnce(ctx, "rerun"); err != nil {
		t.Fatal(err)
	}
	d, err := f.q.Draw(ctx, "rerun")
	if err != nil || d.Phase != queue.DrawDone || d.Participants != 500 {
		t.Fatalf("draw: %+v %v", d, err)
	}
	positions := map[int64]bool{}
	for i, tk := range tickets {
		p, err := f.q.Status(ctx, tk)
		if i == 7 {
			if !errors.Is(err, queue.ErrNoPlace) {
				t.Fatalf("the member who left: %+v %v", p, err)
			}
			continue
		}
		if err != nil || p.State != queue.StateWaiting || positions[p.Position] || p.Position < 1 || p.Position > 499 {
			t.Fatalf("member %d: %+v %v", i, p, err)
		}
		positions[p.Position] = true
	}
	if p, _ := f.q.Status(ctx, late); p.Position != 500 {
		t.Fatalf("late joiner at %d, want 500 (behind 499 drawn members)", p.Position)
	}
	if n, _ := f.rdb.ZCard(ctx, "wr:{q:rerun}:waiting").Result(); n != 500 {
		t.Fatalf("%d in the line, want 500", n)
	}
}

func TestMethodsSoldOutAndEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{})

	t.Run("reject", func(t *testing.T) {
		f.mkQueue(t, "rej", 5, 0)
		if _, _, err := f.q.Put(ctx, "rej", queue.SettingsPatch{Method: methodp(queue.MethodReject)}); err != nil {
			t.Fatal(err)
		}
		tk, _ := f.signer.New("rej")
		if _, _, err := f.q.Join(ctx, tk); !errors.Is(err, queue.ErrQueueNotOpen) {
			t.Fatalf("join a reject queue: %v", err)
		}
	})

	t.Run("passthrough admits at once until max_active, then a line forms and drains back", func(t *testing.T) {
		f.mkQueue(t, "pt", 1000, 3)
		if _, _, err := f.q.Put(ctx, "pt", queue.SettingsPatch{Method: methodp(queue.MethodPassthrough)}); err != nil {
			t.Fatal(err)
		}
		_, _ = a.TickOnce(ctx, "pt") // the first tick only starts the clock
		var tks []queue.Ticket
		for i := range 5 {
			tk, _ := f.signer.New("pt")
			p, _, err := f.q.Join(ctx, tk)
			if err != nil {
				t.Fatal(err)
			}
			want := queue.StateAdmitted
			if i >= 3 {
				want = queue.StateWaiting
			}
			if p.State != want || (want == queue.StateAdmitted && p.Token == "") {
				t.Fatalf("joiner %d: %+v, want %s", i, p, want)
			}
			if want == queue.StateWaiting && p.Position != int64(i-2) {
				t.Fatalf("joiner %d at %d", i, p.Position)
			}
			tks = append(tks, tk)
		}
		// Two tokens are given back: the line (2) drains by ticks, then joins pass through again.
		for _, tk := range tks[:2] {
			if err := f.q.Leave(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		f.elapse(t, "pt")
		if r, err := a.TickOnce(ctx, "pt"); err != nil || r.Admitted != 2 {
			t.Fatalf("drain tick: %+v %v", r, err)
		}
		_ = f.q.Leave(ctx, tks[2])
		tk, _ := f.signer.New("pt")
		if p, _, err := f.q.Join(ctx, tk); err != nil || p.State != queue.StateAdmitted {
			t.Fatalf("after the line drained: %+v %v", p, err)
		}
	})

	t.Run("random admits chosen waiters and keeps positions exact", func(t *testing.T) {
		f.mkQueue(t, "rnd", 0, 0)
		if _, _, err := f.q.Put(ctx, "rnd", queue.SettingsPatch{Method: methodp(queue.MethodRandom)}); err != nil {
			t.Fatal(err)
		}
		var tks []queue.Ticket
		for range 200 {
			tk, _ := f.signer.New("rnd")
			if _, _, err := f.q.Join(ctx, tk); err != nil {
				t.Fatal(err)
			}
			tks = append(tks, tk)
		}
		_, _ = a.TickOnce(ctx, "rnd")
		if _, _, err := f.q.Put(ctx, "rnd", queue.SettingsPatch{RatePerSecond: f64(200)}); err != nil {
			t.Fatal(err)
		}
		f.elapse(t, "rnd")
		r, err := a.TickOnce(ctx, "rnd")
		if err != nil || r.Admitted < 5 {
			t.Fatalf("random tick: %+v %v", r, err)
		}
		var firstHalf int
		pos := map[int64]bool{}
		for i, tk := range tks {
			p, _ := f.q.Status(ctx, tk)
			if p.State == queue.StateAdmitted {
				if i < 100 {
					firstHalf++
				}
				continue
			}
			if pos[p.Position] || p.Position < 1 || p.Position > 200-r.Admitted {
				t.Fatalf("position %d after a random admission of %d", p.Position, r.Admitted)
			}
			pos[p.Position] = true
		}
		if firstHalf == int(r.Admitted) {
			t.Logf("all %d admitted came from the first half (possible, unlikely)", r.Admitted)
		}
		// The holes left below the lowest waiter are dropped as the head moves up to it: the
		// departures never pile up, and a drained line keeps none.
		if g, _ := f.rdb.ZCard(ctx, "wr:{q:rnd}:gone").Result(); g > r.Admitted {
			t.Fatalf("%d departures kept after %d random admissions", g, r.Admitted)
		}
		if _, _, err := f.q.Put(ctx, "rnd", queue.SettingsPatch{RatePerSecond: f64(5000)}); err != nil {
			t.Fatal(err)
		}
		for range 20 {
			f.elapse(t, "rnd")
			if r, _ := a.TickOnce(ctx, "rnd"); r.Waiting == 0 {
				break
			}
		}
		if g, _ := f.rdb.ZCard(ctx, "wr:{q:rnd}:gone").Result(); g != 0 {
			t.Fatalf("%d departures kept after the line drained", g)
		}
	})

	t.Run("sold out stops admission and keeps places; restock resumes in order", func(t *testing.T) {
		f.mkQueue(t, "so", 1000, 0)
		var tks []queue.Ticket
		for range 3 {
			tk, _ := f.signer.New("so")
			_, _, _ = f.q.Join(ctx, tk)
			tks = append(tks, tk)
		}
		before := time.Now().Add(-time.Millisecond) // Redis TIME and this clock are the same machine's
		if err := f.q.SetSoldOut(ctx, "so", true, 0); err != nil {
			t.Fatal(err)
		}
		periods := func() []queue.SoldOutPeriod {
			st, err := f.q.Stats(ctx, "so")
			if err != nil {
				t.Fatal(err)
			}
			return st.SoldOutPeriods
		}
		p1 := periods()
		if len(p1) != 1 || p1[0].From.Before(before) || p1[0].From.After(time.Now()) || !p1[0].To.IsZero() {
			t.Fatalf("sold-out periods %+v, want one since the call, no end", p1)
		}
		// Marked again (a re-check, another order), later by Redis's clock: the period's start
		// stays.
		f.untilRedisTime(t, p1[0].From.Add(2*time.Millisecond))
		if err := f.q.SetSoldOut(ctx, "so", true, 0); err != nil {
			t.Fatal(err)
		}
		if p2 := periods(); len(p2) != 1 || !p2[0].From.Equal(p1[0].From) {
			t.Fatalf("sold out again: periods %+v, want %+v", p2, p1)
		}
		tk, _ := f.signer.New("so")
		if _, _, err := f.q.Join(ctx, tk); !errors.Is(err, queue.ErrSoldOut) {
			t.Fatalf("join while sold out: %v", err)
		}
		f.elapse(t, "so")
		if r, _ := a.TickOnce(ctx, "so"); r.Admitted != 0 {
			t.Fatalf("admitted %d while sold out", r.Admitted)
		}
		if p, _ := f.q.Status(ctx, tks[2]); p.Position != 3 || !p.SoldOut {
			t.Fatalf("place while sold out: %+v", p)
		}
		_ = f.q.SetSoldOut(ctx, "so", false, 0)
		p3 := periods()
		if len(p3) != 1 || !p3[0].From.Equal(p1[0].From) || p3[0].To.Before(p1[0].From) || p3[0].To.After(time.Now()) {
			t.Fatalf("after the restock: periods %+v, want the first ended by the restock", p3)
		}
		_ = f.q.SetSoldOut(ctx, "so", false, 0) // cleared again: nothing logged
		if p4 := periods(); len(p4) != 1 || !p4[0].To.Equal(p3[0].To) {
			t.Fatalf("a second clear changed the log: %+v, want %+v", p4, p3)
		}
		f.elapse(t, "so")
		if r, _ := a.TickOnce(ctx, "so"); r.Admitted != 3 {
			t.Fatalf("admitted %d after restock", r.Admitted)
		}
		if err := f.q.SetSoldOut(ctx, "nope", true, 0); err != nil {
			t.Fatal(err)
		}
		if n, _ := f.rdb.Exists(ctx, "wr:{q:nope}:cfg").Result(); n != 0 {
			t.Fatal("sold out made a stray queue")
		}
	})

	t.Run("sold-out judgements arriving out of order leave the newest", func(t *testing.T) {
		f.mkQueue(t, "sov", 1000, 0)
		soldOut := func() bool {
			st, err := f.q.Settings(ctx, "sov")
			if err != nil {
				t.Fatal(err)
			}
			return st.SoldOut
		}
		for i, step := range []struct {
			sold    bool
			version int64
			want    bool
		}{
			{true, 20, true},   // an order took the last
			{false, 10, true},  // an older restock's judgement, late: kept out
			{false, 20, true},  // the same version again: kept out
			{false, 30, false}, // a newer restock
			{true, 25, false},  // an older order's judgement, late: kept out
			{true, 0, true},    // no version: written whatever the flag holds
			{false, 31, false}, // and versions go on from the last one
		} {
			if err := f.q.SetSoldOut(ctx, "sov", step.sold, step.version); err != nil {
				t.Fatal(err)
			}
			if got := soldOut(); got != step.want {
				t.Fatalf("step %d: SetSoldOut(%v, version %d): sold out %v, want %v", i, step.sold, step.version, got, step.want)
			}
		}
	})

	t.Run("ends_at drops every place", func(t *testing.T) {
		f.mkQueue(t, "end", 0, 0)
		tks := joinMany(t, f, "end", 2500)
		end := time.Now().Add(time.Second)
		if _, _, err := f.q.Put(ctx, "end", queue.SettingsPatch{EndsAt: &end}); err != nil {
			t.Fatal(err)
		}
		f.untilRedisTime(t, end)
		if _, err := a.TickOnce(ctx, "end"); err != nil {
			t.Fatal(err)
		}
		s, _ := f.q.Settings(ctx, "end")
		if !s.Ended {
			t.Fatal("not ended")
		}
		if _, err := f.q.Status(ctx, tks[0]); !errors.Is(err, queue.ErrNoPlace) {
			t.Fatalf("a place survived the end: %v", err)
		}
		tk, _ := f.signer.New("end")
		if _, _, err := f.q.Join(ctx, tk); !errors.Is(err, queue.ErrQueueEnded) {
			t.Fatalf("join after the end: %v", err)
		}
		if n, _ := f.rdb.ZCard(ctx, "wr:{q:end}:waiting").Result(); n != 0 {
			t.Fatalf("%d still waiting", n)
		}
		// Every dropped place is counted, across end.lua's batches (2,000 a call).
		if st, err := f.q.Stats(ctx, "end"); err != nil || st.Dropped != 2500 || st.Joined != 2500 {
			t.Fatalf("dropped %d of %d joined (%v), want all 2500", st.Dropped, st.Joined, err)
		}
		if _, _, err := f.q.Put(ctx, "end", queue.SettingsPatch{EndsAt: timep(time.Now().Add(time.Hour))}); err == nil {
			t.Fatal("a new end accepted after the end")
		}
	})
}

// TestBigDrawOutlastsTheLease: a draw that takes longer than the lease time keeps the lease
// alive between its batches and finishes in one go.
func TestBigDrawOutlastsTheLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "long", 0, 0)
	f.schedule(t, "long", time.Now().Add(time.Hour))
	const members = 300
	joinMany(t, f, "long", members)
	if _, _, err := f.q.Put(ctx, "long", queue.SettingsPatch{StartsAt: &time.Time{}}); err != nil {
		t.Fatal(err)
	}
	// Batches of one member with a 20 ms pause after each: the draw takes at least 6 s, twice
	// the 3 s lease, whatever the machine's speed (the pause is the stretch, not CPU work). The
	// lease is renewed every 750 ms (LeaseTTL/4), so only a stall of over 2 s between two
	// renewals could lose it — a lease of 1 s was lost on a busy machine (a 1.4 s draw, in a
	// test-command run, when the draw was stretched by 3,000 members instead).
	const lease = 3 * time.Second
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{LeaseTTL: lease, DrawBatch: 1})
	queue.SetAfterDrawBatch(a, func() { time.Sleep(20 * time.Millisecond) })
	start := time.Now()
	if _, err := a.TickOnce(ctx, "long"); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	d, err := f.q.Draw(ctx, "long")
	if err != nil || d.Phase != queue.DrawDone || d.Participants != members {
		t.Fatalf("after one tick (the draw took %v, the lease is %v): %+v %v", took, lease, d, err)
	}
	if took < 2*lease {
		t.Fatalf("the draw took %v, want at least %v (300 batches with a 20 ms pause each)", took, 2*lease)
	}
}

// TestPrequeueInviteAndLateEnd: a pre-queue member who brings an invite leaves the draw for
// the invite's lane; a join after ends_at is refused even before the leader ended the line.
func TestPrequeueInviteAndLateEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "inv", 0, 0)
	f.schedule(t, "inv", time.Now().Add(time.Hour))
	member, other := func() queue.Ticket { tk, _ := f.signer.New("inv"); return tk }(), func() queue.Ticket { tk, _ := f.signer.New("inv"); return tk }()
	for _, tk := range []queue.Ticket{member, other} {
		if p, _, err := f.q.Join(ctx, tk); err != nil || p.State != queue.StatePrequeue {
			t.Fatalf("pre-queue join: %+v %v", p, err)
		}
	}
	if _, _, err := f.q.JoinWith(ctx, member, queue.JoinOptions{Invite: "no-such-code-0000"}); !errors.Is(err, queue.ErrInviteInvalid) {
		t.Fatalf("a bad code: %v", err)
	}
	inv, err := f.invites().CreateInvites(ctx, "inv", trust.InviteSpec{Count: 1, Lane: queue.LaneBypass})
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := f.q.JoinWith(ctx, member, queue.JoinOptions{Invite: inv[0].Code})
	if err != nil || p.State != queue.StateWaiting || p.Lane != queue.LaneBypass {
		t.Fatalf("pre-queue member with an invite: %+v %v", p, err)
	}
	if _, _, err := f.q.Put(ctx, "inv", queue.SettingsPatch{StartsAt: &time.Time{}}); err != nil {
		t.Fatal(err)
	}
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{})
	if _, err := a.TickOnce(ctx, "inv"); err != nil {
		t.Fatal(err)
	}
	if d, _ := f.q.Draw(ctx, "inv"); d.Participants != 1 {
		t.Fatalf("%d drawn, want 1 (the invite holder left the draw)", d.Participants)
	}
	if p, _ := f.q.Status(ctx, other); p.State != queue.StateWaiting || p.Position != 1 {
		t.Fatalf("the other member: %+v", p)
	}

	f.mkQueue(t, "late", 0, 0)
	end := time.Now().Add(time.Second)
	if _, _, err := f.q.Put(ctx, "late", queue.SettingsPatch{EndsAt: &end}); err != nil {
		t.Fatal(err)
	}
	f.untilRedisTime(t, end)
	tk, _ := f.signer.New("late")
	if _, _, err := f.q.Join(ctx, tk); !errors.Is(err, queue.ErrQueueEnded) {
		t.Fatalf("join after ends_at, before the leader's tick: %v", err)
	}
}
