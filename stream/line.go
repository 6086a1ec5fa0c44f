package stream

import (
	"context"
	"sort"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// line is this instance's copy of one queue's state, enough to compute the exact position
// of any local waiter without asking Redis: position = seq − head − departures in (head, seq).
// The invite lanes (priority, bypass) are lines of their own, numbered apart, kept the same
// way in lanes; the fields above them are the normal line's.
type line struct {
	synced  bool
	ev      int64
	tick    int64
	head    int64
	tail    int64
	waiting int64
	rate    float64
	arate   float64 // the ETA's estimate of the rate
	real    float64 // really admitted per second lately (0 while paused or empty): shown
	paused  bool
	gone    []int64 // sorted departed sequences above head
	share   float64 // the queue's priority_share
	lanes   [2]laneLine
	sale    saleState
}

// saleState is what a line says besides positions (drop day): the schedule, sold out, the
// method, the end. The stream turns its changes into announcements (sale.go).
type saleState struct {
	sched   queue.TickSchedule // Phase "" while the queue has no schedule
	soldOut bool
	random  bool // method random: a lottery, no position numbers in the normal line
	ended   bool
}

// phase is the draw phase of a scheduled queue ("" for none).
func (s saleState) phase() queue.DrawPhase { return queue.DrawPhase(s.sched.Phase) }

// prequeueSize is the pre-queue's size: counted live before the start, the frozen list's
// size after it (the leader counts the pre-queue only while it is open).
func (s saleState) prequeueSize() int64 {
	if s.phase() == queue.DrawScheduled {
		return s.sched.Prequeue
	}
	return s.sched.N
}

// Lane indexes of a conn (lane) and of line.lanes (lane-1).
const (
	laneNormal uint8 = iota
	lanePriority
	laneBypass
)

// laneIndex maps a queue.Lane to a conn's lane index.
func laneIndex(l queue.Lane) uint8 {
	switch l {
	case queue.LanePriority:
		return lanePriority
	case queue.LaneBypass:
		return laneBypass
	}
	return laneNormal
}

// laneName is the public name of a lane index.
func laneName(i uint8) queue.Lane {
	switch i {
	case lanePriority:
		return queue.LanePriority
	case laneBypass:
		return queue.LaneBypass
	}
	return queue.LaneNormal
}

// laneLine is one invite lane's line.
type laneLine struct {
	head, tail, waiting int64
	gone                []int64 // sorted departed sequences above head
}

func (ll *laneLine) reset(s queue.LaneState) {
	ll.head, ll.tail, ll.waiting = s.Head, s.Tail, s.Waiting
	ll.gone = resetGone(ll.gone, s.Gone, s.Head)
}

func (ll *laneLine) apply(s queue.LaneState) {
	ll.head, ll.tail, ll.waiting = s.Head, s.Tail, s.Waiting
	ll.gone = applyGone(ll.gone, s.Gone, s.Head)
}

func (l *line) reset(s queue.Snapshot) {
	l.synced = true
	l.ev, l.tick, l.head, l.tail, l.waiting = s.Ev, s.Tick, s.Head, s.Tail, s.Waiting
	l.rate, l.arate, l.paused, l.share, l.real = s.Rate, s.AdmitRate, s.Paused, s.Share, s.RealRate
	l.gone = resetGone(l.gone, s.Gone, l.head)
	l.lanes[0].reset(s.Priority)
	l.lanes[1].reset(s.Bypass)
	l.sale = saleState{soldOut: s.SoldOut, random: s.Method == queue.MethodRandom, ended: s.Ended}
	if s.Sched != nil {
		l.sale.sched = *s.Sched
	}
}

// resetGone refills dst with the departures in src above head, sorted.
func resetGone(dst, src []int64, head int64) []int64 {
	dst = dst[:0]
	for _, g := range src {
		if g > head {
			dst = append(dst, g)
		}
	}
	sort.Slice(dst, func(i, j int) bool { return dst[i] < dst[j] })
	return dst
}

// apply advances the line by one tick message; the caller has checked m.Ev == l.ev+1.
func (l *line) apply(m queue.Tick) {
	l.ev, l.tick, l.head, l.tail, l.waiting = m.Ev, m.Tick, m.Head, m.Tail, m.Waiting
	l.rate, l.arate, l.paused = m.Rate, m.ARate, m.Paused
	if l.real = m.ARate; m.Real != nil { // an older leader sends the estimate only (docs/UPGRADING.md)
		l.real = *m.Real
	}
	l.gone = applyGone(l.gone, m.Gone, l.head)
	// No lanes in the message: none was ever used, or a leader without lanes (an older
	// release) wrote it and admits from no lane: the lanes stay as they are.
	if ls := m.Lanes; ls != nil {
		l.share = ls.Share
		if ls.P != nil {
			l.lanes[0].apply(*ls.P)
		}
		if ls.B != nil {
			l.lanes[1].apply(*ls.B)
		}
	}
	// Every message states the whole sale (absent fields are their zero value), so the
	// line takes it as it is.
	l.sale = saleState{soldOut: m.SoldOut, random: m.Method == string(queue.MethodRandom), ended: m.Ended}
	if m.Sched != nil {
		l.sale.sched = *m.Sched
	}
}

// applyGone adds new departures to the sorted list and drops those at or below head.
func applyGone(gone, add []int64, head int64) []int64 {
	for _, g := range add {
		i := sort.Search(len(gone), func(i int) bool { return gone[i] >= g })
		if i < len(gone) && gone[i] == g {
			continue
		}
		gone = append(gone, 0)
		copy(gone[i+1:], gone[i:])
		gone[i] = g
	}
	i := sort.Search(len(gone), func(i int) bool { return gone[i] > head })
	return append(gone[:0], gone[i:]...)
}

// position of the waiter with sequence seq in the normal line: 1 + the users still waiting
// ahead of it, or 0 when seq is at or below the head (admitted or gone).
func (l *line) position(seq int64) int64 { return positionIn(l.head, l.gone, seq) }

// positionOf is position in the line of lane (a conn's lane index).
func (l *line) positionOf(lane uint8, seq int64) int64 {
	if lane == laneNormal {
		return positionIn(l.head, l.gone, seq)
	}
	ll := &l.lanes[lane-1]
	return positionIn(ll.head, ll.gone, seq)
}

func positionIn(head int64, gone []int64, seq int64) int64 {
	if seq <= head {
		return 0
	}
	below := sort.Search(len(gone), func(i int) bool { return gone[i] >= seq })
	return seq - head - int64(below)
}

// waitingIn is the length of lane's line.
func (l *line) waitingIn(lane uint8) int64 {
	if lane == laneNormal {
		return l.waiting
	}
	return l.lanes[lane-1].waiting
}

// rateShare is the part of the admission rate lane's line gets (queue.LaneShare): the
// normal line (1 − share) × rate while the priority line has waiters, the priority line
// share × rate while the normal line has, bypass all of it.
func (l *line) rateShare(lane uint8) float64 {
	var other int64
	switch lane {
	case laneNormal:
		other = l.lanes[0].waiting
	case lanePriority:
		other = l.waiting
	}
	return queue.LaneShare(laneName(lane), l.share, other)
}

func (l *line) eta(pos int64) float64 { return l.etaOf(laneNormal, pos) }

// hidesPosition reports whether waiters of lane's line are shown no position: the normal
// line of a random queue admits by lottery, so a place number would mean nothing.
func (l *line) hidesPosition(lane uint8) bool { return l.sale.random && lane == laneNormal }

// etaOf is the ETA of a waiter at position pos of lane's line, -1 when there is none:
// paused or sold out (nobody is let in), or no position to estimate from.
func (l *line) etaOf(lane uint8, pos int64) float64 {
	if l.paused || l.sale.soldOut || l.hidesPosition(lane) {
		return -1
	}
	f := l.rateShare(lane)
	return queue.ETA(pos, l.arate*f, l.rate*f)
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
	if err != nil {
		qh.line.synced = false
		qh.mu.Unlock()
		return err
	}
	if qh.line.synced && s.Ev < qh.line.ev {
		qh.mu.Unlock()
		return nil // already newer than the snapshot
	}
	prev := qh.line.sale
	qh.line.reset(s)
	news := h.saleChanged(qh, prev)
	qh.mu.Unlock()
	h.m.resyncs.Inc()
	h.announce(qh, news)
	return nil
}
