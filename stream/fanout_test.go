package stream

import (
	"context"
	"testing"
)

// The front of the line gets a position event every round; everyone behind it exactly once
// every BackEvery rounds, and each round carries an even share of them.
func TestFanoutFrontEveryRoundBackSpread(t *testing.T) {
	t.Parallel()
	const front, every = 12, 3
	h := NewHub(nil, nil, Config{UpdateFront: front, BackEvery: every, Shards: 1}, nil)
	qh := &qhub{name: "q", conns: map[*conn]struct{}{}, byTicket: map[string][]*conn{}}
	qh.line = line{synced: true, head: 0, tail: 100, waiting: 100, rate: 10, arate: 10}
	var conns []*conn
	// Join numbers that are all equal mod 3, as on one of three instances behind a
	// round-robin balancer: the spread must not depend on them.
	for seq := int64(10); seq <= 97; seq += every { // positions 10, 13, …, then one less each round
		c := &conn{seq: seq, lastPos: seq + 1}
		h.place(c)
		qh.conns[c] = struct{}{}
		conns = append(conns, c)
	}
	events := map[*conn]int{}
	for round := 1; round <= 2*every; round++ {
		h.fanout(context.Background(), qh)
		s := h.shards[0]
		back := 0
		now := map[*conn]bool{}
		for _, c := range s.dirty {
			now[c] = true
			if c.pos == nil {
				t.Fatalf("round %d: conn %d queued without a frame", round, c.seq)
			}
			events[c]++
			if qh.line.position(c.seq) > front {
				back++
			}
			c.pos, c.queued = nil, false
		}
		s.dirty = nil
		for _, c := range conns {
			if pos := qh.line.position(c.seq); pos <= front && !now[c] {
				t.Fatalf("round %d: position %d is at the front and got no event", round, pos)
			}
		}
		// About a third of the waiters behind the front are served each round.
		if behind := len(conns) - countFront(qh, conns, front); back < behind/every-1 || back > behind/every+1 {
			t.Fatalf("round %d: %d back-of-line events for %d waiters behind the front, want about a third", round, back, behind)
		}
		qh.line.head++ // everybody moves up one place before the next round
	}
	for _, c := range conns {
		if n := events[c]; n < 2 {
			t.Fatalf("seq %d: %d position events in %d rounds, want at least one per %d rounds", c.seq, n, 2*every, every)
		}
	}
}

func countFront(qh *qhub, conns []*conn, front int64) int {
	n := 0
	for _, c := range conns {
		if qh.line.position(c.seq) <= front {
			n++
		}
	}
	return n
}
