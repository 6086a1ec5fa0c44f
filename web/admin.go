package web

import (
	"bufio"
	"context"
	"encoding/json"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
	"github.com/waitroom/waitroom/topology"
)

// The admin auth middleware (adminAuth) and its roles are in roles.go.

// queueStatsJSON is one queue of the admin stats: its name, every setting (the table's) and
// its live numbers.
type queueStatsJSON struct {
	name     string
	settings queue.Settings
	queueLive
}

func (q queueStatsJSON) MarshalJSON() ([]byte, error) {
	return withSettings(q.name, q.settings, q.queueLive)
}

// queueLive is what the stats show of a queue besides its settings.
type queueLive struct {
	Waiting         int64   `json:"waiting"`
	WaitingPriority int64   `json:"waiting_priority"`
	WaitingBypass   int64   `json:"waiting_bypass"`
	AdmittedTotal   int64   `json:"admitted_total"`
	ActiveTokens    int64   `json:"active_tokens"`
	AdmitRate       float64 `json:"admit_rate"`
	TickLagMs       float64 `json:"tick_lag_ms"`
	Leader          string  `json:"leader"`
	// AdmissionHeld: the leader holds a tick until a Redis replica acknowledges it.
	AdmissionHeld            bool  `json:"admission_held"`
	TokenTTLEffectiveSeconds int64 `json:"token_ttl_effective_seconds"`
	queueState
}

// queueState is a queue's read-only state beside its settings, in its settings answer and
// its stats.
type queueState struct {
	RateReason string  `json:"rate_reason"` // why the rate last changed (the auto controller)
	SoldOut    bool    `json:"sold_out"`    // every product the queue sells has stock 0
	Ended      bool    `json:"ended"`       // ends_at passed and the line was dropped
	Prequeue   int64   `json:"prequeue"`    // the pre-queue's size before the start
	Draw       string  `json:"draw"`        // none | scheduled | drawing | done
	LogoURL    *string `json:"logo_url"`    // null: no logo
}

func stateOf(st queue.Settings, prequeue int64, logoURL *string) queueState {
	return queueState{RateReason: st.RateReason, SoldOut: st.SoldOut, Ended: st.Ended, Prequeue: prequeue,
		Draw: drawPhaseName(st.DrawPhase), LogoURL: logoURL}
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
	Instances         []topology.Instance `json:"instances"`
	SSEConnections    int64               `json:"sse_connections_total"`
	Queues            []queueStatsJSON    `json:"queues"`
	RateLimitRejected map[string]int64    `json:"ratelimit_rejected"`
	ServerTime        string              `json:"server_time"`
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
	logEnd := s.deferAccess(c)
	c.Context().SetBodyStreamWriter(fasthttp.StreamWriter(func(w *bufio.Writer) {
		defer s.releaseAdminStream(actor)
		var sent int64 // the body's bytes, for the access log
		write := func(p string) {
			n, _ := w.WriteString(p)
			sent += int64(n)
		}
		write("retry: 2000\n\n")
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var id int64
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
			b, err := build(ctx)
			cancel()
			if err == nil {
				id++
				write("id: " + itoa(int(id)) + "\nevent: stats\ndata: ")
				write(string(b))
				write("\n\n")
			} else {
				write(": stats unavailable\n\n")
			}
			_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if w.Flush() != nil {
				logEnd(200, sent, "client_closed")
				return
			}
			select {
			case <-closing:
				logEnd(200, sent, "shutdown")
				return
			case <-t.C:
			}
		}
	}))
	return nil
}

// queueSettingsJSON is the answer of PUT /admin/api/queues/{queue}: the queue's name,
// every setting and its read-only state.
type queueSettingsJSON struct {
	name     string
	settings queue.Settings
	queueState
}

func (q queueSettingsJSON) MarshalJSON() ([]byte, error) {
	return withSettings(q.name, q.settings, q.queueState)
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
	if p.Messages != nil {
		if err := s.messages.CheckOverrides(*p.Messages); err != nil {
			return &Error{Status: 422, Code: "invalid_settings", Field: "messages", Message: err.Error()}
		}
	}
	_, created, err := s.d.Settings.Put(c.UserContext(), name, p)
	if err != nil {
		return err
	}
	if created {
		s.judgeSoldOut(c.UserContext(), name)
	}
	// The answer is read back rather than taken from Put: it carries the pre-queue's size
	// and what the schedule script stored (a start cleared on a scheduled queue means
	// "start now", stored as the current time).
	st, err := s.d.Line.Stats(c.UserContext(), name)
	if err != nil {
		return err
	}
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(s.queueSnapshot(c.UserContext(), st))
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
	// A change of stock or queue brings the stock of the queues the product was and is sold
	// through, judged in its transaction.
	p, created, err := s.d.Orders.PutProduct(c.UserContext(), id, toPatch(b))
	if err != nil {
		return err
	}
	s.applySoldOut(c.UserContext(), "a product change", p.Judged...)
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
