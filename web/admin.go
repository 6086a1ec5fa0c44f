package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
)

// The admin auth middleware (adminAuth) and its roles are in roles.go.

type queueStatsJSON struct {
	Name            string   `json:"name"`
	Waiting         int64    `json:"waiting"`
	WaitingPriority int64    `json:"waiting_priority"`
	WaitingBypass   int64    `json:"waiting_bypass"`
	AdmittedTotal   int64    `json:"admitted_total"`
	ActiveTokens    int64    `json:"active_tokens"`
	RatePerSecond   float64  `json:"rate_per_second"`
	MaxActive       int64    `json:"max_active"`
	Paused          bool     `json:"paused"`
	Closed          bool     `json:"closed"`
	TokenTTLSeconds int64    `json:"token_ttl_seconds"`
	PlacesPerIP     int64    `json:"places_per_ip"`
	PowDifficulty   int      `json:"pow_difficulty"`
	PriorityShare   float64  `json:"priority_share"`
	AllowedOrigins  []string `json:"allowed_origins"`
	AdmitRate       float64  `json:"admit_rate"`

	// MaxActiveSharePerIP: the share of max_active one address may hold (queue.Settings).
	MaxActiveSharePerIP float64 `json:"max_active_share_per_ip"`

	AutoRedirect bool    `json:"auto_redirect"`
	TickLagMs    float64 `json:"tick_lag_ms"`
	Leader       string  `json:"leader"`
	// AdmissionHeld: the leader holds a tick until a Redis replica acknowledges it.
	AdmissionHeld bool `json:"admission_held"`
	rateModeJSON
	RateReason               string `json:"rate_reason"`
	TokenTTLEffectiveSeconds int64  `json:"token_ttl_effective_seconds"`
	dropDayJSON
	brandJSON
}

// rateModeJSON is how a queue's rate is set and its adaptive token TTL, in its settings and
// its stats.
type rateModeJSON struct {
	RateMode           queue.RateMode `json:"rate_mode"`
	AutoMin            float64        `json:"auto_min"`
	AutoMax            float64        `json:"auto_max"`
	AutoTargetP95Ms    int64          `json:"auto_target_p95_ms"`
	TokenTTLMinSeconds int64          `json:"token_ttl_min_seconds"`
	TokenTTLHalveAt    int64          `json:"token_ttl_halve_at"`
}

func rateMode(st queue.Settings) rateModeJSON {
	return rateModeJSON{RateMode: st.RateMode, AutoMin: st.AutoMin, AutoMax: st.AutoMax,
		AutoTargetP95Ms: st.AutoTargetP95.Milliseconds(), TokenTTLMinSeconds: int64(st.TokenTTLMin.Seconds()),
		TokenTTLHalveAt: st.TokenTTLHalveAt}
}

// dropDayJSON is a queue's schedule, method and sale state, in its settings and its stats.
type dropDayJSON struct {
	StartsAt *string      `json:"starts_at"` // RFC 3339, null when not scheduled
	EndsAt   *string      `json:"ends_at"`
	Method   queue.Method `json:"method"`
	SoldOut  bool         `json:"sold_out"` // read-only: every product the queue sells has stock 0
	Ended    bool         `json:"ended"`    // read-only: ends_at passed and the line was dropped
	Prequeue int64        `json:"prequeue"` // read-only: the pre-queue's size before the start
	Draw     string       `json:"draw"`     // read-only: none | scheduled | drawing | done
}

func dropDay(st queue.Settings, prequeue int64) dropDayJSON {
	m := st.Method
	if m == "" {
		m = queue.MethodFIFO
	}
	return dropDayJSON{StartsAt: timeJSON(st.StartsAt), EndsAt: timeJSON(st.EndsAt), Method: m,
		SoldOut: st.SoldOut, Ended: st.Ended, Prequeue: prequeue, Draw: drawPhaseName(st.DrawPhase)}
}

// drawPhaseName is the public name of a draw phase (the stored one is a letter).
func drawPhaseName(p queue.DrawPhase) string {
	switch p {
	case queue.DrawScheduled:
		return "scheduled"
	case queue.DrawFrozen:
		return "drawing"
	case queue.DrawDone:
		return "done"
	}
	return "none"
}

// timeJSON is an optional time as the API writes it (null for none).
func timeJSON(t *time.Time) *string {
	if t == nil {
		return nil
	}
	v := t.UTC().Format(stream.TimeFormat)
	return &v
}

type statsJSON struct {
	Instances         []queue.Instance `json:"instances"`
	SSEConnections    int64            `json:"sse_connections_total"`
	Queues            []queueStatsJSON `json:"queues"`
	RateLimitRejected map[string]int64 `json:"ratelimit_rejected"`
	ServerTime        string           `json:"server_time"`
}

func (s *Server) stats(c *fiber.Ctx) error {
	v, err := s.snapshotView(c.UserContext(), true, ownAll) // the shared snapshot, with this instance's writes (snapshot.go)
	if err != nil {
		return err
	}
	_, b := s.statsOf(v)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(b)
}

// adminStream sends the stats object once per second as SSE, from the shared snapshot
// (snapshot.go). Admin streams are bounded per token and per instance (429 past them), so
// they use Fiber's stream writer; they end when the server shuts down.
func (s *Server) adminStream(c *fiber.Ctx) error {
	actor := adminActor(c)
	if err := s.acquireAdminStream(actor); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/event-stream; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-cache, no-store, no-transform")
	c.Set("X-Accel-Buffering", "no")
	closing := s.closing
	build := func(ctx context.Context) ([]byte, error) {
		v, err := s.snapshotView(ctx, true, ownNone)
		if err != nil {
			return nil, err
		}
		_, b := s.statsOf(v)
		return b, nil
	}
	// Fiber's WriteTimeout is a deadline on the whole connection; move it forward before
	// every write so the stream is not cut after WriteTimeout.
	conn := c.Context().Conn()
	c.Context().SetBodyStreamWriter(fasthttp.StreamWriter(func(w *bufio.Writer) {
		defer s.releaseAdminStream(actor)
		_, _ = w.WriteString("retry: 2000\n\n")
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var id int64
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
			b, err := build(ctx)
			cancel()
			if err == nil {
				id++
				_, _ = w.WriteString("id: " + itoa(int(id)) + "\nevent: stats\ndata: ")
				_, _ = w.Write(b)
				_, _ = w.WriteString("\n\n")
			} else {
				_, _ = w.WriteString(": stats unavailable\n\n")
			}
			_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if w.Flush() != nil {
				return
			}
			select {
			case <-closing:
				return
			case <-t.C:
			}
		}
	}))
	return nil
}

type queueBody struct {
	RatePerSecond   *float64  `json:"rate_per_second"`
	MaxActive       *int64    `json:"max_active"`
	TokenTTLSeconds *int64    `json:"token_ttl_seconds"`
	Paused          *bool     `json:"paused"`
	Closed          *bool     `json:"closed"`
	PlacesPerIP     *int64    `json:"places_per_ip"`
	PowDifficulty   *int      `json:"pow_difficulty"`
	PriorityShare   *float64  `json:"priority_share"`
	AllowedOrigins  *[]string `json:"allowed_origins"`

	// MaxActiveSharePerIP: the share (0..1) of max_active one address may hold.
	MaxActiveSharePerIP *float64 `json:"max_active_share_per_ip"`

	// starts_at and ends_at are RFC 3339 or null (null clears); read raw so that a bad
	// time is a 422 naming the field, not a 400 for the whole body.
	StartsAt json.RawMessage `json:"starts_at"`
	EndsAt   json.RawMessage `json:"ends_at"`
	Method   *queue.Method   `json:"method"`
	// AutoRedirect: the waiting page goes to the order page by itself at admission.
	AutoRedirect *bool `json:"auto_redirect"`
	// Branding (branding.go): strings where null and "" both clear, read raw so that a
	// value of the wrong type is a 422 naming the field.
	BrandName    json.RawMessage `json:"brand_name"`
	BrandColor   json.RawMessage `json:"brand_color"`
	BrandMessage json.RawMessage `json:"brand_message"`
	SupportURL   json.RawMessage `json:"support_url"`
	// The rate mode, the auto controller's bounds and target, the adaptive TTL.
	RateMode           *queue.RateMode `json:"rate_mode"`
	AutoMin            *float64        `json:"auto_min"`
	AutoMax            *float64        `json:"auto_max"`
	AutoTargetP95Ms    *int64          `json:"auto_target_p95_ms"`
	TokenTTLMinSeconds *int64          `json:"token_ttl_min_seconds"`
	TokenTTLHalveAt    *int64          `json:"token_ttl_halve_at"`
}

// queueSettingsJSON is the answer of PUT /admin/api/queues/{queue}.
type queueSettingsJSON struct {
	Name            string   `json:"name"`
	RatePerSecond   float64  `json:"rate_per_second"`
	MaxActive       int64    `json:"max_active"`
	TokenTTLSeconds int64    `json:"token_ttl_seconds"`
	Paused          bool     `json:"paused"`
	Closed          bool     `json:"closed"`
	PlacesPerIP     int64    `json:"places_per_ip"`
	PowDifficulty   int      `json:"pow_difficulty"`
	PriorityShare   float64  `json:"priority_share"`
	AllowedOrigins  []string `json:"allowed_origins"`
	AutoRedirect    bool     `json:"auto_redirect"`

	// MaxActiveSharePerIP: the share of max_active one address may hold.
	MaxActiveSharePerIP float64 `json:"max_active_share_per_ip"`

	rateModeJSON
	RateReason string `json:"rate_reason"`
	dropDayJSON
	brandJSON
}

func (s *Server) putQueue(c *fiber.Ctx) error {
	name := c.Params("queue")
	if !queue.ValidName(name) {
		return errorf(404, "queue_not_found", "Queue names are 1-64 characters of A-Z a-z 0-9 _ -.")
	}
	p, err := parseQueueBody(c.Body())
	if err != nil {
		return err
	}
	_, created, err := s.d.Queue.Put(c.UserContext(), name, p)
	if err != nil {
		return err
	}
	if created {
		s.resyncSoldOut(c.UserContext(), name)
	}
	// The answer is read back rather than taken from Put: it carries the pre-queue's size
	// and what the schedule script stored (a start cleared on a scheduled queue means
	// "start now", stored as the current time).
	st, err := s.d.Queue.Stats(c.UserContext(), name)
	if err != nil {
		return err
	}
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(s.queueSnapshot(c.UserContext(), st))
}

// parseQueueBody reads a partial queue settings body strictly (decodeStrict: exactly the keys
// of queueBody); the queue validates the values.
func parseQueueBody(body []byte) (p queue.SettingsPatch, err error) {
	var b queueBody
	if err := decodeStrict(body, &b); err != nil {
		return queue.SettingsPatch{}, err
	}
	p = queue.SettingsPatch{RatePerSecond: b.RatePerSecond, MaxActive: b.MaxActive, Paused: b.Paused, Closed: b.Closed, PlacesPerIP: b.PlacesPerIP,
		PowDifficulty: b.PowDifficulty, PriorityShare: b.PriorityShare, AllowedOrigins: b.AllowedOrigins,
		AutoRedirect: b.AutoRedirect, MaxActiveSharePerIP: b.MaxActiveSharePerIP}
	if b.TokenTTLSeconds != nil {
		if *b.TokenTTLSeconds < 0 || *b.TokenTTLSeconds > 1<<31 {
			return p, &Error{Status: 422, Code: "invalid_settings", Field: "token_ttl_seconds",
				Message: "token_ttl_seconds must be between " + strconv.Itoa(int(queue.MinTokenTTL.Seconds())) + " and " + strconv.Itoa(int(queue.MaxTokenTTL.Seconds())) + "."}
		}
		d := time.Duration(*b.TokenTTLSeconds) * time.Second
		p.TokenTTL = &d
	}
	p.Method = b.Method
	p.RateMode, p.AutoMin, p.AutoMax, p.TokenTTLHalveAt = b.RateMode, b.AutoMin, b.AutoMax, b.TokenTTLHalveAt
	if b.AutoTargetP95Ms != nil {
		if *b.AutoTargetP95Ms < 0 || *b.AutoTargetP95Ms > 1<<31 {
			return p, &Error{Status: 422, Code: "invalid_settings", Field: "auto_target_p95_ms",
				Message: "auto_target_p95_ms must be between " + strconv.FormatInt(queue.MinAutoTarget.Milliseconds(), 10) + " and " + strconv.FormatInt(queue.MaxAutoTarget.Milliseconds(), 10) + "."}
		}
		d := time.Duration(*b.AutoTargetP95Ms) * time.Millisecond
		p.AutoTargetP95 = &d
	}
	if b.TokenTTLMinSeconds != nil {
		if *b.TokenTTLMinSeconds < 0 || *b.TokenTTLMinSeconds > 1<<31 {
			return p, &Error{Status: 422, Code: "invalid_settings", Field: "token_ttl_min_seconds",
				Message: "token_ttl_min_seconds must be 0 (fixed TTL) or between " + strconv.Itoa(int(queue.MinTokenTTL.Seconds())) + " and token_ttl_seconds."}
		}
		d := time.Duration(*b.TokenTTLMinSeconds) * time.Second
		p.TokenTTLMin = &d
	}
	if p.StartsAt, err = parseTimeField("starts_at", b.StartsAt); err != nil {
		return p, err
	}
	if p.EndsAt, err = parseTimeField("ends_at", b.EndsAt); err != nil {
		return p, err
	}
	if err := parseBrand(&b, &p); err != nil {
		return p, err
	}
	return p, nil
}

// parseTimeField reads an optional time of a settings body: absent → nil (keep), null →
// the zero time (clear), an RFC 3339 string → that time; anything else is a 422 naming the
// field. Times before 1970 are refused here because the zero time means "clear".
func parseTimeField(field string, raw json.RawMessage) (*time.Time, error) {
	if raw == nil {
		return nil, nil
	}
	if string(raw) == "null" {
		return &time.Time{}, nil
	}
	bad := &Error{Status: 422, Code: "invalid_settings", Field: field,
		Message: field + " must be an RFC 3339 time (like 2030-06-01T10:00:00Z) or null."}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, bad
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || t.Year() < 1970 {
		return nil, bad
	}
	return &t, nil
}

type productBody struct {
	Name         *string `json:"name"`
	Price        *int64  `json:"price"`
	Currency     *string `json:"currency"` // ISO 4217, upper-case, from orders' allow-list
	Stock        *int64  `json:"stock"`
	Queue        *string `json:"queue"` // "" takes the product off sale
	MaxPerOrder  *int64  `json:"max_per_order"`
	MaxPerTicket *int64  `json:"max_per_ticket"`
}

func (s *Server) putProduct(c *fiber.Ctx) error {
	id := c.Params("id")
	if !queue.ValidName(id) {
		return errorf(404, "product_not_found", "Product ids are 1-64 characters of A-Z a-z 0-9 _ -.")
	}
	var b productBody
	if err := decodeStrict(c.Body(), &b); err != nil {
		return err
	}
	// The queue the product is sold through before the change: when it moves, the queue it
	// leaves may stop (or start) being sold out too. Two admins moving one product at the
	// same instant may leave a flag stale until the next change or start.
	var before string
	if b.Queue != nil {
		if old, err := s.d.Orders.Product(c.UserContext(), id); err == nil {
			before = old.Queue
		} else if !errors.Is(err, orders.ErrNotFound) {
			return err
		}
	}
	p, created, err := s.d.Orders.PutProduct(c.UserContext(), id, toPatch(b))
	if err != nil {
		return err
	}
	if b.Stock != nil || b.Queue != nil {
		s.resyncSoldOut(c.UserContext(), p.Queue, before)
	}
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(toProductJSON(p))
}

func toPatch(b productBody) orders.ProductPatch {
	return orders.ProductPatch{Name: b.Name, Price: b.Price, Currency: b.Currency, Queue: b.Queue,
		Stock: clampInt(b.Stock), MaxPerOrder: clampInt(b.MaxPerOrder), MaxPerTicket: clampInt(b.MaxPerTicket)}
}

// clampInt narrows a JSON integer to int; a value int cannot hold becomes -1, which every
// field using it refuses as out of range (naming the field).
func clampInt(v *int64) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	if int64(n) != *v {
		n = -1
	}
	return &n
}

// nonNil makes an absent list an empty JSON array.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
