package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/topology"
)

// AutoConfig tunes the auto rate controller. Zero fields take the documented defaults,
// chosen for a backend whose answers come within a second and whose admitted users order
// within a second or two of admission.
type AutoConfig struct {
	// Period is the control period: one decision per auto queue per Period (1 s).
	Period time.Duration
	// Window is how far back the backend's health windows are merged (2 s: each instance
	// writes one window per second, so two of them per instance).
	Window time.Duration
	// Cut is the multiplicative decrease on a breach (0.75: a quarter off). A p95 far over
	// the target cuts deeper, by target/p95, down to MaxCut (0.5: half off): a backend whose
	// capacity halved is left in seconds.
	Cut    float64
	MaxCut float64
	// CutHold is the time after a cut without another cut (5 s): the window still holds
	// requests of the rate before, and the backlog the rate before left in the backend
	// drains for a few seconds (cutting again meanwhile would overshoot downwards).
	CutHold time.Duration
	// RaiseHold is the time after a cut without an increase (5 s): the users admitted at
	// the new rate reach the backend a little later.
	RaiseHold time.Duration
	// Headroom: increases only while the p95 is at most Headroom × the target (0.8); between
	// that and the target the rate holds, so the controller settles just under the knee
	// instead of running into it every few seconds.
	Headroom float64
	// Plateau: increases stop at Plateau (0.8) × the rate the last overshoot was cut from
	// — a backend's latency is flat below its knee and climbs fast past it, and the window's
	// lag lets the rate climb a step or three past the knee before the cut, so the knee
	// lies a little under the rate cut from. After PlateauFor (10 s) healthy there, the rate
	// probes upwards again in ProbeStep (a quarter) steps, in case the backend grew.
	Plateau    float64
	PlateauFor time.Duration
	ProbeStep  float64
	// MinRequests is the fewest requests in the window for a latency decision (5); with
	// fewer the rate holds.
	MinRequests int64
	// MinFailures and FailureRatio: a breach by failures needs at least MinFailures (3)
	// failed requests and more than FailureRatio (1 %) of the window failing.
	MinFailures  int64
	FailureRatio float64
	// Used is how much of the rate must really be admitted for an increase (0.8, minus one
	// user): a rate that max_active or a short line keeps from being used is not raised.
	Used float64
	Log  zerolog.Logger
}

func (c AutoConfig) withDefaults() AutoConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Period, time.Second)
	def(&c.Window, 2*time.Second)
	def(&c.CutHold, 5*time.Second)
	def(&c.RaiseHold, 5*time.Second)
	deff := func(f *float64, v float64) {
		if *f <= 0 {
			*f = v
		}
	}
	deff(&c.Cut, 0.75)
	deff(&c.MaxCut, 0.5)
	deff(&c.Plateau, 0.8)
	deff(&c.ProbeStep, 0.25)
	def(&c.PlateauFor, 10*time.Second)
	deff(&c.Headroom, 0.8)
	deff(&c.FailureRatio, 0.01)
	deff(&c.Used, 0.8)
	if c.MinRequests <= 0 {
		c.MinRequests = 5
	}
	if c.MinFailures <= 0 {
		c.MinFailures = 3
	}
	return c
}

// AutoRate is the auto rate controller: a TickObserver of the admission loops that, for
// each queue this instance leads with rate_mode "auto", once per Period merges the
// backend's health windows of every instance (topology) and moves the queue's rate by
// AIMD — a multiplicative cut when the p95 latency is over auto_target_p95_ms or more than
// 1 % of requests fail (deeper when the p95 is far over: by target/p95, at most half), an
// additive step up (max(1, auto_max/100) users/s) while the backend is healthy and the
// rate is really used (people wait and the rate is admitted), a hold without signal. The
// rate and a sentence saying why go to the queue's settings ("rate", "rate_reason"; written
// when either changes), which the next tick reads: the change takes effect at once.
//
// Redis cost, only for a queue this instance leads while it ticks: per Period one WATCH,
// two HGETALLs (settings, health) and, when the rate or reason changed, one MULTI/HSET/EXEC.
// A busy queue in fixed mode costs the WATCH and one HGETALL per 5 s; a resting queue nothing.
//
// The defaults assume buyers order within a second or two of admission (as the e2e test's
// do). When the backend hears of admitted users later, CutHold and RaiseHold should be at
// least that delay, or the controller reacts to the rate before the last one.
//
// The state that matters lives in Redis (the rate); a new leader starts from the stored
// rate (its cool-downs start empty). A queue switched back to fixed keeps its rate.
type AutoRate struct {
	q   *Queue
	cfg AutoConfig

	mu     sync.Mutex
	queues map[string]*autoQueue
}

// autoQueue is what the controller knows of one led queue.
type autoQueue struct {
	// Fed by ObserveTick (under mu), taken by each step.
	seen     time.Time // last tick observed
	admitted int64     // users admitted since the last step
	waiting  int64     // users waiting after the last tick

	// The controller's own (only its goroutine touches them).
	lastStep time.Time
	lastCut  time.Time
	cutFrom  float64       // the rate the last cut series came from (0: none yet)
	cutP95   time.Duration // the p95 that made the last cut
	raised   bool          // raised since the last cut
	plateau  time.Time     // when the rate reached the plateau (zero: not there)
	lastTag  string        // rule of the last decision ("" = none yet)
	// fixedUntil: the queue was in fixed mode at the last look; no look before this.
	fixedUntil time.Time
}

// AutoDecision is one control step's outcome.
type AutoDecision struct {
	Kind   string  // "cut", "raise", "hold"; "" when the queue is not in auto mode
	Rate   float64 // the rate after the step
	Reason string
	// P95, Failures and Requests are the merged window the step looked at.
	P95      time.Duration
	Failures int64
	Requests int64

	tag  string  // which rule decided (a new one is logged)
	from float64 // the rate before the step
}

// NewAutoRate returns a controller for the queues of q.
func NewAutoRate(q *Queue, cfg AutoConfig) *AutoRate {
	return &AutoRate{q: q, cfg: cfg.withDefaults(), queues: map[string]*autoQueue{}}
}

// ObserveTick records what a led queue's tick did; it never waits on Redis (Run decides).
func (c *AutoRate) ObserveTick(name string, at time.Time, r TickResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.queues[name]
	if s == nil {
		s = &autoQueue{}
		c.queues[name] = s
	}
	s.seen = at
	s.admitted += r.Admitted
	s.waiting = r.Waiting + r.WaitingPriority + r.WaitingBypass
}

// Run makes one decision per Period for every queue whose ticks this instance ran lately,
// until ctx ends. A queue this instance stopped leading (or that rests) drops out.
func (c *AutoRate) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			for _, name := range c.led(now) {
				if _, err := c.Step(ctx, name, now); err != nil && ctx.Err() == nil {
					c.cfg.Log.Warn().Err(err).Str("queue", name).Msg("auto rate: step")
				}
			}
		}
	}
}

// led lists the queues ticked within the last two periods and forgets the others.
func (c *AutoRate) led(now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name, s := range c.queues {
		if now.Sub(s.seen) > 2*c.cfg.Period {
			delete(c.queues, name)
			continue
		}
		out = append(out, name)
	}
	return out
}

// Step runs one control period of queue name at now: Run calls it every Period for the
// queues this instance leads; tests drive it directly after ObserveTick. The rate is
// written only if the queue is still in auto mode and nobody changed it meanwhile (an
// operator's change wins: WATCH on the settings).
func (c *AutoRate) Step(ctx context.Context, name string, now time.Time) (AutoDecision, error) {
	c.mu.Lock()
	s := c.queues[name]
	if s == nil {
		s = &autoQueue{}
		c.queues[name] = s
	}
	admitted, waiting, seen := s.admitted, s.waiting, !s.seen.IsZero()
	s.admitted = 0
	c.mu.Unlock()
	if now.Before(s.fixedUntil) {
		// A fixed queue's admissions are dropped with the period they fell in, so the first
		// auto step divides only its own period's admissions by its own length.
		s.lastStep = now
		return AutoDecision{}, nil
	}

	elapsed := c.cfg.Period
	if !s.lastStep.IsZero() && now.After(s.lastStep) {
		elapsed = now.Sub(s.lastStep)
	}
	s.lastStep = now

	ctx, cancel := c.q.bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	var d AutoDecision
	err := c.q.rdb.Watch(ctx, func(tx *redis.Tx) error {
		m, err := tx.HGetAll(ctx, k.Cfg()).Result()
		if err != nil {
			return err
		}
		if len(m) == 0 {
			return ErrQueueNotFound
		}
		set := parseSettings(name, m)
		if set.RateMode != RateAuto {
			d = AutoDecision{Rate: set.RatePerSecond}
			s.lastTag, s.lastCut, s.fixedUntil = "", time.Time{}, now.Add(fixedLook)
			return nil
		}
		hm, err := tx.HGetAll(ctx, k.Health()).Result()
		if err != nil {
			return err
		}
		w, stale := topology.MergeHealth(hm, now.Add(-c.cfg.Window))
		in := autoInput{rate: set.RatePerSecond, min: set.AutoMin, max: set.AutoMax, target: set.AutoTargetP95,
			w: w, seen: seen, waiting: waiting, admittedPerSec: float64(admitted) / elapsed.Seconds(),
			sinceCut: -1, cutFrom: s.cutFrom, cutP95: s.cutP95, atPlateau: -1}
		if !s.plateau.IsZero() {
			in.atPlateau = now.Sub(s.plateau)
		}
		if !s.lastCut.IsZero() {
			in.sinceCut = now.Sub(s.lastCut)
		}
		d = c.decide(in)
		write := d.Rate != set.RatePerSecond || d.Reason != set.RateReason
		if !write && len(stale) == 0 {
			return nil
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if write {
				p.HSet(ctx, k.Cfg(), "rate", strconv.FormatFloat(d.Rate, 'f', -1, 64), "rate_reason", d.Reason)
			}
			if len(stale) > 0 {
				p.HDel(ctx, k.Health(), stale...)
			}
			return nil
		})
		return err
	}, k.Cfg())
	switch {
	case errors.Is(err, redis.TxFailedErr):
		return AutoDecision{}, nil // the settings changed under the step: the next one decides
	case err != nil:
		return AutoDecision{}, fail("auto rate "+name, err)
	}
	if d.Kind != "" && s.remember(d, now) {
		c.cfg.Log.Debug().Str("queue", name).Float64("rate", d.Rate).Msg("auto rate: " + d.Reason)
	}
	return d, nil
}

// remember keeps what the next decisions of the queue need from decision d, made at now,
// and reports whether d is worth a log line (a change, or a hold for a new reason).
func (s *autoQueue) remember(d AutoDecision, now time.Time) bool {
	switch d.Kind {
	case "cut":
		// A second cut with no raise between belongs to the same overshoot: the knee is
		// where the first one came from.
		if s.cutFrom == 0 || s.raised {
			s.cutFrom = d.from
		}
		s.lastCut, s.cutP95, s.raised, s.plateau = now, d.P95, false, time.Time{}
	case "raise":
		s.raised = true
	}
	if d.tag == "plateau" && s.plateau.IsZero() {
		s.plateau = now
	}
	logIt := d.tag != s.lastTag || d.Kind != "hold"
	s.lastTag = d.tag
	return logIt
}

// fixedLook is how often a led queue in fixed mode is looked at again (a switch to auto
// takes effect within it): one WATCH/HGETALL per 5 s instead of per Period.
const fixedLook = 5 * time.Second

// autoInput is what one decision looks at.
type autoInput struct {
	rate, min, max float64
	target         time.Duration
	w              topology.HealthWindow
	seen           bool    // a tick was observed (this instance leads the queue)
	waiting        int64   // users waiting after the last tick
	admittedPerSec float64 // users admitted per second since the last step
	sinceCut       time.Duration
	cutFrom        float64       // the rate the last cut came from (0: none)
	cutP95         time.Duration // the p95 that made the last cut
	atPlateau      time.Duration // how long the rate has been at the plateau (-1: not there)
}

// decide is the AIMD rule (pure: the tests' table runs it through Step).
func (c *AutoRate) decide(in autoInput) AutoDecision {
	p95 := in.w.Quantile(0.95)
	d := AutoDecision{Kind: "hold", Rate: in.rate, P95: p95, Failures: in.w.Failures, Requests: in.w.Count, from: in.rate}
	ms := func(t time.Duration) string { return strconv.FormatInt(int64(math.Round(float64(t)/1e6)), 10) + " ms" }
	target := ms(in.target)
	failBreach := in.w.Failures >= c.cfg.MinFailures && in.w.FailureRatio() > c.cfg.FailureRatio
	slowBreach := in.w.Count >= c.cfg.MinRequests && p95 > in.target
	// Within CutHold of a cut the window still shows the rate before; but failing requests
	// with a p95 still rising say the backlog outgrows the pool's wait: the cut was not
	// enough (a backend whose capacity fell), and the next comes at once.
	worse := failBreach && p95 > in.cutP95
	coolingCut := in.sinceCut >= 0 && in.sinceCut < c.cfg.CutHold && !worse
	coolingRaise := in.sinceCut >= 0 && in.sinceCut < c.cfg.RaiseHold
	why := ""
	switch {
	case slowBreach:
		why = "p95 " + ms(p95) + " over the " + target + " target"
	case failBreach:
		why = fmt.Sprintf("%d failures in %d requests (%.1f %%)", in.w.Failures, in.w.Count, 100*in.w.FailureRatio())
	}
	switch {
	case (slowBreach || failBreach) && coolingCut:
		d.tag, d.Reason = "breach-cooling", "held: "+why+", waiting for the last cut to take effect"
	case (slowBreach || failBreach) && in.rate <= in.min:
		d.Rate = in.min
		d.tag, d.Reason = "min", "held at the minimum "+rateStr(in.min)+"/s: "+why
	case slowBreach || failBreach:
		d.Kind = "cut"
		f := c.cfg.Cut
		if slowBreach {
			f = math.Max(c.cfg.MaxCut, math.Min(c.cfg.Cut, float64(in.target)/float64(p95)))
		}
		d.Rate = math.Max(in.min, roundRate(in.rate*f))
		d.tag, d.Reason = "cut", "cut to "+rateStr(d.Rate)+"/s: "+why
	case in.w.Count == 0:
		d.tag, d.Reason = "none", "held: no backend requests"
	case in.w.Count < c.cfg.MinRequests:
		d.tag, d.Reason = "few", fmt.Sprintf("held: only %d backend requests", in.w.Count)
	case p95 > time.Duration(c.cfg.Headroom*float64(in.target)):
		d.tag, d.Reason = "near", "held: p95 "+ms(p95)+" near the "+target+" target"
	case coolingRaise:
		d.tag, d.Reason = "cooling", "held: p95 "+ms(p95)+" after a cut, waiting before raising"
	case in.rate >= in.max:
		d.Rate = in.max
		d.tag, d.Reason = "max", "held at the maximum "+rateStr(in.max)+"/s: p95 "+ms(p95)
	case !in.seen || in.waiting == 0:
		d.tag, d.Reason = "idle", "held: nobody waiting"
	case in.admittedPerSec < c.cfg.Used*in.rate-1:
		d.tag, d.Reason = "unused", "held: "+rateStr(in.admittedPerSec)+"/s admitted of "+rateStr(in.rate)+"/s (the rate is not used)"
	default:
		step, probing := AutoStep(in.max), ""
		plateau := roundRate(c.cfg.Plateau * in.cutFrom)
		switch {
		case in.cutFrom > 0 && in.rate >= plateau && (in.atPlateau < 0 || in.atPlateau < c.cfg.PlateauFor):
			d.tag, d.Reason = "plateau", fmt.Sprintf("held: %s/s is %.0f %% under the %s/s the last overshoot was cut from; p95 %s",
				rateStr(in.rate), 100*(1-c.cfg.Plateau), rateStr(in.cutFrom), ms(p95))
			return d
		case in.cutFrom > 0 && in.rate >= plateau:
			step *= c.cfg.ProbeStep
			probing = " (probing past the plateau)"
		case in.cutFrom > 0 && in.rate+step > plateau:
			step = plateau - in.rate
			probing = " (the plateau: " + strconv.FormatFloat(100*(1-c.cfg.Plateau), 'f', 0, 64) + " % under the last overshoot)"
		}
		d.Kind = "raise"
		d.Rate = math.Min(in.max, roundRate(in.rate+step))
		d.tag, d.Reason = "raise", fmt.Sprintf("raised to %s/s%s: p95 %s, %d failures in %d requests", rateStr(d.Rate), probing, ms(p95), in.w.Failures, in.w.Count)
	}
	return d
}

// AutoStep is the additive increase per control period for a queue whose auto_max is max:
// max(1, max/100) users/s, so a controller climbs from 0 to auto_max in at most 100 periods.
func AutoStep(max float64) float64 { return math.Max(1, max/100) }

// roundRate keeps a rate to two decimals (the settings' readable form).
func roundRate(r float64) float64 { return math.Round(r*100) / 100 }

func rateStr(r float64) string { return strconv.FormatFloat(roundRate(r), 'f', -1, 64) }
