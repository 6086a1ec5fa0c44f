package web

import (
	"context"
	"regexp"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/queue"
)

// TokenStore is what the guard needs of the token store (implemented by *queue.Queue).
type TokenStore interface {
	ClaimToken(ctx context.Context, t queue.Ticket, token, reqKey string, idem bool) (queue.Verdict, time.Time, error)
	ConsumeToken(ctx context.Context, t queue.Ticket, token, reqKey string) error
	ReleaseToken(ctx context.Context, t queue.Ticket, token, reqKey string) error
}

// GuardConfig configures Guard.
type GuardConfig struct {
	Tokens TokenStore
	Signer *queue.Signer
	// FailOpen, when set and returning true for a token-store error (Redis down), lets
	// the request through unchecked; the protected handler must then still enforce its
	// own limits (stock, a local rate limit). Off unless set.
	FailOpen func(c *fiber.Ctx, err error) bool
}

// Locals set by Guard for the protected handler.
const (
	LocalTicket   = "wr_ticket_id" // string: the caller's ticket id
	LocalFailOpen = "wr_fail_open" // bool: let through without a check (fail-open mode)
)

var idemKey = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Guard protects a Fiber route with the waiting room's admission tokens. Before the
// handler: the X-Admission-Token must exist, be live and belong to the caller's ticket
// (cookie wr_ticket or Authorization: Bearer) — 401 token_missing / token_invalid /
// token_expired, 403 token_not_yours — and it is claimed for this request so concurrent
// uses of one token cannot both pass. After the handler: the token is consumed only if
// the handler succeeded (no error, status < 400); otherwise the claim is released and the
// token stays usable until its TTL. The handler knows nothing about tokens.
//
// Any Fiber app can use it:
//
//	app.Post("/checkout", web.Guard(web.GuardConfig{Tokens: q, Signer: signer}), checkout)
func Guard(cfg GuardConfig) fiber.Handler {
	return func(c *fiber.Ctx) error {
		token := c.Get("X-Admission-Token")
		if token == "" {
			return errorf(401, "token_missing", "An admission token is required: wait for your turn in the queue.")
		}
		raw, _ := presented(c)
		if raw == "" {
			return errorf(401, "ticket_missing", "The ticket the token was issued to is required (cookie or Authorization: Bearer).")
		}
		t, err := cfg.Signer.Parse(raw)
		if err != nil {
			return err
		}
		key, idem := c.Get("Idempotency-Key"), true
		if key == "" {
			key, idem = "r-"+newID(), false
		} else if !idemKey.MatchString(key) {
			return errorf(422, "invalid_idempotency_key", "Idempotency-Key must be 1-128 characters of A-Z a-z 0-9 _ . -")
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		v, _, err := cfg.Tokens.ClaimToken(ctx, t, token, key, idem)
		cancel()
		if err != nil {
			if cfg.FailOpen != nil && cfg.FailOpen(c, err) {
				c.Locals(LocalTicket, t.ID)
				c.Locals(LocalFailOpen, true)
				return c.Next()
			}
			return err
		}
		switch v {
		case queue.TokenLive, queue.TokenShared, queue.TokenReplay:
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
		c.Locals(LocalTicket, t.ID)
		herr := c.Next()
		ok := herr == nil && c.Response().StatusCode() < 400
		// Outlive the request: a client that hangs up must not leave the claim behind.
		bctx, bcancel := context.WithTimeout(context.Background(), 2*time.Second)
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
