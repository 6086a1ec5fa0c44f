package web

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/waitroom/waitroom/queue"
)

// Tracing of requests (Deps.Tracer; nil: off, and this middleware is not installed). Each
// request is a server span named "METHOD route", a child of the caller's W3C traceparent
// when it sends one (a shop's backend calling the order API puts its order in its own
// trace). The span sits in the request's user context, so the Redis and PostgreSQL calls
// made for the request are its children. A stream's span covers its opening only: the
// stream itself is written by the hub, and its access-log line says how long it lasted.
// The attributes never hold a query string, a header or a secret path segment (logPath).

// traceContext is the only propagation read: W3C traceparent and tracestate.
var traceContext = propagation.TraceContext{}

// untraced are the routes polled by machines; a span for each would drown the traces.
var untraced = map[string]bool{"/metrics": true, "/healthz": true, "/readyz": true}

func (s *Server) traceRequest(c *fiber.Ctx) error {
	if untraced[c.Path()] {
		return c.Next()
	}
	ctx := traceContext.Extract(c.UserContext(), headerCarrier{c})
	ctx, span := s.d.Tracer.Start(ctx, c.Method(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", c.Method()), attribute.String("client.address", clientIP(c))))
	defer span.End()
	c.SetUserContext(ctx)
	err := c.Next() // requestLog, inside, has turned an error into its answer
	route := c.Route().Path
	status := c.Response().StatusCode()
	if c.Context().Hijacked() {
		status = 200
	}
	span.SetName(c.Method() + " " + route)
	span.SetAttributes(attribute.String("http.route", route), attribute.String("url.path", logPath(c)),
		attribute.Int("http.response.status_code", status), attribute.String("waitroom.request_id", requestID(c)))
	if status >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(status))
	}
	return err
}

// headerCarrier reads a request's headers for the propagator.
type headerCarrier struct{ c *fiber.Ctx }

func (h headerCarrier) Get(key string) string { return h.c.Get(key) }
func (h headerCarrier) Set(string, string)    {} // requests are only read
func (h headerCarrier) Keys() []string {
	var keys []string
	h.c.Request().Header.VisitAll(func(k, _ []byte) { keys = append(keys, string(k)) })
	return keys
}

// traceJoin says on the join's span where the ticket stands, so that the span of the tick
// that admits it can be found (its waitroom.seq.first … .last hold waitroom.seq).
func traceJoin(ctx context.Context, name string, p queue.Place) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	lane := string(p.Lane)
	if lane == "" {
		lane = "normal"
	}
	span.SetAttributes(attribute.String("waitroom.queue", name), attribute.String("waitroom.lane", lane),
		attribute.Int64("waitroom.seq", p.Seq), attribute.String("waitroom.state", string(p.State)))
}

// traceID is the trace id of the request's span, for its access-log line ("" when none).
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}
