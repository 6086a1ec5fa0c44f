package web

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
)

// ticketFor parses the request's ticket for queue name: 401 when missing, malformed or
// forged; 404 when it belongs to another queue.
func (s *Server) ticketFor(c *fiber.Ctx, name string) (queue.Ticket, string, error) {
	raw, _ := presentedFor(c, s.d.Signer, name)
	if raw == "" {
		return queue.Ticket{}, "", errorf(401, "ticket_missing", "No ticket: join the queue first.")
	}
	t, err := s.d.Signer.Parse(raw)
	if err != nil {
		return queue.Ticket{}, "", err
	}
	if t.Queue != name {
		return queue.Ticket{}, "", queue.ErrNoPlace
	}
	return t, raw, nil
}

// pathTicket is the request's ticket for the queue named in the path.
func (s *Server) pathTicket(c *fiber.Ctx) (queue.Ticket, string, error) {
	name, err := queueParam(c)
	if err != nil {
		return queue.Ticket{}, "", err
	}
	return s.ticketFor(c, name)
}

func queueParam(c *fiber.Ctx) (string, error) {
	name := c.Params("queue")
	if !queue.ValidName(name) {
		return "", queue.ErrQueueNotFound
	}
	return name, nil
}

func (s *Server) join(c *fiber.Ctx) error {
	name, err := queueParam(c)
	if err != nil {
		return err
	}
	jb, err := parseJoinBody(c.Body())
	if err != nil {
		return err
	}
	if s.full() {
		// This instance holds all the streams it may: the client retries (a load balancer
		// that reads /readyz sends it elsewhere), spread over a few seconds, on a new
		// connection; stale sockets are looked for meanwhile.
		s.d.Hub.RequestSweep()
		return &Error{Status: 503, Code: "instance_full", RetryAfter: 1 + rand.IntN(4), Close: true,
			Message: "This server is full right now; retrying in a moment."}
	}
	if err := s.joinLimit(c); err != nil {
		return err
	}
	// Reuse the caller's ticket when it is valid for this queue (joining twice never makes
	// a second place). A stale cookie (other queue, old secret) just gets a new ticket; an
	// explicit forged ticket is refused.
	var t queue.Ticket
	raw, fromCookie := presentedFor(c, s.d.Signer, name)
	if raw != "" {
		pt, perr := s.d.Signer.Parse(raw)
		switch {
		case perr == nil && pt.Queue == name:
			t = pt
		case perr != nil && !fromCookie:
			return perr
		}
	}
	opts, err := s.joinOptions(c, name, jb)
	if err != nil {
		return err
	}
	if t.ID == "" {
		// In a sharded pre-queue, a new ticket is minted in its address's shard (or its
		// challenge's), so the address cap holds across shards (queue/prequeue.go).
		t, raw = s.d.Signer.NewWhere(name, s.d.Line.IDFits(c.UserContext(), name, opts.Client, opts.Pow.ID))
	}
	p, created, err := s.d.Line.JoinWith(c.UserContext(), t, opts)
	var pr *queue.PowRequiredError
	if errors.As(err, &pr) {
		return s.powRequired(c, name, pr.Difficulty)
	}
	if errors.Is(err, queue.ErrTooManyPlaces) {
		s.m.rejected.WithLabelValues("ip", "/api/queues/join").Inc()
		s.lim.CountRejected(c.UserContext(), "ip")
		// Final: the page and waitroom.js do not retry it (Retry-After is only the contract's
		// rule for every 429). Said so that a buyer behind a shared address understands it.
		return &Error{Status: 429, Code: "too_many_places", Scope: "ip", RetryAfter: 60, Message: tooManyPlacesMessage}
	}
	if err != nil {
		return err
	}
	traceJoin(c.UserContext(), name, p)
	s.setTicketCookie(c, name, raw)
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(s.placeBody(t, raw, p))
}

// tooManyPlacesMessage is the join's answer when the caller's address holds its cap of
// live places (places_per_ip, or its share of max_active; queue/places.go).
const tooManyPlacesMessage = "Your network (one internet address) already holds as many places in this line as it may. " +
	"A place counts until it leaves the line or its admission is used or expires. Use a place you already have, or try again later."

func (s *Server) setTicketCookie(c *fiber.Ctx, name, raw string) {
	secure := s.scheme(c) == "https"
	c.Cookie(&fiber.Cookie{Name: TicketCookie(name), Value: raw, Path: "/", HTTPOnly: true, SameSite: "Lax",
		Secure: secure, MaxAge: ticketCookieAge})
	// Rolling deploy: an instance of an older release reads only wr_ticket, so it is set too
	// (the last queue joined); this one reads it only for the queue its ticket belongs to
	// (docs/UPGRADING.md, mixed versions).
	c.Cookie(&fiber.Cookie{Name: LegacyTicketCookie, Value: raw, Path: "/", HTTPOnly: true, SameSite: "Lax",
		Secure: secure, MaxAge: ticketCookieAge})
}

func (s *Server) status(c *fiber.Ctx) error {
	t, raw, err := s.pathTicket(c)
	if err != nil {
		return err
	}
	if err := s.statusLimit(c, t); err != nil {
		return err
	}
	p, err := s.d.Line.Status(c.UserContext(), t)
	if err != nil {
		return s.endedOr(c.UserContext(), t.Queue, err)
	}
	return c.JSON(s.placeBody(t, raw, p))
}

// endedOr turns "no place" into "the sale has ended" when the queue's end dropped every
// place: the page then stops instead of joining again. Other errors pass unchanged; the
// settings are only read on this path.
func (s *Server) endedOr(ctx context.Context, queueName string, err error) error {
	if !errors.Is(err, queue.ErrNoPlace) {
		return err
	}
	if st, serr := s.d.Settings.Settings(ctx, queueName); serr == nil && st.Ended {
		return queue.ErrQueueEnded
	}
	return err
}

func (s *Server) leave(c *fiber.Ctx) error {
	t, _, err := s.pathTicket(c)
	if err != nil {
		return err
	}
	if err := s.d.Line.Leave(c.UserContext(), t); err != nil {
		return err
	}
	s.forgetReminder(c.UserContext(), t.Queue, t.ID)
	return c.SendStatus(fiber.StatusNoContent)
}

// stream hands the connection to the hub: the request is validated here, then the
// connection is hijacked and written only by the hub's workers, so no goroutine and no
// *fiber.Ctx stays behind for an open stream.
func (s *Server) stream(c *fiber.Ctx) error {
	name, err := queueParam(c)
	if err != nil {
		return err
	}
	t, _, err := s.ticketFor(c, name)
	if err != nil {
		return err
	}
	// Opening a stream reads Redis and is a sign of life, like status: the same per-ticket
	// limit (an EventSource reconnects every few seconds at most).
	if err := s.statusLimit(c, t); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), streamSetupTimeout)
	defer cancel()
	p, err := s.d.Line.TicketState(ctx, t)
	if err = s.endedOr(ctx, name, err); errors.Is(err, queue.ErrQueueEnded) {
		// 204 is the one answer that makes EventSource stop reconnecting for good.
		return c.SendStatus(fiber.StatusNoContent)
	}
	if err != nil {
		return err
	}
	if p.State == queue.StateWaiting {
		// Opening a stream is a sign of life: a place whose earlier stream dropped must not
		// be abandoned while this one is open (the hub refreshes it every grace/3).
		if err := s.d.Line.Touch(ctx, name, []string{t.ID}); err != nil {
			return err
		}
	}
	addr := clientIP(c)
	ip := addrKey(addr) // the same string for IPv4
	if c.Method() == fiber.MethodHead {
		// The head of a stream without its body (EventSource never sends HEAD). It answers
		// the per-address cap as GET would: a page whose stream was refused asks this way
		// why (EventSource cannot read a refusal's status).
		if s.d.Hub.IPFull(ip) {
			return s.tooManyStreams()
		}
		c.Set(fiber.HeaderContentType, "text/event-stream; charset=utf-8")
		c.Set(fiber.HeaderCacheControl, "no-cache, no-store, no-transform")
		c.Status(fiber.StatusOK)
		return nil
	}
	if !s.d.Hub.Reserve(s.cfg.MaxStreams) {
		return s.shedStream(c)
	}
	err = s.d.Hub.AcquireIP(ip)
	if err != nil {
		s.d.Hub.Unreserve()
	}
	switch {
	case errors.Is(err, stream.ErrTooMany):
		s.m.streamErr.WithLabelValues("ip_cap").Inc()
		s.m.rejected.WithLabelValues("ip", "/api/queues/stream").Inc()
		s.lim.CountRejected(c.UserContext(), "ip")
		return s.tooManyStreams()
	case err != nil:
		return &Error{Status: 503, Code: "shutting_down", Message: "This instance is shutting down; reconnect.", RetryAfter: 1}
	}
	last, _ := stream.ParseLastEventID(c.Get("Last-Event-ID"))
	w := stream.Waiter{Queue: name, Ticket: t.ID, IP: ip, LastEventID: last, Place: p, Reserved: true}
	if o := corsOrigin(c); o != "" {
		// The hub writes the answer itself: the CORS headers go with it (o is an exact
		// allowed origin, so it holds no line break).
		w.Header = "Access-Control-Allow-Origin: " + o + "\r\nAccess-Control-Allow-Credentials: true\r\nVary: Origin\r\n"
	}
	line := s.streamLineOf(c, addr)
	if line != nil {
		w.Ended = line
	}
	hub, log := s.d.Hub, s.log
	c.Context().Request.Header.ResetConnectionClose() // fasthttp skips hijacking on Connection: close
	c.Context().HijackSetNoResponse(true)
	c.Context().Hijack(func(nc net.Conn) {
		if u, ok := nc.(interface{ UnsafeConn() net.Conn }); ok {
			nc = u.UnsafeConn()
		}
		framingHijacked(nc)
		actx, cancel := context.WithTimeout(context.Background(), streamSetupTimeout)
		defer cancel()
		if err := hub.Attach(actx, nc, w); err != nil {
			if errors.Is(err, stream.ErrClosed) {
				log.Debug().Msg("stream refused: shutting down")
			} else {
				log.Warn().Err(err).Msg("stream attach")
			}
			_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
			n, _ := nc.Write(streamUnavailable)
			_ = nc.Close()
			line.write(name, 503, int64(n), "unavailable") // unless the hub has told the end already
		}
	})
	return nil
}

// tooManyStreams refuses a stream for the per-address cap (WR_STREAMS_PER_IP on this
// instance, across queues). Its Retry-After is the polling interval: the client polls
// GET /status that often instead (the place is kept) and asks for a stream again later.
func (s *Server) tooManyStreams() error {
	every := pollEvery(s.lim.Get().StatusPerTicket)
	return &Error{Status: 429, Code: "too_many_streams", RetryAfter: every, Scope: "ip",
		Message: "Too many open streams from your address on this server; poll status every " + strconv.Itoa(every) + " s instead (your place is kept)."}
}

// pollEvery is the polling interval in whole seconds for a status limit of rate per ticket
// per second: the limit's own interval rounded up, at least 1 s (1 s when it is off).
func pollEvery(rate float64) int {
	if rate <= 0 {
		return 1
	}
	return max(1, int(math.Ceil(1/rate)))
}

// shedStream answers a stream over the stream budget: 200 with a jittered retry and an
// immediate end, so the browser's EventSource comes back later (a 503 would make it give up
// for good) — spread over [shedRetryMin, shedRetryMax] so a reconnect storm is not repeated.
func (s *Server) shedStream(c *fiber.Ctx) error {
	s.m.streamErr.WithLabelValues("full").Inc()
	s.d.Hub.RequestSweep() // stale sockets may be holding the capacity
	retry := shedRetryMin + time.Duration(rand.Int64N(int64(shedRetryMax-shedRetryMin)))
	c.Set(fiber.HeaderContentType, "text/event-stream; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-cache, no-store, no-transform")
	c.Set(fiber.HeaderConnection, "close")
	return c.SendString("retry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\n\n")
}

// The retry a shed stream is told.
const (
	shedRetryMin = 2 * time.Second
	shedRetryMax = 10 * time.Second
)

// ticketCookieAge is the lifetime of a ticket cookie: a place is kept at most a day.
const ticketCookieAge = 24 * 3600

// streamSetupTimeout bounds the Redis work of opening a stream (ticket state, sign of
// life, the queue's first snapshot).
const streamSetupTimeout = 3 * time.Second

// streamUnavailable is the whole answer written on a hijacked connection whose stream
// could not be attached (the hub closing, or the queue's state unreadable).
var streamUnavailable = func() []byte {
	body := `{"error":{"code":"stream_unavailable","message":"Live updates are unavailable right now; retrying soon."}}`
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 2\r\n" +
		"X-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()
