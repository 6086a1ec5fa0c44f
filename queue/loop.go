package queue

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"github.com/waitroom/waitroom/internal/rstore"
)

// One queue's admission loop as a state machine. The loop decides when: when to try or renew
// the lease, when to tick, when to rest and for how long, when to hand the lease over. What
// each step does in Redis is behind loopBackend (redisBackend in production), so the timing
// is tested on synctest's fake clock (loop_test.go) and the Redis side by the tests against
// a real server.

// loopState is where a queue's loop stands. Handing over is no state of its own: the leader
// releases the lease and wakes the preferred instance in one step, and is contending again
// (its next try two renewals later, so the preferred instance takes the lease first).
type loopState int

const (
	// contending: awake without the lease. The timer runs every Tick; the lease is tried
	// every LeaseRenew (the preferred instance at once, the others a renewal later).
	contending loopState = iota
	// leading: the lease is held. A tick every Tick (plus jitter), the lease renewed every
	// LeaseRenew.
	leading
	// resting: the queue is idle and nobody holds its lease. No Redis command: the loop waits
	// for a wake message or, on the preferred instance, its rest check (every RestCheck and at
	// the schedule's next instant); another instance only looks at the view now and then.
	resting
	// stopped: ctx ended; a held lease was released and the preferred instance woken.
	stopped
)

func (s loopState) String() string {
	switch s {
	case contending:
		return "contending"
	case leading:
		return "leading"
	case resting:
		return "resting"
	case stopped:
		return "stopped"
	}
	return "unknown"
}

// loopBackend is the work one queue's loop has done in Redis: the lease script's three
// modes (leaseMode), the wake message, the settings' rate, the admission tick and what
// follows it (the draw, the end), and the tick held for a replica's acknowledgement. Every
// call is for the loop's own queue and lease owner.
type loopBackend interface {
	// takeLease takes or keeps the lease even if the queue rests, ending the rest (leaseTake):
	// the fencing token, or 0 when another owner holds it.
	takeLease(ctx context.Context) (int64, error)
	// checkLease takes or keeps the lease unless the queue really rests (leaseCheckRest).
	checkLease(ctx context.Context) (leaseCheck, error)
	// releaseLease lets the lease go if this owner holds it (leaseRelease).
	releaseLease(ctx context.Context)
	publishWake(ctx context.Context) error
	settingsRate(ctx context.Context) (float64, error)
	tick(ctx context.Context, fence int64, rate float64, waiting int64, lag time.Duration, rest bool) (TickResult, error)
	// afterTick runs what the tick said is due; drew: it ran a draw to its end, so the next
	// tick (which tells every instance the draw is done) should come at once.
	afterTick(ctx context.Context, fence int64, res TickResult) (drew bool)
	// holding reports whether a tick still waits for a replica's acknowledgement (one more
	// try to have it acknowledged first); dropHeld forgets such a tick.
	holding(ctx context.Context) bool
	dropHeld()
	reloadTopology(ctx context.Context)
}

// leaseCheck is checkLease's answer: fence > 0 while this owner holds the lease, 0 while
// another does, -2 when the queue rests (then starts and ends are the schedule's instants,
// zero when unset).
type leaseCheck struct {
	fence        int64
	starts, ends time.Time
}

// queueLoop is the admission loop of one queue: its state and the timing it keeps.
type queueLoop struct {
	a     *Admitter
	name  string
	be    loopBackend
	log   zerolog.Logger
	wake  chan struct{}
	timer *time.Timer

	state     loopState
	fence     int64     // the lease's fencing token while leading, else 0
	rate      float64   // users/s the last tick used; -1: read the settings before the next tick
	waiting   int64     // the lines' length after the last tick: sizes the next tick's token list
	nextLease time.Time // the lease is tried or renewed at the first step from then on
	scheduled time.Time // when the timer was meant to fire: a tick's lag counts from here
	soon      bool      // the next tick comes at once (a draw just ended)
	due       time.Time // while resting: the schedule's next instant (start or end), if any
	handedOff time.Time // the last hand-over to the preferred instance

	onState func(loopState) // tests only (loop_test.go): sees each change of state
}

// newLoop returns queue name's loop, contending: the preferred instance tries the lease at
// its first step, another one a renewal later. Its timer fires at once.
func (a *Admitter) newLoop(name string, be loopBackend, log zerolog.Logger) *queueLoop {
	l := &queueLoop{a: a, name: name, be: be, log: log, wake: a.wakeChan(name),
		state: contending, rate: -1, waiting: maxTokensPerTick} // waiting: until the first tick says
	if !a.preferred(name) {
		l.nextLease = time.Now().Add(a.cfg.LeaseRenew) // the preferred instance tries first
	}
	l.scheduled = time.Now()
	l.timer = time.NewTimer(0)
	return l
}

// run drives the loop until ctx ends: each wake message and each timer firing is one step.
func (l *queueLoop) run(ctx context.Context) {
	defer l.timer.Stop()
	for {
		select {
		case <-ctx.Done():
			l.stop()
			return
		case <-l.wake:
			if l.woken() {
				l.step(ctx, false)
			}
		case <-l.timer.C:
			if awake, force := l.restCheck(); awake {
				l.step(ctx, force)
			}
		}
	}
}

// woken handles a wake message (a join ended the rest, the settings changed, the lease was
// let go) and reports whether the loop steps now. A resting loop contends again: the
// preferred instance at once, another one a renewal later.
func (l *queueLoop) woken() bool {
	l.rate = -1 // a settings change may have woken it
	switch {
	case l.state == resting:
		next := time.Time{}
		if !l.a.preferred(l.name) {
			next = time.Now().Add(l.a.cfg.LeaseRenew)
		}
		l.endRest(next)
		if !l.timer.Stop() {
			select {
			case <-l.timer.C:
			default:
			}
		}
		return true
	case l.state == contending && l.a.preferred(l.name):
		// Awake without the lease, and preferred: the lease was let go (a hand-over, a
		// shutdown) — try now instead of at the next renewal.
		l.nextLease = time.Time{}
		return true
	}
	return false // awake already: the timer runs
}

// restCheck handles the timer and reports whether the loop steps now, and whether that step
// takes the lease even if the queue rests (the schedule's instant: it ticks even if idle).
// An awake loop always steps. A resting loop on the preferred instance ends its rest and
// tries the lease; on another instance it sleeps on.
func (l *queueLoop) restCheck() (awake, force bool) {
	if l.state != resting {
		return true, false
	}
	if !l.a.preferred(l.name) {
		l.sleep()
		return false, false
	}
	l.endRest(time.Time{})
	if !l.due.IsZero() && !time.Now().Before(l.due) {
		force, l.due = true, time.Time{}
	}
	return true, force
}

// to moves the loop to state s.
func (l *queueLoop) to(s loopState) {
	if s != l.state && l.onState != nil {
		l.onState(s)
	}
	l.state = s
}

// endRest makes a resting loop contend, its next lease try at next.
func (l *queueLoop) endRest(next time.Time) {
	l.to(contending)
	l.scheduled = time.Now() // the rest is not tick lag
	l.nextLease = next
}

// step is one turn of an awake loop: the lease when its time has come, a tick while
// leading, then the timer for the next turn. A step that puts the queue to rest arms the
// rest's timer instead.
func (l *queueLoop) step(ctx context.Context, force bool) {
	now := time.Now()
	if !now.Before(l.nextLease) && !l.tryLease(ctx, now, force) {
		return
	}
	if l.state == leading && !l.lead(ctx, now) {
		return
	}
	delay := l.a.cfg.Tick + jitter(l.a.cfg.Jitter)
	if l.soon {
		// A draw just ended (it ran for seconds): the tick that publishes it comes now, not
		// a whole interval later — every stream waits for it to learn its drawn place.
		l.soon, delay = false, time.Millisecond
	}
	l.scheduled = time.Now().Add(delay)
	l.timer.Reset(delay)
}

// tryLease tries or renews the lease: contending → leading when it is won, leading →
// contending when it is lost (or cannot be read), contending → resting when the queue
// rests. It reports false for the rest.
func (l *queueLoop) tryLease(ctx context.Context, now time.Time, force bool) bool {
	var c leaseCheck
	var err error
	if force || l.a.cfg.NoRest {
		c.fence, err = l.be.takeLease(ctx)
	} else {
		c, err = l.be.checkLease(ctx)
	}
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn().Err(err).Msg("admission: lease")
			l.be.reloadTopology(ctx)
		}
		c.fence = 0
	}
	l.nextLease = now.Add(l.a.cfg.LeaseRenew)
	if c.fence == -2 {
		l.setLeader(0)
		l.rest(restUntil(c.starts, c.ends))
		return false
	}
	l.setLeader(c.fence)
	if c.fence > 0 {
		l.to(leading)
	} else {
		l.to(contending)
	}
	return true
}

// lead runs one tick of a leading loop, unless a tick waits for a replica's
// acknowledgement (then no further tick until it has one). The tick may end the
// leadership: the script refused the fencing token (→ contending), the queue went quiet
// (→ resting: it reports false), or another instance is preferred (a hand-over).
func (l *queueLoop) lead(ctx context.Context, now time.Time) bool {
	if l.be.holding(ctx) {
		return true
	}
	m, name := l.a.q.m, l.name
	m.tickLag.WithLabelValues(name).Observe(max(0, now.Sub(l.scheduled).Seconds()))
	if l.rate < 0 {
		if r, err := l.be.settingsRate(ctx); err == nil {
			l.rate = r
		}
	}
	res, err := l.be.tick(ctx, l.fence, l.rate, l.waiting, max(0, now.Sub(l.scheduled)), !l.a.cfg.NoRest)
	m.tickDur.WithLabelValues(name).Observe(time.Since(now).Seconds())
	switch {
	case err != nil:
		if ctx.Err() == nil {
			l.log.Warn().Err(err).Msg("admission: tick")
			l.be.reloadTopology(ctx)
		}
	case res.fenced:
		l.setLeader(0)
		l.to(contending)
	default:
		l.rate, l.waiting = res.rate, res.Waiting+res.WaitingPriority+res.WaitingBypass
		for _, o := range l.a.cfg.Observers {
			o.ObserveTick(name, now, res)
		}
		l.soon = l.be.afterTick(ctx, l.fence, res)
		if res.Rested {
			// The script released the lease with the rest.
			l.setLeader(0)
			m.rests.WithLabelValues(name).Inc()
			l.rest(restUntil(res.StartsAt, res.EndsAt))
			return false
		}
		if l.a.settledElsewhere(name) && time.Since(l.handedOff) > 10*time.Second {
			l.handOver(ctx)
		}
	}
	return true
}

// handOver gives the lease to the preferred instance: leading → contending, after a
// release and a wake message; this loop tries again two renewals later, by when the
// preferred instance holds the lease.
func (l *queueLoop) handOver(ctx context.Context) {
	l.handedOff = time.Now()
	l.release()
	l.to(contending)
	_ = l.be.publishWake(ctx)
	l.nextLease = time.Now().Add(2 * l.a.cfg.LeaseRenew)
	l.log.Debug().Msg("admission: handed the lease to the preferred instance")
}

// rest puts the loop to rest until a wake message or its rest check; due is the schedule's
// next instant (zero: none).
func (l *queueLoop) rest(due time.Time) {
	l.to(resting)
	l.due = due
	l.sleep()
}

// restUntil is the rest's due instant: a moment after the earliest of the schedule's
// instants still to come (zero: none).
func restUntil(instants ...time.Time) time.Time {
	var due time.Time
	for _, at := range instants {
		if at.After(time.Now()) && (due.IsZero() || at.Before(due)) {
			due = at.Add(50 * time.Millisecond)
		}
	}
	return due
}

// sleep arms the timer of a resting loop: the preferred instance checks every RestCheck and
// at the schedule's next instant; another instance only re-reads the view now and then
// (free), in case it becomes the preferred one.
func (l *queueLoop) sleep() {
	d := 6 * l.a.cfg.RestCheck
	if l.a.preferred(l.name) {
		d = l.a.cfg.RestCheck
		if !l.due.IsZero() {
			d = min(d, max(0, time.Until(l.due)))
		}
	}
	l.timer.Reset(d)
}

// stop ends the loop (ctx ended): a held tick's message is dropped, and a held lease is
// released with a wake message, so the preferred instance takes over at once rather than
// at its next try.
func (l *queueLoop) stop() {
	l.be.dropHeld()
	if l.fence > 0 {
		l.release()
		wctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = l.be.publishWake(wctx)
		cancel()
	}
	l.to(stopped)
}

// release lets the lease go (on a context of its own: ctx may have ended).
func (l *queueLoop) release() {
	rctx, cancel := context.WithTimeout(context.Background(), time.Second)
	l.be.releaseLease(rctx)
	cancel()
	l.setLeader(0)
}

// setLeader records the lease's fencing token f (0: not held); the Admitter's Leading list,
// the leader metrics and the log follow. The caller moves the loop to its next state.
func (l *queueLoop) setLeader(f int64) {
	if f != l.fence && l.fence > 0 {
		// The lease ended or changed hands meanwhile: a held tick's message is dropped
		// (streams see the gap in event numbers and resync from Redis, whose token
		// reads confirm before they hand a token out).
		l.be.dropHeld()
	}
	if (f > 0) != (l.fence > 0) {
		l.a.mu.Lock()
		l.a.leading[l.name] = f > 0
		l.a.mu.Unlock()
		if f > 0 {
			l.a.q.m.leaderChanges.WithLabelValues(l.name).Inc()
			l.a.q.m.leader.WithLabelValues(l.name).Set(1)
			l.log.Info().Int64("fence", f).Msg("admission: took the lease")
		} else {
			l.a.q.m.leader.WithLabelValues(l.name).Set(0)
			l.log.Debug().Msg("admission: lost the lease")
		}
	}
	l.fence = f
}

// redisBackend is loopBackend on Redis: the lease script and the Admitter's tick, held-tick
// and schedule work for one queue and one lease owner.
type redisBackend struct {
	a     *Admitter
	name  string
	owner string
	k     rstore.Keys
	log   zerolog.Logger
}

func (b *redisBackend) takeLease(ctx context.Context) (int64, error) {
	k := b.k
	return rstore.Lease.Run(ctx, b.a.q.rdb, []string{k.Lease(), k.Fence(), k.Clock()},
		b.owner, b.a.cfg.LeaseTTL.Milliseconds(), string(leaseTake)).Int64()
}

func (b *redisBackend) checkLease(ctx context.Context) (leaseCheck, error) {
	k := b.k
	res, err := rstore.Lease.Run(ctx, b.a.q.rdb, []string{k.Lease(), k.Fence(), k.Clock(), k.Cfg(), k.Waiting(), k.Active(), k.Pre(), k.Retire()},
		b.owner, b.a.cfg.LeaseTTL.Milliseconds(), string(leaseCheckRest)).Slice()
	if err != nil || len(res) != 3 {
		return leaseCheck{}, err
	}
	c := leaseCheck{fence: toInt(res[0])}
	if ms := toInt(res[1]); ms > 0 {
		c.starts = time.UnixMilli(ms)
	}
	if ms := toInt(res[2]); ms > 0 {
		c.ends = time.UnixMilli(ms)
	}
	return c, nil
}

func (b *redisBackend) releaseLease(ctx context.Context) {
	k := b.k
	_ = rstore.Lease.Run(ctx, b.a.q.rdb, []string{k.Lease(), k.Fence(), k.Clock()}, b.owner, 0, string(leaseRelease)).Err()
}

func (b *redisBackend) publishWake(ctx context.Context) error {
	return b.a.q.topo.PublishWake(ctx, b.name)
}

func (b *redisBackend) settingsRate(ctx context.Context) (float64, error) {
	s, err := b.a.q.Settings(ctx, b.name)
	return s.RatePerSecond, err
}

func (b *redisBackend) tick(ctx context.Context, fence int64, rate float64, waiting int64, lag time.Duration, rest bool) (TickResult, error) {
	return b.a.tick(ctx, b.name, b.owner, fence, rate, waiting, lag, rest)
}

func (b *redisBackend) afterTick(ctx context.Context, fence int64, res TickResult) bool {
	return b.a.afterTick(ctx, b.name, b.owner, fence, res, b.log)
}

func (b *redisBackend) holding(ctx context.Context) bool { return b.a.holding(ctx, b.name, b.log) }

func (b *redisBackend) dropHeld() { b.a.dropHeld(b.name, b.log) }

func (b *redisBackend) reloadTopology(ctx context.Context) { b.a.q.ReloadTopology(ctx) }
