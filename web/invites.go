package web

import (
	"errors"
	"net/url"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
	"github.com/waitroom/waitroom/trust"
)

// Invite administration: POST / GET /admin/api/queues/{queue}/invites, DELETE
// /admin/api/queues/{queue}/invites/{code} (API.md "Invites"; openapi.yaml
// schemas Invite, InviteList).

type inviteBody struct {
	Count     *int64  `json:"count"`
	Lane      *string `json:"lane"`
	MaxUses   *int64  `json:"max_uses"`
	ExpiresAt *string `json:"expires_at"`
}

type inviteJSON struct {
	Code      string     `json:"code"`
	URL       string     `json:"url"`
	Lane      queue.Lane `json:"lane"`
	UsesLeft  int64      `json:"uses_left"`
	ExpiresAt string     `json:"expires_at"`
	// Redacted: the list was read with a viewer's token, which sees no usable code (an
	// invite skips the line): code is its first 6 characters and "…", url is "".
	Redacted bool `json:"redacted,omitempty"`
}

type inviteListJSON struct {
	Invites []inviteJSON `json:"invites"`
}

// invalidInvites is the 422 for a refused invite request.
func invalidInvites(field, msg string) *Error {
	return &Error{Status: 422, Code: "invalid_invites", Field: field, Message: msg}
}

// inviteError maps the invite errors to their answers (the rest goes to the error
// handler as it is).
func inviteError(err error) error {
	var ie *queue.InvalidError
	switch {
	case errors.As(err, &ie):
		return invalidInvites(ie.Field, ie.Message)
	case errors.Is(err, trust.ErrInviteNotFound):
		return errorf(404, "invite_not_found", "No live invite code of that name in this queue.")
	}
	return err
}

// parseInviteBody reads a create request strictly (decodeStrict): 400 when it is not JSON
// or gives a key twice, 422 unknown_field for a key it does not take, 422 invalid_invites
// naming the field otherwise.
func parseInviteBody(body []byte) (trust.InviteSpec, error) {
	var b inviteBody
	if err := decodeStrict(body, &b); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == "invalid_field" {
			e.Code = "invalid_invites"
		}
		return trust.InviteSpec{}, err
	}
	var spec trust.InviteSpec
	switch {
	case b.Count == nil:
		return spec, invalidInvites("count", "count is required.")
	case *b.Count < 1 || *b.Count > trust.MaxInvitesPerCall:
		return spec, invalidInvites("count", "count must be between 1 and 10000.")
	case b.Lane == nil:
		return spec, invalidInvites("lane", "lane is required.")
	case *b.Lane != string(queue.LaneBypass) && *b.Lane != string(queue.LanePriority):
		return spec, invalidInvites("lane", `lane must be "bypass" or "priority".`)
	}
	spec.Count, spec.Lane = int(*b.Count), queue.Lane(*b.Lane)
	if b.MaxUses != nil {
		if *b.MaxUses < 1 || *b.MaxUses > trust.MaxInviteUses {
			return spec, invalidInvites("max_uses", "max_uses must be between 1 and 1000000.")
		}
		spec.MaxUses = *b.MaxUses
	}
	if b.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *b.ExpiresAt)
		if err != nil {
			return spec, invalidInvites("expires_at", "expires_at must be an RFC 3339 time, e.g. 2026-12-24T18:00:00Z.")
		}
		spec.ExpiresAt = t
	}
	return spec, nil
}

func toInviteJSON(name string, in trust.Invite) inviteJSON {
	return inviteJSON{Code: in.Code, URL: "/q/" + name + "?invite=" + url.QueryEscape(in.Code), Lane: in.Lane,
		UsesLeft: in.UsesLeft, ExpiresAt: in.ExpiresAt.UTC().Format(stream.TimeFormat)}
}

func inviteList(name string, ins []trust.Invite) inviteListJSON {
	out := inviteListJSON{Invites: make([]inviteJSON, len(ins))}
	for i, in := range ins {
		out.Invites[i] = toInviteJSON(name, in)
	}
	return out
}

func (s *Server) createInvites(c *fiber.Ctx) error {
	name, err := queueParam(c)
	if err != nil {
		return err
	}
	spec, err := parseInviteBody(c.Body())
	if err != nil {
		return err
	}
	ins, err := s.d.Invites.CreateInvites(c.UserContext(), name, spec)
	if err != nil {
		return inviteError(err)
	}
	return c.Status(fiber.StatusCreated).JSON(inviteList(name, ins))
}

func (s *Server) listInvites(c *fiber.Ctx) error {
	name, err := queueParam(c)
	if err != nil {
		return err
	}
	ins, err := s.d.Invites.Invites(c.UserContext(), name)
	if err != nil {
		return inviteError(err)
	}
	out := inviteList(name, ins)
	if adminRole(c) == RoleViewer {
		for i := range out.Invites {
			in := &out.Invites[i]
			in.Code, in.URL, in.Redacted = codePrefix(in.Code)+"…", "", true
		}
	}
	return c.JSON(out)
}

func (s *Server) revokeInvite(c *fiber.Ctx) error {
	name, err := queueParam(c)
	if err != nil {
		return err
	}
	// The code is copied: Fiber's params alias a reused buffer.
	code := string([]byte(c.Params("code")))
	if err := s.d.Invites.RevokeInvite(c.UserContext(), name, code); err != nil {
		return inviteError(err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// codePrefix is the part of an invite code that may be shown where the code itself must not
// be (a viewer's list, the audit log): too short to guess the rest from.
func codePrefix(code string) string {
	if len(code) > auditCodePrefix {
		return code[:auditCodePrefix]
	}
	return code
}
