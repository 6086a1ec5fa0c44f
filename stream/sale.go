package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// The sale (drop day). Besides positions a line carries the sale's state (line.sale): a
// scheduled start with its pre-queue and draw, sold out, the method, the end. Each change
// the leader publishes becomes an announcement here, made when the tick message (or a
// resync) brings it, not at the next fan-out:
//
//   - sold out: one sold_out event, rendered once, to every stream not yet admitted; when
//     stock returns the next fan-out sends every stream its state (qhub.force);
//   - the end: one closed event to every stream, each closed once it is written;
//   - the draw done: the draw loop reads the drawn places of this instance's pre-queue
//     streams in one pipeline (Source.Seqs) and pushes each its position.
//
// Before the start pre-queue streams get prequeue events from the fan-out (fanout.go) when
// the pre-queue's size changes. They cost no Redis work per member: their places do not
// expire before the start, so presence skips them.

// saleNews is what a change of the sale leaves to do once the queue's lock is released.
type saleNews struct {
	soldOut []*conn // streams to tell the queue sold out
}

// saleChanged turns a change of the line's sale into announcements. The caller holds qh.mu,
// has just updated the line (prev is the sale before) and hands the result to announce once
// it has unlocked.
func (h *Hub) saleChanged(qh *qhub, prev saleState) saleNews {
	l := &qh.line
	qh.ev.Store(l.ev)
	cur := l.sale
	var news saleNews
	if cur.ended {
		if !prev.ended {
			h.closeAll(qh)
		}
		return news
	}
	if cur.soldOut && !prev.soldOut {
		news.soldOut = make([]*conn, 0, len(qh.conns))
		for c := range qh.conns {
			if c.admitted {
				continue
			}
			news.soldOut = append(news.soldOut, c)
			if c.pre {
				// Its latest prequeue event may be dropped as stale (frameAnnounce): the
				// next fan-out sends it again, saying sold out.
				c.lastPre = -1
			}
		}
	}
	if (prev.soldOut && !cur.soldOut) || prev.random != cur.random {
		// Stock came back (every stream must hear "sold_out":false), or what a position
		// event shows changed (a number or null).
		qh.force = true
	}
	if cur.phase() == queue.DrawDone && prev.phase() != queue.DrawDone {
		h.askDraw(qh)
	}
	return news
}

// announce pushes what saleChanged left to do; no lock may be held. The sold_out event goes
// under the queue's push lock, so a position event rendered before the sell-out (saying
// "sold_out":false) is either queued before it or dropped by it, never written after it.
func (h *Hub) announce(qh *qhub, news saleNews) {
	if len(news.soldOut) == 0 {
		return
	}
	qh.pushMu.Lock()
	defer qh.pushMu.Unlock()
	b := soldOutFrame(qh.lastEv()) // one rendering for the whole line
	for _, c := range news.soldOut {
		c.shard.push(c, b, frameAnnounce)
	}
}

// closeAll ends every stream of the queue at the end of the sale: the closed event, then the
// writer closes the stream. A stream that holds a live token is left alone: the token stays
// valid until it expires (the end drops places, not admissions). The caller holds qh.mu.
func (h *Hub) closeAll(qh *qhub) {
	b := closedFrame(qh.line.ev) // one rendering for the whole line
	for c := range qh.conns {
		if c.ended || (c.admitted && !c.expired) {
			continue
		}
		c.admitted, c.ended = true, true
		c.shard.push(c, b, frameClose)
	}
}

// askDraw hands qh to the draw loop unless it has it already; the caller holds qh.mu. When
// the loop is busy the next fan-out asks again.
func (h *Hub) askDraw(qh *qhub) {
	if qh.drawAsked {
		return
	}
	select {
	case h.draws <- qh:
		qh.drawAsked = true
	default:
	}
}

// drawTimeout bounds the read of the drawn places (100,000 streams: 100 commands in one
// pipeline).
const drawTimeout = 10 * time.Second

// drawLoop places the pre-queue streams of the queues whose draw is done, one queue at a
// time, until ctx ends. It runs apart from the subscription so that the Redis read does not
// hold up the tick messages (and their admitted events).
func (h *Hub) drawLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case qh := <-h.draws:
			h.placeDrawn(ctx, qh)
		}
	}
}

// placeDrawn gives every pre-queue stream of qh the sequence the draw gave its ticket and
// pushes its position at once. A stream whose ticket is not waiting (it left, or was
// admitted since) goes to the ticket check, which drops it or hands it its token. On an
// error the streams stay in the pre-queue and the next fan-out asks again.
func (h *Hub) placeDrawn(ctx context.Context, qh *qhub) {
	qh.mu.Lock()
	var cs []*conn
	var ids []string
	for c := range qh.conns {
		if c.pre && !c.admitted {
			cs = append(cs, c)
			ids = append(ids, c.ticket)
		}
	}
	qh.mu.Unlock()
	var seqs []int64
	var err error
	if len(ids) > 0 {
		dctx, cancel := context.WithTimeout(ctx, drawTimeout)
		seqs, err = h.src.Seqs(dctx, qh.name, ids) // no lock held: this is a Redis read
		cancel()
		if err == nil && len(seqs) != len(ids) {
			err = fmt.Errorf("%d places for %d tickets", len(seqs), len(ids))
		}
	}
	qh.pushMu.Lock()
	defer qh.pushMu.Unlock()
	qh.mu.Lock()
	qh.drawAsked = false
	if err != nil {
		qh.mu.Unlock()
		if ctx.Err() == nil {
			h.log.Warn().Err(err).Str("queue", qh.name).Msg("stream: drawn places (asked again at the next fan-out)")
		}
		return
	}
	l := &qh.line
	changes := make([]change, 0, len(cs))
	r := renderers{l: l}
	for i, c := range cs {
		if !c.pre || c.admitted {
			continue // admitted or closed meanwhile
		}
		c.pre, c.seq = false, seqs[i]
		pos := l.positionOf(c.lane, c.seq)
		if pos == 0 {
			if !c.checking {
				h.askCheck(qh, c)
			}
			continue
		}
		c.lastPos, c.lastETA, c.lastWait = pos, l.etaOf(c.lane, pos), l.waitingIn(c.lane)
		changes = append(changes, change{c, pos})
		r.of(c.lane)
	}
	qh.mu.Unlock()
	h.pushPositions(changes, &r)
}
