package stream

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/draw"
)

// conn is one open SSE stream. After the HTTP handshake no goroutine belongs to it: the
// hijacked net.Conn is written by its shard's worker, which keeps an idle waiter at about
// a kilobyte of server memory (Fiber's SetBodyStreamWriter costs ~29 KB and 2 goroutines).
type conn struct {
	nc     net.Conn
	qh     *qhub // its queue (nil only for conns made by tests without Attach)
	queue  string
	ticket string
	ip     string
	shard  *shard
	hbSlot int   // which of the shard's heartbeat slots pings this stream
	tier   int64 // behind the front of the line, the fan-out rounds (mod BackEvery) that refresh it

	// Guarded by the queue's lock (qhub.mu).
	seq       int64 // its place in its lane's line; 0 while in the pre-queue (set by the draw)
	lastPos   int64
	lastETA   float64
	lastWait  int64 // the waiting count last sent, where no position is shown (random)
	lastPre   int64 // the pre-queue size last sent
	admitted  bool  // admitted or expired (or the sale ended): no more position events
	expired   bool  // the expired event has been queued
	pre       bool  // in a scheduled queue's pre-queue: no position until the draw places it
	ended     bool  // the closed event has been queued
	checking  bool
	lane      uint8 // the line this stream's ticket waits in (laneNormal…); set at attach, never changed
	checkedAt time.Time
	token     string // the admission token id last delivered ("" when none): another one is a re-admission (replace.go)

	// onEnd is told of the stream's end (Waiter.Ended; nil: nobody); written counts the
	// bytes sent, for it.
	onEnd   Ender
	written atomic.Int64

	// Guarded by shard.mu.
	pri     [][]byte // handshake, admitted, expired: never dropped, written first
	pos     []byte   // latest position wins
	queued  bool
	closed  bool
	ready   bool // the response head has been written; heartbeats may follow
	final   bool // admitted/expired queued: later position frames are dropped
	closing bool // the closed event is queued: nothing more, and the stream closes after it
	// admitAt is when Redis admitted this stream's ticket, set while its live admitted
	// frame waits to be written (for sse_admitted_delivery_seconds).
	admitAt time.Time
}

// Waiter describes a stream to attach: who it is and what Redis said about its ticket.
type Waiter struct {
	Queue       string
	Ticket      string
	IP          string
	LastEventID int64
	Place       queue.Place
	Reserved    bool // the caller holds a slot from Reserve (else Attach takes one)
	// Header is extra response header lines ("Name: value\r\n" each), e.g. the CORS
	// answer of a cross-origin stream; written as they are.
	Header string
	// Ended, when set, is told once when the stream ends (the access log's line for it),
	// from whichever goroutine drops it, with no lock held. It must not block.
	Ended Ender
}

// Ender is told of a stream's end. An interface rather than a func: a pointer held in it
// costs no allocation, where a method value would cost one per stream.
type Ender interface {
	Ended(End)
}

// End describes a stream that has ended.
type End struct {
	Queue  string // the stream's queue (Waiter.Queue)
	Reason string // why: the label of sse_disconnects_total (client_closed, shutdown, …)
	Bytes  int64  // bytes written on the connection, response head included
}

// Reserve takes a stream slot when fewer than max streams are open (max 0: no budget) and
// reports whether it did, so the budget holds however many requests race for the last
// slot. A true must be matched by Attach (with Waiter.Reserved) or Unreserve.
func (h *Hub) Reserve(max int64) bool {
	for {
		n := h.count.Load()
		if max > 0 && n >= max {
			return false
		}
		if h.count.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Unreserve gives back a slot taken by Reserve that no stream will use.
func (h *Hub) Unreserve() { h.m.conns.Set(float64(h.count.Add(-1))) }

// Attach takes over nc (a hijacked connection whose HTTP request has been read), writes
// the response head, retry and the current state, and keeps it until the client goes
// away or the hub closes. The IP slot taken by AcquireIP is released when it ends.
func (h *Hub) Attach(ctx context.Context, nc net.Conn, w Waiter) error {
	if !w.Reserved {
		h.Reserve(0)
	}
	qh, err := h.queueFor(ctx, w.Queue)
	if err != nil {
		h.ReleaseIP(w.IP)
		h.Unreserve()
		return err
	}
	if h.isClosed() {
		h.ReleaseIP(w.IP)
		h.Unreserve()
		return ErrClosed
	}
	c := &conn{nc: nc, qh: qh, queue: w.Queue, ticket: w.Ticket, seq: w.Place.Seq, ip: w.IP, lastPos: -1, lastWait: -1,
		lastPre: -1, lane: laneIndex(w.Place.Lane), onEnd: w.Ended}
	h.place(c)

	head := responseHead(jitterDur(h.cfg.Retry, 0.25), w.Header)
	var token, drawID string
	switch w.Place.State {
	case queue.StateAdmitted:
		token = h.placeToken(w.Queue, w.Ticket, w.Place) // signed before the lock: it takes tens of µs
	case queue.StatePrequeue:
		if drawID = w.Place.DrawID; drawID == "" {
			drawID = draw.ID(w.Ticket) // a hash: also kept out of the lock
		}
	}
	qh.mu.Lock()
	qh.conns[c] = struct{}{}
	qh.byTicket[c.ticket] = append(qh.byTicket[c.ticket], c)
	l := &qh.line
	var first []byte
	kind, soldOut := framePriority, false
	switch {
	case w.Place.State == queue.StateAdmitted:
		// Before the end check: a token handed out before the end stays valid until it expires.
		c.admitted, c.token = true, w.Place.Token
		first = admittedFrame(l.ev, admitTick(w.Place, l.tick), w.Queue, token, w.Place.TokenExpiresAt)
	case l.sale.ended:
		// The sale is over and every place dropped: the closed event, then the stream ends
		// (the client's reconnect is answered 204 by the web layer, which stops it).
		c.admitted, c.ended = true, true
		first, kind = closedFrame(l.ev), frameClose
	case w.Place.State == queue.StateExpired, w.Place.State == queue.StateUsed:
		c.admitted, c.expired = true, true
		first = expiredFrame(l.ev, l.tick)
	case w.Place.State == queue.StatePrequeue:
		// Its Seq is its join number in the pre-queue, not a place in line: the draw gives it
		// one (sale.go). A stream that connects once the draw is done (its Place was read
		// before) is resolved by the next fan-out.
		c.pre, c.seq = true, 0
		starts, size := l.sale.sched.Starts, l.sale.prequeueSize()
		if l.sale.phase() == queue.DrawNone { // a line not yet told of the schedule
			starts, size = w.Place.StartsAt.UnixMilli(), w.Place.PrequeueSize
		}
		c.lastPre, soldOut = size, l.sale.soldOut
		first = prequeueFrame(l.ev, starts, size, soldOut, drawID)
	default:
		pos := l.positionOf(c.lane, c.seq)
		if pos == 0 {
			// The line has passed this ticket since Redis was read: the admission message
			// is being handled; the fan-out's check delivers the token.
			pos = 1
		}
		c.lastPos, c.lastETA, c.lastWait = pos, l.etaOf(c.lane, pos), l.waitingIn(c.lane)
		first = newLaneRenderer(l, c.lane).render(pos)
		soldOut = l.sale.soldOut
	}
	c.shard.add(c)
	c.shard.push(c, append(head, first...), kind)
	if soldOut {
		c.shard.push(c, soldOutFrame(l.ev), framePriority) // after its state, which says sold_out too
	}
	qh.mu.Unlock()
	if h.isClosed() {
		// Closed after the check above: shutdownConns may have taken its list already.
		h.drop(c, endShutdown)
		return ErrClosed
	}

	h.m.conns.Set(float64(h.count.Load())) // the slot was counted by Reserve
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

func responseHead(retry time.Duration, extra string) []byte {
	b := []byte("HTTP/1.1 200 OK\r\n" +
		"Content-Type: text/event-stream; charset=utf-8\r\n" +
		"Cache-Control: no-cache, no-store, no-transform\r\n" +
		"X-Accel-Buffering: no\r\n" +
		"X-Content-Type-Options: nosniff\r\n" + extra +
		"Connection: close\r\n\r\n" +
		"retry: ")
	b = strconv.AppendInt(b, retry.Milliseconds(), 10)
	return append(b, "\n\n"...)
}

// drop closes c once and forgets it. Call it with no lock held (see the lock order).
func (h *Hub) drop(c *conn, reason string) {
	if !c.shard.remove(c) {
		return // already dropped
	}
	_ = c.nc.Close()

	qh := c.qh
	if qh == nil {
		qh = h.localQueue(c.queue)
	}
	touch := true
	if qh != nil {
		touch = qh.forget(c)
	}
	if touch {
		h.mu.Lock()
		h.gone[c.queue] = append(h.gone[c.queue], c.ticket)
		h.mu.Unlock()
	}
	h.ReleaseIP(c.ip)
	n := h.count.Add(-1)
	h.m.conns.Set(float64(n))
	h.m.drops.WithLabelValues(reason).Inc()
	if c.onEnd != nil {
		c.onEnd.Ended(End{Queue: c.queue, Reason: reason, Bytes: c.written.Load()})
	}
}

// forget removes c from the queue's connection sets; it reports whether c's ticket wants a
// last sign of life (not a pre-queue member, whose place does not expire before the start,
// nor a stream closed by the end of the sale, whose place is gone).
func (qh *qhub) forget(c *conn) bool {
	qh.mu.Lock()
	defer qh.mu.Unlock()
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
	return !c.pre && !c.ended
}

// shutdownWriteTimeout bounds the last write (the retry) to each stream at shutdown.
const shutdownWriteTimeout = 50 * time.Millisecond

// shutdownConns tells every client to come back after a random delay (so a deploy does
// not send them all to the remaining instances at once) and closes the stream.
func (h *Hub) shutdownConns() {
	lo := h.cfg.Retry / 4
	for _, s := range h.shards {
		for _, c := range s.all() {
			if s.isReady(c) { // a stream whose response head never went out just closes
				d := lo + time.Duration(rand.Int64N(int64(h.cfg.ShutdownRetry-lo)+1))
				_ = c.nc.SetWriteDeadline(time.Now().Add(shutdownWriteTimeout))
				n, _ := c.nc.Write([]byte("retry: " + strconv.FormatInt(d.Milliseconds(), 10) + "\n\n"))
				c.written.Add(int64(n))
			}
			h.drop(c, endShutdown)
		}
	}
}
