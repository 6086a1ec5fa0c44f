package main

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// clientStats is what one process measures; the parent adds the processes up.
type clientStats struct {
	joinLat    hist // join request round trip
	connectLat hist // dial → first event parsed (stream) or join answered (poll)

	posLat      hist // position event: now − server_time
	admLat      hist // admitted event: now − server_time
	admIssueLat hist // admitted event: now − issuance (token_expires_at − TTL)
	expLat      hist
	pingGap     hist // time between two ": ping" comments on one stream
	gapFront    hist // time between position events while admitting, position ≤ front
	gapAll      hist // same, every stream

	pollLat      hist // /status round trip
	pollIssueLat hist // admission seen by polling: now − issuance

	// Reconnecting streams (-mode storm).
	reconnectLat         hist // stream ended → first event of a new stream
	arrivalJoinLat       hist // a storm arrival's first join attempt → its join answered
	admIssueLatReconnect hist // admitted event first seen on a reconnected stream: now − issuance

	positions, admitted, expired, pings, other    atomic.Int64
	posAfterAdmitted, monoViolations, dupAdmitted atomic.Int64
	joinToStreamUp                                atomic.Int64
	polls, pollAdmitted, pollMonoViolations       atomic.Int64
	drops, sheds, connFails, lost, reconnects     atomic.Int64
	join503, tokenChanged, admittedResent         atomic.Int64
	// Drop day: prequeue, sold_out, closed and ping events; joins answered "prequeue";
	// sold_out events after a stream's first.
	prequeues, soldOuts, closedEv, pingEvents atomic.Int64
	joinPrequeue, soldOutTwice                atomic.Int64

	mu        sync.Mutex
	errs      map[string]int64
	groups    map[groupKey]*group
	admCounts map[int64]int64 // admission tick → admitted events seen
	admRecs   []admRecord
}

// reconnRecord is a stream's last position before it ended and the first one on the
// stream that replaced it. With no departures from the line, the new position is exactly
// the old one minus the admissions at ticks (PrevTick, Tick].
type reconnRecord struct {
	PrevTick int64 `json:"pt"`
	PrevPos  int64 `json:"pp"`
	Tick     int64 `json:"t"`
	Pos      int64 `json:"p"`
	Adm      int64 `json:"a,omitempty"` // the ticket's admission tick (0 = not admitted)
}

// reconnPositionErrors counts reconnected streams whose first position is not the exact one
// (counts: admissions by tick, all of them). A stream whose ticket was admitted by its new
// tick is left out: the server says position 1 while the admission message is on its way.
func reconnPositionErrors(recs []reconnRecord, counts map[int64]int64) (wrong int64, checked int64) {
	upTo := admittedUpTo(counts)
	for _, r := range recs {
		if r.Adm > 0 && r.Adm <= r.Tick {
			continue
		}
		checked++
		if want := r.PrevPos - (upTo(r.Tick) - upTo(r.PrevTick)); r.Pos != want {
			wrong++
		}
	}
	return wrong, checked
}

func newClientStats() *clientStats {
	return &clientStats{errs: map[string]int64{}, groups: map[groupKey]*group{}, admCounts: map[int64]int64{}}
}

func (s *clientStats) err(kind string) {
	s.mu.Lock()
	s.errs[kind]++
	s.mu.Unlock()
}

// groupKey is one fan-out round of one instance: every position event it renders carries
// the same tick.
type groupKey struct {
	Target int
	Tick   int64
}

type group struct {
	FirstServer time.Time // earliest server_time in the round
	LastParsed  time.Time // latest parse time in the round
	N           int64
}

func (s *clientStats) groupAdd(k groupKey, server, parsed time.Time) {
	s.mu.Lock()
	g := s.groups[k]
	if g == nil {
		g = &group{FirstServer: server, LastParsed: parsed}
		s.groups[k] = g
	}
	if server.Before(g.FirstServer) {
		g.FirstServer = server
	}
	if parsed.After(g.LastParsed) {
		g.LastParsed = parsed
	}
	g.N++
	s.mu.Unlock()
}

// admRecord is one admitted stream: its last position before admission and the tick that
// admitted it. With every admission of the queue observed, FIFO means the stream was
// admitted exactly at the tick where the admissions counted since PosTick reached Pos.
type admRecord struct {
	PosTick int64 `json:"t"`
	Pos     int64 `json:"p"`
	AdmTick int64 `json:"a"`
}

func (s *clientStats) admission(tick int64, rec *admRecord) {
	s.mu.Lock()
	s.admCounts[tick]++
	if rec != nil {
		s.admRecs = append(s.admRecs, *rec)
	}
	s.mu.Unlock()
}

// fifoViolations counts records not admitted at the tick their position implies.
func fifoViolations(recs []admRecord, counts map[int64]int64) int64 {
	upTo := admittedUpTo(counts)
	var bad int64
	for _, r := range recs {
		before := upTo(r.AdmTick-1) - upTo(r.PosTick)
		through := upTo(r.AdmTick) - upTo(r.PosTick)
		if !(before < r.Pos && r.Pos <= through) {
			bad++
		}
	}
	return bad
}

// joinRec supports the join-order check inside one process: a join answered before
// another one was sent certainly took the earlier place.
type joinRec struct {
	Start, End time.Duration // since the process started
	AdmTick    int64         // 0 = not admitted
	Healthy    bool          // its stream never failed
}

// joinOrderViolations counts admitted waiters admitted at an earlier tick than a waiter
// that certainly joined before them, and (skipped) healthy earlier waiters never admitted
// while a later one was.
func joinOrderViolations(recs []joinRec) (wrongOrder, skipped int64) {
	byStart := append([]joinRec(nil), recs...)
	byEnd := append([]joinRec(nil), recs...)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].Start < byStart[j].Start })
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].End < byEnd[j].End })
	var maxAdm int64 // highest admission tick among certain predecessors
	var maxHealthyWaiting bool
	j := 0
	for _, b := range byStart {
		for j < len(byEnd) && byEnd[j].End < b.Start {
			a := byEnd[j]
			if a.AdmTick == 0 {
				if a.Healthy {
					maxHealthyWaiting = true
				}
			} else {
				maxAdm = max(maxAdm, a.AdmTick)
			}
			j++
		}
		if b.AdmTick == 0 {
			continue
		}
		if maxAdm > b.AdmTick {
			wrongOrder++
		}
		if maxHealthyWaiting {
			skipped++
		}
	}
	return wrongOrder, skipped
}

// admittedUpTo returns upTo(t) = the admissions at ticks ≤ t, from the admissions per tick.
func admittedUpTo(counts map[int64]int64) func(t int64) int64 {
	ticks := make([]int64, 0, len(counts))
	for t := range counts {
		ticks = append(ticks, t)
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i] < ticks[j] })
	cum := make([]int64, len(ticks))
	var run int64
	for i, t := range ticks {
		run += counts[t]
		cum[i] = run
	}
	return func(t int64) int64 {
		i := sort.Search(len(ticks), func(i int) bool { return ticks[i] > t })
		if i == 0 {
			return 0
		}
		return cum[i-1]
	}
}
