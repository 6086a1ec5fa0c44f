package stream

import (
	"context"
	"net"
	"runtime"
	"sync"
	"time"
)

// shard owns the writes of a subset of the connections, so one slow client can hold up
// at most its shard for one write timeout, never the hub.
type shard struct {
	h     *Hub
	mu    sync.Mutex
	conns map[*conn]struct{}
	pri   []*conn
	// priSince is when the oldest pending priority frame was queued (pri was empty before).
	priSince time.Time
	dirty    []*conn
	wake     chan struct{}
	// priWake is signalled with wake for priority frames only, so a writer waiting for a
	// write slot (below) turns to them at once and is not woken by every position frame.
	priWake chan struct{}
}

func newShard(h *Hub) *shard {
	return &shard{h: h, conns: map[*conn]struct{}{}, wake: make(chan struct{}, 1), priWake: make(chan struct{}, 1)}
}

// writeSlots is how many writers may write position events and pings at once: one fewer
// than the Go processors (at least one). A fan-out is thousands of write system calls;
// with every processor busy writing, the runtime looks at the network only when sysmon
// does (every 10 ms at best) and every goroutine readied meanwhile queues behind the
// writers' chunks — the pub/sub reader with a tick's admissions, and the admission loop's
// reply from Redis. One processor left free polls the network as soon as it is idle, and
// its thread, having slept, is the one the kernel runs first. Priority frames (admitted,
// expired, announcements) are written without a slot.
func writeSlots() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// slotsFrom is how many open streams an instance holds before its bulk work is held to the
// write slots. Below it a fan-out and the heartbeats are short: limiting them to one
// processor of two only made the tick messages and admitted frames wait behind them (admission
// p99 at 500 streams 2–3 ms without the limit, 10–16 ms with it, make bench 2026-12-02); above
// it the limit is what keeps a processor free for them (19,000 streams: BENCHMARKS.md).
const slotsFrom = 2000

// slotChan is the channel a bulk job takes its slot from: the write slots when the instance
// holds slotsFrom streams or more, otherwise one as wide as every writer and fan-out (no
// limit). A job gives back to the channel it took from.
func (h *Hub) slotChan() chan struct{} {
	if h.count.Load() >= slotsFrom {
		return h.slots
	}
	return h.wide
}

// add registers c with its writer.
func (s *shard) add(c *conn) {
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
}

// remove marks c closed and unregisters it; false when it already was.
func (s *shard) remove(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed {
		return false
	}
	c.closed = true
	c.pri, c.pos = nil, nil
	delete(s.conns, c)
	return true
}

// all snapshots the writer's connections.
func (s *shard) all() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// isReady reports whether c's response head has been written.
func (s *shard) isReady(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.ready
}

// pingable reports whether c may be pinged: its response head is out and it is not about
// to close (nothing may follow a closed event).
func (s *shard) pingable(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.ready && !c.closing && !c.closed
}

// Kinds of frames for push.
const (
	framePosition = iota // latest wins
	framePriority        // never dropped, written first
	frameFinal           // priority, and no position may follow it (admitted, expired)
	// frameAnnounce is priority, and drops a position frame not yet written: it was
	// rendered before the announcement (sold_out) and would contradict it if written after.
	frameAnnounce
	// frameClose is the last frame (closed): nothing may follow it, and the stream is
	// closed once it is written.
	frameClose
)

// push queues a frame for c; priority frames are never dropped, a position frame replaces
// any position frame not yet written.
func (s *shard) push(c *conn, b []byte, kind int) { s.pushAt(c, b, kind, time.Time{}) }

// pushAt is push for a frame that reports an admission made at admitAt (Redis time): its
// delivery delay is observed once the frame is written.
func (s *shard) pushAt(c *conn, b []byte, kind int, admitAt time.Time) {
	s.mu.Lock()
	if c.closed || c.closing {
		s.mu.Unlock()
		return
	}
	if kind == framePosition && c.final {
		s.mu.Unlock()
		return // admitted or expired already queued: no position after it
	}
	if kind != framePosition {
		if len(s.pri) == 0 {
			s.priSince = time.Now()
		}
		c.pri = append(c.pri, b)
		s.pri = append(s.pri, c)
		if !admitAt.IsZero() {
			c.admitAt = admitAt
		}
		select {
		case s.priWake <- struct{}{}:
		default:
		}
		switch kind {
		case frameFinal:
			c.pos, c.final = nil, true
		case frameAnnounce:
			c.pos = nil
		case frameClose:
			c.pos, c.final, c.closing = nil, true, true
		}
	} else {
		c.pos = b
		if !c.queued {
			c.queued = true
			s.dirty = append(s.dirty, c)
		}
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// hbSlots spreads heartbeats: every Heartbeat/hbSlots a shard pings one slot's streams, so
// each stream still gets its ping once per Heartbeat, but 19,000 streams are not all pinged
// (and peeked) in the same instant, which held admitted events back by a few hundred ms.
const hbSlots = 10

func (s *shard) run(ctx context.Context) {
	step := max(s.h.cfg.Heartbeat/hbSlots, time.Millisecond)
	hb := time.NewTicker(step)
	defer hb.Stop()
	start, done := time.Now(), int64(0) // slots handled so far
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			s.flush()
		case <-hb.C:
			// Slots follow the clock, not the ticks: a tick dropped while the shard was busy
			// must not push every later ping back (each stream keeps its ping per Heartbeat).
			due := int64(time.Since(start) / step)
			if due-done > hbSlots {
				done = due - hbSlots
			}
			for ; done < due; done++ {
				s.heartbeat(int(done % hbSlots))
			}
		}
	}
}

// flushChunk is how many position frames are written between two looks at the priority
// list, so an admitted event waits for at most one chunk, not a whole fan-out.
const flushChunk = 32

type job struct {
	c       *conn
	frames  [][]byte
	admitAt time.Time
	close   bool // the frames end with a closing one: close the stream once they are written
}

// flush writes everything pending: priority frames first, then positions in the order the
// fan-out queued them (front of the line first), a chunk at a time under a write slot,
// looking for new priority frames between chunks and while waiting for a slot.
func (s *shard) flush() {
	jobs := make([]job, 0, flushChunk)
	for {
		jobs = jobs[:0]
		s.mu.Lock()
		if len(s.pri) > 0 {
			jobs = s.takePriority(jobs)
			s.mu.Unlock()
			s.runJobs(jobs) // no slot: a few frames, and they are what waits
			continue
		}
		if len(s.dirty) == 0 {
			s.mu.Unlock()
			return // frames pushed from now on wake the writer again
		}
		s.mu.Unlock()
		slot := s.h.slotChan()
		select {
		case slot <- struct{}{}:
		case <-s.priWake:
			continue // priority frames first, then wait for a slot again
		}
		s.mu.Lock()
		if len(s.pri) > 0 {
			jobs = s.takePriority(jobs)
		}
		n := min(flushChunk, len(s.dirty))
		for _, c := range s.dirty[:n] {
			c.queued = false
			if c.pos != nil && !c.closed {
				jobs = append(jobs, job{c: c, frames: [][]byte{c.pos}})
				c.pos = nil
			}
		}
		s.dirty = s.dirty[n:]
		if len(s.dirty) == 0 {
			s.dirty = nil
		}
		s.mu.Unlock()
		s.runJobs(jobs)
		<-slot
	}
}

// acquire waits for a write slot, writing this shard's priority frames meanwhile; the slot
// is given back by receiving from the channel it returns.
func (s *shard) acquire() chan struct{} {
	slot := s.h.slotChan()
	for {
		select {
		case slot <- struct{}{}:
			return slot
		case <-s.priWake:
			s.writePriority()
		}
	}
}

// writePriority writes every pending priority frame (no slot needed).
func (s *shard) writePriority() {
	s.mu.Lock()
	jobs := s.takePriority(nil)
	s.mu.Unlock()
	s.runJobs(jobs)
}

// takePriority moves every pending priority frame into jobs; s.mu is held.
func (s *shard) takePriority(jobs []job) []job {
	if len(s.pri) > 0 {
		s.h.m.priorityWait.Observe(time.Since(s.priSince).Seconds())
	}
	for _, c := range s.pri {
		if len(c.pri) > 0 && !c.closed {
			jobs = append(jobs, job{c, c.pri, c.admitAt, c.closing})
			c.pri, c.admitAt = nil, time.Time{}
		}
	}
	s.pri = s.pri[:0]
	return jobs
}

func (s *shard) runJobs(jobs []job) {
	for _, j := range jobs {
		ok := true
		for _, b := range j.frames {
			if ok = s.write(j.c, b); !ok {
				break
			}
		}
		if ok && !j.admitAt.IsZero() {
			s.h.m.admitDelivery.Observe(max(0, time.Since(j.admitAt).Seconds()))
		}
		if ok && j.close {
			s.h.drop(j.c, endEnded)
			continue
		}
		if ok && !j.c.ready {
			s.mu.Lock()
			j.c.ready = true
			s.mu.Unlock()
		}
	}
}

// heartbeat pings one slot's streams (and notices closed peers), writing any admitted
// event that arrives meanwhile before the next chunk of pings. The ping is an event that
// carries its queue's current event id, rendered once per queue per slot.
func (s *shard) heartbeat(slot int) {
	s.mu.Lock()
	cs := make([]*conn, 0, len(s.conns)/hbSlots+1)
	for c := range s.conns {
		if c.hbSlot == slot {
			cs = append(cs, c)
		}
	}
	s.mu.Unlock()
	s.flush() // the response head of a new stream must precede any ping
	now := stamp()
	pings := map[*qhub][]byte{}
	ws := s.acquire()
	defer func() { <-ws }()
	for i, c := range cs {
		if i > 0 && i%flushChunk == 0 {
			// Between chunks: the slot goes to the next writer, pending priority frames out.
			<-ws
			s.writePriority()
			ws = s.acquire()
		}
		if !s.pingable(c) {
			continue
		}
		if peerClosed(c.nc) {
			s.h.drop(c, endClientClosed)
			continue
		}
		b := pings[c.qh]
		if b == nil {
			b = pingFrame(c.qh.lastEv(), now)
			pings[c.qh] = b
		}
		s.write(c, b)
	}
}

func (s *shard) write(c *conn, b []byte) bool {
	t0 := time.Now()
	_ = c.nc.SetWriteDeadline(t0.Add(s.h.cfg.WriteTimeout))
	_, err := c.nc.Write(b)
	s.h.m.writeDur.Observe(time.Since(t0).Seconds())
	if err != nil {
		reason := endWriteError
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			reason = endSlowClient
		}
		s.h.drop(c, reason)
		return false
	}
	s.h.m.bytes.Add(float64(len(b)))
	c.written.Add(int64(len(b)))
	return true
}

// sweepEvery bounds how often a full instance looks for streams whose peer has gone.
const sweepEvery = time.Second

// RequestSweep asks for a look, now, at every stream for a peer that has gone (a closed
// socket the heartbeats have not reached yet), so that capacity held by stale sockets is
// free when a reconnect storm needs it. It never blocks; sweeps run at most once per
// sweepEvery. An instance at its stream budget calls it.
func (h *Hub) RequestSweep() {
	select {
	case h.sweeps <- struct{}{}:
	default:
	}
}

func (h *Hub) sweepLoop(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.sweeps:
		}
		if wait := sweepEvery - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		dropped := 0
		for _, s := range h.shards {
			for _, c := range s.all() {
				// A peek, no write: it cannot block, and a stream whose head is not out yet
				// is left to its writer.
				if s.isReady(c) && peerClosed(c.nc) {
					h.drop(c, endClientClosed)
					dropped++
				}
			}
		}
		h.m.sweeps.Inc()
		h.m.swept.Add(float64(dropped))
	}
}
