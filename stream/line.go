package stream

import (
	"context"
	"sort"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// line is this instance's copy of one queue's state, enough to compute the exact position
// of any local waiter without asking Redis: position = seq − head − departures in (head, seq).
type line struct {
	synced  bool
	ev      int64
	tick    int64
	head    int64
	tail    int64
	waiting int64
	rate    float64
	arate   float64
	paused  bool
	gone    []int64 // sorted departed sequences above head
}

func (l *line) reset(s queue.Snapshot) {
	l.synced = true
	l.ev, l.tick, l.head, l.tail, l.waiting = s.Ev, s.Tick, s.Head, s.Tail, s.Waiting
	l.rate, l.arate, l.paused = s.Rate, s.AdmitRate, s.Paused
	l.gone = l.gone[:0]
	for _, g := range s.Gone {
		if g > l.head {
			l.gone = append(l.gone, g)
		}
	}
	sort.Slice(l.gone, func(i, j int) bool { return l.gone[i] < l.gone[j] })
}

// apply advances the line by one tick message; the caller has checked m.Ev == l.ev+1.
func (l *line) apply(m queue.Tick) {
	l.ev, l.tick, l.head, l.tail, l.waiting = m.Ev, m.Tick, m.Head, m.Tail, m.Waiting
	l.rate, l.arate, l.paused = m.Rate, m.ARate, m.Paused
	for _, g := range m.Gone {
		i := sort.Search(len(l.gone), func(i int) bool { return l.gone[i] >= g })
		if i < len(l.gone) && l.gone[i] == g {
			continue
		}
		l.gone = append(l.gone, 0)
		copy(l.gone[i+1:], l.gone[i:])
		l.gone[i] = g
	}
	i := sort.Search(len(l.gone), func(i int) bool { return l.gone[i] > l.head })
	l.gone = append(l.gone[:0], l.gone[i:]...)
}

// position of the waiter with sequence seq: 1 + the users still waiting ahead of it, or 0
// when seq is at or below the head (admitted or gone).
func (l *line) position(seq int64) int64 {
	if seq <= l.head {
		return 0
	}
	below := sort.Search(len(l.gone), func(i int) bool { return l.gone[i] >= seq })
	return seq - l.head - int64(below)
}

func (l *line) eta(pos int64) float64 {
	if l.paused {
		return -1
	}
	return queue.ETA(pos, l.arate, l.rate)
}

// resyncTimeout bounds one snapshot read.
const resyncTimeout = 2 * time.Second

// resync reads the queue's snapshot from Redis — without holding qh.mu, so a slow or
// absent Redis never blocks the writers that need the lock to drop a connection — and
// applies it unless the line has meanwhile moved past it.
func (h *Hub) resync(ctx context.Context, qh *qhub) error {
	ctx, cancel := context.WithTimeout(ctx, resyncTimeout)
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
