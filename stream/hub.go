// Package stream owns this instance's live connections: one Server-Sent Events stream per
// waiting user, fed from the admission leader's per-tick messages on Redis pub/sub. Each
// instance keeps a copy of every queue's head and departures and computes its waiters'
// exact positions locally, so the Redis cost of live positions does not grow with the
// number of waiters.
package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/waitroom/waitroom/queue"
)

// Source is what the hub needs from the queue store (implemented by *queue.Queue).
type Source interface {
	Redis() redis.UniversalClient
	Names(ctx context.Context) ([]string, error)
	Snapshot(ctx context.Context, name string) (queue.Snapshot, error)
	Touch(ctx context.Context, queue string, ids []string) error
	TicketState(ctx context.Context, t queue.Ticket) (queue.Place, error)
}

// Config tunes a Hub. Zero fields take the documented defaults.
type Config struct {
	Instance       string        // instance id reported to the admin view
	UpdateInterval time.Duration // at most one position event per stream per interval (1 s)
	UpdateFront    int64         // positions 1…UpdateFront are refreshed every interval (5,000)
	BackEvery      int64         // the rest every BackEvery-th interval, spread evenly over them (3; 1 = every interval)
	Heartbeat      time.Duration // ": ping" comment and dead-client check (15 s)
	WriteTimeout   time.Duration // one write may block this long before the client is dropped (250 ms)
	Retry          time.Duration // base EventSource retry sent on connect, jittered ±25 % (2 s)
	ShutdownRetry  time.Duration // retry sent at shutdown is random in [Retry/4, this] (5 s)
	MaxPerIP       int           // concurrent streams per client IP (0 = 50)
	Shards         int           // writer goroutines (default 8)
	PresenceEvery  time.Duration // sign-of-life refresh of open streams' tickets (20 s)
	CountEvery     time.Duration // report this instance's stream count (2 s)
	CountTTL       time.Duration // a silent instance drops out of the admin view after this (6 s)
	Log            zerolog.Logger
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
	cfg       Config
	log       zerolog.Logger
	m         *metrics
	startedAt time.Time
	shards    []*shard
	next      atomic.Uint32
	count     atomic.Int64
	degraded  atomic.Bool // Redis pub/sub lost: streams were told "reconnecting"

	mu     sync.Mutex
	queues map[string]*qhub
	ips    map[string]int
	closed bool
	gone   map[string][]string // queue -> tickets whose stream closed, to touch once

	cancel context.CancelFunc
	done   chan struct{}
	sub    chan string // queues to subscribe to
}

// qhub is one queue's local state and streams.
type qhub struct {
	name     string
	mu       sync.Mutex
	line     line
	conns    map[*conn]struct{}
	byTicket map[string][]*conn
	round    int64 // fan-out rounds so far (picks this round's share of the back of the line)
}

// NewHub returns a hub; call Run to start it.
func NewHub(src Source, cfg Config, reg prometheus.Registerer) *Hub {
	cfg = cfg.withDefaults()
	h := &Hub{src: src, cfg: cfg, log: cfg.Log, m: newMetrics(reg), startedAt: time.Now(),
		queues: map[string]*qhub{}, ips: map[string]int{}, gone: map[string][]string{},
		done: make(chan struct{}), sub: make(chan string, 64)}
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
	g.Go(func() error { return h.subscribe(gctx) })
	g.Go(func() error { h.fanoutLoop(gctx); return nil })
	g.Go(func() error { h.presenceLoop(gctx); return nil })
	g.Go(func() error { h.reportLoop(gctx); return nil })
	err := g.Wait()
	h.shutdownConns()
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

// Waiter describes a stream to attach: who it is and what Redis said about its ticket.
type Waiter struct {
	Queue       string
	Ticket      string
	IP          string
	LastEventID int64
	Place       queue.Place
}

// Attach takes over nc (a hijacked connection whose HTTP request has been read), writes
// the response head, retry and the current state, and keeps it until the client goes
// away or the hub closes. The IP slot taken by AcquireIP is released when it ends.
func (h *Hub) Attach(ctx context.Context, nc net.Conn, w Waiter) error {
	qh, err := h.queueFor(ctx, w.Queue)
	if err != nil {
		h.ReleaseIP(w.IP)
		return err
	}
	c := &conn{nc: nc, queue: w.Queue, ticket: w.Ticket, seq: w.Place.Seq, ip: w.IP, lastPos: -1}
	h.place(c)

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.ReleaseIP(w.IP)
		return ErrClosed
	}
	h.mu.Unlock()

	head := responseHead(jitterDur(h.cfg.Retry, 0.25))
	qh.mu.Lock()
	qh.conns[c] = struct{}{}
	qh.byTicket[c.ticket] = append(qh.byTicket[c.ticket], c)
	var first []byte
	switch w.Place.State {
	case "admitted":
		c.admitted = true
		first = admittedFrame(qh.line.ev, admitTick(w.Place, qh.line.tick), w.Queue, w.Place.Token, w.Place.TokenExpiresAt)
	case "expired", "used":
		c.admitted, c.expired = true, true
		first = frame(qh.line.ev, "expired", expiredData{ServerTime: stamp(), Tick: qh.line.tick})
	default:
		pos := qh.line.position(c.seq)
		if pos == 0 {
			// The line has passed this ticket since Redis was read: the admission message
			// is being handled; the fan-out's check delivers the token.
			pos = 1
		}
		c.lastPos, c.lastETA = pos, qh.line.eta(pos)
		first = h.positionFrame(qh, pos)
	}
	c.shard.mu.Lock()
	c.shard.conns[c] = struct{}{}
	c.shard.mu.Unlock()
	c.shard.push(c, append(head, first...), framePriority)
	qh.mu.Unlock()

	open := h.count.Add(1)
	h.m.conns.Set(float64(open))
	h.m.connects.Inc()
	return nil
}

// place gives a new stream its writer shard, its heartbeat slot and its refresh tier from
// this instance's own count of streams, so each is spread evenly whatever the join numbers
// of the users who land here (with round-robin over 3 instances, one instance's join
// numbers may all be equal mod 3).
func (h *Hub) place(c *conn) {
	n := int64(h.next.Add(1))
	c.shard = h.shards[n%int64(len(h.shards))]
	k := n / int64(len(h.shards)) // consecutive streams of one shard: k, k+1, …
	c.hbSlot = int(k % hbSlots)
	c.tier = k % h.cfg.BackEvery
}

func responseHead(retry time.Duration) []byte {
	b := []byte("HTTP/1.1 200 OK\r\n" +
		"Content-Type: text/event-stream; charset=utf-8\r\n" +
		"Cache-Control: no-cache, no-store, no-transform\r\n" +
		"X-Accel-Buffering: no\r\n" +
		"X-Content-Type-Options: nosniff\r\n" +
		"Connection: close\r\n\r\n" +
		"retry: ")
	b = strconv.AppendInt(b, retry.Milliseconds(), 10)
	return append(b, "\n\n"...)
}

// admitTick is the tick a ticket was admitted at (stored with it), else the line's.
func admitTick(p queue.Place, fallback int64) int64 {
	if p.Tick > 0 {
		return p.Tick
	}
	return fallback
}

func admittedFrame(ev, tick int64, queueName, token string, exp time.Time) []byte {
	return frame(ev, "admitted", admittedData{
		Token: token, TokenExpiresAt: exp.UTC().Format(TimeFormat),
		Redirect: "/q/" + queueName + "/order", ServerTime: stamp(), Tick: tick,
	})
}

func (h *Hub) positionFrame(qh *qhub, pos int64) []byte {
	return newPositionRenderer(&qh.line).render(pos)
}

// positionRenderer renders position events of one line state; the JSON is written by
// hand (it is the fan-out's hot path: one event per changed waiter per second).
type positionRenderer struct {
	l      line // copy of the scalar state (gone is not used)
	prefix []byte
	suffix []byte
}

func newPositionRenderer(l *line) *positionRenderer {
	r := &positionRenderer{l: line{ev: l.ev, tick: l.tick, head: l.head, waiting: l.waiting,
		rate: l.rate, arate: l.arate, paused: l.paused}}
	rate := l.rate
	if l.paused {
		rate = 0 // nobody is let in while paused
	}
	r.prefix = strconv.AppendInt([]byte("id: "), l.ev, 10)
	r.prefix = append(r.prefix, "\nevent: position\ndata: {\"position\":"...)
	r.suffix = append(r.suffix, ",\"rate_per_second\":"...)
	r.suffix = strconv.AppendFloat(r.suffix, rate, 'f', -1, 64)
	r.suffix = append(r.suffix, ",\"admit_rate\":"...)
	r.suffix = strconv.AppendFloat(r.suffix, round2(l.arate), 'f', -1, 64)
	r.suffix = append(r.suffix, ",\"server_time\":\""...)
	r.suffix = append(r.suffix, stamp()...)
	r.suffix = append(r.suffix, "\",\"tick\":"...)
	r.suffix = strconv.AppendInt(r.suffix, l.tick, 10)
	r.suffix = append(r.suffix, "}\n\n"...)
	return r
}

func (r *positionRenderer) render(pos int64) []byte {
	b := make([]byte, 0, len(r.prefix)+len(r.suffix)+48)
	b = append(b, r.prefix...)
	b = strconv.AppendInt(b, pos, 10)
	b = append(b, ",\"waiting\":"...)
	b = strconv.AppendInt(b, r.l.waiting, 10)
	b = append(b, ",\"eta_seconds\":"...)
	if eta := r.l.eta(pos); eta >= 0 {
		b = strconv.AppendFloat(b, eta, 'f', -1, 64)
	} else {
		b = append(b, "null"...)
	}
	return append(b, r.suffix...)
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// drop closes c once and forgets it.
func (h *Hub) drop(c *conn, reason string) {
	s := c.shard
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return
	}
	c.closed = true
	c.pri, c.pos = nil, nil
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.nc.Close()

	h.mu.Lock()
	qh := h.queues[c.queue]
	h.gone[c.queue] = append(h.gone[c.queue], c.ticket)
	h.mu.Unlock()
	if qh != nil {
		qh.mu.Lock()
		delete(qh.conns, c)
		list := qh.byTicket[c.ticket]
		for i, x := range list {
			if x == c {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(qh.byTicket, c.ticket)
		} else {
			qh.byTicket[c.ticket] = list
		}
		qh.mu.Unlock()
	}
	h.ReleaseIP(c.ip)
	n := h.count.Add(-1)
	h.m.conns.Set(float64(n))
	h.m.drops.WithLabelValues(reason).Inc()
}

// shutdownConns tells every client to come back after a random delay (so a deploy does
// not send them all to the remaining instances at once) and closes the stream.
func (h *Hub) shutdownConns() {
	var all []*conn
	for _, s := range h.shards {
		s.mu.Lock()
		for c := range s.conns {
			all = append(all, c)
		}
		s.mu.Unlock()
	}
	lo := h.cfg.Retry / 4
	for _, c := range all {
		c.shard.mu.Lock()
		ready := c.ready
		c.shard.mu.Unlock()
		if ready { // a stream whose response head never went out just closes
			d := lo + time.Duration(rand.Int64N(int64(h.cfg.ShutdownRetry-lo)+1))
			_ = c.nc.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			_, _ = c.nc.Write([]byte("retry: " + strconv.FormatInt(d.Milliseconds(), 10) + "\n\n"))
		}
		h.drop(c, "shutdown")
	}
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
		default:
		}
	}
	h.mu.Unlock()
	qh.mu.Lock()
	synced := qh.line.synced
	qh.mu.Unlock()
	if !synced {
		if err := h.resync(ctx, qh); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotSynced, err)
		}
	}
	return qh, nil
}

// resync reads the queue's snapshot from Redis — without holding qh.mu, so a slow or
// absent Redis never blocks the writers that need the lock to drop a connection — and
// applies it unless the line has meanwhile moved past it.
func (h *Hub) resync(ctx context.Context, qh *qhub) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := h.src.Snapshot(ctx, qh.name)
	qh.mu.Lock()
	defer qh.mu.Unlock()
	if err != nil {
		qh.line.synced = false
		return err
	}
	if qh.line.synced && s.Ev < qh.line.ev {
		return nil // already newer than the snapshot
	}
	qh.line.reset(s)
	h.m.resyncs.Inc()
	return nil
}

func jitterDur(d time.Duration, frac float64) time.Duration {
	j := (rand.Float64()*2 - 1) * frac
	return time.Duration(float64(d) * (1 + j))
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
