package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
)

// jwksMaxAge is how long a verifier may cache the key set: well under the publish delay
// of a new key (WR_KEY_PUBLISH_DELAY, 60 s by default), so a cache is fresh before the key
// signs.
const jwksMaxAge = 15 * time.Second

// jwks answers GET /.well-known/jwks.json from this instance's copy of the keys.
func (s *Server) jwks(c *fiber.Ctx) error {
	if s.d.Keys == nil {
		return errorf(404, "not_found", "Signed admission tokens are off.")
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	c.Set(fiber.HeaderCacheControl, "public, max-age="+strconv.Itoa(int(jwksMaxAge.Seconds())))
	return c.Send(s.d.Keys.JWKS())
}

// verify answers GET /api/verify for a gateway (nginx auth_request): 204 when the token
// may be used now by this caller (for X-Waitroom-Queue when sent), else the guard's
// refusal. The token is never claimed or consumed.
func (s *Server) verify(c *fiber.Ctx) error {
	var queues []string
	if q := c.Get("X-Waitroom-Queue"); q != "" {
		if !queue.ValidName(q) {
			return errWrongQueue()
		}
		queues = []string{q}
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), guardTimeout)
	defer cancel()
	_, err := s.gate().Check(ctx, gateRequest(c), queues)
	var rf *admission.Refusal
	if errors.As(err, &rf) {
		return refusal(rf)
	}
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

type redeemedJSON struct {
	Queue      string `json:"queue"`
	TicketHash string `json:"ticket_hash"`
	ExpiresAt  string `json:"expires_at"`
}

// redeem answers POST /api/redeem for a shop's backend after the redirect flow: a signed
// token is used up the first time (200), 409 token_used after; no ticket is needed, the
// token's own claims name it.
func (s *Server) redeem(c *fiber.Ctx) error {
	raw := c.Get("X-Admission-Token")
	if raw == "" {
		return refusal(&admission.Refusal{Status: 401, Code: "token_missing", Message: "An admission token is required."})
	}
	if s.d.Keys == nil {
		return errorf(401, "token_invalid", "Signed admission tokens are off.")
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), guardTimeout)
	defer cancel()
	claims, err := s.d.Keys.Verify(ctx, raw)
	switch {
	case errors.Is(err, queue.ErrUnavailable):
		return err
	case errors.Is(err, admission.ErrExpired):
		return errorf(401, "token_expired", "This admission token has expired.")
	case errors.Is(err, admission.ErrKeyRevoked):
		return errorf(401, "token_revoked", "The key that signed this admission token was revoked by the operator.")
	case err != nil:
		return errorf(401, "token_invalid", "This admission token is not valid here.")
	}
	t := queue.Ticket{Queue: claims.Audience, ID: claims.Subject}
	if revoked, err := s.d.Tokens.TokenRevoked(ctx, t, claims.ID); err != nil {
		return err
	} else if revoked {
		return errorf(401, "token_revoked", "This admission token was revoked by the operator.")
	}
	key := "redeem-" + newID()
	v, exp, err := s.d.Tokens.ClaimToken(ctx, t, claims.ID, key, false)
	if err != nil {
		return err
	}
	switch v {
	case queue.TokenLive:
	case queue.TokenUsed, queue.TokenReplay:
		return errorf(409, "token_used", "This admission token was used already.")
	case queue.TokenBusy, queue.TokenShared:
		// An order is using it right now; if that order fails the token is usable again.
		return &Error{Status: 409, Code: "token_in_use", RetryAfter: 1,
			Message: "This admission token is being used by another request; try again in a moment."}
	case queue.TokenExpired:
		return errorf(401, "token_expired", "This admission token has expired.")
	default:
		return errorf(401, "token_invalid", "Unknown admission token.")
	}
	if err := s.d.Tokens.ConsumeToken(context.WithoutCancel(ctx), t, claims.ID, key); err != nil {
		_ = s.d.Tokens.ReleaseToken(context.WithoutCancel(ctx), t, claims.ID, key)
		return err
	}
	sum := sha256.Sum256([]byte(claims.Subject))
	return c.JSON(redeemedJSON{Queue: claims.Audience, TicketHash: hex.EncodeToString(sum[:]),
		ExpiresAt: exp.UTC().Format(stream.TimeFormat)})
}

type keyJSON struct {
	Kid       string `json:"kid"`
	X         string `json:"x"`
	CreatedAt string `json:"created_at"`
	SignsFrom string `json:"signs_from"`
	RetiredAt string `json:"retired_at,omitempty"`
}

type keysJSON struct {
	Signing string    `json:"signing"`
	Keys    []keyJSON `json:"keys"`
}

func (s *Server) keysBody() keysJSON {
	out := keysJSON{Signing: s.d.Keys.Signing(), Keys: []keyJSON{}}
	for _, k := range s.d.Keys.Keys() {
		j := keyJSON{Kid: k.Kid, X: admission.EncodeKey(k.Public),
			CreatedAt: k.Created.UTC().Format(stream.TimeFormat), SignsFrom: k.SignsFrom.UTC().Format(stream.TimeFormat)}
		if !k.Retired.IsZero() {
			j.RetiredAt = k.Retired.UTC().Format(stream.TimeFormat)
		}
		out.Keys = append(out.Keys, j)
	}
	return out
}

// listKeys answers GET /admin/api/keys.
func (s *Server) listKeys(c *fiber.Ctx) error {
	if s.d.Keys == nil {
		return errorf(404, "not_found", "Signed admission tokens are off.")
	}
	return c.JSON(s.keysBody())
}

// rotateKeys answers POST /admin/api/keys/rotate.
func (s *Server) rotateKeys(c *fiber.Ctx) error {
	if s.d.Keys == nil {
		return errorf(404, "not_found", "Signed admission tokens are off.")
	}
	k, err := s.d.Keys.Rotate(c.UserContext())
	if err != nil {
		return err
	}
	s.log.Info().Str("kid", k.Kid).Time("signs_from", k.SignsFrom).Msg("admission: signing key rotated")
	return c.JSON(s.keysBody())
}

// gate is the guard logic for this server's endpoints.
func (s *Server) gate() *admission.Gate {
	return &admission.Gate{Tokens: s.d.Tokens, Tickets: s.d.Signer, Keys: s.d.Keys, RejectBare: !s.d.AcceptBareTokens}
}
