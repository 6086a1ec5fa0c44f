package autorate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/autorate"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/topology"
)

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }
func dur(v time.Duration) *time.Duration {
	return &v
}

type fixture struct {
	q    *queue.Queue
	st   *rstore.Store
	topo *topology.Topology
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	rdb := redistest.Start(t).Client()
	// Calls may take 10 s (the default, 1 s, fails them on a machine busy with the tests
	// beside them).
	st := rstore.New(rdb, 10*time.Second)
	return &fixture{q: queue.New(rdb, queue.Config{OpTimeout: 10 * time.Second}, nil), st: st, topo: topology.New(st)}
}

func (f *fixture) mkQueue(t testing.TB, name string, rate float64, maxActive int64) {
	t.Helper()
	if _, _, err := f.q.Put(context.Background(), name, queue.SettingsPatch{RatePerSecond: f64(rate), MaxActive: i64(maxActive)}); err != nil {
		t.Fatal(err)
	}
}

// autoQueue makes queue name in auto mode: rate 20/s between 2 and 100, p95 target 500 ms.
func (f *fixture) autoQueue(t *testing.T, name string, rate float64) {
	t.Helper()
	mode := queue.RateAuto
	if _, _, err := f.q.Put(context.Background(), name, queue.SettingsPatch{RatePerSecond: f64(rate), RateMode: &mode,
		AutoMin: f64(2), AutoMax: f64(100), AutoTargetP95: dur(500 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
}

// backend writes one instance's window of n requests of queue name, each taking lat, fails
// of them failing, ending at end.
func (f *fixture) backend(t *testing.T, name string, end time.Time, n int, lat time.Duration, fails int) {
	t.Helper()
	w := topology.HealthWindow{End: end}
	for i := range n {
		w.Observe(lat, i < fails)
	}
	if err := f.topo.ReportHealth(context.Background(), name, "i1", w); err != nil {
		t.Fatal(err)
	}
}

// The AIMD rules, one control step each, against a real Redis: the decision, the rate
// and the reason written to the queue's settings (what the next tick and the admin see).
func TestAutoRateRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// busy: the line is long and the rate was admitted in full; idle: nobody waits.
	busy := queue.TickResult{Admitted: 20, Waiting: 300, Rate: 20}
	idle := queue.TickResult{Admitted: 3, Waiting: 0, Rate: 20}
	for _, c := range []struct {
		name     string
		rate     float64
		tick     *queue.TickResult
		n, fails int
		lat      time.Duration
		kind     string
		want     float64
		reason   string
	}{
		{"slow backend: cut by a quarter", 20, &busy, 40, 0, 600 * time.Millisecond, "cut", 15, "cut to 15/s: p95 "},
		{"far over the target: cut by half at most", 20, &busy, 40, 0, 3 * time.Second, "cut", 10, "cut to 10/s: p95 "},
		{"failing backend: cut", 20, &busy, 100, 5, 50 * time.Millisecond, "cut", 15, "cut to 15/s: 5 failures in 100 requests (5.0 %)"},
		{"two failures are noise", 20, &busy, 100, 2, 50 * time.Millisecond, "raise", 21, "raised to 21/s: p95 "},
		{"healthy and used: one step up", 20, &busy, 40, 0, 100 * time.Millisecond, "raise", 21, "raised to 21/s: p95 "},
		{"healthy, nobody waiting: hold", 20, &idle, 40, 0, 100 * time.Millisecond, "hold", 20, "held: nobody waiting"},
		{"healthy, rate not used: hold", 20, &queue.TickResult{Admitted: 5, Waiting: 300, Rate: 20}, 40, 0, 100 * time.Millisecond, "hold", 20, "held: 5/s admitted of 20/s"},
		{"no requests: hold", 20, &busy, 0, 0, 0, "hold", 20, "held: no backend requests"},
		{"too few requests: hold", 20, &busy, 3, 0, 900 * time.Millisecond, "hold", 20, "held: only 3 backend requests"},
		{"near the target: hold", 20, &busy, 40, 0, 450 * time.Millisecond, "hold", 20, "held: p95 "},
		{"cut stops at auto_min", 2.5, &busy, 40, 0, 800 * time.Millisecond, "cut", 2, "cut to 2/s"},
		{"at auto_min: held there", 2, &busy, 40, 0, 800 * time.Millisecond, "hold", 2, "held at the minimum 2/s: p95 "},
		{"raise stops at auto_max", 99.5, &queue.TickResult{Admitted: 100, Waiting: 300, Rate: 99.5}, 40, 0, 100 * time.Millisecond, "raise", 100, "raised to 100/s"},
		{"at auto_max: held there", 100, &queue.TickResult{Admitted: 100, Waiting: 300, Rate: 100}, 40, 0, 100 * time.Millisecond, "hold", 100, "held at the maximum 100/s"},
		{"not led here (no tick seen): no raise", 20, nil, 40, 0, 100 * time.Millisecond, "hold", 20, "held: nobody waiting"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "a" + strings.NewReplacer(" ", "-", ":", "", "(", "", ")", "", ",", "").Replace(c.name)
			if len(name) > 64 {
				name = name[:64]
			}
			f.autoQueue(t, name, c.rate)
			ctrl := autorate.New(f.st, autorate.Config{})
			now := time.Now()
			if c.n > 0 {
				f.backend(t, name, now.Add(-300*time.Millisecond), c.n, c.lat, c.fails)
			}
			if c.tick != nil {
				ctrl.ObserveTick(name, now.Add(-100*time.Millisecond), *c.tick)
			}
			d, err := ctrl.Step(ctx, name, now)
			if err != nil {
				t.Fatal(err)
			}
			if d.Kind != c.kind || d.Rate != c.want || !strings.HasPrefix(d.Reason, c.reason) {
				t.Fatalf("step: %s to %v (%q); want %s to %v (%q…)", d.Kind, d.Rate, d.Reason, c.kind, c.want, c.reason)
			}
			s, err := f.q.Settings(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if s.RatePerSecond != c.want || s.RateReason != d.Reason {
				t.Fatalf("stored rate %v reason %q; want %v %q", s.RatePerSecond, s.RateReason, c.want, d.Reason)
			}
		})
	}
}

// After a cut the controller waits: no second cut within CutHold (the window still holds
// the old rate's requests), no raise within RaiseHold; then it acts again.
func TestAutoRateCoolDowns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.autoQueue(t, "cool", 40)
	ctrl := autorate.New(f.st, autorate.Config{})
	t0 := time.Now()
	step := func(at time.Duration, lat time.Duration, kind string, rate float64) {
		t.Helper()
		now := t0.Add(at)
		f.backend(t, "cool", now.Add(-200*time.Millisecond), 50, lat, 0)
		ctrl.ObserveTick("cool", now.Add(-100*time.Millisecond), queue.TickResult{Admitted: 60, Waiting: 500, Rate: 40})
		d, err := ctrl.Step(ctx, "cool", now)
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind != kind || d.Rate != rate {
			t.Fatalf("at +%v: %s to %v (%q); want %s to %v", at, d.Kind, d.Rate, d.Reason, kind, rate)
		}
	}
	slow, fast := 600*time.Millisecond, 80*time.Millisecond
	step(0, slow, "cut", 30)
	step(time.Second, slow, "hold", 30)   // within CutHold: the window still holds requests admitted at 40/s
	step(4*time.Second, slow, "hold", 30) // still: the backlog of 40/s drains
	step(5*time.Second, slow, "cut", 22.5)
	step(6*time.Second, fast, "hold", 22.5) // healthy, but within RaiseHold of the cut
	step(9*time.Second, fast, "hold", 22.5)
	step(10*time.Second, fast, "raise", 23.5)
	step(11*time.Second, fast, "raise", 24.5)
	if s, _ := f.q.Settings(ctx, "cool"); s.RatePerSecond != 24.5 || !strings.HasPrefix(s.RateReason, "raised to 24.5/s: p95 ") {
		t.Fatalf("stored %v %q", s.RatePerSecond, s.RateReason)
	}
}

// After an overshoot the rate climbs back to 80 % of the rate it was cut from and stays
// there; after 10 s healthy there it probes upwards in quarter steps.
func TestAutoRatePlateau(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.autoQueue(t, "plat", 20)
	ctrl := autorate.New(f.st, autorate.Config{})
	t0 := time.Now()
	last := t0
	step := func(at time.Duration, lat time.Duration, kind string, rate float64, reason string) {
		t.Helper()
		now := t0.Add(at)
		f.backend(t, "plat", now.Add(-200*time.Millisecond), 50, lat, 0)
		// The line is long and the whole rate was admitted since the last step.
		ctrl.ObserveTick("plat", now.Add(-100*time.Millisecond), queue.TickResult{Admitted: int64(25 * now.Sub(last).Seconds()), Waiting: 500, Rate: rate})
		last = now
		d, err := ctrl.Step(ctx, "plat", now)
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind != kind || d.Rate != rate || !strings.HasPrefix(d.Reason, reason) {
			t.Fatalf("at +%v: %s to %v (%q); want %s to %v (%q…)", at, d.Kind, d.Rate, d.Reason, kind, rate, reason)
		}
	}
	slow, fast := 600*time.Millisecond, 80*time.Millisecond
	step(0, slow, "cut", 15, "cut to 15/s")
	step(5*time.Second, fast, "raise", 16, "raised to 16/s: p95 ")
	step(6*time.Second, fast, "hold", 16, "held: 16/s is 20 % under the 20/s the last overshoot was cut from")
	step(15*time.Second, fast, "hold", 16, "held: 16/s is 20 % under")
	step(16*time.Second, fast, "raise", 16.25, "raised to 16.25/s (probing past the plateau)")
	step(17*time.Second, fast, "raise", 16.5, "raised to 16.5/s (probing past the plateau)")
	// The next overshoot sets the plateau anew: 80 % of 16.5/s.
	step(18*time.Second, slow, "cut", 12.38, "cut to 12.38/s")
	step(23*time.Second, fast, "raise", 13.2, "raised to 13.2/s (the plateau: 20 % under the last overshoot)")
}

// A backend whose capacity fell: within CutHold of a cut, failing requests and a p95 still
// rising bring the next cut at once.
func TestAutoRateCutsAgainWhenWorse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.autoQueue(t, "worse", 40)
	ctrl := autorate.New(f.st, autorate.Config{})
	t0 := time.Now()
	for i, c := range []struct {
		lat   time.Duration
		fails int
		kind  string
		rate  float64
	}{
		{300 * time.Millisecond, 5, "cut", 30},
		{350 * time.Millisecond, 2, "hold", 30}, // two failures: noise, the backlog drains
		{450 * time.Millisecond, 5, "cut", 22.5},
		{400 * time.Millisecond, 5, "hold", 22.5}, // failing, but better than at the cut
	} {
		now := t0.Add(time.Duration(2*i) * time.Second) // windows 2 s apart: each step sees its own
		f.backend(t, "worse", now.Add(-200*time.Millisecond), 100, c.lat, c.fails)
		ctrl.ObserveTick("worse", now.Add(-100*time.Millisecond), queue.TickResult{Admitted: 40, Waiting: 500, Rate: 40})
		d, err := ctrl.Step(ctx, "worse", now)
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind != c.kind || d.Rate != c.rate {
			t.Fatalf("step %d: %s to %v (%q); want %s to %v", i, d.Kind, d.Rate, d.Reason, c.kind, c.rate)
		}
	}
}

// A queue in fixed mode is never touched; switching auto off keeps the controller's
// rate; a new leader starts from the stored rate; a stale window (an instance that
// stopped) is no signal.
func TestAutoRateModes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "fixed", 20, 0)
	ctrl := autorate.New(f.st, autorate.Config{})
	now := time.Now()
	f.backend(t, "fixed", now, 50, 2*time.Second, 10)
	ctrl.ObserveTick("fixed", now, queue.TickResult{Admitted: 20, Waiting: 100, Rate: 20})
	if d, err := ctrl.Step(ctx, "fixed", now); err != nil || d.Kind != "" || d.Rate != 20 {
		t.Fatalf("fixed queue: %+v %v", d, err)
	}
	if s, _ := f.q.Settings(ctx, "fixed"); s.RatePerSecond != 20 || s.RateReason != "" {
		t.Fatalf("fixed queue changed: %v %q", s.RatePerSecond, s.RateReason)
	}
	// A queue seen in fixed mode is looked at again after 5 s (no Redis command before).
	auto := queue.RateAuto
	if _, _, err := f.q.Put(ctx, "fixed", queue.SettingsPatch{RateMode: &auto}); err != nil {
		t.Fatal(err)
	}
	if d, err := ctrl.Step(ctx, "fixed", now.Add(time.Second)); err != nil || d.Kind != "" {
		t.Fatalf("1 s after a look in fixed mode: %+v %v", d, err)
	}
	f.backend(t, "fixed", now.Add(5*time.Second), 50, 2*time.Second, 10)
	ctrl.ObserveTick("fixed", now.Add(5*time.Second), queue.TickResult{Admitted: 20, Waiting: 100, Rate: 20})
	if d, err := ctrl.Step(ctx, "fixed", now.Add(5*time.Second)); err != nil || d.Kind != "cut" {
		t.Fatalf("5 s after, in auto mode: %+v %v", d, err)
	}

	f.autoQueue(t, "sw", 20)
	f.backend(t, "sw", now, 50, 2*time.Second, 0)
	ctrl.ObserveTick("sw", now, queue.TickResult{Admitted: 20, Waiting: 100, Rate: 20})
	if d, err := ctrl.Step(ctx, "sw", now); err != nil || d.Kind != "cut" || d.Rate != 10 {
		t.Fatalf("auto queue: %+v %v", d, err)
	}
	fixed := queue.RateFixed
	if _, _, err := f.q.Put(ctx, "sw", queue.SettingsPatch{RateMode: &fixed}); err != nil {
		t.Fatal(err)
	}
	later := now.Add(5 * time.Second)
	f.backend(t, "sw", later, 50, 2*time.Second, 0)
	if d, err := ctrl.Step(ctx, "sw", later); err != nil || d.Kind != "" {
		t.Fatalf("switched to fixed: %+v %v", d, err)
	}
	if s, _ := f.q.Settings(ctx, "sw"); s.RatePerSecond != 10 || s.RateMode != queue.RateFixed {
		t.Fatalf("switched to fixed: rate %v mode %q, want the controller's 10 kept", s.RatePerSecond, s.RateMode)
	}

	// A new leader (a new controller, no memory) starts from the stored rate.
	f.autoQueue(t, "lead", 20)
	f.backend(t, "lead", now, 50, 2*time.Second, 0)
	ctrl.ObserveTick("lead", now, queue.TickResult{Admitted: 20, Waiting: 100, Rate: 20})
	if d, err := ctrl.Step(ctx, "lead", now); err != nil || d.Rate != 10 {
		t.Fatalf("first leader: %+v %v", d, err)
	}
	next := autorate.New(f.st, autorate.Config{})
	f.backend(t, "lead", now.Add(3*time.Second), 50, 100*time.Millisecond, 0)
	next.ObserveTick("lead", now.Add(3*time.Second), queue.TickResult{Admitted: 10, Waiting: 100, Rate: 10})
	if d, err := next.Step(ctx, "lead", now.Add(3*time.Second)); err != nil || d.Kind != "raise" || d.Rate != 11 {
		t.Fatalf("next leader: %+v %v; want a raise from the stored 10/s", d, err)
	}

	f.autoQueue(t, "stale", 20)
	f.backend(t, "stale", now.Add(-4*time.Second), 50, 2*time.Second, 50)
	ctrl.ObserveTick("stale", now, queue.TickResult{Admitted: 20, Waiting: 100, Rate: 20})
	if d, err := ctrl.Step(ctx, "stale", now); err != nil || d.Kind != "hold" || d.Reason != "held: no backend requests" {
		t.Fatalf("stale window: %+v %v", d, err)
	}
	if _, err := ctrl.Step(ctx, "nosuch", now); err == nil {
		t.Fatal("a step of a missing queue did not fail")
	}
}
