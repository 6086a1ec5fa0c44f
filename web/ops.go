package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

type metrics struct {
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	rejected      *prometheus.CounterVec
	failOpen      prometheus.Counter
	streamErr     *prometheus.CounterVec
	acceptErrors  *prometheus.CounterVec
	connsShed     prometheus.Counter
	connsBudget   prometheus.Gauge
	streamsBudget prometheus.Gauge
	pageFallbacks prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_requests_total", Help: "HTTP requests by route and status."}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}, []string{"route"}),
		rejected:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_rejected_total", Help: "Requests refused by a rate limit, by scope and path."}, []string{"scope", "path"}),
		failOpen:  prometheus.NewCounter(prometheus.CounterOpts{Name: "failopen_orders_total", Help: "Orders let through without a token check while Redis was down (fail-open mode)."}),
		streamErr: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sse_refused_total", Help: "Stream requests refused, by reason (full: shed with a retry at the stream budget)."}, []string{"reason"}),
		acceptErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_accept_errors_total",
			Help: "Failed accepts, by reason; each is retried after a back-off (the server never stops on one)."}, []string{"reason"}),
		connsShed:     prometheus.NewCounter(prometheus.CounterOpts{Name: "http_connections_shed_total", Help: "Connections closed at accept because the connection budget was full."}),
		connsBudget:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "http_connections_budget", Help: "Most open client connections (WR_MAX_CONNS; 0 = none)."}),
		streamsBudget: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sse_streams_budget", Help: "Most open streams (WR_MAX_STREAMS; 0 = none)."}),
		pageFallbacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "waitroom_page_template_fallbacks_total",
			Help: "Waiting pages shown as the default page because the queue's own page could not be read or rendered."}),
	}
	// Every series with a known label value exists from the start, at 0: a series that
	// appears at its first event hides that event from rate() and increase(), and an alert
	// on it has nothing to compare with.
	for _, r := range rejectedSeries {
		m.rejected.WithLabelValues(r.scope, r.path)
	}
	for _, r := range []string{"full", "ip_cap"} {
		m.streamErr.WithLabelValues(r)
	}
	for _, r := range acceptReasons {
		m.acceptErrors.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.rejected, m.failOpen, m.streamErr, m.acceptErrors, m.connsShed,
			m.connsBudget, m.streamsBudget, m.pageFallbacks)
	}
	return m
}

// rejectedSeries are the scope and path pairs of ratelimit_rejected_total: the limits of
// limits.go and the per-address caps of join and stream.
var rejectedSeries = []struct{ scope, path string }{
	{"ip", "/api/queues/join"}, {"global", "/api/queues/join"},
	{"user", "/api/orders"}, {"ip", "/api/orders"}, {"global", "/api/orders"},
	{"user", "/api/queues/status"},
	{"ip", "/api/queues/stream"},
}

const requestIDKey = "request_id"

func requestID(c *fiber.Ctx) string {
	if v, ok := c.Locals(requestIDKey).(string); ok {
		return v
	}
	return ""
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func (s *Server) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// readyz answers 200 only when Redis and PostgreSQL both answer a ping.
func (s *Server) readyz(c *fiber.Ctx) error {
	check := func(f func(context.Context) error) string {
		ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.ReadyTimeout)
		defer cancel()
		if err := f(ctx); err != nil {
			return "down"
		}
		return "ok"
	}
	res := fiber.Map{
		"redis":    check(s.d.Line.Ping),
		"postgres": check(s.d.Orders.Ping),
	}
	if res["redis"] != "ok" || res["postgres"] != "ok" {
		c.Set(fiber.HeaderRetryAfter, "2")
		res["status"] = "unavailable"
		return c.Status(fiber.StatusServiceUnavailable).JSON(res)
	}
	if s.full() {
		// At the stream budget: a load balancer steers new users to other instances; the
		// streams held here go on. The balancer stops sending streams, so the look for
		// stale sockets is asked for here too.
		s.d.Hub.RequestSweep()
		c.Locals(localShed, true)
		c.Set(fiber.HeaderRetryAfter, "2")
		c.Set(fiber.HeaderConnection, "close")
		res["status"] = "full"
		return c.Status(fiber.StatusServiceUnavailable).JSON(res)
	}
	res["status"] = "ok"
	return c.JSON(res)
}

func (s *Server) metricsHandler() fiber.Handler {
	h := fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.d.Gatherer, promhttp.HandlerOpts{}))
	return func(c *fiber.Ctx) error {
		h(c.Context())
		return nil
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
