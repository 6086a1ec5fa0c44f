package web

// The audit of admin changes: a middleware on every changing admin route (so the handlers
// stay as they are) snapshots the target's state before the handler runs and, when the
// answer is a success (status < 400) and the state changed, records before → after with the
// admin token's name (a request that stores what was there records nothing).
// Invite codes, tokens and secrets never go into an entry: invites.create records how many
// codes of which lane until when, invite.revoke the code's first auditCodePrefix characters.

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/analytics"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
)

// AuditLog is what web needs of the audit log (implemented by *analytics.AuditLog).
type AuditLog interface {
	Record(e analytics.AuditEntry)
	List(ctx context.Context, limit int, queueName string) ([]analytics.AuditEntry, error)
}

// auditTarget is what a changing admin route changes.
type auditTarget int

const (
	auditQueue      auditTarget = iota // PUT /queues/:queue
	auditLogo                          // PUT and DELETE /queues/:queue/logo
	auditProduct                       // PUT /products/:id
	auditInvites                       // POST /queues/:queue/invites
	auditInviteCode                    // DELETE /queues/:queue/invites/:code
	auditKeys                          // POST /keys/rotate
	auditLimits                        // PUT /limits
	auditPage                          // PUT and DELETE /queues/:queue/template
)

// auditCodePrefix is how much of a revoked invite code the log keeps: enough to tell codes
// apart in a list, far too little to use one.
const auditCodePrefix = 6

// audit records the change the route's handler makes (see the top of this file).
func (s *Server) audit(t auditTarget) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if s.d.Audit == nil {
			return c.Next()
		}
		ctx := c.UserContext()
		name := c.Params("queue")
		before := s.auditSnapshot(ctx, c, t)
		if err := c.Next(); err != nil {
			return err
		}
		status := c.Response().StatusCode()
		if status >= 400 {
			return nil
		}
		e := analytics.AuditEntry{At: time.Now().UTC(), Actor: adminActor(c), Before: before}
		created := status == fiber.StatusCreated
		switch t {
		case auditQueue:
			e.Action, e.Target, e.Queue = pick(created, "queue.create", "queue.update"), "queue:"+name, name
			e.After = s.auditSnapshot(ctx, c, t)
		case auditLogo:
			e.Target, e.Queue = "queue:"+name, name
			if c.Method() == fiber.MethodDelete {
				e.Action, e.After = "queue.logo.delete", s.auditSnapshot(ctx, c, t)
			} else {
				e.Action, e.After = "queue.logo.update", responseJSON(c)
			}
		case auditPage:
			// The source of every version is kept (after), so an earlier page can be put back.
			e.Target, e.Queue = "queue:"+name, name
			e.Action = pick(c.Method() == fiber.MethodDelete, "queue.template.delete", "queue.template.update")
			e.After = s.auditSnapshot(ctx, c, t)
		case auditProduct:
			e.Action, e.Target = pick(created, "product.create", "product.update"), "product:"+c.Params("id")
			e.After = responseJSON(c)
			e.Queue = productQueue(e.After)
			if e.Queue == "" {
				e.Queue = productQueue(e.Before)
			}
		case auditInvites:
			e.Action, e.Target, e.Queue = "invites.create", "queue:"+name, name
			e.After = invitesSummary(c.Response().Body())
		case auditInviteCode:
			code := codePrefix(c.Params("code"))
			e.Action, e.Target, e.Queue = "invite.revoke", "invite:"+name+"/"+code, name
		case auditKeys:
			e.Action, e.Target, e.After = "keys.rotate", "keys", responseJSON(c)
		case auditLimits:
			e.Action, e.Target, e.After = "limits.update", "limits", responseJSON(c)
		}
		if !created && unchanged(t, e.Before, e.After) {
			return nil // the request stored what was there: nothing to record
		}
		s.d.Audit.Record(e)
		return nil
	}
}

// auditReadOnly are the keys of a queue's snapshot that no request sets (the line's own
// state): a difference in them alone is not a change made by the request.
var auditReadOnly = []string{"sold_out", "ended", "prequeue", "draw", "rate_reason"}

// unchanged reports whether a successful request left its target as it was: a queue, a
// product or the limits whose state after equals the state before, or a logo stored again
// with the same bytes (the same URL). Revocations, rotations and new invites always change
// something. A state that could not be read (nil) counts as a change.
func unchanged(t auditTarget, before, after json.RawMessage) bool {
	switch t {
	case auditQueue, auditProduct, auditLimits:
		return sameJSON(before, after, auditReadOnly...)
	case auditLogo:
		return sameJSON(before, after, "type", "bytes") // PUT answers these too
	case auditPage:
		return sameJSON(before, after, "version") // a save of the same source
	}
	return false
}

// sameJSON reports whether two JSON objects hold the same values, leaving out the keys
// ignore; false when either is missing or not an object.
func sameJSON(a, b json.RawMessage, ignore ...string) bool {
	var ma, mb map[string]any
	if a == nil || b == nil || json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil || ma == nil || mb == nil {
		return false
	}
	for _, k := range ignore {
		delete(ma, k)
		delete(mb, k)
	}
	return reflect.DeepEqual(ma, mb)
}

func pick(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}

// auditSnapshot is the target's state now as JSON (nil: none, or not kept). A failed read
// records null rather than failing the change (the handler reports Redis or PostgreSQL
// trouble itself).
func (s *Server) auditSnapshot(ctx context.Context, c *fiber.Ctx, t auditTarget) json.RawMessage {
	var v any
	switch t {
	case auditQueue:
		name := c.Params("queue")
		if !queue.ValidName(name) {
			return nil
		}
		st, err := s.d.Line.Stats(ctx, name)
		if err != nil {
			return nil
		}
		v = s.queueSnapshot(ctx, st)
	case auditLogo:
		name := c.Params("queue")
		if !queue.ValidName(name) {
			return nil
		}
		etag, err := s.d.Logos.LogoETag(ctx, name)
		if err != nil {
			return nil
		}
		var u *string
		if etag != "" {
			l := logoURL(name, etag)
			u = &l
		}
		v = fiber.Map{"logo_url": u}
	case auditPage:
		v = s.pageSnapshot(ctx, c.Params("queue"))
	case auditProduct:
		id := c.Params("id")
		if !queue.ValidName(id) {
			return nil
		}
		p, err := s.d.Orders.Product(ctx, id)
		if err != nil {
			return nil // orders.ErrNotFound: a new product (or a failed read)
		}
		v = toProductJSON(p)
	case auditKeys:
		if s.d.Keys == nil {
			return nil
		}
		v = s.keysBody() // public keys only
	case auditLimits:
		v = s.lim.Get()
	default: // invites: not kept
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// queueSnapshot is a queue's settings as PUT /admin/api/queues/{queue} answers them.
func (s *Server) queueSnapshot(ctx context.Context, st queue.QueueStats) queueSettingsJSON {
	return queueSettingsJSON{name: st.Name, settings: st.Settings, queueState: stateOf(st.Settings, st.Prequeue, s.logoOf(ctx, st.Name))}
}

// responseJSON is a copy of the JSON answer (the state after the change), nil when the
// answer is not JSON.
func responseJSON(c *fiber.Ctx) json.RawMessage {
	b := c.Response().Body()
	if !json.Valid(b) {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// productQueue is the queue a product JSON names ("" for none).
func productQueue(raw json.RawMessage) string {
	var p struct {
		Queue *string `json:"queue"`
	}
	if json.Unmarshal(raw, &p) != nil || p.Queue == nil {
		return ""
	}
	return *p.Queue
}

// invitesSummary is what the log keeps of new invites: how many, which lane, how many uses
// each and until when — never the codes (or their URLs).
func invitesSummary(body []byte) json.RawMessage {
	var l inviteListJSON
	if json.Unmarshal(body, &l) != nil || len(l.Invites) == 0 {
		return nil
	}
	first := l.Invites[0]
	b, _ := json.Marshal(fiber.Map{"count": len(l.Invites), "lane": first.Lane, "max_uses": first.UsesLeft,
		"expires_at": first.ExpiresAt})
	return b
}

type auditEntryJSON struct {
	At     string          `json:"at"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// auditList answers GET /admin/api/audit?limit=&queue=.
func (s *Server) auditList(c *fiber.Ctx) error {
	args := c.Context().QueryArgs()
	limit := 100
	if args.Has("limit") {
		n, err := strconv.Atoi(c.Query("limit"))
		if err != nil || n < 1 || n > analytics.AuditMaxLimit {
			return &Error{Status: 422, Code: "invalid_limit", Field: "limit",
				Message: "limit must be a whole number from 1 to " + strconv.Itoa(analytics.AuditMaxLimit) + "."}
		}
		limit = n
	}
	name := c.Query("queue")
	if args.Has("queue") && !queue.ValidName(name) {
		return &Error{Status: 422, Code: "invalid_queue", Field: "queue",
			Message: "queue must be a queue name: 1-64 characters of A-Z a-z 0-9 _ -."}
	}
	if s.d.Audit == nil {
		return errorf(501, "not_implemented", "The audit log is not configured on this instance.")
	}
	entries, err := s.d.Audit.List(c.UserContext(), limit, name)
	if errors.Is(err, analytics.ErrUnavailable) {
		return &Error{Status: 503, Code: "database_unavailable", RetryAfter: 2,
			Message: "The audit log is unavailable right now; try again shortly."}
	}
	if err != nil {
		return err
	}
	out := struct {
		Entries []auditEntryJSON `json:"entries"`
	}{Entries: make([]auditEntryJSON, len(entries))}
	null := json.RawMessage("null")
	for i, e := range entries {
		j := auditEntryJSON{At: e.At.UTC().Format(stream.TimeFormat), Actor: e.Actor, Action: e.Action,
			Target: e.Target, Before: e.Before, After: e.After}
		if j.Before == nil {
			j.Before = null
		}
		if j.After == nil {
			j.After = null
		}
		out.Entries[i] = j
	}
	return c.JSON(out)
}
