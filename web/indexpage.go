package web

import (
	"strconv"
	"strings"
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
// precedence (internal/rstore/lua/join.lua, before the per-request checks): ended (the end flag, or ends_at
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

// indexPerPage is how many queues one page of the index lists.
const indexPerPage = 50

// indexPage lists the queues with their state, indexPerPage at a time (?page=N, from 1; a
// page past the last redirects to the last). It reads the shared snapshot (snapshot.go): no Redis
// command of its own, whatever the number of queues or visitors.
func (s *Server) indexPage(c *fiber.Ctx) error {
	page := 1
	if v := c.Query("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || len(v) > 7 {
			return &Error{Status: 400, Code: "invalid_page", Field: "page", Message: "page must be a whole number from 1."}
		}
		page = n
	}
	l, t := s.lang(c)
	v, err := s.snapshotView(c.UserContext(), false, ownAdmin)
	if err != nil {
		return err
	}
	now := time.Now()
	var listed []static.QueueInfo
	first := (page - 1) * indexPerPage
	count := 0
	for _, e := range v.entries {
		state := IndexState(e.ov.Settings, now)
		if !indexListed(e.ov.Settings, state, now) {
			continue
		}
		count++
		if count > first && count <= first+indexPerPage {
			info := indexInfo(e.name, e.ov, state)
			info.Note = demoNote(e.name, t)
			listed = append(listed, info)
		}
	}
	pages := max(1, (count+indexPerPage-1)/indexPerPage)
	if page > pages {
		// The queues changed under a link, or the number is made up: the last page.
		return c.Redirect("/?page="+strconv.Itoa(pages), fiber.StatusSeeOther)
	}
	data := static.IndexPage{Lang: l, T: t, Queues: listed, Page: page, Pages: pages}
	if pages > 1 {
		data.PageLabel = strings.NewReplacer("{page}", static.FormatNumber(l, page), "{pages}", static.FormatNumber(l, pages)).Replace(t["index_page_of"])
	}
	if page > 1 {
		data.PrevURL = "/?page=" + strconv.Itoa(page-1)
	}
	if page < pages {
		data.NextURL = "/?page=" + strconv.Itoa(page+1)
	}
	return s.render(c, 200, "index", data)
}

// indexInfo is one queue's entry on the index.
func indexInfo(n string, st *queue.Overview, state string) static.QueueInfo {
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
	return info
}

// pageEnd is what the waiting page shows of the end: ends_at (RFC 3339, "" = none) and
// whether it has passed (the same rule as the index's ended state).
func pageEnd(st queue.Settings) (string, bool) {
	if st.EndsAt == nil {
		return "", st.Ended
	}
	return st.EndsAt.UTC().Format(stream.TimeFormat), IndexState(st, time.Now()) == indexEnded
}
