package web

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/rs/zerolog"
	"github.com/waitroom/waitroom/stream"
)

// The access log: one line per request, written when its answer is complete — at once for
// a plain answer, when the stream ends for a stream (its duration is then the stream's
// life). The line never carries a ticket, token or invite code: no header is logged, the
// query string (where ?ticket= and ?token= travel) is left out, and a path segment that is
// a secret is replaced by its parameter's name (logPath).
//
// With Config.AccessLog (WR_ACCESS_LOG, on by default) the lines are at info level; without
// it at debug. A 5xx that is not load shedding is at warn either way.

// localDeferred marks a request whose access-log line is written later, by the stream that
// took it over (deferAccess), so requestLog writes none.
const localDeferred = "wr_log_deferred"

// requestLog gives every request an id (X-Request-ID, kept when the client sent a sane
// one), counts it, and writes its access-log line unless a stream has taken the line over.
func (s *Server) requestLog(c *fiber.Ctx) error {
	id := c.Get("X-Request-ID")
	if len(id) == 0 || len(id) > 64 || !printable(id) {
		id = newID()
	}
	c.Locals(requestIDKey, id)
	c.Set("X-Request-ID", id)
	start := time.Now()
	c.Locals(localStart, start)
	err := c.Next()
	if err != nil {
		if herr := s.app.ErrorHandler(c, err); herr != nil {
			_ = c.SendStatus(fiber.StatusInternalServerError)
		}
	}
	status := c.Response().StatusCode()
	route := c.Route().Path
	if c.Context().Hijacked() {
		status = 200
	}
	s.m.requests.WithLabelValues(route, itoa(status)).Inc()
	s.m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	if deferred, _ := c.Locals(localDeferred).(bool); deferred {
		return nil
	}
	shed, _ := c.Locals(localShed).(bool)
	s.access(newAccessEntry(c, id, start), status, responseBytes(c, status), shed).Msg("request")
	return nil
}

// accessEntry is what a request's line says about the request, copied out of the
// *fiber.Ctx so that a stream can write the line after the context has gone back to the pool.
type accessEntry struct {
	id, method, path, ip string
	trace                string // the request's trace id when it is traced
	start                time.Time
}

func newAccessEntry(c *fiber.Ctx, id string, start time.Time) accessEntry {
	return accessEntry{id: id, method: c.Method(), path: logPath(c), ip: clientIP(c), trace: traceID(c.UserContext()), start: start}
}

// access starts a request's line at its level; the caller adds fields and writes it.
func (s *Server) access(e accessEntry, status int, bytes int64, shed bool) *zerolog.Event {
	ev := s.log.Debug()
	switch {
	case status >= 500 && !shed:
		ev = s.log.Warn()
	case s.cfg.AccessLog:
		ev = s.log.Info()
	}
	ev = ev.Str("request_id", e.id).Str("method", e.method).Str("path", e.path).Int("status", status).
		Int64("bytes", bytes).Float64("duration_ms", float64(time.Since(e.start).Microseconds())/1000).Str("ip", e.ip)
	if e.trace != "" {
		ev = ev.Str("trace_id", e.trace)
	}
	return ev
}

// deferAccess hands the request's access-log line to a stream that outlives the handler
// (a hijacked user stream, the admin stream): requestLog writes none, and the returned
// func writes it — once, whatever calls it more often — with the status, the bytes sent
// and why the stream ended.
func (s *Server) deferAccess(c *fiber.Ctx) func(status int, bytes int64, end string) {
	c.Locals(localDeferred, true)
	e := newAccessEntry(c, requestID(c), time.Now())
	if t, ok := c.Locals(localStart).(time.Time); ok {
		e.start = t
	}
	var once sync.Once
	return func(status int, bytes int64, end string) {
		once.Do(func() {
			s.access(e, status, bytes, false).Bool("stream", true).Str("end", end).Msg("request")
		})
	}
}

// streamLine is the access-log line of a waiter's stream, written once when the hub drops
// it (or when the hub refuses it). Every open stream holds one, so it keeps only what the
// line needs beyond what the hub tells at the end (the queue, the bytes, the reason) and
// what every stream shares (GET /api/queues/{queue}/stream): the client address (for IPv4
// the very string the hub's per-address count holds), the request id, the trace id and the
// start — 80 bytes and the id's 16 (measured: 0.14 KB per idle waiter before this shape).
type streamLine struct {
	s         *Server
	id, trace string
	ip        string
	start     int64 // unix nanoseconds
	done      atomic.Bool
}

// streamLineOf starts a stream's access-log line (nil when no line would be written); ip is
// the client's address as the handler has it.
func (s *Server) streamLineOf(c *fiber.Ctx, ip string) *streamLine {
	if !s.cfg.AccessLog && s.log.GetLevel() > zerolog.DebugLevel {
		return nil
	}
	c.Locals(localDeferred, true)
	l := &streamLine{s: s, id: requestID(c), ip: ip, trace: traceID(c.UserContext())}
	start, ok := c.Locals(localStart).(time.Time)
	if !ok {
		start = time.Now()
	}
	l.start = start.UnixNano()
	return l
}

// write writes the line unless it was written already.
func (l *streamLine) write(queueName string, status int, bytes int64, end string) {
	if l == nil || l.done.Swap(true) {
		return
	}
	e := accessEntry{id: l.id, method: fiber.MethodGet, path: "/api/queues/" + queueName + "/stream", ip: l.ip, trace: l.trace, start: time.Unix(0, l.start)}
	l.s.access(e, status, bytes, false).Bool("stream", true).Str("end", end).Msg("request")
}

// Ended is the hub's Waiter.Ended.
func (l *streamLine) Ended(e stream.End) { l.write(e.Queue, 200, e.Bytes, e.Reason) }

// localStart is when requestLog began the request (the start of a stream's duration).
const localStart = "wr_start"

// responseBytes is the size of the answer's body: none for an answer that has none on the
// wire (HEAD, 1xx, 204, 304 — fasthttp drops the body a handler may have set, such as
// SendStatus's status text), else the body held in memory, or a streamed body's
// Content-Length (0 when unknown). Reading Body() of a streamed answer would drain its
// stream, so it is not called for one.
func responseBytes(c *fiber.Ctx, status int) int64 {
	r := c.Response()
	if c.Method() == fiber.MethodHead || status < 200 || status == fiber.StatusNoContent || status == fiber.StatusNotModified {
		return 0
	}
	if r.IsBodyStream() {
		return int64(max(r.Header.ContentLength(), 0))
	}
	return int64(len(r.Body()))
}

// secretParams are the route parameters whose values are secrets (an invite code): the
// access log shows the parameter's name in their place.
var secretParams = []string{"code"}

// logPath is the request's path as the access log shows it: without the query string, and
// with the segments of secretParams replaced by ":name".
func logPath(c *fiber.Ctx) string {
	p := c.Path()
	for _, name := range secretParams {
		v := c.Params(name)
		if v == "" {
			continue
		}
		if i := strings.LastIndex(p, "/"+v); i >= 0 {
			p = p[:i+1] + ":" + name + p[i+1+len(v):]
		}
	}
	return p
}
