package web

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/static"
	"github.com/waitroom/waitroom/stream"
)

// The states of a queue on the index page (its entry's data-state).
const (
	indexOpen      = "open"
	indexPaused    = "paused"
	indexScheduled = "scheduled"
	indexSoldOut   = "sold_out"
	indexEnded     = "ended"
	indexClosed    = "closed"
)

// endedListed is how long an ended queue stays on the index after its ends_at.
const endedListed = 24 * time.Hour

// IndexState is the one state of a queue as a join at now would find it, by the join's own
// precedence (queue/join.lua, before the per-request checks): ended (the end flag, or ends_at
// passed) → closed (closed, or method reject) → sold_out → scheduled (the pre-queue before
// the start) → paused → open. A join succeeds for open, paused (the place is kept) and
// scheduled (a pre-queue place); it is refused for the others (423 queue_ended,
// queue_closed, sold_out). TestIndexStateIsTheJoins holds the two together.
func IndexState(st queue.Settings, now time.Time) string {
	switch {
	case st.Ended || (st.EndsAt != nil && !now.Before(*st.EndsAt)):
		return indexEnded
	case st.Closed || st.Method == queue.MethodReject:
		return indexClosed
	case st.SoldOut:
		return indexSoldOut
	case st.DrawPhase == queue.DrawScheduled && st.StartsAt != nil && now.Before(*st.StartsAt):
		return indexScheduled
	case st.Paused:
		return indexPaused
	}
	return indexOpen
}

// indexListed reports whether a queue in state is on the index: every queue but one that
// ended more than endedListed ago (or ended with no ends_at left to date it).
func indexListed(st queue.Settings, state string, now time.Time) bool {
	if state != indexEnded {
		return true
	}
	return st.EndsAt != nil && now.Sub(*st.EndsAt) < endedListed
}

// indexPage lists the queues with their state. Its Redis cost is the list of names and one
// Stats read per queue (one pipeline), as before the states: the state comes from the
// settings that read already carries.
func (s *Server) indexPage(c *fiber.Ctx) error {
	l, t := lang(c)
	data := static.IndexPage{Lang: l, T: t}
	names, err := s.d.Queue.Names(c.UserContext())
	if err != nil {
		return err
	}
	now := time.Now()
	for _, n := range names {
		st, err := s.d.Queue.Stats(c.UserContext(), n)
		if err != nil {
			continue
		}
		state := IndexState(st.Settings, now)
		if !indexListed(st.Settings, state, now) {
			continue
		}
		info := static.QueueInfo{Name: n, Waiting: st.Waiting, RatePerSecond: st.RatePerSecond,
			Paused: st.Paused, Closed: state == indexClosed, State: state}
		if state == indexScheduled {
			info.Waiting = st.Prequeue // before the start the line is the pre-queue
		}
		if st.StartsAt != nil {
			info.StartsAt = st.StartsAt.UTC().Format(stream.TimeFormat)
		}
		if st.EndsAt != nil {
			info.EndsAt = st.EndsAt.UTC().Format(stream.TimeFormat)
		}
		data.Queues = append(data.Queues, info)
	}
	return s.render(c, 200, "index", data)
}

// pageEnd is what the waiting page shows of the end: ends_at (RFC 3339, "" = none) and
// whether it has passed (the same rule as the index's ended state).
func pageEnd(st queue.Settings) (string, bool) {
	if st.EndsAt == nil {
		return "", st.Ended
	}
	return st.EndsAt.UTC().Format(stream.TimeFormat), IndexState(st, time.Now()) == indexEnded
}
