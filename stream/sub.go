package stream

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/queue"
)

// subscribe follows every queue's tick channel on one pub/sub connection. go-redis
// reconnects and resubscribes by itself; every (re)subscription confirmation, and every
// gap in event numbers, triggers a resync from the snapshot in Redis, because pub/sub is
// at-most-once and Redis holds the truth.
func (h *Hub) subscribe(ctx context.Context) error {
	ps := h.src.Redis().Subscribe(ctx)
	defer ps.Close()
	subscribed := map[string]bool{}
	refresh := time.NewTicker(time.Second)
	defer refresh.Stop()
	msgs := make(chan any, 1024)
	go func() {
		defer close(msgs)
		backoff := 50 * time.Millisecond
		for {
			m, err := ps.Receive(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				select {
				case msgs <- err:
				case <-ctx.Done():
					return
				}
				time.Sleep(backoff)
				backoff = min(backoff*2, 2*time.Second)
				continue
			}
			backoff = 50 * time.Millisecond
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	add := func(names ...string) {
		var todo []string
		for _, n := range names {
			if !subscribed[n] {
				subscribed[n] = true
				todo = append(todo, queue.Channel(n))
			}
		}
		if len(todo) > 0 {
			if err := ps.Subscribe(ctx, todo...); err != nil && ctx.Err() == nil {
				h.log.Warn().Err(err).Msg("stream: subscribe")
				for _, n := range names {
					delete(subscribed, n)
				}
			}
		}
	}
	loadNames := func() {
		names, err := h.src.Names(ctx)
		if err == nil {
			add(names...)
		}
	}
	loadNames()
	// The leader publishes at least once a second; silence for 3 s means the connection may
	// be half-open: positions are resynced from Redis each second meanwhile and a PING
	// probes the connection (a failure makes go-redis reconnect and resubscribe).
	lastMsg := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-h.sub:
			add(n)
		case <-refresh.C:
			loadNames()
			if len(subscribed) > 0 && time.Since(lastMsg) > 3*time.Second {
				h.m.silences.Inc()
				h.unsyncAll()
				go func() {
					pctx, cancel := context.WithTimeout(ctx, time.Second)
					defer cancel()
					_ = ps.Ping(pctx)
				}()
			}
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			switch m := m.(type) {
			case error:
				h.m.subErrors.Inc()
				h.unsyncAll()
				if !h.degraded.Swap(true) {
					h.log.Warn().Err(m).Msg("stream: lost Redis pub/sub; streams told 'reconnecting'")
					h.broadcastState("reconnecting")
				}
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					h.markUnsynced(queueOf(m.Channel))
				}
				h.recovered()
			case *redis.Message:
				lastMsg = time.Now()
				h.recovered()
				h.onMessage(ctx, queueOf(m.Channel), m.Payload)
			}
		}
	}
}

func queueOf(channel string) string {
	// wr:{q:<name>}:events
	s := strings.TrimPrefix(channel, "wr:{q:")
	if i := strings.Index(s, "}"); i >= 0 {
		return s[:i]
	}
	return s
}

func (h *Hub) unsyncAll() {
	qs := h.queueList()
	for _, qh := range qs {
		qh.mu.Lock()
		qh.line.synced = false
		qh.mu.Unlock()
	}
}

func (h *Hub) markUnsynced(name string) {
	h.mu.Lock()
	qh := h.queues[name]
	h.mu.Unlock()
	if qh != nil {
		qh.mu.Lock()
		qh.line.synced = false
		qh.mu.Unlock()
	}
}

// onMessage applies one tick message; admissions and expiries go out on the priority
// path at once, positions wait for the next fan-out.
func (h *Hub) onMessage(ctx context.Context, name, payload string) {
	m, err := decodeTick([]byte(payload))
	if err != nil {
		h.log.Warn().Err(err).Str("queue", name).Msg("stream: bad tick message")
		return
	}
	h.m.ticks.Inc()
	var admitAt time.Time
	if m.Now > 0 {
		admitAt = time.UnixMilli(m.Now)
		h.m.tickDelay.Observe(max(0, time.Since(admitAt).Seconds()))
	}
	h.mu.Lock()
	qh := h.queues[name]
	h.mu.Unlock()
	if qh == nil {
		return // no local streams for this queue yet; it syncs on first use
	}
	qh.mu.Lock()
	if qh.line.synced && m.Ev > qh.line.ev+1 {
		h.m.gaps.Inc()
		qh.line.synced = false
	}
	if !qh.line.synced {
		qh.mu.Unlock()
		if err := h.resync(ctx, qh); err != nil {
			h.log.Warn().Err(err).Str("queue", name).Msg("stream: resync")
		}
		qh.mu.Lock()
	}
	// A message the snapshot already covers is not applied again, but its admissions and
	// expiries are still delivered (both are idempotent per connection).
	if qh.line.synced && m.Ev == qh.line.ev+1 {
		qh.line.apply(m)
	}
	defer qh.mu.Unlock()
	for _, a := range m.Adm {
		for _, c := range qh.byTicket[a.Ticket] {
			if c.admitted {
				continue
			}
			c.admitted = true
			c.shard.pushAt(c, admittedFrame(m.Ev, m.Tick, name, a.Token, time.UnixMilli(a.Exp)), frameFinal, admitAt)
			h.m.admittedSent.Inc()
		}
	}
	for _, t := range m.Exp {
		for _, c := range qh.byTicket[t] {
			if c.expired {
				continue
			}
			c.admitted, c.expired = true, true
			c.shard.push(c, frame(m.Ev, "expired", expiredData{ServerTime: stamp(), Tick: m.Tick}), frameFinal)
		}
	}
}

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
		qs := h.queueList()
		for _, qh := range qs {
			h.fanout(ctx, qh)
		}
	}
}

type change struct {
	c   *conn
	pos int64
}

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
	qh.mu.Lock()
	var changes []change
	var check []*conn
	qh.round++
	front, every := h.cfg.UpdateFront, h.cfg.BackEvery
	for c := range qh.conns {
		if c.admitted {
			continue
		}
		pos := qh.line.position(c.seq)
		if pos == 0 {
			// Passed by the head without an admitted event reaching us (a gap, or a
			// connect racing the message): ask Redis once in a while.
			if !c.checking && time.Since(c.checkedAt) > 2*time.Second {
				c.checking = true
				check = append(check, c)
			}
			continue
		}
		// Behind the front of the line a waiter's turn comes every `every` rounds; tiers
		// (given in order of arrival on this instance) spread the back of the line evenly
		// over them, so each round carries the front plus 1/every of the rest.
		if pos > front && every > 1 && (c.tier+qh.round)%every != 0 {
			continue
		}
		eta := qh.line.eta(pos)
		if pos > c.lastPos && c.lastPos > 0 {
			pos = c.lastPos // never show a higher number than before (cannot happen; belt and braces)
		}
		if pos != c.lastPos || eta != c.lastETA {
			c.lastPos, c.lastETA = pos, eta
			changes = append(changes, change{c, pos})
		}
	}
	r := newPositionRenderer(&qh.line)
	qh.mu.Unlock()
	// Rendering and queueing happen outside the queue's lock, so a tick message (and its
	// admitted events) never waits for a fan-out; a position can no longer overtake an
	// admitted event because push refuses positions after a final frame.
	sort.Slice(changes, func(i, j int) bool { return changes[i].pos < changes[j].pos })
	for _, ch := range changes {
		ch.c.shard.push(ch.c, r.render(ch.pos), framePosition)
	}
	h.m.positionsSent.Add(float64(len(changes)))
	h.m.fanout.Observe(time.Since(start).Seconds())
	for _, c := range check {
		go h.checkTicket(ctx, qh, c)
	}
}

// checkTicket asks Redis for a ticket the line has passed and delivers what it finds.
func (h *Hub) checkTicket(ctx context.Context, qh *qhub, c *conn) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	p, err := h.src.TicketState(ctx, queue.Ticket{Queue: qh.name, ID: c.ticket})
	qh.mu.Lock()
	defer qh.mu.Unlock()
	c.checking = false
	c.checkedAt = time.Now()
	if err != nil {
		if err == queue.ErrNoPlace {
			c.admitted = true
			go h.drop(c, "no_place")
		}
		return
	}
	switch p.State {
	case "admitted":
		if !c.admitted {
			c.admitted = true
			c.shard.push(c, admittedFrame(qh.line.ev, admitTick(p, qh.line.tick), qh.name, p.Token, p.TokenExpiresAt), frameFinal)
			h.m.admittedSent.Inc()
		}
	case "expired", "used":
		if !c.expired {
			c.admitted, c.expired = true, true
			c.shard.push(c, frame(qh.line.ev, "expired", expiredData{ServerTime: stamp(), Tick: qh.line.tick}), frameFinal)
		}
	}
}

// recovered ends a degraded period: streams are told they are live again; their
// positions are resynced from Redis before the next fan-out.
func (h *Hub) recovered() {
	if h.degraded.Swap(false) {
		h.log.Info().Msg("stream: Redis pub/sub back; resyncing")
		h.broadcastState("live")
	}
}

type stateData struct {
	State      string `json:"state"`
	ServerTime string `json:"server_time"`
}

// broadcastState sends a "state" event (reconnecting / live) to every stream.
func (h *Hub) broadcastState(state string) {
	qs := h.queueList()
	for _, qh := range qs {
		qh.mu.Lock()
		b := frame(qh.line.ev, "state", stateData{State: state, ServerTime: stamp()})
		for c := range qh.conns {
			c.shard.push(c, b, framePriority)
		}
		qh.mu.Unlock()
	}
}
