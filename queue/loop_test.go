package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
)

// The admission loop's timing — when it tries or renews the lease, ticks, rests, wakes, hands
// the lease over and stops — is proved here, one transition per test, on synctest's fake
// clock: the loop runs over a recording loopBackend (a Redis connection's I/O would not be
// durably blocking in a bubble), so every instant below is exact. What the calls do in Redis
// is covered by the tests against a real server (admit_test.go, rest_test.go).
//
// Every test uses the default timing: a tick every 100 ms, the lease renewed every 500 ms
// (LeaseTTL 2 s / 4), a rest check every 10 s, the view re-read every 2 s.

const loopQueue = "q"

// recorder is loopBackend for these tests: it answers as the test sets it and records each
// call ("500ms check") and each change of the loop's state ("500ms → leading") with the
// bubble's time since the loop started.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	calls []string
	ticks []tickCall
	state loopState

	check    leaseCheck // checkLease's answer
	take     int64      // takeLease's answer
	leaseErr error      // both lease calls' error
	res      TickResult // tick's answer
	tickErr  error
	held     bool    // holding's answer (recorded as "held" while true)
	rate     float64 // settingsRate's answer
}

// tickCall is what one tick was given.
type tickCall struct {
	fence   int64
	rate    float64
	waiting int64
	lag     time.Duration
	rest    bool
}

func (r *recorder) note(what string) {
	r.calls = append(r.calls, fmt.Sprintf("%v %s", time.Since(r.start), what))
}

func (r *recorder) takeLease(context.Context) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("take")
	return r.take, r.leaseErr
}

func (r *recorder) checkLease(context.Context) (leaseCheck, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("check")
	if r.leaseErr != nil {
		return leaseCheck{}, r.leaseErr
	}
	return r.check, nil
}

func (r *recorder) releaseLease(context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("release")
}

func (r *recorder) publishWake(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("wake")
	return nil
}

func (r *recorder) settingsRate(context.Context) (float64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("rate")
	return r.rate, nil
}

func (r *recorder) tick(_ context.Context, fence int64, rate float64, waiting int64, lag time.Duration, rest bool) (TickResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("tick")
	r.ticks = append(r.ticks, tickCall{fence, rate, waiting, lag, rest})
	return r.res, r.tickErr
}

func (r *recorder) afterTick(context.Context, int64, TickResult) bool { return false }

func (r *recorder) holding(context.Context) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		r.note("held")
	}
	return r.held
}

func (r *recorder) dropHeld() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("drop")
}

func (r *recorder) reloadTopology(context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("reload")
}

// set changes the recorder's answers.
func (r *recorder) set(f func(r *recorder)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// tickCalls returns what every tick so far was given.
func (r *recorder) tickCalls() []tickCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]tickCall(nil), r.ticks...)
}

// took returns the calls recorded since the last took.
func (r *recorder) took() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

// loopRig is one queue's loop running in a bubble over a recorder.
type loopRig struct {
	t      *testing.T
	a      *Admitter
	be     *recorder
	l      *queueLoop
	cancel context.CancelFunc
	done   chan struct{}
}

// startLoop starts queue loopQueue's loop at the bubble's current time, with the view v
// (nil: no view yet, every queue is this instance's) and the recorder's answers as be has
// them. It is stopped when the test ends.
func startLoop(t *testing.T, cfg AdmitConfig, v *leadView, be *recorder) *loopRig {
	t.Helper()
	a := NewAdmitter(New(nil, Config{}, nil), cfg)
	if v != nil {
		a.view.Store(v)
	}
	be.start = time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	r := &loopRig{t: t, a: a, be: be, l: a.newLoop(loopQueue, be, zerolog.Nop()), cancel: cancel, done: make(chan struct{})}
	r.l.onState = func(s loopState) {
		be.mu.Lock()
		defer be.mu.Unlock()
		be.state = s
		be.note("→ " + s.String())
	}
	go func() { defer close(r.done); r.l.run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// stop cancels the loop's context and waits for the loop to end.
func (r *loopRig) stop() { r.cancel(); <-r.done }

// until advances the bubble's clock to d after the loop's start and lets the loop finish
// what is due at that instant.
func (r *loopRig) until(d time.Duration) {
	r.t.Helper()
	if wait := d - time.Since(r.be.start); wait > 0 {
		time.Sleep(wait)
	}
	synctest.Wait()
}

// expect checks the calls recorded since the last check.
func (r *loopRig) expect(want ...string) {
	r.t.Helper()
	if got := r.be.took(); !slices.Equal(got, want) {
		r.t.Fatalf("calls:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// expectState checks the loop's state and whether the Admitter lists the queue as led.
func (r *loopRig) expectState(s loopState) {
	r.t.Helper()
	r.be.mu.Lock()
	got := r.be.state
	r.be.mu.Unlock()
	if got != s {
		r.t.Fatalf("state %v, want %v", got, s)
	}
	if led := slices.Contains(r.a.Leading(), loopQueue); led != (s == leading) {
		r.t.Fatalf("state %v, Leading() %v", s, r.a.Leading())
	}
}

// ticks lists "<at> tick" for every Tick from from to to (both included).
func ticks(from, to time.Duration) []string {
	var out []string
	for at := from; at <= to; at += 100 * time.Millisecond {
		out = append(out, fmt.Sprintf("%v tick", at))
	}
	return out
}

// seq joins call lists and single calls into one list.
func seq(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			out = append(out, p)
		case []string:
			out = append(out, p...)
		}
	}
	return out
}

const ms = time.Millisecond

// elsewhere is a view, settled since now, in which another instance is preferred for the
// queue: a leader hands over 3 × ViewEvery (6 s) from now.
func elsewhere() *leadView {
	return &leadView{known: true, mine: map[string]bool{}, since: time.Now()}
}

// leader is the answers of a lease that is this loop's (fence 7) and of ticks at rate 10
// with six users waiting in the three lines.
func leader() *recorder {
	return &recorder{check: leaseCheck{fence: 7}, take: 7, rate: 10,
		res: TickResult{rate: 10, Waiting: 3, WaitingPriority: 2, WaitingBypass: 1}}
}

// contending → leading: the preferred instance tries the lease at its first step and, once
// it holds it, ticks every Tick (the rate read from the settings first) and renews the lease
// every LeaseRenew, in the same step as that instant's tick and before it.
func TestLoopContendingToLeading(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var seen []time.Duration
		start := time.Now()
		obs := observerFunc(func(name string, at time.Time, _ TickResult) {
			mu.Lock()
			defer mu.Unlock()
			if name == loopQueue {
				seen = append(seen, at.Sub(start))
			}
		})
		r := startLoop(t, AdmitConfig{Owner: "me", Observers: []TickObserver{obs}}, nil, leader())
		r.until(time.Second)
		r.expect(seq("0s check", "0s → leading", "0s rate", ticks(0, 400*ms), "500ms check", ticks(500*ms, 900*ms), "1s check", "1s tick")...)
		r.expectState(leading)
		// The first tick has the settings' rate and the most tokens a tick makes; later ones
		// what the tick before said: its rate and the three lines' length.
		want0 := tickCall{fence: 7, rate: 10, waiting: maxTokensPerTick, rest: true}
		want1 := tickCall{fence: 7, rate: 10, waiting: 6, rest: true}
		if tc := r.be.tickCalls(); tc[0] != want0 || tc[1] != want1 {
			t.Fatalf("ticks given %+v, %+v; want %+v, %+v", tc[0], tc[1], want0, want1)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 11 || seen[0] != 0 || seen[10] != time.Second {
			t.Fatalf("observers saw %v, want the 11 ticks from 0 s to 1 s", seen)
		}
	})
}

type observerFunc func(name string, at time.Time, r TickResult)

func (f observerFunc) ObserveTick(name string, at time.Time, r TickResult) { f(name, at, r) }

// contending, not preferred: the first try is a renewal after the start (the preferred
// instance tries first); the steps before it send nothing.
func TestLoopNotPreferredTriesARenewalLater(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startLoop(t, AdmitConfig{Owner: "me"}, elsewhere(), leader())
		r.until(499 * ms)
		r.expect()
		r.expectState(contending)
		r.until(time.Second)
		r.expect(seq("500ms check", "500ms → leading", "500ms rate", ticks(500*ms, 900*ms), "1s check", "1s tick")...)
		r.expectState(leading)
	})
}

// contending while another instance holds the lease: one try every LeaseRenew, no tick.
// A wake message on the preferred instance (the lease was let go) makes it try at once, and
// the renewals count from there.
func TestLoopContendingTriesEveryRenewal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		be := leader()
		be.check.fence = 0
		r := startLoop(t, AdmitConfig{Owner: "me"}, nil, be)
		r.until(1200 * ms)
		r.expect("0s check", "500ms check", "1s check")
		r.expectState(contending)
		r.be.set(func(be *recorder) { be.check.fence = 7 })
		r.a.poke(loopQueue)
		r.until(1400 * ms)
		r.expect(seq("1.2s check", "1.2s → leading", "1.2s rate", ticks(1200*ms, 1400*ms))...)
		r.expectState(leading)
		r.until(1700 * ms)
		r.expect(seq(ticks(1500*ms, 1600*ms), "1.7s check", "1.7s tick")...)
	})
}

// A wake message for a loop that is awake already steps nothing (the timer runs), but the
// settings are read again before the next tick (the message may be a settings change);
// on a contending loop that is not preferred it changes nothing.
func TestLoopWakeWhileAwake(t *testing.T) {
	t.Parallel()
	t.Run("leading", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := startLoop(t, AdmitConfig{Owner: "me"}, nil, leader())
			r.until(250 * ms)
			r.be.took()
			r.a.poke(loopQueue)
			r.until(300 * ms)
			r.expect("300ms rate", "300ms tick")
		})
	})
	t.Run("contending elsewhere", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			be := leader()
			be.check.fence = 0
			r := startLoop(t, AdmitConfig{Owner: "me"}, elsewhere(), be)
			r.until(700 * ms)
			r.expect("500ms check")
			r.a.poke(loopQueue)
			r.until(time.Second)
			r.expect("1s check")
			r.expectState(contending)
		})
	})
}

// leading → contending when a renewal finds the lease lost: no tick at that instant, the
// held tick (if any) is dropped, and the lease is tried again every LeaseRenew.
func TestLoopLosesTheLeaseAtARenewal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startLoop(t, AdmitConfig{Owner: "me"}, nil, leader())
		r.until(300 * ms)
		r.be.took()
		r.be.set(func(be *recorder) { be.check.fence = 0 })
		r.until(time.Second)
		r.expect("400ms tick", "500ms check", "500ms drop", "500ms → contending", "1s check")
		r.expectState(contending)
	})
}

// leading → contending when the tick's script refuses the fencing token (another loop took
// the lease): no further tick; the lease is tried at the next renewal.
func TestLoopFencedTickEndsTheLead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startLoop(t, AdmitConfig{Owner: "me"}, nil, leader())
		r.until(250 * ms)
		r.be.took()
		r.be.set(func(be *recorder) { be.res = TickResult{fenced: true}; be.check.fence = 0 })
		r.until(time.Second)
		r.expect("300ms tick", "300ms drop", "300ms → contending", "500ms check", "1s check")
		r.expectState(contending)
	})
}

// A lease call that fails counts as the lease lost (and the cluster's slot map is re-read);
// a tick that fails keeps the lead: the next tick runs on schedule.
func TestLoopRedisErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startLoop(t, AdmitConfig{Owner: "me"}, nil, leader())
		r.until(450 * ms)
		r.be.took()
		r.be.set(func(be *recorder) { be.leaseErr = errors.New("down") })
		r.until(700 * ms)
		r.expect("500ms check", "500ms reload", "500ms drop", "500ms → contending")
		r.expectState(contending)
		r.be.set(func(be *recorder) { be.leaseErr, be.tickErr = nil, errors.New("down") })
		r.until(1100 * ms)
		r.expect("1s check", "1s → leading", "1s tick", "1s reload", "1.1s tick", "1.1s reload")
		r.expectState(leading)
	})
}

// leading → resting when a tick finds the queue quiet (the script released the lease with
// the rest): no command until the rest check a RestCheck later, on this, the preferred,
// instance. A check that finds the queue still resting rests again for a RestCheck; one that
// finds it busy (or a stale idle flag) leads.
func TestLoopRestsWhenTheQueueGoesQuiet(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startLoop(t, AdmitConfig{Owner: "me"}, nil, leader())
		r.until(250 * ms)
		r.be.took()
		r.be.set(func(be *recorder) { be.res.Rested = true; be.check.fence = -2 })
		r.until(10299 * ms)
		r.expect("300ms tick", "300ms drop", "300ms → resting")
		r.expectState(resting)
		r.until(20299 * ms)
		r.expect("10.3s → contending", "10.3s check", "10.3s → resting")
		r.expectState(resting)
		r.be.set(func(be *recorder) { be.res.Rested = false; be.check.fence = 7 })
		r.until(20400 * ms)
		r.expect("20.3s → contending", "20.3s check", "20.3s → leading", "20.3s tick", "20.4s tick")
		r.expectState(leading)
	})
}

// resting → contending on a wake message (a join, a settings change): the preferred
// instance tries the lease at once and reads the settings again; another instance tries a
// renewal later.
func TestLoopWakeEndsTheRest(t *testing.T) {
	t.Parallel()
	rest := func(t *testing.T, v *leadView) *loopRig {
		be := leader()
		be.check.fence = -2
		r := startLoop(t, AdmitConfig{Owner: "me"}, v, be)
		r.until(2 * time.Second)
		r.expectState(resting)
		r.be.took()
		r.be.set(func(be *recorder) { be.check.fence = 7 })
		r.a.poke(loopQueue)
		return r
	}
	t.Run("preferred", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := rest(t, nil)
			r.until(2100 * ms)
			r.expect("2s → contending", "2s check", "2s → leading", "2s rate", "2s tick", "2.1s tick")
			r.expectState(leading)
		})
	})
	t.Run("elsewhere", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := rest(t, elsewhere())
			r.until(2499 * ms)
			r.expect("2s → contending")
			r.expectState(contending)
			r.until(2600 * ms)
			r.expect("2.5s check", "2.5s → leading", "2.5s rate", "2.5s tick", "2.6s tick")
			r.expectState(leading)
		})
	})
}

// resting on an instance that is not preferred: no rest check, only a look at the view
// every 6 × RestCheck; once this instance is preferred, that look is a rest check.
func TestLoopRestsElsewhereWithoutChecks(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		be := leader()
		be.check.fence = -2
		r := startLoop(t, AdmitConfig{Owner: "me"}, elsewhere(), be)
		r.until(100 * time.Second)
		r.expect("500ms check", "500ms → resting") // the first try, a renewal after the start, finds the rest
		r.expectState(resting)
		r.a.view.Store(&leadView{known: true, mine: map[string]bool{loopQueue: true}, since: time.Now()})
		r.until(120*time.Second + 499*ms)
		r.expect()
		r.until(120*time.Second + 500*ms)
		r.expect("2m0.5s → contending", "2m0.5s check", "2m0.5s → resting")
		r.expectState(resting)
	})
}

// resting → contending at the schedule's instant: the rest's timer fires 50 ms after the
// start (or end) the lease check or the resting tick named, and that step takes the lease
// even though the queue rests (the tick at the instant runs the draw or the end).
func TestLoopScheduleInstantEndsTheRest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		be := leader()
		start := time.Now()
		be.check = leaseCheck{fence: -2, starts: start.Add(3 * time.Second), ends: start.Add(8 * time.Second)}
		r := startLoop(t, AdmitConfig{Owner: "me"}, nil, be)
		r.until(3049 * ms)
		r.expect("0s check", "0s → resting")
		r.expectState(resting)
		r.until(3200 * ms)
		r.expect("3.05s → contending", "3.05s take", "3.05s → leading", "3.05s rate", "3.05s tick", "3.15s tick")
		r.expectState(leading)
		// The start has passed: the resting tick names the end only.
		r.be.set(func(be *recorder) { be.res.Rested, be.res.EndsAt = true, start.Add(8*time.Second) })
		r.until(8049 * ms)
		r.expect("3.25s tick", "3.25s drop", "3.25s → resting")
		r.expectState(resting)
		// The tick at the end finds the queue quiet again (ended, nobody in it).
		r.until(8050 * ms)
		r.expect("8.05s → contending", "8.05s take", "8.05s → leading", "8.05s tick", "8.05s drop", "8.05s → resting")
		r.expectState(resting)
	})
}

// leading → handing over → contending: a leader that is not preferred, by a view that has
// not changed for 3 × ViewEvery, releases the lease after a tick and wakes the preferred
// instance; it tries the lease again two renewals later, and hands over at most once in
// 10 s.
func TestLoopHandsOverToThePreferredInstance(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startLoop(t, AdmitConfig{Owner: "me"}, elsewhere(), leader())
		r.until(5900 * ms)
		r.be.took()
		r.until(7100 * ms)
		// The hand-over's release drops a held tick (the lease is no longer this loop's).
		r.expect("6s check", "6s tick", "6s release", "6s drop", "6s → contending", "6s wake", "7s check", "7s → leading", "7s tick", "7.1s tick")
		r.expectState(leading) // the preferred instance did not take the lease: the loop leads again
		r.until(15950 * ms)
		r.be.took()
		r.until(16200 * ms)
		r.expect("16s check", "16s tick", "16.1s tick", "16.1s release", "16.1s drop", "16.1s → contending", "16.1s wake")
		r.expectState(contending)
		r.be.set(func(be *recorder) { be.check.fence = 0 }) // now it has
		r.until(17500 * ms)
		r.expect("17.1s check")
		r.expectState(contending)
	})
}

// A leader whose tick waits for a replica's acknowledgement runs no tick (each step tries to
// have it acknowledged) but renews its lease; the ticks resume once it is acknowledged.
func TestLoopHeldTickWaits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startLoop(t, AdmitConfig{Owner: "me"}, nil, leader())
		r.until(250 * ms)
		r.be.took()
		r.be.set(func(be *recorder) { be.held = true })
		r.until(650 * ms)
		r.expect("300ms held", "400ms held", "500ms check", "500ms held", "600ms held")
		r.be.set(func(be *recorder) { be.held = false })
		r.until(700 * ms)
		r.expect("700ms tick")
		r.expectState(leading)
	})
}

// ctx ends → stopped: a leader drops its held tick, releases the lease and wakes the
// preferred instance (the release's own drop finds nothing left); a loop without the lease
// only drops.
func TestLoopStops(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		fence int64
		want  []string
	}{
		{"leading", 7, []string{"250ms drop", "250ms release", "250ms drop", "250ms wake", "250ms → stopped"}},
		{"contending", 0, []string{"250ms drop", "250ms → stopped"}},
		{"resting", -2, []string{"250ms drop", "250ms → stopped"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				be := leader()
				be.check.fence = c.fence
				r := startLoop(t, AdmitConfig{Owner: "me"}, nil, be)
				r.until(250 * ms)
				r.be.took()
				r.stop()
				r.expect(c.want...)
				r.expectState(stopped)
			})
		})
	}
}

// Without rests the lease is always taken (mode "0"), and the tick is told not to rest.
func TestLoopNoRest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startLoop(t, AdmitConfig{Owner: "me", NoRest: true}, nil, leader())
		r.until(500 * ms)
		r.expect(seq("0s take", "0s → leading", "0s rate", ticks(0, 400*ms), "500ms take", "500ms tick")...)
		for _, tc := range r.be.tickCalls() {
			if tc.rest {
				t.Fatalf("a tick told to rest: %+v", tc)
			}
		}
	})
}

// Jitter adds 0..Jitter to each tick's delay; a tick's lag counts from when its timer was
// meant to fire.
func TestLoopTickJitter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startLoop(t, AdmitConfig{Owner: "me", Jitter: 50 * ms}, nil, leader())
		r.until(10 * time.Second)
		var last time.Duration
		n := 0
		for _, c := range r.be.took() {
			at, what, _ := strings.Cut(c, " ")
			if what != "tick" {
				continue
			}
			d, err := time.ParseDuration(at)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 && (d-last < 100*ms || d-last >= 150*ms) {
				t.Fatalf("ticks at %v and %v: want 100 ms plus 0..50 ms apart", last, d)
			}
			last = d
			n++
		}
		if n < 10000/150 {
			t.Fatalf("%d ticks in 10 s", n)
		}
		for _, tc := range r.be.tickCalls() {
			if tc.lag != 0 {
				t.Fatalf("tick lag %v on a clock that is never late", tc.lag)
			}
		}
	})
}
