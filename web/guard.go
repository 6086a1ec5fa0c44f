package web

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/queue"
)

// TokenStore is what the guard needs of the token store (implemented by *queue.Queue).
type TokenStore = admission.TokenStore

// GuardConfig configures Guard. A route declares which queue(s) admit to it: Queues, or
// QueuesFor when it depends on the request.
type GuardConfig struct {
	Tokens TokenStore
	Signer *queue.Signer
	// Keys verifies signed admission tokens (JWS); nil accepts only bare tokens.
	Keys *admission.KeyRing
	// RejectBare refuses bare UUID tokens (docs/UPGRADING.md, mixed versions).
	RejectBare bool
	// Queues are the queues whose admission tokens this route accepts.
	Queues []string
	// QueuesFor, when set, names the accepted queues for one request (the built-in order
	// route: the queue of the product in the body); an error it returns is the answer.
	QueuesFor func(c *fiber.Ctx) ([]string, error)
	// FailOpen, when set and returning true for a token-store error (Redis down), lets
	// the request through unchecked; the protected handler must then still enforce its
	// own limits (stock, a local rate limit). Off unless set.
	FailOpen func(c *fiber.Ctx, err error) bool
	// Health, when set, measures the protected handler for the auto rate controller: its
	// latency and whether it failed (5xx), per admitting queue. The guard's own refusals
	// are not measured.
	Health *Health
}

// Locals set by Guard for the protected handler.
const (
	LocalTicket   = "wr_ticket_id" // string: the caller's ticket id
	LocalQueue    = "wr_queue"     // string: the queue that admitted the caller
	LocalFailOpen = "wr_fail_open" // bool: let through without a check (fail-open mode)
)

var idemKey = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// guardTimeout bounds each token-store call of the guard.
const guardTimeout = 2 * time.Second

// Guard protects a Fiber route with the waiting room's admission tokens. Before the
// handler: the X-Admission-Token must exist, verify (a signed token: our key, EdDSA, our
// issuer, not expired), be live, have been admitted by one of the route's queues and
// belong to the caller's ticket (that queue's cookie wr_ticket_<queue>, or Authorization:
// Bearer) — 401 token_missing / token_invalid / token_expired, 403 token_wrong_queue /
// token_not_yours — and it is claimed for this request so concurrent uses of one token
// cannot both pass. After the handler: the token is consumed only if the handler
// succeeded (no error, status < 400); otherwise the claim is released and the token stays
// usable until its TTL. The handler knows nothing about tokens. (web/httpguard is the same
// for net/http.)
//
// Any Fiber app can use it:
//
//	app.Post("/checkout", web.Guard(web.GuardConfig{Tokens: q, Signer: signer, Keys: keys, Queues: []string{"drop"}}), checkout)
//
// It panics when no queue admits to the route (a wiring mistake, found at start).
func Guard(cfg GuardConfig) fiber.Handler {
	if len(cfg.Queues) == 0 && cfg.QueuesFor == nil {
		panic("web.Guard: no queue admits to this route: set GuardConfig.Queues")
	}
	gate := &admission.Gate{Tokens: cfg.Tokens, Tickets: cfg.Signer, Keys: cfg.Keys, RejectBare: cfg.RejectBare}
	return func(c *fiber.Ctx) error {
		if c.Get("X-Admission-Token") == "" {
			return refusal(&admission.Refusal{Status: 401, Code: "token_missing", Message: "An admission token is required: wait for your turn in the queue."})
		}
		queues := cfg.Queues
		if cfg.QueuesFor != nil {
			var err error
			if queues, err = cfg.QueuesFor(c); err != nil {
				return err
			}
		}
		key, idem := c.Get("Idempotency-Key"), true
		if key == "" {
			key, idem = "r-"+newID(), false
		} else if !idemKey.MatchString(key) {
			return &Error{Status: 422, Code: "invalid_idempotency_key", Field: "Idempotency-Key",
				Message: "Idempotency-Key must be 1-128 characters of A-Z a-z 0-9 _ . -"}
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), guardTimeout)
		pass, err := gate.Claim(ctx, gateRequest(c), queues, key, idem)
		cancel()
		var rf *admission.Refusal
		switch {
		case errors.As(err, &rf):
			return refusal(rf)
		case err != nil:
			if cfg.FailOpen != nil && cfg.FailOpen(c, err) {
				c.Locals(LocalTicket, pass.Ticket.ID)
				c.Locals(LocalQueue, pass.Ticket.Queue)
				c.Locals(LocalFailOpen, true)
				return measure(c, cfg.Health, pass.Ticket.Queue)
			}
			return err
		}
		c.Locals(LocalTicket, pass.Ticket.ID)
		c.Locals(LocalQueue, pass.Ticket.Queue)
		herr := measure(c, cfg.Health, pass.Ticket.Queue)
		ok := herr == nil && c.Response().StatusCode() < 400
		// Outlive the request: a client that hangs up must not leave the claim behind. A
		// failed consume leaves the token to lapse at its TTL; a repeat with the same key is
		// answered from the order store.
		bctx, bcancel := context.WithTimeout(context.Background(), guardTimeout)
		defer bcancel()
		_ = gate.Settle(bctx, pass, ok)
		return herr
	}
}

// measure runs the protected handler and counts it in h (when set): its latency and
// whether it failed — a 5xx answer, or an error the error handler will answer with 5xx
// (the database pool busy, a timeout, anything unexpected). 4xx answers are the caller's.
func measure(c *fiber.Ctx, h *Health, queueName string) error {
	if h == nil {
		return c.Next()
	}
	start := time.Now()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		status = mapError(err).Status
	}
	h.Observe(queueName, time.Since(start), status >= 500)
	return err
}

// gateRequest is what a Fiber request presents to the gate.
func gateRequest(c *fiber.Ctx) admission.Request {
	return admission.Request{
		Token:  c.Get("X-Admission-Token"),
		Ticket: explicitTicket(c),
		Cookie: func(name string) string { return c.Cookies(name) },
		Cookies: func(yield func(name, value string)) {
			c.Request().Header.VisitAllCookie(func(k, v []byte) { yield(string(k), string(v)) })
		},
	}
}

// refusal is the gate's answer in the error shape.
func refusal(r *admission.Refusal) *Error {
	return &Error{Status: r.Status, Code: r.Code, Message: r.Message, RetryAfter: r.RetryAfter}
}

func errWrongQueue() *Error { return refusal(admission.WrongQueue()) }
