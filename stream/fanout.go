package stream

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// fanoutLoop sends, once per update interval, a position event to every stream at the
// front of the line (positions 1…UpdateFront) whose position or ETA changed, and to a
// 1/BackEvery share of the streams behind it, front of the line first. So the front sees
// its place move every second and everyone is refreshed within BackEvery intervals, at a
// fraction of the writes (100,000 waiters: 36,700 events/s instead of 100,000).
func (h *Hub) fanoutLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.UpdateInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, qh := range h.queueList() {
			h.fanout(ctx, qh)
		}
	}
}

type change struct {
	c   *conn
	pos int64
}

// renderers are one fan-out round's position renderers, one per lane, made when first needed.
type renderers struct {
	l  *line
	rs [3]*positionRenderer
}

func (r *renderers) of(lane uint8) *positionRenderer {
	if r.rs[lane] == nil {
		r.rs[lane] = newLaneRenderer(r.l, lane)
	}
	return r.rs[lane]
}

// prequeueEvery is how many fan-out rounds (update intervals) pass between two pre-queue size
// updates of one stream (5 s at the default interval).
const prequeueEvery = 5

// checkEvery is how often a stream the line has passed without an admitted event (a gap,
// or a connect racing the message) may ask Redis for its ticket.
const checkEvery = 2 * time.Second

func (h *Hub) fanout(ctx context.Context, qh *qhub) {
	start := time.Now()
	qh.mu.Lock()
	synced := qh.line.synced
	qh.mu.Unlock()
	if !synced {
		if err := h.resync(ctx, qh); err != nil {
			return
		}
	}
	qh.pushMu.Lock()
	defer qh.pushMu.Unlock()
	// The fan-out is bulk work like the writers' (writeSlots): it computes under a write slot.
	slot := h.slotChan()
	slot <- struct{}{}
	qh.mu.Lock()
	var changes []change
	var pres []*conn
	l := &qh.line
	qh.round++
	front, every := h.cfg.UpdateFront, h.cfg.BackEvery
	force := qh.force
	qh.force = false
	phase, size := l.sale.phase(), l.sale.prequeueSize()
	for c := range qh.conns {
		if c.admitted {
			continue
		}
		if c.pre {
			switch phase {
			case queue.DrawScheduled:
				// The size is news, not a place: each pre-queue stream hears it at most every
				// prequeueEvery rounds (its turn set by its heartbeat slot, so the turns are
				// spread evenly), which keeps a big pre-queue that is still filling from
				// costing an event per member every second.
				turn := (int64(c.hbSlot)+qh.round)%prequeueEvery == 0
				if c.lastPre != size && (turn || c.lastPre < 0) || force {
					c.lastPre = size
					pres = append(pres, c)
				}
			case queue.DrawDone:
				// Drawn, and not placed by the draw loop yet: it connected with a place read
				// before the draw finished, or the loop's read failed.
				h.askDraw(qh)
			}
			continue
		}
		pos := l.positionOf(c.lane, c.seq)
		if pos == 0 {
			if !c.checking && time.Since(c.checkedAt) > checkEvery {
				h.askCheck(qh, c)
			}
			continue
		}
		// Behind the front of the line a waiter's turn comes every `every` rounds; tiers
		// (given in order of arrival on this instance) spread the back of the line evenly
		// over them, so each round carries the front plus 1/every of the rest.
		if !force && pos > front && every > 1 && (c.tier+qh.round)%every != 0 {
			continue
		}
		eta := l.etaOf(c.lane, pos)
		if l.hidesPosition(c.lane) {
			// A lottery shows no place: the event changes with the number waiting.
			if w := l.waitingIn(c.lane); w != c.lastWait || eta != c.lastETA || force {
				c.lastPos, c.lastETA, c.lastWait = pos, eta, w
				changes = append(changes, change{c, pos})
			}
			continue
		}
		if force {
			c.lastPos = -1
		}
		if pos > c.lastPos && c.lastPos > 0 {
			pos = c.lastPos // never show a higher number than before (cannot happen; belt and braces)
		}
		if pos != c.lastPos || eta != c.lastETA {
			c.lastPos, c.lastETA, c.lastWait = pos, eta, l.waitingIn(c.lane)
			changes = append(changes, change{c, pos})
		}
	}
	// The renderers copy what they need of the line now (the lanes' renderers are made only
	// when a stream of that lane changed); the prequeue event is one frame for all.
	r := renderers{l: l}
	for _, ch := range changes {
		r.of(ch.c.lane)
	}
	var pf []byte
	if len(pres) > 0 {
		pf = prequeueFrame(l.ev, l.sale.sched.Starts, size, l.sale.soldOut, "")
	}
	qh.mu.Unlock()
	<-slot
	// Rendering and queueing happen outside the queue's lock, so a tick message (and its
	// admitted events) never waits for a fan-out; a position can no longer overtake an
	// admitted event because push refuses positions after a final frame.
	for _, c := range pres {
		c.shard.push(c, pf, framePosition)
	}
	h.pushPositions(changes, &r)
	h.m.fanout.Observe(time.Since(start).Seconds())
}

// pushPositions renders and queues position events, front of the line first; the caller
// holds qh.pushMu (not qh.mu) and made r's renderers under qh.mu.
func (h *Hub) pushPositions(changes []change, r *renderers) {
	slot := h.slotChan()
	slot <- struct{}{}
	sort.Slice(changes, func(i, j int) bool { return changes[i].pos < changes[j].pos })
	for i, ch := range changes {
		if i > 0 && i%renderChunk == 0 {
			<-slot // between chunks the slot goes to the writers, who write what is queued
			slot = h.slotChan()
			slot <- struct{}{}
		}
		ch.c.shard.push(ch.c, r.of(ch.c.lane).render(ch.pos), framePosition)
	}
	<-slot
	h.m.positionsSent.Add(float64(len(changes)))
}

// renderChunk is how many position events a fan-out renders and queues under one write slot.
const renderChunk = 256

// checkReq asks a checker about one stream's ticket.
type checkReq struct {
	qh *qhub
	c  *conn
}

// askCheck queues a check of c (qh.mu is held); when the checkers are saturated it is
// simply asked again at a later fan-out.
func (h *Hub) askCheck(qh *qhub, c *conn) {
	select {
	case h.checks <- checkReq{qh, c}:
		c.checking = true
	default:
	}
}

// checkTimeout bounds one ticket check.
const checkTimeout = 2 * time.Second

// checkLoop runs ticket checks until ctx ends.
func (h *Hub) checkLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-h.checks:
			h.checkTicket(ctx, r.qh, r.c)
		}
	}
}

// checkTicket asks Redis for a ticket the line has passed and delivers what it finds.
func (h *Hub) checkTicket(ctx context.Context, qh *qhub, c *conn) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	p, err := h.src.TicketState(ctx, queue.Ticket{Queue: qh.name, ID: c.ticket})
	cancel()
	var token string
	if err == nil && p.State == queue.StateAdmitted {
		token = h.placeToken(qh.name, c.ticket, p) // signed before the lock: it takes tens of µs
	}
	qh.mu.Lock()
	c.checking = false
	c.checkedAt = time.Now()
	drop := false
	switch {
	case errors.Is(err, queue.ErrNoPlace):
		c.admitted, drop = true, true
	case err != nil:
	case p.State == queue.StateAdmitted:
		if !c.admitted || c.replacedBy(p.Token) {
			c.admitted, c.token = true, p.Token
			c.shard.push(c, admittedFrame(qh.line.ev, admitTick(p, qh.line.tick), qh.name, token, p.TokenExpiresAt), frameFinal)
			h.m.admittedSent.Inc()
		}
	case p.State == queue.StateExpired, p.State == queue.StateUsed:
		if !c.expired {
			c.admitted, c.expired = true, true
			c.shard.push(c, expiredFrame(qh.line.ev, qh.line.tick), frameFinal)
		}
	case p.State == queue.StateWaiting && c.seq == 0 && !c.pre && laneIndex(p.Lane) == c.lane:
		// A pre-queue stream the draw loop found without a place, which has one after all:
		// it takes it (else it would be checked again every checkEvery).
		c.seq, c.lastPos = p.Seq, -1
	case p.State == queue.StatePrequeue && !c.pre:
		// Not drawn yet: back to the pre-queue until the draw is done.
		c.pre, c.seq, c.lastPre = true, 0, -1
	}
	qh.mu.Unlock()
	if drop {
		h.drop(c, endNoPlace) // after unlocking: drop takes qh.mu itself
	}
}
