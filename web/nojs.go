package web

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/static"
)

// The waiting room without scripts (docs/API.md, "Without JavaScript"). The waiting page's
// <noscript> part posts a form to POST /q/{queue}/join, which joins as the API does, sets
// the same ticket cookie (wr_ticket_<queue>: HttpOnly, SameSite=Lax, Secure behind TLS)
// and answers 303 to GET /q/{queue}/place. That page is rendered by the server from the
// cookie: the number in line, the people ahead, the ETA, or the turn with its link to the
// order page; it reloads itself (a Refresh header) every refreshEvery seconds,
// and each reload is a status call — the same per-ticket limit, the same sign of life.

// The bounds of the no-script page's refresh.
const (
	// nojsMinRefresh is the fastest refresh when the status limit allows faster: a page
	// that reloads itself more often than every 5 s shows nothing new and costs a reload.
	nojsMinRefresh = 5
	// nojsStepShare: the refresh is this share of the ETA (a tenth: the page is reloaded
	// about ten times on the way to the door, more often near it).
	nojsStepShare = 0.1
)

// refreshEvery is the no-script page's refresh interval in whole seconds for a place whose
// ETA is eta seconds (negative: unknown — paused, sold out, a lottery): a tenth of the ETA,
// never faster than the per-ticket status limit (statusRate per second; 0 = off) nor
// nojsMinRefresh, and at most half the presence grace, so that one reload lost on the way
// still leaves the place alive. An unknown ETA refreshes at that most. When the status
// limit is slower than half the grace (a configuration in which polling keeps no place
// either), the grace wins: the place is what the page is for.
func refreshEvery(eta, statusRate float64, grace time.Duration) int {
	if eta < 0 || math.IsNaN(eta) || math.IsInf(eta, 0) {
		return refreshWithin(-1, statusRate, grace)
	}
	return refreshWithin(eta*nojsStepShare, statusRate, grace)
}

// refreshWithin is a refresh of about want seconds held within refreshEvery's bounds
// (negative: the slowest).
func refreshWithin(want, statusRate float64, grace time.Duration) int {
	lo := max(nojsMinRefresh, pollEvery(statusRate))
	hi := max(1, int(grace/time.Second)/2)
	if lo > hi || want < 0 {
		return hi
	}
	return min(hi, max(lo, int(math.Round(want))))
}

// grace is the presence grace (WR_GRACE) the page's refresh stays under.
func (s *Server) grace() time.Duration {
	if s.cfg.Grace > 0 {
		return s.cfg.Grace
	}
	return 60 * time.Second
}

// formStart is what both no-script forms do first: the page's data in the buyer's language,
// the queue's settings and brand. sent is true when the answer is already made (an unknown
// queue, a post from another site, a failed read); err is then the handler's result.
func (s *Server) formStart(c *fiber.Ctx) (data static.PlacePage, st queue.Settings, sent bool, err error) {
	l, t := s.lang(c)
	name := c.Params("queue")
	data = static.PlacePage{Lang: l, T: t, Queue: name}
	if !queue.ValidName(name) {
		data.Queue = ""
		return data, st, true, s.placeRefused(c, &data, queue.ErrQueueNotFound)
	}
	if !s.formFromHere(c) {
		data.State = static.PlaceCrossSite
		return data, st, true, s.renderPlace(c, fiber.StatusForbidden, data)
	}
	if st, err = s.d.Settings.Settings(c.UserContext(), name); err != nil {
		return data, st, true, s.placeRefused(c, &data, err)
	}
	data.Brand = s.pageBrand(c.UserContext(), st)
	return data, st, false, nil
}

// formJoin answers POST /q/{queue}/join, the no-script page's form: 303 to the place page
// once joined (or with the place it already had), else a page that says why, with the
// join's status.
func (s *Server) formJoin(c *fiber.Ctx) error {
	data, st, sent, err := s.formStart(c)
	if sent {
		return err
	}
	ctx, name := c.UserContext(), data.Queue
	if st.PowDifficulty > 0 {
		data.State = static.PlacePow
		return s.renderPlace(c, fiber.StatusPreconditionRequired, data)
	}
	invite := c.FormValue("invite")
	if len(invite) > maxInvite {
		return s.placeRefused(c, &data, queue.ErrInviteInvalid)
	}
	if s.full() {
		s.d.Hub.RequestSweep()
		return s.placeRefused(c, &data, &Error{Status: 503, Code: "instance_full", RetryAfter: 1 + rand.IntN(4)})
	}
	if err := s.joinLimit(c); err != nil {
		return s.placeRefused(c, &data, err)
	}
	// The browser's own ticket for this queue, if it holds a valid one (joining twice
	// keeps the place); a stale or forged cookie just gets a new ticket.
	var tk queue.Ticket
	raw := cookieTicket(c, s.d.Signer, name)
	if raw != "" {
		if pt, perr := s.d.Signer.Parse(raw); perr == nil && pt.Queue == name {
			tk = pt
		}
	}
	opts := queue.JoinOptions{Client: clientKey(c), Invite: invite}
	if tk.ID == "" {
		tk, raw = s.d.Signer.NewWhere(name, s.d.Line.IDFits(ctx, name, opts.Client, ""))
	}
	p, _, err := s.d.Line.JoinWith(ctx, tk, opts)
	var pr *queue.PowRequiredError
	if errors.As(err, &pr) {
		data.State = static.PlacePow
		return s.renderPlace(c, fiber.StatusPreconditionRequired, data)
	}
	if err != nil {
		if errors.Is(err, queue.ErrTooManyPlaces) {
			s.m.rejected.WithLabelValues("ip", "/q/join").Inc()
			s.lim.CountRejected(ctx, "ip")
		}
		return s.placeRefused(c, &data, err)
	}
	traceJoin(ctx, name, p)
	s.setTicketCookie(c, name, raw)
	return c.Redirect("/q/"+name+"/place", fiber.StatusSeeOther)
}

// placePage answers GET /q/{queue}/place: the place of the browser's ticket cookie,
// rendered by the server, refreshing itself while there is something to wait for. Each
// request is a status call (the per-ticket status limit, and the place's sign of life).
func (s *Server) placePage(c *fiber.Ctx) error {
	l, t := s.lang(c)
	name := c.Params("queue")
	data := static.PlacePage{Lang: l, T: t, Queue: name}
	if !queue.ValidName(name) {
		data.Queue = ""
		return s.placeRefused(c, &data, queue.ErrQueueNotFound)
	}
	ctx := c.UserContext()
	st, err := s.d.Settings.Settings(ctx, name)
	if err != nil {
		return s.placeRefused(c, &data, err)
	}
	data.Brand = s.pageBrand(ctx, st)
	data.Invite = c.Query("invite")
	if len(data.Invite) > maxInvite {
		data.Invite = ""
	}
	// The join form is offered where a join can succeed without a script.
	canJoin := st.PowDifficulty == 0 && !st.Closed && !st.Ended
	raw := cookieTicket(c, s.d.Signer, name)
	tk, perr := s.d.Signer.Parse(raw)
	if raw == "" || perr != nil || tk.Queue != name {
		if _, ended := pageEnd(st); ended {
			return s.placeRefused(c, &data, queue.ErrQueueEnded)
		}
		data.State, data.CanJoin = static.PlaceNone, canJoin
		if st.PowDifficulty > 0 {
			data.State = static.PlacePow
		}
		return s.renderPlace(c, fiber.StatusOK, data)
	}
	if err := s.statusLimit(c, tk); err != nil {
		return s.placeRefused(c, &data, err)
	}
	p, err := s.d.Line.Status(ctx, tk)
	if errors.Is(err, queue.ErrNoPlace) && st.Ended {
		err = queue.ErrQueueEnded // the end dropped the place (st was read in this request)
	}
	if errors.Is(err, queue.ErrNoPlace) {
		data.State, data.CanJoin = static.PlaceGone, canJoin
		return s.renderPlace(c, fiber.StatusOK, data)
	}
	if err != nil {
		return s.placeRefused(c, &data, err)
	}
	s.fillPlace(&data, p, canJoin)
	return s.renderPlace(c, fiber.StatusOK, data)
}

// formLeave answers POST /q/{queue}/leave, the place page's "Leave the line" form: the
// browser's ticket gives up its place (as DELETE /api/queues/{queue}/ticket does) and the
// page says so, with the join form. A ticket with no place left is the same answer.
func (s *Server) formLeave(c *fiber.Ctx) error {
	data, st, sent, err := s.formStart(c)
	if sent {
		return err
	}
	ctx, name := c.UserContext(), data.Queue
	data.State, data.CanJoin = static.PlaceLeft, st.PowDifficulty == 0 && !st.Closed && !st.Ended
	if tk, err := s.d.Signer.Parse(cookieTicket(c, s.d.Signer, name)); err == nil && tk.Queue == name {
		if err := s.d.Line.Leave(ctx, tk); err != nil && !errors.Is(err, queue.ErrNoPlace) {
			return s.placeRefused(c, &data, err)
		}
	}
	return s.renderPlace(c, fiber.StatusOK, data)
}

// fillPlace writes place p into the page: its state, its numbers in the page's language,
// and the refresh.
func (s *Server) fillPlace(data *static.PlacePage, p queue.Place, canJoin bool) {
	t := data.T
	pr := message.NewPrinter(language.Make(data.Lang))
	n := func(v int64) string { return pr.Sprintf("%d", v) }
	statusRate := s.lim.Get().StatusPerTicket
	grace := s.grace()
	data.Waiting = n(p.Waiting)
	data.Paused, data.SoldOut = p.Paused, p.SoldOut
	switch p.State {
	case queue.StatePrequeue:
		data.State = static.PlacePrequeue
		data.Waiting = n(p.PrequeueSize)
		until := -1.0
		if !p.StartsAt.IsZero() {
			data.StartsAtISO = p.StartsAt.UTC().Format(time.RFC3339)
			data.StartsAt = fill(t["nojs_time_utc"], "{time}", p.StartsAt.UTC().Format("2006-01-02 15:04:05"))
			until = max(0, time.Until(p.StartsAt).Seconds()) // the start is what it waits for: back then
		}
		data.Refresh = refreshWithin(until, statusRate, grace)
	case queue.StateWaiting:
		eta := p.ETA()
		data.State = static.PlaceWaiting
		if p.Method == queue.MethodRandom && p.Lane == queue.LaneNormal {
			data.State, eta = static.PlaceLottery, -1
		}
		data.Position, data.Ahead = n(p.Position), n(max(0, p.Position-1))
		data.ETA = etaText(t, eta, p.Paused)
		data.Refresh = refreshEvery(eta, statusRate, grace)
	case queue.StateAdmitted:
		data.State = static.PlaceAdmitted
		left := time.Until(p.TokenExpiresAt)
		data.UntilISO = p.TokenExpiresAt.UTC().Format(time.RFC3339)
		data.Until = fill(t["nojs_time_utc"], "{time}", p.TokenExpiresAt.UTC().Format("15:04:05"))
		data.MinutesLeft = fill(t["nojs_minutes_left"], "{n}", n(int64(math.Ceil(max(0, left.Minutes())))))
		// The turn needs no sign of life; the page comes back to say when it ran out.
		data.Refresh = refreshEvery(-1, statusRate, grace)
	case queue.StateExpired:
		data.State, data.CanJoin = static.PlaceExpired, canJoin
	case queue.StateUsed:
		data.State = static.PlaceUsed
	default:
		data.State, data.CanJoin = static.PlaceGone, canJoin
	}
	if data.Refresh > 0 {
		data.RefreshNote = fill(t["nojs_refresh_note"], "{n}", n(int64(data.Refresh)), "{grace}", n(int64(grace/time.Second)))
	}
}

// etaText is the ETA in words (the buyer messages' eta_*); negative: none known.
func etaText(t map[string]string, eta float64, paused bool) string {
	switch {
	case paused:
		return t["eta_paused"]
	case eta < 0:
		return t["eta_unknown"]
	case eta <= 1:
		return t["eta_soon"]
	case eta < 60:
		return fill(t["eta_seconds"], "{n}", strconv.Itoa(int(math.Round(eta))))
	case eta < 3600:
		return fill(t["eta_minutes"], "{n}", strconv.Itoa(int(math.Round(eta/60))))
	}
	s := int(math.Round(eta))
	return fill(t["eta_hours"], "{h}", strconv.Itoa(s/3600), "{m}", strconv.Itoa((s%3600)/60))
}

// placeRefused renders err as the no-script page: its state and status as the JSON API
// would answer it; a refusal that passes (a rate limit, Redis away) makes the page try
// again by itself after the Retry-After.
func (s *Server) placeRefused(c *fiber.Ctx, data *static.PlacePage, err error) error {
	e := mapError(err)
	data.State, data.Reason = static.PlaceRefused, e.Code
	switch {
	case e.Status == fiber.StatusTooManyRequests && e.Code == "rate_limited":
		data.State = static.PlaceBusy
	case e.Status >= 500:
		if e.Code != "instance_full" {
			s.log.Error().Err(err).Str("request_id", requestID(c)).Str("path", logPath(c)).Int("status", e.Status).Msg("request failed")
		}
		data.State = static.PlaceDown
		e.RetryAfter = max(e.RetryAfter, 2)
	}
	if data.State != static.PlaceRefused {
		data.Refresh = max(e.RetryAfter, 1)
		pr := message.NewPrinter(language.Make(data.Lang))
		data.RefreshNote = fill(data.T["nojs_retry_note"], "{n}", pr.Sprintf("%d", data.Refresh))
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(data.Refresh))
	}
	return s.renderPlace(c, e.Status, *data)
}

// renderPlace renders the no-script page with its refresh: a Refresh header (not a <meta>
// refresh: the header is the same reload, and the page's markup has nothing that moves by
// itself). The reload is what keeps the place (a sign of life), so it is the real-time
// exception of WCAG 2.2.1; the page says how often it happens and why.
func (s *Server) renderPlace(c *fiber.Ctx, status int, data static.PlacePage) error {
	if data.Refresh > 0 {
		c.Set("Refresh", strconv.Itoa(data.Refresh))
	}
	return s.render(c, status, "place", data)
}

// cookieTicket is the browser's ticket cookie for queue name (the no-script pages read no
// explicit ticket: a ticket in a page's address would leak through history and logs).
func cookieTicket(c *fiber.Ctx, signer *queue.Signer, name string) string {
	if raw := c.Cookies(TicketCookie(name)); raw != "" {
		return raw
	}
	if raw := c.Cookies(LegacyTicketCookie); raw != "" {
		if t, err := signer.Parse(raw); err == nil && t.Queue == name {
			return raw
		}
	}
	return ""
}

// formFromHere tells whether a form post comes from a page of this site. The browser says
// so itself in Sec-Fetch-Site (a page cannot set it); a browser without it sends an Origin
// of this scheme and host, or at least a Referer of this host. A post that shows none of
// them is refused: it could come from any site. The ticket cookie is SameSite=Lax besides,
// so another site's post never carries it. (sameOrigin leaves this route to this check, so
// that a refusal is a page, not JSON.)
func (s *Server) formFromHere(c *fiber.Ctx) bool {
	if site := c.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	host := c.Get(fiber.HeaderHost)
	if o := c.Get(fiber.HeaderOrigin); o != "" {
		u, err := url.Parse(o) // "null" has no host: refused
		return err == nil && u.Host != "" && strings.EqualFold(u.Host, host) && strings.EqualFold(u.Scheme, s.scheme(c))
	}
	if r := c.Get(fiber.HeaderReferer); r != "" {
		u, err := url.Parse(r)
		return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
	}
	return false
}

// isPageForm tells whether the request is a post of the no-script pages' forms (join, leave).
func isPageForm(c *fiber.Ctx) bool {
	p := c.Path()
	return c.Method() == fiber.MethodPost && strings.HasPrefix(p, "/q/") && (strings.HasSuffix(p, "/join") || strings.HasSuffix(p, "/leave"))
}
