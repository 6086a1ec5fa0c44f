package stream

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/waitroom/waitroom/internal/backoff"
	"github.com/waitroom/waitroom/queue"
)

// Timings of the subscription.
const (
	// nameRefresh is how often the list of queues is re-read to follow new ones.
	nameRefresh = time.Second
	// silenceLimit: the leader publishes at least once a second, so this long without a
	// message means the connection may be half-open.
	silenceLimit = 3 * time.Second
	// probeTimeout bounds the PING that probes a silent connection.
	probeTimeout = time.Second
	// Backoff between failed receives (go-redis reconnects on the next one).
	backoffMin = 50 * time.Millisecond
	backoffMax = 2 * time.Second
	// shardLinger is how many refreshes (seconds) a sharded subscription outlives the last
	// stream of its queue here.
	shardLinger = 60
	// feedQueue is how many feed events may wait for the subscription loop.
	feedQueue = 1024
)

// feedItem is one result of Feed.Receive.
type feedItem struct {
	ev  queue.FeedEvent
	err error
}

// subscribe follows every queue's ticks on one feed. Every (re)subscription, and every gap
// in event numbers, triggers a resync from the snapshot in Redis, because pub/sub is
// at-most-once and Redis holds the truth.
func (h *Hub) subscribe(ctx context.Context) error {
	feed := h.src.Feed(ctx)
	items := make(chan feedItem, feedQueue)
	var reader sync.WaitGroup
	reader.Add(1)
	go func() { defer reader.Done(); receive(ctx, feed, items) }()
	// Closing the feed is what ends a Receive blocked on the connection.
	defer func() { _ = feed.Close(); reader.Wait() }()

	subscribed := map[string]bool{}
	follow := func(names ...string) {
		var todo []string
		for _, n := range names {
			if !subscribed[n] {
				subscribed[n] = true
				todo = append(todo, n)
			}
		}
		if len(todo) == 0 {
			return
		}
		if err := feed.Follow(ctx, todo...); err != nil && ctx.Err() == nil {
			h.log.Warn().Err(err).Msg("stream: subscribe")
			for _, n := range todo {
				delete(subscribed, n)
			}
		}
	}
	quiet := map[string]int{} // sharded: seconds a followed queue has had no stream here
	followAll := func() {
		if feed.Sharded() {
			// A sharded feed holds a connection per queue: only the queues with streams here
			// are followed (read from memory), and one without any for shardLinger is let go
			// (its state is marked unsynced: a new stream resyncs it and follows it again).
			var names []string
			for _, qh := range h.queueList() {
				qh.mu.Lock()
				n := len(qh.conns)
				qh.mu.Unlock()
				switch {
				case n > 0:
					delete(quiet, qh.name)
					names = append(names, qh.name)
				case subscribed[qh.name]:
					if quiet[qh.name]++; quiet[qh.name] >= shardLinger {
						feed.Unfollow(qh.name)
						delete(subscribed, qh.name)
						delete(quiet, qh.name)
						qh.unsync()
					}
				}
			}
			follow(names...)
			return
		}
		if names, err := h.src.Names(ctx); err == nil {
			follow(names...)
		}
	}
	followAll()
	refresh := time.NewTicker(nameRefresh)
	defer refresh.Stop()
	lastMsg := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-h.sub:
			follow(n)
		case <-refresh.C:
			followAll()
			// A queue with streams here is not idle (someone waits or holds a live token), so
			// its leader publishes at least once a second; resting queues publish nothing and
			// leave no silence to worry about.
			if len(subscribed) > 0 && time.Since(lastMsg) > silenceLimit && h.hasStreams() {
				// Positions are resynced from Redis each second meanwhile, and a PING
				// probes the connection (a failure makes go-redis reconnect and resubscribe).
				h.m.silences.Inc()
				h.unsyncAll()
				pctx, cancel := context.WithTimeout(ctx, probeTimeout)
				_ = feed.Ping(pctx)
				cancel()
			}
		case it := <-items:
			switch {
			case errors.Is(it.err, queue.ErrMalformedTick):
				h.log.Warn().Err(it.err).Str("queue", it.ev.Queue).Msg("stream: bad tick message")
			case it.err != nil:
				h.m.subErrors.Inc()
				h.unsyncAll()
				if !h.degraded.Swap(true) {
					h.log.Warn().Err(it.err).Msg("stream: lost Redis pub/sub; streams told 'reconnecting'")
					h.broadcastState("reconnecting")
				}
			case it.ev.Kind == queue.FeedSubscribed:
				if qh := h.localQueue(it.ev.Queue); qh != nil {
					qh.unsync()
				}
				h.recovered()
			case it.ev.Kind == queue.FeedTick:
				lastMsg = time.Now()
				h.recovered()
				h.onTick(ctx, it.ev.Queue, it.ev.Tick)
			}
		}
	}
}

// receive reads the feed into items until ctx ends (or the feed is closed), backing off
// after errors.
func receive(ctx context.Context, feed *queue.Feed, items chan<- feedItem) {
	bo := backoff.Backoff{Min: backoffMin, Max: backoffMax}
	for {
		ev, err := feed.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		select {
		case items <- feedItem{ev, err}:
		case <-ctx.Done():
			return
		}
		if err == nil || errors.Is(err, queue.ErrMalformedTick) {
			bo.Reset()
			continue
		}
		if !bo.Wait(ctx) {
			return
		}
	}
}

// hasStreams reports whether any stream is open here.
func (h *Hub) hasStreams() bool {
	for _, qh := range h.queueList() {
		qh.mu.Lock()
		n := len(qh.conns)
		qh.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

func (qh *qhub) unsync() {
	qh.mu.Lock()
	qh.line.synced = false
	qh.mu.Unlock()
}

func (h *Hub) unsyncAll() {
	for _, qh := range h.queueList() {
		qh.unsync()
	}
}

// onTick applies one tick message; admissions and expiries go out on the priority path at
// once, positions wait for the next fan-out.
func (h *Hub) onTick(ctx context.Context, name string, m queue.Tick) {
	h.m.ticks.Inc()
	start := time.Now()
	var admitAt time.Time
	if m.Now > 0 {
		admitAt = time.UnixMilli(m.Now)
		h.m.tickDelay.Observe(max(0, time.Since(admitAt).Seconds()))
	}
	qh := h.localQueue(name)
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
	var news saleNews
	if qh.line.synced && m.Ev == qh.line.ev+1 {
		prev := qh.line.sale
		qh.line.apply(m)
		news = h.saleChanged(qh, prev)
	}
	// The tokens are signed after the lock is released (a signature costs tens of
	// microseconds; a big tick must not hold the writers that long).
	var out []handout
	for _, a := range m.Adm {
		for _, c := range qh.byTicket[a.Ticket] {
			if c.admitted && !c.replacedBy(a.Token) {
				continue
			}
			c.admitted, c.token = true, a.Token
			out = append(out, handout{c: c, a: a})
		}
	}
	h.expire(qh, m)
	qh.mu.Unlock()
	var signed queue.Admission
	var token string
	for _, o := range out {
		if o.a != signed || token == "" {
			signed, token = o.a, h.handOut(name, o.a.Ticket, o.a.Token, o.a.IssuedAt, o.a.Exp)
		}
		o.c.shard.pushAt(o.c, admittedFrame(m.Ev, m.Tick, name, token, time.UnixMilli(o.a.Exp)), frameFinal, admitAt)
		h.m.admittedSent.Inc()
	}
	h.m.tickHandle.Observe(time.Since(start).Seconds())
	h.announce(qh, news) // after the admitted events: it may wait for a fan-out's pushes
}

// handout is an admitted connection waiting for its token.
type handout struct {
	c *conn
	a queue.Admission
}

// expire delivers a tick's expiries; the caller holds qh.mu.
func (h *Hub) expire(qh *qhub, m queue.Tick) {
	for _, t := range m.Exp {
		for _, c := range qh.byTicket[t] {
			if c.expired {
				continue
			}
			c.admitted, c.expired = true, true
			c.shard.push(c, expiredFrame(m.Ev, m.Tick), frameFinal)
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
	for _, qh := range h.queueList() {
		qh.mu.Lock()
		b := frame(qh.line.ev, "state", stateData{State: state, ServerTime: stamp()})
		for c := range qh.conns {
			c.shard.push(c, b, framePriority)
		}
		qh.mu.Unlock()
	}
}
