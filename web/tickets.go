package web

import (
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/queue"
)

// Ticket cookies. Each queue has its own (wr_ticket_<queue>), so one browser keeps a place
// in every queue it joined. The single cookie wr_ticket is set and read too, for instances
// that know only it (docs/UPGRADING.md, mixed versions); it lives one day.
const (
	TicketCookiePrefix = admission.TicketCookiePrefix
	LegacyTicketCookie = admission.LegacyTicketCookie
)

// TicketCookie is the name of queue's ticket cookie (queue names are valid cookie names).
func TicketCookie(queue string) string { return admission.TicketCookie(queue) }

// bearer returns the ticket of an Authorization: Bearer header, else "".
func bearer(c *fiber.Ctx) string {
	if a := c.Get(fiber.HeaderAuthorization); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// explicitTicket is a ticket the client sent on purpose: Authorization: Bearer, then
// ?ticket= (EventSource cannot set headers).
func explicitTicket(c *fiber.Ctx) string {
	if b := bearer(c); b != "" {
		return b
	}
	return c.Query("ticket")
}

// presentedFor returns the ticket a request carries for queue name and whether it came from
// a cookie: an explicit ticket, else the queue's cookie, else the legacy cookie when it
// holds a valid ticket of this queue.
func presentedFor(c *fiber.Ctx, signer *queue.Signer, name string) (raw string, fromCookie bool) {
	if raw := explicitTicket(c); raw != "" {
		return raw, false
	}
	if raw := c.Cookies(TicketCookie(name)); raw != "" {
		return raw, true
	}
	if raw := c.Cookies(LegacyTicketCookie); raw != "" {
		if t, err := signer.Parse(raw); err == nil && t.Queue == name {
			return raw, true
		}
	}
	return "", false
}

// cookieTickets lists the valid tickets of every ticket cookie the request carries (each
// queue's and the legacy one).
func cookieTickets(c *fiber.Ctx, signer *queue.Signer) []queue.Ticket {
	var out []queue.Ticket
	c.Request().Header.VisitAllCookie(func(k, v []byte) {
		name := string(k)
		if name != LegacyTicketCookie && !strings.HasPrefix(name, TicketCookiePrefix) {
			return
		}
		if t, err := signer.Parse(string(v)); err == nil && !slices.Contains(out, t) {
			out = append(out, t)
		}
	})
	return out
}

// anyTicket is the request's ticket when the queue is not known yet (the per-ticket order
// limit runs before the guard): the explicit one, else the first valid cookie ticket.
func anyTicket(c *fiber.Ctx, signer *queue.Signer) (queue.Ticket, bool) {
	if raw := explicitTicket(c); raw != "" {
		t, err := signer.Parse(raw)
		return t, err == nil
	}
	if ts := cookieTickets(c, signer); len(ts) > 0 {
		return ts[0], true
	}
	return queue.Ticket{}, false
}
