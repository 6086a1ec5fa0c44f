package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/notify"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/static"
)

// Reminders are the e-mail reminders (implemented by *notify.Store); nil in Deps when
// e-mail is not configured (WR_SMTP_URL empty): the route answers 404 notify_unavailable
// and the waiting page shows no field.
type Reminders interface {
	Register(ctx context.Context, name, id, raw, addr, lang string) error
	Forget(ctx context.Context, name string, ids ...string) error
	LinkLive(ctx context.Context, name, code string) (bool, error)
	SpendLink(ctx context.Context, name, code string) (string, notify.Kind, error)
}

// The reminder route's rate limits: per address (a mailbox is not flooded by others'
// places), per client address, per queue. Fixed: they bound abuse, not use (a buyer gives
// an address once or twice).
// Each is a burst, then a steady rate: per address 3, then one per 10 minutes; per client
// address 5, then one per 10 s; per queue 200, then 50 per second.
func notifyLimits(addrHash, client, name string) []queue.Limit {
	return []queue.Limit{
		{Scope: "email", Key: "notify:email:" + addrHash, Rate: 1.0 / 600, Burst: 3},
		{Scope: "ip", Key: "notify:ip:" + client, Rate: 1.0 / 10, Burst: 5},
		{Scope: "queue", Key: "notify:queue:" + name, Rate: 50, Burst: 200},
	}
}

type notifyBody struct {
	Email string `json:"email"`
}

// notifyMe registers an e-mail address for the caller's waiting place:
// POST /api/queues/{queue}/notify {"email":"…"} with the ticket → 204. Neither the address
// nor anything made of it but a hash reaches a log line, the metrics or the audit log.
func (s *Server) notifyMe(c *fiber.Ctx) error {
	// Like every route under /api/queues/, the answer names Origin in Vary, so that a cache
	// between the browser and the room never serves one origin's answer to another.
	c.Vary(fiber.HeaderOrigin)
	if s.d.Reminders == nil {
		return errorf(404, "notify_unavailable", "E-mail reminders are not available here.")
	}
	t, raw, err := s.pathTicket(c)
	if err != nil {
		return err
	}
	var b notifyBody
	if err := decodeStrict(c.Body(), &b); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == "invalid_field" && e.Field == "email" {
			return errorf422Email()
		}
		return err
	}
	addr, err := notify.CheckAddress(strings.TrimSpace(b.Email))
	if err != nil {
		return errorf422Email()
	}
	sum := sha256.Sum256([]byte(strings.ToLower(addr)))
	if err := s.check(c, "/api/queues/notify", notifyLimits(hex.EncodeToString(sum[:16]), clientKey(c), t.Queue)); err != nil {
		return err
	}
	lang, _ := s.lang(c)
	switch err := s.d.Reminders.Register(c.UserContext(), t.Queue, t.ID, raw, addr, lang); {
	case errors.Is(err, notify.ErrNotWaiting):
		return errorf(409, "not_waiting", "Reminders are for a place that is waiting in the line; this ticket's place is not (admitted already, or not placed yet).")
	case err != nil:
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func errorf422Email() *Error {
	return &Error{Status: 422, Code: "invalid_field", Field: "email",
		Message: "email must be one e-mail address such as name@example.com (at most 254 characters)."}
}

// forgetReminder drops the registration of a place that left. A failure is logged and
// left to the registration's own expiry.
func (s *Server) forgetReminder(ctx context.Context, name, id string) {
	if s.d.Reminders == nil {
		return
	}
	if err := s.d.Reminders.Forget(ctx, name, id); err != nil {
		s.log.Warn().Err(err).Str("queue", name).Msg("notify: registration of a place that left not deleted; it expires by itself")
	}
}

// backPage is a reminder link's page (GET /q/{queue}/back/{code}): it shows a button that
// spends the link (a POST) and spends nothing itself, since mail scanners follow links.
func (s *Server) backPage(c *fiber.Ctx) error {
	l, t := s.lang(c)
	name, err := queueParam(c)
	data := static.BackPage{Lang: l, T: t, Queue: name}
	if err != nil || s.d.Reminders == nil {
		data.Queue = ""
		return s.render(c, 404, "back", data)
	}
	live, err := s.d.Reminders.LinkLive(c.UserContext(), name, c.Params("code"))
	if err != nil {
		return err
	}
	if !live {
		return s.render(c, 410, "back", data)
	}
	data.Live, data.Action = true, "/q/"+name+"/back/"+c.Params("code")
	// The pages' no-referrer would make the form's POST carry Origin: null, which the
	// same-origin check refuses: this page sends its origin to itself only.
	c.Set("Referrer-Policy", "same-origin")
	return s.render(c, 200, "back", data)
}

// spendBack spends a reminder link (POST /q/{queue}/back/{code}): the place's ticket goes
// into this browser's ticket cookie and the browser is sent to the waiting page, which
// shows the place or, at the turn, the token. A spent or expired link answers 410 with a
// page that says so; it never changes the browser's cookie.
func (s *Server) spendBack(c *fiber.Ctx) error {
	l, t := s.lang(c)
	name, err := queueParam(c)
	data := static.BackPage{Lang: l, T: t, Queue: name}
	if err != nil || s.d.Reminders == nil {
		data.Queue = ""
		return s.render(c, 404, "back", data)
	}
	raw, _, err := s.d.Reminders.SpendLink(c.UserContext(), name, c.Params("code"))
	if errors.Is(err, notify.ErrLinkSpent) {
		data.Spent = true
		return s.render(c, 410, "back", data)
	}
	if err != nil {
		return err
	}
	tk, err := s.d.Signer.Parse(raw)
	if err != nil || tk.Queue != name {
		data.Spent = true
		return s.render(c, 410, "back", data)
	}
	s.setTicketCookie(c, name, raw)
	return c.Redirect("/q/"+name, fiber.StatusSeeOther)
}
