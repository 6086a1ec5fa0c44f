package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"math/big"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/waitroom/waitroom/internal/rstore"
)

// AdmitConfig tunes the admission loops. Zero fields take the documented defaults.
type AdmitConfig struct {
	Owner        string        // instance id, part of the lease owner (and its id in the live set)
	Tick         time.Duration // fixed delay between ticks (default 100 ms)
	Jitter       time.Duration // random extra delay per tick, 0..Jitter (default 0)
	LeaseTTL     time.Duration // lease time; a dead leader is replaced within it (default 2 s)
	LeaseRenew   time.Duration // how often the lease is renewed or tried (default LeaseTTL/4)
	MaxElapsed   time.Duration // most time one tick may account for (default 3 × Tick)
	PublishEvery time.Duration // publish a tick message at least this often (default 1 s)
	SweepLimit   int           // expired tokens / abandoned places handled per tick (default 500)
	DrawBatch    int           // pre-queue members placed per script call of the draw (default 5,000)
	Refresh      time.Duration // how often the list of queues is re-read (default 5 s; a new queue wakes at once)
	// RestCheck is how often the preferred instance of a resting queue looks at it (one
	// cheap script call; default 10 s): a wake message lost with a pub/sub connection costs
	// at most this long. NoRest keeps every loop ticking as before resting existed.
	RestCheck time.Duration
	NoRest    bool
	// ViewEvery is how often the live instances are re-read to spread leadership (default
	// 2 s); AliveTTL is how recent an instance's report must be to count (default 6 s, the
	// stream hub's CountTTL).
	ViewEvery time.Duration
	AliveTTL  time.Duration
	// Observers see every tick this instance runs as a queue's leader (history, the auto
	// rate controller); they are called on the loop's goroutine and must not block.
	Observers []TickObserver
	Log       zerolog.Logger
}

// TickObserver sees the ticks of the queues this instance leads: name, when the tick ran
// and what it did. ObserveTick runs on the admission loop: it must hand work off, never wait.
type TickObserver interface {
	ObserveTick(name string, at time.Time, r TickResult)
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
	def(&c.Refresh, 5*time.Second)
	def(&c.RestCheck, 10*time.Second)
	def(&c.ViewEvery, 2*time.Second)
	def(&c.AliveTTL, 6*time.Second)
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
//
// An idle queue (nobody waiting, no pre-queue, no live token) rests: its leader's last tick
// releases the lease and marks it idle, and every instance's loop for it waits without a
// Redis command until a wake message (a join ended the rest, its settings changed) or, on
// the instance preferred to lead it, a rest check every RestCheck and the schedule's next
// instant. Leadership is spread: each instance knows which queues it is preferred for
// (spread.go); that instance tries first, and a leader that is not preferred hands over.
type Admitter struct {
	q   *Queue
	cfg AdmitConfig

	mu      sync.Mutex
	leading map[string]bool
	wakes   map[string]chan struct{}

	view    atomic.Pointer[leadView]
	refresh chan struct{} // re-read the queue names now (a wake named an unknown queue)

	holds map[string]*heldTick // guarded by mu: ticks held until a replica acknowledges them (ackhold.go)

	afterDrawBatch func() // tests only (export_test.go): runs after each batch of a draw
}

// leadView is one computation of the spread: which queues this instance is preferred for,
// and since when the inputs have been the same (a hand-over waits for a settled view).
type leadView struct {
	mine   map[string]bool
	known  bool // this instance is in the live set (else it treats every queue as its own)
	ids    string
	since  time.Time
	counts map[string]int
}

// NewAdmitter returns an Admitter for the queues in q.
func NewAdmitter(q *Queue, cfg AdmitConfig) *Admitter {
	return &Admitter{q: q, cfg: cfg.withDefaults(), leading: map[string]bool{},
		wakes: map[string]chan struct{}{}, refresh: make(chan struct{}, 1), holds: map[string]*heldTick{}}
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

// Preferred lists the queues this instance is preferred to lead (the spread), or nil
// while it does not know (not yet in the live set).
func (a *Admitter) Preferred() []string {
	v := a.view.Load()
	if v == nil || !v.known {
		return nil
	}
	var out []string
	for n := range v.mine {
		out = append(out, n)
	}
	sortStrings(out)
	return out
}

// preferred reports whether this instance should try first for queue name.
func (a *Admitter) preferred(name string) bool {
	v := a.view.Load()
	return v == nil || !v.known || v.mine[name]
}

// settledPreferred reports whether another instance is preferred for name by a view that has
// not changed for a while (a hand-over on a view that is still moving could bounce).
func (a *Admitter) settledElsewhere(name string) bool {
	v := a.view.Load()
	return v != nil && v.known && !v.mine[name] && time.Since(v.since) >= 3*a.cfg.ViewEvery
}

func (a *Admitter) wakeChan(name string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := a.wakes[name]
	if ch == nil {
		ch = make(chan struct{}, 1)
		a.wakes[name] = ch
	}
	return ch
}

// poke wakes the loop of queue name (false: no loop for it here yet).
func (a *Admitter) poke(name string) bool {
	a.mu.Lock()
	ch := a.wakes[name]
	a.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case ch <- struct{}{}:
	default:
	}
	return true
}

func (a *Admitter) pokePreferred() {
	a.mu.Lock()
	chs := make([]chan struct{}, 0, len(a.wakes))
	for n, ch := range a.wakes {
		if a.preferred(n) {
			chs = append(chs, ch)
		}
	}
	a.mu.Unlock()
	for _, ch := range chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Run starts a loop for every queue, and for queues created later, until ctx ends; then
// every loop releases its lease so another instance takes over at once.
func (a *Admitter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { defer wg.Done(); a.listenWakes(ctx) }()
	started := map[string]bool{}
	var names []string
	readNames := func() {
		ns, err := a.q.Names(ctx)
		if err != nil {
			if ctx.Err() == nil {
				a.cfg.Log.Warn().Err(err).Msg("admission: list queues")
			}
			return
		}
		names = ns
	}
	readNames()
	a.updateView(ctx, names)
	t := time.NewTicker(a.cfg.Refresh)
	defer t.Stop()
	vt := time.NewTicker(a.cfg.ViewEvery)
	defer vt.Stop()
	for {
		for _, n := range names {
			if !started[n] {
				started[n] = true
				a.wakeChan(n)
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
			readNames()
		case <-a.refresh:
			readNames()
			a.updateView(ctx, names)
		case <-vt.C:
			a.updateView(ctx, names)
		}
	}
}

// updateView recomputes the spread from the live instances and the queue names.
func (a *Admitter) updateView(ctx context.Context, names []string) {
	ids, err := a.q.topo.Alive(ctx, a.cfg.AliveTTL)
	if err != nil {
		return // keep the last view
	}
	key := ""
	for _, id := range ids {
		key += id + "\x00"
	}
	key += "|" + strconv.Itoa(len(names))
	prev := a.view.Load()
	v := &leadView{ids: key, since: time.Now(), mine: map[string]bool{}, counts: map[string]int{}}
	if prev != nil && prev.ids == key {
		v.since = prev.since
	}
	for q, id := range assign(names, ids) {
		v.counts[id]++
		if id == a.cfg.Owner {
			v.mine[q] = true
		}
	}
	for _, id := range ids {
		if id == a.cfg.Owner {
			v.known = true
		}
	}
	a.view.Store(v)
	// Queues this instance has just become preferred for (another instance left): their
	// resting loops look at them now — the rest checks and schedule instants are now ours.
	if prev != nil && v.known {
		for n := range v.mine {
			if !prev.known || !prev.mine[n] {
				a.poke(n)
			}
		}
	}
}

// listenWakes follows the wake channel: a named queue's loop wakes; an unknown name is a new
// queue (the names are re-read). After a (re)subscription every loop looks once, since
// wakes published meanwhile are lost.
func (a *Admitter) listenWakes(ctx context.Context) {
	refresh := func() {
		select {
		case a.refresh <- struct{}{}:
		default:
		}
	}
	a.q.topo.WatchWakes(ctx, func(name string) {
		if !a.poke(name) {
			refresh()
		}
	}, func() {
		// Queues created before the subscription was up (at start, or while it was
		// re-established) are read now, not at the next refresh.
		refresh()
		// Wakes published meanwhile are lost: the loops of the queues this instance is
		// preferred for look once (the others follow their preferred instance).
		a.pokePreferred()
	})
}

// Loop runs the admission loop of one queue until ctx ends. It has its own goroutine
// and timer and uses a fixed delay, so ticks never overlap and never share a worker with
// other jobs; its lag is exported. While the queue rests the goroutine waits on its wake
// channel (and, on the preferred instance, a rest-check timer): no Redis command, no tick.
// The states and their transitions are queueLoop's (loop.go).
func (a *Admitter) Loop(ctx context.Context, name string) {
	owner := a.cfg.Owner + ":" + nonce()
	log := a.cfg.Log.With().Str("queue", name).Logger()
	be := &redisBackend{a: a, name: name, owner: owner, k: rstore.KeysFor(name), log: log}
	a.newLoop(name, be, log).run(ctx)
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
	// Rested: the tick found the queue idle and put it to rest (lease released). StartsAt and
	// EndsAt are the schedule's instants (zero when unset), for the resting loop's timer.
	Rested   bool
	StartsAt time.Time
	EndsAt   time.Time
	// Acks is how many replicas acknowledged the tick before its message went out (-1: not
	// asked: ReplicaAcks 0, or no replica attached). Held: fewer than asked did, a replica is
	// attached, and the message waits until one holds the tick (ackhold.go).
	Acks int64
	Held bool
	// Rate is the admission rate the tick used (users/s); Tail the last sequence handed out
	// in the normal line; Seqs the normal line's sequences this tick admitted (nil for none),
	// in FIFO order or the lottery's picks under method random.
	Rate float64
	Tail int64
	Seqs []int64

	rate   float64
	fenced bool
}

// tick runs admit.lua once. The tokens are made here (UUID v4) and passed in, enough for
// the most the tick may admit; the script uses what it needs. With ReplicaAcks > 0 the script
// returns its message instead of publishing it, runs in one pipeline with WAIT on the
// master's connection, and the message goes out once the replicas hold the tick's writes.
func (a *Admitter) tick(ctx context.Context, name, owner string, fence int64, rate float64, waiting int64, lag time.Duration, rest bool) (TickResult, error) {
	k := rstore.KeysFor(name)
	n := int(math.Ceil(rate*a.cfg.MaxElapsed.Seconds())) + 1
	// No more tokens than users who could be waiting: last tick's line plus a margin for
	// joins since (an idle queue sends a few ids, not thousands).
	// Never below zero: a loop that could not read the rate yet passes -1, which with a
	// MaxElapsed over 1 s made n negative (a panic in make); such a tick hands out no token.
	n = max(0, min(n, maxTokensPerTick, int(waiting)+joinMargin))
	keys := make([]string, admitFixedKeys, admitFixedKeys+n)
	copy(keys, []string{k.Cfg(), k.Waiting(), k.Tickets(), k.Seen(), k.Clock(), k.Active(),
		k.Gone(), k.GoneNew(), k.Lease(), k.Fence(), k.Ev(), rstore.Channel(name), k.Seq(), k.Retire(),
		k.LaneWaiting(laneP), k.LaneGone(laneP), k.LaneGoneNew(laneP),
		k.LaneWaiting(laneB), k.LaneGone(laneB), k.LaneGoneNew(laneB), k.Pre(), k.DrawSet(), k.Draw()})
	grace := a.q.cfg.Grace.Milliseconds()
	if grace < 0 {
		grace = 0
	}
	how := publishPlain
	want := a.q.ackWant(ctx, name)
	switch {
	case want > 0:
		how = publishReturn
	case a.q.PubSub() == PubSubSharded:
		how = publishSharded
	case a.q.PubSub() == PubSubBoth:
		how = publishBoth
	}
	mode := string(how)
	if rest {
		mode += restWhenIdle
	}
	args := make([]any, 8, 8+n)
	copy(args, []any{owner, fence, a.cfg.MaxElapsed.Milliseconds(), grace, a.cfg.SweepLimit,
		a.cfg.PublishEvery.Milliseconds(), strconv.FormatFloat(float64(lag.Microseconds())/1000, 'f', 3, 64), mode})
	for range n {
		t := uuid.NewString()
		keys = append(keys, k.Token(t))
		args = append(args, t)
	}
	var text string
	var err error
	acks := int64(-1)
	if how == publishReturn {
		text, acks, err = a.q.evalWait(ctx, want, rstore.Admit, keys, args...)
	} else {
		text, err = rstore.Admit.Run(ctx, a.q.rdb, keys, args...).Text()
	}
	if refusal(err) == errFenced {
		return TickResult{fenced: true}, nil
	}
	if err != nil {
		return TickResult{}, err
	}
	var ans admitAnswer
	if err := decodeAnswer("admit "+name, text, &ans); err != nil {
		return TickResult{}, err
	}
	r := ans.result()
	r.Acks = acks
	// held: an attached replica did not acknowledge the tick within AckTimeout (slow,
	// paused, far behind): its message waits (ackhold.go). With no replica attached at
	// all the message goes out, its admissions counted unconfirmed.
	held, alone := false, want == 0 && a.q.cfg.ReplicaAcks > 0
	if acks >= 0 && acks < int64(want) {
		ok, none, first := a.q.shortfall(ctx, name, acks)
		held, alone = !ok, none
		if first {
			a.cfg.Log.Warn().Str("queue", name).Msg("admission: the Redis master has no replica; admissions go out unconfirmed until one is attached")
		}
	}
	if r.Admitted > 0 && alone {
		a.q.m.unconfirmed.WithLabelValues(name).Add(float64(r.Admitted))
	}
	if msg := ans.Message; msg != "" && held && !r.Rested {
		// A resting tick admitted nobody and released the lease: its message goes out.
		a.hold(name, msg, r, a.cfg.Log)
		r.Held = true
	} else if msg != "" {
		if err := a.q.publishTick(ctx, name, msg); err != nil {
			// Streams see the gap in event numbers and resync from Redis.
			a.cfg.Log.Warn().Err(err).Str("queue", name).Msg("admission: publish tick")
		}
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
	k := rstore.KeysFor(name)
	owner := a.cfg.Owner + ":once"
	fence, err := rstore.Lease.Run(ctx, a.q.rdb, []string{k.Lease(), k.Fence(), k.Clock()}, owner, a.cfg.LeaseTTL.Milliseconds(), string(leaseTake)).Int64()
	if err != nil {
		return TickResult{}, err
	}
	if fence == 0 {
		return TickResult{fenced: true}, ErrNotLeader
	}
	if a.holding(ctx, name, a.cfg.Log) {
		return TickResult{Held: true}, nil // no tick while one waits for a replica
	}
	s, err := a.q.Settings(ctx, name)
	if err != nil {
		return TickResult{}, err
	}
	res, err := a.tick(ctx, name, owner, fence, s.RatePerSecond, maxTokensPerTick, 0, false)
	if err == nil && !res.fenced {
		a.afterTick(ctx, name, owner, fence, res, a.cfg.Log)
	}
	return res, err
}
