package autorate

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/topology"
)

// Controller is the auto rate controller: a queue.TickObserver of the admission loops
// that, for each queue this instance leads with rate_mode "auto", once per Period merges
// the backend's health windows of every instance (topology.MergeHealth) and moves the
// queue's rate by AIMD — a multiplicative cut when the p95 latency is over auto_target_p95_ms or more than
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
type Controller struct {
	st  *rstore.Store
	cfg Config

	mu     sync.Mutex
	queues map[string]*ledQueue
}

// ledQueue is what the controller knows of one queue this instance leads.
type ledQueue struct {
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

// Decision is one control step's outcome.
type Decision struct {
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

// New returns a controller that reads and writes the queues' settings through st (its
// client and per-call deadline).
func New(st *rstore.Store, cfg Config) *Controller {
	return &Controller{st: st, cfg: cfg.withDefaults(), queues: map[string]*ledQueue{}}
}

// ObserveTick records what a led queue's tick did; it never waits on Redis (Run decides).
func (c *Controller) ObserveTick(name string, at time.Time, r queue.TickResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.queues[name]
	if s == nil {
		s = &ledQueue{}
		c.queues[name] = s
	}
	s.seen = at
	s.admitted += r.Admitted
	s.waiting = r.Waiting + r.WaitingPriority + r.WaitingBypass
}

// Run makes one decision per Period for every queue whose ticks this instance ran lately,
// until ctx ends. A queue this instance stopped leading (or that rests) drops out.
func (c *Controller) Run(ctx context.Context) error {
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
func (c *Controller) led(now time.Time) []string {
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
func (c *Controller) Step(ctx context.Context, name string, now time.Time) (Decision, error) {
	c.mu.Lock()
	s := c.queues[name]
	if s == nil {
		s = &ledQueue{}
		c.queues[name] = s
	}
	admitted, waiting, seen := s.admitted, s.waiting, !s.seen.IsZero()
	s.admitted = 0
	c.mu.Unlock()
	if now.Before(s.fixedUntil) {
		// A fixed queue's admissions are dropped with the period they fell in, so the first
		// auto step divides only its own period's admissions by its own length.
		s.lastStep = now
		return Decision{}, nil
	}

	elapsed := c.cfg.Period
	if !s.lastStep.IsZero() && now.After(s.lastStep) {
		elapsed = now.Sub(s.lastStep)
	}
	s.lastStep = now

	ctx, cancel := c.st.Bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	var d Decision
	err := c.st.Client().Watch(ctx, func(tx *redis.Tx) error {
		m, err := tx.HGetAll(ctx, k.Cfg()).Result()
		if err != nil {
			return err
		}
		if len(m) == 0 {
			return queue.ErrQueueNotFound
		}
		set := queue.ParseSettings(name, m)
		if set.RateMode != queue.RateAuto {
			d = Decision{Rate: set.RatePerSecond}
			s.lastTag, s.lastCut, s.fixedUntil = "", time.Time{}, now.Add(fixedLook)
			return nil
		}
		hm, err := tx.HGetAll(ctx, k.Health()).Result()
		if err != nil {
			return err
		}
		w, stale := topology.MergeHealth(hm, now.Add(-c.cfg.Window))
		in := input{rate: set.RatePerSecond, min: set.AutoMin, max: set.AutoMax, target: set.AutoTargetP95,
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
				p.HSet(ctx, k.Cfg(), queue.RateFields(d.Rate, d.Reason)...)
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
		return Decision{}, nil // the settings changed under the step: the next one decides
	case err != nil:
		return Decision{}, rstore.Fail("auto rate "+name, err)
	}
	if d.Kind != "" && s.remember(d, now) {
		c.cfg.Log.Debug().Str("queue", name).Float64("rate", d.Rate).Msg("auto rate: " + d.Reason)
	}
	return d, nil
}

// remember keeps what the next decisions of the queue need from decision d, made at now,
// and reports whether d is worth a log line (a change, or a hold for a new reason).
func (s *ledQueue) remember(d Decision, now time.Time) bool {
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
