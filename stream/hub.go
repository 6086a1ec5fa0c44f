// Package stream owns this instance's live connections: one Server-Sent Events stream per
// waiting user, fed from the admission leader's per-tick messages (queue.Feed). Each
// instance keeps a copy of every queue's head and departures and computes its waiters'
// exact positions locally, so the Redis cost of live positions does not grow with the
// number of waiters.
//
// Files by noun: hub.go (the Hub, its lifecycle and registries), conn.go (one stream:
// attach, drop, shutdown), shard.go (the writers), line.go (a queue's local copy of the
// line), subscription.go (tick messages in), fanout.go (position events out), sale.go (the
// sale's announcements: pre-queue, draw, sold out, end), frames.go (event rendering),
// presence.go (signs of life and the instance report).
//
// Lock order. There are three kinds of mutex, always taken in this order and never the
// other way round:
//
//  1. qhub.pushMu — one queue's pushers of position-like frames (the fan-out, the draw, the
//     sold-out announcement), so that a frame computed earlier is never queued after one
//     computed later; held while they push, never while reading Redis;
//  2. qhub.mu — one queue's line and its connection sets, and the per-conn fields marked
//     "guarded by the queue's lock";
//  3. shard.mu — one writer's queues and the per-conn fields marked "guarded by shard.mu";
//     taken under the locks above only inside shard.push/pushAt, and never held while
//     taking another lock.
//
// A write slot (Hub.slots, writeSlots in shard.go: bulk work — position writes, pings, a
// fan-out's computation — on at most GOMAXPROCS−1 processors) is taken like a lock between
// pushMu and qh.mu: the fan-out takes it with pushMu held and then qh.mu; the writers take
// it holding no lock (and may drop a stream while holding it). Nobody waits for a slot while
// holding qh.mu or shard.mu, and only the fan-out while holding pushMu, so slots close no
// cycle.
//
// Hub.mu (the registries: queues, ips, gone, closed) is a leaf: it is held only to read or
// change those maps and never while another lock is held or taken. drop takes shard.mu,
// qhub.mu and Hub.mu one after the other and releases each before the next, so it must be
// called with no lock held — code that finds a connection to drop while holding a lock
// collects it and drops it after unlocking.
//
// Goroutines: Run starts every one of them (writers, subscription, fan-out, ticket checkers,
// the draw, presence, report and sweep loops) in one errgroup and returns only when all have
// stopped; the only other goroutine, the subscription's feed reader, is started by subscribe
// and waited for before it returns.
package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/topology"
)

// Source is what the hub needs from the queue store (implemented by *queue.Queue).
type Source interface {
	Names(ctx context.Context) ([]string, error)
	Feed(ctx context.Context) *queue.Feed
	Snapshot(ctx context.Context, name string) (queue.Snapshot, error)
	Touch(ctx context.Context, queue string, ids []string) error
	TicketState(ctx context.Context, t queue.Ticket) (queue.Place, error)
	Seqs(ctx context.Context, queue string, ids []string) ([]int64, error)
}

// Registry is where the hub reports this instance and its streams, and drops it at
// shutdown (implemented by *topology.Topology).
type Registry interface {
	ReportInstance(ctx context.Context, in topology.Instance, ttl time.Duration) error
	RemoveInstance(ctx context.Context, id string) error
}

// Config tunes a Hub. Zero fields take the documented defaults.
type Config struct {
	Instance       string        // instance id reported to the admin view
	UpdateInterval time.Duration // at most one position event per stream per interval (1 s)
	UpdateFront    int64         // positions 1…UpdateFront are refreshed every interval (5,000)
	BackEvery      int64         // the rest every BackEvery-th interval, spread evenly over them (3; 1 = every interval)
	Heartbeat      time.Duration // "ping" event and dead-client check (15 s)
	WriteTimeout   time.Duration // one write may block this long before the client is dropped (250 ms)
	Retry          time.Duration // base EventSource retry sent on connect, jittered ±25 % (2 s)
	ShutdownRetry  time.Duration // retry sent at shutdown is random in [Retry/4, this] (5 s)
	MaxPerIP       int           // concurrent streams per client IP (0 = 50)
	Shards         int           // writer goroutines (default 8)
	PresenceEvery  time.Duration // sign-of-life refresh of open streams' tickets (20 s)
	CountEvery     time.Duration // report this instance's stream count (2 s)
	CountTTL       time.Duration // a silent instance drops out of the admin view after this (6 s)
	MaxStreams     int64         // the stream budget, reported with the count (0 = none)
	MaxConns       int64         // the connection budget, reported likewise
	Connections    func() int64  // open client connections, reported likewise (nil = not known)
	// HandOut renders the admission token a waiter is given: jti is the token Redis
	// stores, iat and exp the admission and expiry (Unix ms; iat 0 when the leader did not
	// say). Nil hands out jti itself.
	HandOut func(queueName, ticket, jti string, iatMs, expMs int64) string
	Log     zerolog.Logger
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.UpdateInterval, time.Second)
	def(&c.Heartbeat, 15*time.Second)
	def(&c.WriteTimeout, 250*time.Millisecond)
	def(&c.Retry, 2*time.Second)
	def(&c.ShutdownRetry, 5*time.Second)
	def(&c.PresenceEvery, 20*time.Second)
	def(&c.CountEvery, 2*time.Second)
	def(&c.CountTTL, 6*time.Second)
	if c.MaxPerIP <= 0 {
		c.MaxPerIP = 50
	}
	if c.UpdateFront <= 0 {
		c.UpdateFront = 5000
	}
	if c.BackEvery <= 0 {
		c.BackEvery = 3
	}
	if c.Shards <= 0 {
		c.Shards = 8
	}
	if c.Instance == "" {
		c.Instance = "instance"
	}
	return c
}

// Errors of Attach.
var (
	ErrClosed    = errors.New("stream hub closed")
	ErrTooMany   = errors.New("too many streams from this address")
	ErrNotSynced = errors.New("queue state unavailable")
)

// Hub holds this instance's streams.
type Hub struct {
	src       Source
	registry  Registry
	cfg       Config
	log       zerolog.Logger
	m         *metrics
	startedAt time.Time
	shards    []*shard
	slots     chan struct{} // write slots of the writers (writeSlots in shard.go)
	wide      chan struct{} // no limit: below slotsFrom streams (slotChan in shard.go)
	next      atomic.Uint32
	count     atomic.Int64
	degraded  atomic.Bool // Redis pub/sub lost: streams were told "reconnecting"

	mu     sync.Mutex // the registries below; a leaf (see the lock order above)
	queues map[string]*qhub
	ips    map[string]int
	closed bool
	gone   map[string][]string // queue -> tickets whose stream closed, to touch once

	cancel context.CancelFunc
	done   chan struct{}
	sub    chan string   // queues to subscribe to
	checks chan checkReq // tickets the line has passed, for the checkers to ask Redis about
	sweeps chan struct{} // asks for a sweep of streams whose peer has gone (capacity needed)
	draws  chan *qhub    // queues whose draw is done, for the draw loop to place their pre-queue streams
}

// qhub is one queue's local state and streams.
type qhub struct {
	name   string
	pushMu sync.Mutex // see the lock order above
	mu     sync.Mutex
	// ev is line.ev, readable without the lock (the writers' pings carry it).
	ev       atomic.Int64
	line     line
	conns    map[*conn]struct{}
	byTicket map[string][]*conn
	round    int64 // fan-out rounds so far (picks this round's share of the back of the line)
	// force makes the next fan-out send every stream its state, changed or not, whatever its
	// tier (stock came back, or the method changed what a position event shows).
	force bool
	// drawAsked: the queue is with the draw loop, or queued for it.
	drawAsked bool
}

// lastEv is the queue's current event id (0 for no queue).
func (qh *qhub) lastEv() int64 {
	if qh == nil {
		return 0
	}
	return qh.ev.Load()
}

// Sizes of the hub's internal queues: a full one drops the request (it is repeated later).
const (
	subQueue   = 64   // queues waiting to be subscribed to
	drawQueue  = 64   // queues waiting for the draw loop
	checkQueue = 8192 // tickets waiting for a check (a lost tick may pass thousands at once)
	checkers   = 8    // goroutines asking Redis about passed tickets
)

// NewHub returns a hub reading the queues from src and reporting itself to registry; call
// Run to start it.
func NewHub(src Source, registry Registry, cfg Config, reg prometheus.Registerer) *Hub {
	cfg = cfg.withDefaults()
	h := &Hub{src: src, registry: registry, cfg: cfg, log: cfg.Log, m: newMetrics(reg), startedAt: time.Now(),
		queues: map[string]*qhub{}, ips: map[string]int{}, gone: map[string][]string{},
		done: make(chan struct{}), sub: make(chan string, subQueue), checks: make(chan checkReq, checkQueue),
		sweeps: make(chan struct{}, 1), draws: make(chan *qhub, drawQueue), slots: make(chan struct{}, writeSlots()), wide: make(chan struct{}, 1<<12)}
	for range cfg.Shards {
		h.shards = append(h.shards, newShard(h))
	}
	h.m.conns.Set(0)
	return h
}

// Count is the number of open streams on this instance.
func (h *Hub) Count() int64 { return h.count.Load() }

// Run runs the subscriber, fan-out, writers and reporters until ctx ends or Close is
// called; then every stream gets a jittered retry and is closed.
func (h *Hub) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	h.mu.Lock()
	h.cancel = cancel
	h.mu.Unlock()
	defer close(h.done)
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range h.shards {
		g.Go(func() error { s.run(gctx); return nil })
	}
	for range checkers {
		g.Go(func() error { h.checkLoop(gctx); return nil })
	}
	g.Go(func() error { return h.subscribe(gctx) })
	g.Go(func() error { h.fanoutLoop(gctx); return nil })
	g.Go(func() error { h.drawLoop(gctx); return nil })
	g.Go(func() error { h.presenceLoop(gctx); return nil })
	g.Go(func() error { h.reportLoop(gctx); return nil })
	g.Go(func() error { h.sweepLoop(gctx); return nil })
	err := g.Wait()
	h.shutdownConns()
	// The streams closed at shutdown get their last sign of life now, so their grace starts
	// here (their clients reconnect to another instance).
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), touchTimeout)
	h.flushGone(fctx)
	cancel()
	return err
}

// Close ends Run (closing every stream) and waits for it, or for ctx. Safe to call twice.
func (h *Hub) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	cancel := h.cancel
	h.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AcquireIP reserves a stream slot for ip: ErrTooMany when its cap is reached, ErrClosed
// while shutting down. Every nil must be matched by Attach (which releases the slot when
// the stream ends) or ReleaseIP.
func (h *Hub) AcquireIP(ip string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	if h.ips[ip] >= h.cfg.MaxPerIP {
		return ErrTooMany
	}
	h.ips[ip]++
	return nil
}

// IPFull tells whether ip has reached its stream cap on this instance, taking nothing (the
// HEAD of a stream asks this; taking and giving back a slot could refuse a GET in between).
func (h *Hub) IPFull(ip string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ips[ip] >= h.cfg.MaxPerIP
}

// ReleaseIP gives back a slot taken by AcquireIP.
func (h *Hub) ReleaseIP(ip string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ips[ip] <= 1 {
		delete(h.ips, ip)
	} else {
		h.ips[ip]--
	}
}

func (h *Hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// queueFor returns the local state of a queue, subscribing and resyncing on first use.
func (h *Hub) queueFor(ctx context.Context, name string) (*qhub, error) {
	h.mu.Lock()
	qh := h.queues[name]
	if qh == nil {
		qh = &qhub{name: name, conns: map[*conn]struct{}{}, byTicket: map[string][]*conn{}}
		h.queues[name] = qh
		select {
		case h.sub <- name:
		default: // the subscriber also re-reads every queue name each second
		}
	}
	h.mu.Unlock()
	qh.mu.Lock()
	synced := qh.line.synced
	qh.mu.Unlock()
	if !synced {
		select {
		case h.sub <- name: // followed again if it was let go (a sharded feed, no stream for a while)
		default:
		}
		if err := h.resync(ctx, qh); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotSynced, err)
		}
	}
	return qh, nil
}

// localQueue returns the local state of a queue, or nil when no stream of it was opened here.
func (h *Hub) localQueue(name string) *qhub {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queues[name]
}

// queueList snapshots the queues with local state.
func (h *Hub) queueList() []*qhub {
	h.mu.Lock()
	defer h.mu.Unlock()
	qs := make([]*qhub, 0, len(h.queues))
	for _, q := range h.queues {
		qs = append(qs, q)
	}
	return qs
}

func jitterDur(d time.Duration, frac float64) time.Duration {
	j := (rand.Float64()*2 - 1) * frac
	return time.Duration(float64(d) * (1 + j))
}

// handOut is the token handed to a waiter (see Config.HandOut).
func (h *Hub) handOut(queueName, ticket, jti string, iatMs, expMs int64) string {
	if h.cfg.HandOut == nil {
		return jti
	}
	return h.cfg.HandOut(queueName, ticket, jti, iatMs, expMs)
}

// placeToken is handOut for a place read from Redis.
func (h *Hub) placeToken(queueName, ticket string, p queue.Place) string {
	var iat int64
	if !p.TokenIssuedAt.IsZero() {
		iat = p.TokenIssuedAt.UnixMilli()
	}
	return h.handOut(queueName, ticket, p.Token, iat, p.TokenExpiresAt.UnixMilli())
}
