package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"math/big"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// AdmitConfig tunes the admission loops. Zero fields take the documented defaults.
type AdmitConfig struct {
	Owner        string        // instance id, part of the lease owner
	Tick         time.Duration // fixed delay between ticks (default 100 ms)
	Jitter       time.Duration // random extra delay per tick, 0..Jitter (default 0)
	LeaseTTL     time.Duration // lease time; a dead leader is replaced within it (default 2 s)
	LeaseRenew   time.Duration // how often the lease is renewed or tried (default LeaseTTL/4)
	MaxElapsed   time.Duration // most time one tick may account for (default 3 × Tick)
	PublishEvery time.Duration // publish a tick message at least this often (default 1 s)
	SweepLimit   int           // expired tokens / abandoned places handled per tick (default 500)
	DrawBatch    int           // pre-queue members placed per script call of the draw (default 5,000)
	Refresh      time.Duration // how often the list of queues is re-read (default 1 s)
	Log          zerolog.Logger
}

func (c AdmitConfig) withDefaults() AdmitConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Tick, 100*time.Millisecond)
	def(&c.LeaseTTL, 2*time.Second)
	def(&c.LeaseRenew, c.LeaseTTL/4)
	def(&c.MaxElapsed, 3*c.Tick)
	def(&c.PublishEvery, time.Second)
	def(&c.Refresh, time.Second)
	if c.SweepLimit <= 0 {
		c.SweepLimit = 500
	}
	if c.DrawBatch <= 0 {
		c.DrawBatch = 5000
	}
	if c.Owner == "" {
		c.Owner = "instance"
	}
	return c
}

// Admitter runs one admission loop per queue. Every instance runs an Admitter; a loop
// admits only while it holds its queue's lease, and the admit script checks the lease's
// fencing token, so exactly one loop per queue admits at a time across all instances.
type Admitter struct {
	q   *Queue
	cfg AdmitConfig

	mu      sync.Mutex
	leading map[string]bool
}

// NewAdmitter returns an Admitter for the queues in q.
func NewAdmitter(q *Queue, cfg AdmitConfig) *Admitter {
	return &Admitter{q: q, cfg: cfg.withDefaults(), leading: map[string]bool{}}
}

// Leading lists the queues whose lease this Admitter holds.
func (a *Admitter) Leading() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for n, ok := range a.leading {
		if ok {
			out = append(out, n)
		}
	}
	sortStrings(out)
	return out
}

// Run starts a loop for every queue, and for queues created later, until ctx ends; then
// every loop releases its lease so another instance takes over at once.
func (a *Admitter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	started := map[string]bool{}
	t := time.NewTicker(a.cfg.Refresh)
	defer t.Stop()
	for {
		names, err := a.q.Names(ctx)
		if err != nil && ctx.Err() == nil {
			a.cfg.Log.Warn().Err(err).Msg("admission: list queues")
		}
		for _, n := range names {
			if !started[n] {
				started[n] = true
				wg.Add(1)
				go func() {
					defer wg.Done()
					a.Loop(ctx, n)
				}()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Loop runs the admission loop of one queue until ctx ends. It has its own goroutine
// and timer and uses a fixed delay, so ticks never overlap and never share a worker with
// other jobs (seed 000's lesson); its lag is exported.
func (a *Admitter) Loop(ctx context.Context, name string) {
	owner := a.cfg.Owner + ":" + nonce()
	k := keysFor(name)
	log := a.cfg.Log.With().Str("queue", name).Logger()
	var fence int64
	var rate float64 = -1
	waiting := int64(maxTokensPerTick) // until the first tick says
	nextLease := time.Time{}
	scheduled := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	setLeader := func(f int64) {
		if (f > 0) != (fence > 0) {
			a.mu.Lock()
			a.leading[name] = f > 0
			a.mu.Unlock()
			if f > 0 {
				a.q.m.leaderChanges.WithLabelValues(name).Inc()
				a.q.m.leader.WithLabelValues(name).Set(1)
				log.Info().Int64("fence", f).Msg("admission: took the lease")
			} else {
				a.q.m.leader.WithLabelValues(name).Set(0)
				log.Info().Msg("admission: lost the lease")
			}
		}
		fence = f
	}
	for {
		select {
		case <-ctx.Done():
			if fence > 0 {
				rctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = leaseScript.Run(rctx, a.q.rdb, []string{k.lease(), k.fence()}, owner, 0, "1").Err()
				cancel()
				setLeader(0)
			}
			return
		case <-timer.C:
		}
		now := time.Now()
		if !now.Before(nextLease) {
			f, err := leaseScript.Run(ctx, a.q.rdb, []string{k.lease(), k.fence()},
				owner, a.cfg.LeaseTTL.Milliseconds(), "0").Int64()
			if err != nil {
				if ctx.Err() == nil {
					log.Warn().Err(err).Msg("admission: lease")
				}
				f = 0
			}
			setLeader(f)
			nextLease = now.Add(a.cfg.LeaseRenew)
		}
		if fence > 0 {
			a.q.m.tickLag.WithLabelValues(name).Observe(max(0, now.Sub(scheduled).Seconds()))
			if rate < 0 {
				if s, err := a.q.Settings(ctx, name); err == nil {
					rate = s.RatePerSecond
				}
			}
			res, err := a.tick(ctx, name, owner, fence, rate, waiting, max(0, now.Sub(scheduled)))
			a.q.m.tickDur.WithLabelValues(name).Observe(time.Since(now).Seconds())
			switch {
			case err != nil:
				if ctx.Err() == nil {
					log.Warn().Err(err).Msg("admission: tick")
				}
			case res.fenced:
				setLeader(0)
			default:
				rate, waiting = res.rate, res.Waiting+res.WaitingPriority+res.WaitingBypass
				a.afterTick(ctx, name, owner, fence, res, log)
			}
		}
		delay := a.cfg.Tick + jitter(a.cfg.Jitter)
		scheduled = time.Now().Add(delay)
		timer.Reset(delay)
	}
}

// maxTokensPerTick caps the tokens one tick may issue: each is a key in the script's KEYS
// and a UUID made here, and 5,000 is 50,000 users/s at the default 100 ms tick.
const maxTokensPerTick = 5000

// admitFixedKeys is how many keys admit.lua takes before the token keys.
const admitFixedKeys = 23

// joinMargin is how many tokens a tick makes beyond last tick's line, for users who joined
// since; a later tick admits whoever a short margin left behind.
const joinMargin = 64

// TickResult is what one admission tick did.
type TickResult struct {
	Admitted  int64 // from every line
	Ev        int64
	Waiting   int64 // the normal line's length after the tick
	Active    int64
	Tick      int64
	Head      int64 // the normal line's head
	Expired   int64
	Abandoned int64
	// The invite lanes: their lengths after the tick and how many each gave of Admitted.
	WaitingPriority  int64
	WaitingBypass    int64
	AdmittedPriority int64
	AdmittedBypass   int64
	// Phase is the queue's draw phase after the tick (DrawFrozen: the draw is due); EndDue
	// says ends_at has passed and the line is not yet ended.
	Phase  DrawPhase
	EndDue bool

	rate   float64
	fenced bool
}

// tick runs admit.lua once. The tokens are made here (UUID v4) and passed in, enough for
// the most the tick may admit; the script uses what it needs.
func (a *Admitter) tick(ctx context.Context, name, owner string, fence int64, rate float64, waiting int64, lag time.Duration) (TickResult, error) {
	k := keysFor(name)
	n := int(math.Ceil(rate*a.cfg.MaxElapsed.Seconds())) + 1
	// No more tokens than users who could be waiting: last tick's line plus a margin for
	// joins since (an idle queue sends a few ids, not thousands).
	n = min(n, maxTokensPerTick, int(waiting)+joinMargin)
	keys := make([]string, admitFixedKeys, admitFixedKeys+n)
	copy(keys, []string{k.cfg(), k.waiting(), k.tickets(), k.seen(), k.clock(), k.active(),
		k.gone(), k.goneNew(), k.lease(), k.fence(), k.ev(), Channel(name), k.seq(), k.retire(),
		k.laneWaiting(laneP), k.laneGone(laneP), k.laneGoneNew(laneP),
		k.laneWaiting(laneB), k.laneGone(laneB), k.laneGoneNew(laneB), k.pre(), k.drawSet(), k.draw()})
	grace := a.q.cfg.Grace.Milliseconds()
	if grace < 0 {
		grace = 0
	}
	args := make([]any, 7, 7+n)
	copy(args, []any{owner, fence, a.cfg.MaxElapsed.Milliseconds(), grace, a.cfg.SweepLimit,
		a.cfg.PublishEvery.Milliseconds(), strconv.FormatFloat(float64(lag.Microseconds())/1000, 'f', 3, 64)})
	for range n {
		t := uuid.NewString()
		keys = append(keys, k.token(t))
		args = append(args, t)
	}
	res, err := admitScript.Run(ctx, a.q.rdb, keys, args...).Int64Slice()
	if err != nil {
		return TickResult{}, err
	}
	if res[0] < 0 {
		return TickResult{fenced: true}, nil
	}
	r := TickResult{Admitted: res[0], Ev: res[1], Waiting: res[2], Active: res[3], Tick: res[4],
		Head: res[5], rate: float64(res[7]) / 1000, Expired: res[9], Abandoned: res[10]}
	if len(res) >= 15 {
		r.WaitingPriority, r.WaitingBypass, r.AdmittedPriority, r.AdmittedBypass = res[11], res[12], res[13], res[14]
	}
	if len(res) >= 17 {
		r.Phase = [...]DrawPhase{DrawNone, DrawScheduled, DrawFrozen, DrawDone}[min(max(res[15], 0), 3)]
		r.EndDue = res[16] == 1
	}
	a.q.m.issued.WithLabelValues(name).Add(float64(r.Admitted))
	a.q.m.waiting.WithLabelValues(name).Set(float64(r.Waiting + r.WaitingPriority + r.WaitingBypass))
	a.q.m.active.WithLabelValues(name).Set(float64(r.Active))
	a.q.m.expired.WithLabelValues(name).Add(float64(r.Expired))
	a.q.m.abandoned.WithLabelValues(name).Add(float64(r.Abandoned))
	return r, nil
}

func nonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(d)))
	if err != nil {
		return 0
	}
	return time.Duration(n.Int64())
}

// TickOnce takes queue name's lease for this Admitter (if it is free) and runs one
// admission tick. Tests and benchmarks drive admission step by step with it; a server
// uses Run.
func (a *Admitter) TickOnce(ctx context.Context, name string) (TickResult, error) {
	k := keysFor(name)
	owner := a.cfg.Owner + ":once"
	fence, err := leaseScript.Run(ctx, a.q.rdb, []string{k.lease(), k.fence()}, owner, a.cfg.LeaseTTL.Milliseconds(), "0").Int64()
	if err != nil {
		return TickResult{}, err
	}
	if fence == 0 {
		return TickResult{fenced: true}, ErrNotLeader
	}
	s, err := a.q.Settings(ctx, name)
	if err != nil {
		return TickResult{}, err
	}
	res, err := a.tick(ctx, name, owner, fence, s.RatePerSecond, maxTokensPerTick, 0)
	if err == nil && !res.fenced {
		a.afterTick(ctx, name, owner, fence, res, a.cfg.Log)
	}
	return res, err
}
