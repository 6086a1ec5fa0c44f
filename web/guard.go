package web

import (
	"context"
	"regexp"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/queue"
)

// TokenStore is what the guard needs of the token store (implemented by *queue.Queue).
type TokenStore interface {
	ClaimToken(ctx context.Context, t queue.Ticket, token, reqKey string, idem bool) (queue.Verdict, time.Time, error)
	CheckToken(ctx context.Context, t queue.Ticket, token string) (queue.Verdict, time.Time, error)
	ConsumeToken(ctx context.Context, t queue.Ticket, token, reqKey string) error
	ReleaseToken(ctx context.Context, t queue.Ticket, token, reqKey string) error
}

// GuardConfig configures Guard. A route declares which queue(s) admit to it: Queues, or
// QueuesFor when it depends on the request.
type GuardConfig struct {
	Tokens TokenStore
	Signer *queue.Signer
	// Queues are the queues whose admission tokens this route accepts.
	Queues []string
	// QueuesFor, when set, names the accepted queues for one request (the built-in order
	// route: the queue of the product in the body); an error it returns is the answer.
	QueuesFor func(c *fiber.Ctx) ([]string, error)
	// FailOpen, when set and returning true for a token-store error (Redis down), lets
	// the request through unchecked; the protected handler must then still enforce its
	// own limits (stock, a local rate limit). Off unless set.
	FailOpen func(c *fiber.Ctx, err error) bool
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
// handler: the X-Admission-Token must exist, be live, have been admitted by one of the
// route's queues and belong to the caller's ticket (that queue's cookie wr_ticket_<queue>,
// or Authorization: Bearer) — 401 token_missing / token_invalid / token_expired, 403
// token_wrong_queue / token_not_yours — and it is claimed for this request so concurrent
// uses of one token cannot both pass. After the handler: the token is consumed only if the
// handler succeeded (no error, status < 400); otherwise the claim is released and the token
// stays usable until its TTL. The handler knows nothing about tokens.
//
// Any Fiber app can use it:
//
//	app.Post("/checkout", web.Guard(web.GuardConfig{Tokens: q, Signer: signer, Queues: []string{"drop"}}), checkout)
//
// It panics when no queue admits to the route (a wiring mistake, found at start).
func Guard(cfg GuardConfig) fiber.Handler {
	if len(cfg.Queues) == 0 && cfg.QueuesFor == nil {
		panic("web.Guard: no queue admits to this route: set GuardConfig.Queues")
	}
	return func(c *fiber.Ctx) error {
		token := c.Get("X-Admission-Token")
		if token == "" {
			return errorf(401, "token_missing", "An admission token is required: wait for your turn in the queue.")
		}
		queues := cfg.Queues
		if cfg.QueuesFor != nil {
			var err error
			if queues, err = cfg.QueuesFor(c); err != nil {
				return err
			}
		}
		tickets, err := guardTickets(c, cfg.Signer, queues)
		if err != nil {
			return err
		}
		key, idem := c.Get("Idempotency-Key"), true
		if key == "" {
			key, idem = "r-"+newID(), false
		} else if !idemKey.MatchString(key) {
			return &Error{Status: 422, Code: "invalid_idempotency_key", Field: "Idempotency-Key",
				Message: "Idempotency-Key must be 1-128 characters of A-Z a-z 0-9 _ . -"}
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), guardTimeout)
		// The token belongs to one of the caller's tickets for the route's queues: try
		// them in turn (an unknown verdict claims nothing).
		var t queue.Ticket
		var v queue.Verdict
		for _, t = range tickets {
			if v, _, err = cfg.Tokens.ClaimToken(ctx, t, token, key, idem); err != nil || v != queue.TokenUnknown {
				break
			}
		}
		if err == nil && v == queue.TokenUnknown && tokenOfOtherQueue(ctx, c, cfg, queues, token) {
			v = tokenWrongQueue
		}
		cancel()
		if err != nil {
			if cfg.FailOpen != nil && cfg.FailOpen(c, err) {
				c.Locals(LocalTicket, t.ID)
				c.Locals(LocalQueue, t.Queue)
				c.Locals(LocalFailOpen, true)
				return c.Next()
			}
			return err
		}
		if err := verdictError(v); err != nil {
			return err
		}
		c.Locals(LocalTicket, t.ID)
		c.Locals(LocalQueue, t.Queue)
		herr := c.Next()
		ok := herr == nil && c.Response().StatusCode() < 400
		// Outlive the request: a client that hangs up must not leave the claim behind.
		bctx, bcancel := context.WithTimeout(context.Background(), guardTimeout)
		defer bcancel()
		switch {
		case ok && v != queue.TokenReplay:
			if err := cfg.Tokens.ConsumeToken(bctx, t, token, key); err != nil {
				// The order exists; the token lapses at its TTL at the latest and a
				// repeat with the same key is answered from the order store.
				return herr
			}
		case !ok && v == queue.TokenLive:
			_ = cfg.Tokens.ReleaseToken(bctx, t, token, key)
		}
		return herr
	}
}

// tokenWrongQueue is the guard's own verdict for a token another queue admitted.
const tokenWrongQueue queue.Verdict = "wrong_queue"

func errWrongQueue() *Error {
	return errorf(403, "token_wrong_queue", "This admission token was given by another queue than the one that sells this.")
}

func verdictError(v queue.Verdict) error {
	switch v {
	case queue.TokenLive, queue.TokenShared, queue.TokenReplay:
		return nil
	case tokenWrongQueue:
		return errWrongQueue()
	case queue.TokenExpired:
		return errorf(401, "token_expired", "Your admission token has expired; join the queue again.")
	case queue.TokenNotYours:
		return errorf(403, "token_not_yours", "This admission token was issued to another ticket.")
	case queue.TokenBusy:
		return errorf(401, "token_invalid", "This admission token is being used by another request.")
	case queue.TokenUsed:
		return errorf(401, "token_invalid", "This admission token has already been used.")
	default:
		return errorf(401, "token_invalid", "Unknown admission token.")
	}
}

// guardTickets are the caller's tickets for the route's queues: an explicit ticket (Bearer)
// must be of one of them; else each queue's cookie that holds a valid ticket of that queue.
// A caller whose only tickets are of other queues is answered 403 token_wrong_queue (its
// token cannot have come from here).
func guardTickets(c *fiber.Ctx, signer *queue.Signer, queues []string) ([]queue.Ticket, error) {
	if raw := explicitTicket(c); raw != "" {
		t, err := signer.Parse(raw)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(queues, t.Queue) {
			return nil, errWrongQueue()
		}
		return []queue.Ticket{t}, nil
	}
	var out []queue.Ticket
	for _, q := range queues {
		raw, _ := presentedFor(c, signer, q)
		if t, err := signer.Parse(raw); err == nil && t.Queue == q {
			out = append(out, t)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	if len(cookieTickets(c, signer)) > 0 {
		return nil, errWrongQueue()
	}
	return nil, errorf(401, "ticket_missing", "The ticket the token was issued to is required (cookie or Authorization: Bearer).")
}

// maxOtherChecks bounds the Redis calls an unknown token may cost: a Cookie header could
// carry dozens of valid tickets.
const maxOtherChecks = 4

// tokenOfOtherQueue reports whether a token unknown in the route's queues is live for a
// ticket cookie of another queue (a token of queue A presented to a route of queue B by a
// browser that waited in both). Only unknown tokens pay for this look, and only for
// cookies named after their ticket's queue, at most maxOtherChecks of them.
func tokenOfOtherQueue(ctx context.Context, c *fiber.Ctx, cfg GuardConfig, queues []string, token string) bool {
	checked := 0
	for _, o := range cookieTickets(c, cfg.Signer) {
		if slices.Contains(queues, o.Queue) || c.Cookies(TicketCookie(o.Queue)) == "" {
			continue
		}
		if checked++; checked > maxOtherChecks {
			return false
		}
		if v, _, err := cfg.Tokens.CheckToken(ctx, o, token); err == nil && v != queue.TokenUnknown {
			return true
		}
	}
	return false
}
