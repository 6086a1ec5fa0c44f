package web

// Revocation (operator role, audited): DELETE /admin/api/keys/{kid} removes a signing key,
// POST /admin/api/queues/{queue}/revoke refuses one admission token from now on (API.md,
// "Keys" and "Token revocation"; openapi.yaml). Each records its own audit entry (key.revoke,
// token.revoke) when it has changed something (revoking a revoked token again does not); the entries hold public key material and a
// token's first auditCodePrefix characters only, never a token or a ticket.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/analytics"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
)

// revokeKey answers DELETE /admin/api/keys/{kid}: 200 with the keys left (GET
// /admin/api/keys's shape); 404 key_not_found for a kid that is not published (revoked
// already, dropped, never made); 409 key_signing for the key that signs now.
func (s *Server) revokeKey(c *fiber.Ctx) error {
	if s.d.Keys == nil {
		return errorf(404, "not_found", "Signed admission tokens are off.")
	}
	kid := c.Params("kid")
	k, err := s.d.Keys.Revoke(c.UserContext(), kid)
	switch {
	case errors.Is(err, admission.ErrUnknownKey):
		return errorf(404, "key_not_found", "No published signing key has this kid (revoked already, dropped, or never made).")
	case errors.Is(err, admission.ErrKeySigning):
		return errorf(409, "key_signing", "This key signs the tokens handed out now: rotate the keys, and revoke it once the new key signs.")
	case err != nil:
		return err
	}
	s.log.Warn().Str("kid", k.Kid).Str("actor", adminActor(c)).Msg("admission: signing key revoked")
	before, _ := json.Marshal(keyJSON{Kid: k.Kid, X: admission.EncodeKey(k.Public),
		CreatedAt: k.Created.UTC().Format(stream.TimeFormat), SignsFrom: k.SignsFrom.UTC().Format(stream.TimeFormat),
		RetiredAt: formatIfSet(k.Retired)})
	s.recordRevocation(c, analytics.AuditEntry{Action: "key.revoke", Target: "key:" + k.Kid, Before: before})
	return c.JSON(s.keysBody())
}

func formatIfSet(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(stream.TimeFormat)
}

// revokeBody is the body of POST /admin/api/queues/{queue}/revoke: exactly one of them.
type revokeBody struct {
	Ticket *string `json:"ticket"`
	JTI    *string `json:"jti"`
}

func invalidRevocation(field, msg string) *Error {
	return &Error{Status: 422, Code: "invalid_revocation", Field: field, Message: msg}
}

// revokeToken answers POST /admin/api/queues/{queue}/revoke {"ticket": "<ticket string>"}
// or {"jti": "<token id>"}: 204, and the token (the ticket's live one, or the token with
// that jti) answers 401 token_revoked on every guard, /api/verify and /api/redeem. The
// body is strict (decodeStrict). 422 invalid_revocation (field ticket or jti) for neither
// or both, a jti that is not a token id, a ticket that is malformed, forged or of another
// queue; 404 queue_not_found, ticket_not_found (the queue does not know the ticket),
// token_not_found (no live token: never issued, used, lapsed, or the ticket holds none).
func (s *Server) revokeToken(c *fiber.Ctx) error {
	name, err := queueParam(c)
	if err != nil {
		return err
	}
	var b revokeBody
	if err := decodeStrict(c.Body(), &b); err != nil {
		return err
	}
	ctx := c.UserContext()
	var r queue.Revocation
	switch {
	case (b.Ticket == nil) == (b.JTI == nil):
		return invalidRevocation("ticket", "Give exactly one of ticket (the ticket string) and jti (the token's id).")
	case b.JTI != nil:
		if !queue.ValidToken(*b.JTI) {
			return invalidRevocation("jti", "jti must be an admission token's id (a UUID, the jti claim of a signed token).")
		}
		if _, err := s.d.Settings.Settings(ctx, name); err != nil {
			return err // queue_not_found
		}
		r, err = s.d.Tokens.RevokeToken(ctx, name, *b.JTI)
	default:
		t, perr := s.d.Signer.Parse(*b.Ticket)
		switch {
		case perr != nil:
			return invalidRevocation("ticket", "ticket must be a ticket string this waiting room issued (queue.id.signature).")
		case t.Queue != name:
			return invalidRevocation("ticket", "This ticket is of queue "+t.Queue+", not "+name+".")
		}
		if _, err := s.d.Settings.Settings(ctx, name); err != nil {
			return err // queue_not_found
		}
		r, err = s.d.Tokens.RevokeTicketToken(ctx, t)
	}
	switch {
	case errors.Is(err, queue.ErrTokenNotLive):
		return errorf(404, "token_not_found", "No live admission token: it was never issued in this queue, was used or has lapsed.")
	case err != nil:
		return err // ticket_not_found, queue_unavailable
	}
	if r.Again {
		return c.SendStatus(fiber.StatusNoContent) // revoked already: no change to record
	}
	sum := sha256.Sum256([]byte(r.Ticket))
	after, _ := json.Marshal(fiber.Map{"ticket_hash": hex.EncodeToString(sum[:]),
		"revoked_until": r.Until.UTC().Format(stream.TimeFormat)})
	s.recordRevocation(c, analytics.AuditEntry{Action: "token.revoke", Target: "token:" + name + "/" + codePrefix(r.Token),
		Queue: name, After: after})
	return c.SendStatus(fiber.StatusNoContent)
}

// recordRevocation adds e to the audit log with the time and the admin token's name.
func (s *Server) recordRevocation(c *fiber.Ctx, e analytics.AuditEntry) {
	if s.d.Audit == nil {
		return
	}
	e.At, e.Actor = time.Now().UTC(), adminActor(c)
	s.d.Audit.Record(e)
}
