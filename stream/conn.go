package stream

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// conn is one open SSE stream. After the HTTP handshake no goroutine belongs to it: the
// hijacked net.Conn is written by its shard's worker, which keeps an idle waiter at about
// a kilobyte of server memory (Fiber's SetBodyStreamWriter costs ~29 KB and 2 goroutines).
type conn struct {
	nc     net.Conn
	queue  string
	ticket string
	seq    int64
	ip     string
	shard  *shard
	hbSlot int   // which of the shard's heartbeat slots pings this stream
	tier   int64 // behind the front of the line, the fan-out rounds (mod BackEvery) that refresh it

	// Guarded by the queue's lock (qhub.mu).
	lastPos   int64
	lastETA   float64
	admitted  bool // admitted or expired: no more position events
	expired   bool // the expired event has been queued
	checking  bool
	lane      uint8 // the line this stream's ticket waits in (laneNormal…); set at attach, never changed
	checkedAt time.Time

	// Guarded by shard.mu.
	pri    [][]byte // handshake, admitted, expired: never dropped, written first
	pos    []byte   // latest position wins
	queued bool
	closed bool
	ready  bool // the response head has been written; heartbeats may follow
	final  bool // admitted/expired queued: later position frames are dropped
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
	c := &conn{nc: nc, queue: w.Queue, ticket: w.Ticket, seq: w.Place.Seq, ip: w.IP, lastPos: -1,
		lane: laneIndex(w.Place.Lane)}
	h.place(c)

	head := responseHead(jitterDur(h.cfg.Retry, 0.25), w.Header)
	var token string
	if w.Place.State == queue.StateAdmitted {
		token = h.placeToken(w.Queue, w.Ticket, w.Place) // signed before the lock: it takes tens of µs
	}
	qh.mu.Lock()
	qh.conns[c] = struct{}{}
	qh.byTicket[c.ticket] = append(qh.byTicket[c.ticket], c)
	var first []byte
	switch w.Place.State {
	case queue.StateAdmitted:
		c.admitted = true
		first = admittedFrame(qh.line.ev, admitTick(w.Place, qh.line.tick), w.Queue, token, w.Place.TokenExpiresAt)
	case queue.StateExpired, queue.StateUsed:
		c.admitted, c.expired = true, true
		first = expiredFrame(qh.line.ev, qh.line.tick)
	default:
		pos := qh.line.positionOf(c.lane, c.seq)
		if pos == 0 {
			// The line has passed this ticket since Redis was read: the admission message
			// is being handled; the fan-out's check delivers the token.
			pos = 1
		}
		c.lastPos, c.lastETA = pos, qh.line.etaOf(c.lane, pos)
		first = newLaneRenderer(&qh.line, c.lane).render(pos)
	}
	c.shard.add(c)
	c.shard.push(c, append(head, first...), framePriority)
	qh.mu.Unlock()
	if h.isClosed() {
		// Closed after the check above: shutdownConns may have taken its list already.
		h.drop(c, "shutdown")
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

	h.mu.Lock()
	qh := h.queues[c.queue]
	h.gone[c.queue] = append(h.gone[c.queue], c.ticket)
	h.mu.Unlock()
	if qh != nil {
		qh.forget(c)
	}
	h.ReleaseIP(c.ip)
	n := h.count.Add(-1)
	h.m.conns.Set(float64(n))
	h.m.drops.WithLabelValues(reason).Inc()
}

// forget removes c from the queue's connection sets.
func (qh *qhub) forget(c *conn) {
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
				_, _ = c.nc.Write([]byte("retry: " + strconv.FormatInt(d.Milliseconds(), 10) + "\n\n"))
			}
			h.drop(c, "shutdown")
		}
	}
}
