package admission

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// TokenStore is what a gate needs of the token store (implemented by *queue.Queue).
type TokenStore interface {
	ClaimToken(ctx context.Context, t queue.Ticket, token, reqKey string, idem bool) (queue.Verdict, time.Time, error)
	CheckToken(ctx context.Context, t queue.Ticket, token string) (queue.Verdict, time.Time, error)
	ConsumeToken(ctx context.Context, t queue.Ticket, token, reqKey string) error
	ReleaseToken(ctx context.Context, t queue.Ticket, token, reqKey string) error
	// TokenRevoked reports whether an operator revoked token (its jti) in t's queue.
	TokenRevoked(ctx context.Context, t queue.Ticket, token string) (bool, error)
}

// Bounds on what one request may make a gate do, whatever it carries (a Cookie header
// can hold about 90 valid ticket cookies).
const (
	// MaxTicketCookies is how many ticket cookies of a request are read (each an HMAC
	// check); the ones after them are not parsed.
	MaxTicketCookies = 8
	// MaxTokenChecks is how many token-store script calls a bare token may cost: the
	// caller's tickets tried plus the tickets of other queues asked about (to answer
	// token_wrong_queue). A signed token names its ticket: one call.
	MaxTokenChecks = 4
	// MaxGateCommands is the most Redis commands one gate decision sends: MaxTokenChecks
	// script calls, the revocation check (one EXISTS) and, for a claim of a revoked bare
	// token, the release of that claim. A signed token costs at most 2 (EXISTS + the
	// script); one whose kid is unknown costs at most one key re-read (HGETALL, at most
	// once a second per instance) and nothing else. GET /api/verify never claims: at most
	// MaxTokenChecks + 1.
	MaxGateCommands = MaxTokenChecks + 2
)

// Ticket cookies (API.md, "Tickets"): one per queue, and the single wr_ticket, still read
// for the queue its ticket belongs to (docs/UPGRADING.md, mixed versions).
const (
	TicketCookiePrefix = "wr_ticket_"
	LegacyTicketCookie = "wr_ticket"
)

// TicketCookie is the name of queue's ticket cookie.
func TicketCookie(queue string) string { return TicketCookiePrefix + queue }

// Request is what a protected request presents, whatever the framework.
type Request struct {
	Token  string // X-Admission-Token
	Ticket string // an explicit ticket (Authorization: Bearer); "" when none
	// Cookie returns a cookie's value ("" when absent).
	Cookie func(name string) string
	// Cookies calls yield for every cookie (to find ticket cookies of other queues).
	Cookies func(yield func(name, value string))
}

// Refusal is a gate's answer to a request it does not let through: an HTTP status and
// the public error code (API.md) with a sentence for the user.
type Refusal struct {
	Status  int
	Code    string
	Message string
	// RetryAfter, when > 0, is sent as Retry-After (seconds): the refusal is momentary.
	RetryAfter int
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

func refuse(status int, code, msg string) *Refusal {
	return &Refusal{Status: status, Code: code, Message: msg}
}

// Refusals shared by every guard.
var (
	errTokenMissing = refuse(401, "token_missing", "An admission token is required: wait for your turn in the queue.")
	errTokenInvalid = refuse(401, "token_invalid", "Unknown admission token.")
	errTokenExpired = refuse(401, "token_expired", "Your admission token has expired; join the queue again.")
	// A concurrent request holds the token: a conflict, not an invalid token — if that
	// request fails the token is usable again, so the client retries after a moment.
	errTokenBusy = &Refusal{Status: 409, Code: "token_in_use", RetryAfter: 1,
		Message: "This admission token is being used by another request; try again in a moment."}
	errTokenUsed     = refuse(401, "token_invalid", "This admission token has already been used.")
	errNotYours      = refuse(403, "token_not_yours", "This admission token was issued to another ticket.")
	errWrongQueue    = refuse(403, "token_wrong_queue", "This admission token was given by another queue than the one that sells this.")
	errTicketMissing = refuse(401, "ticket_missing", "The ticket the token was issued to is required (cookie or Authorization: Bearer).")
	errTicketInvalid = refuse(401, "ticket_invalid", "The ticket is missing, malformed or forged.")
	errTokenRevoked  = refuse(401, "token_revoked", "This admission token was revoked by the operator.")
	errKeyRevoked    = refuse(401, "token_revoked", "The key that signed this admission token was revoked by the operator.")
)

// WrongQueue is the refusal for a token or ticket of another queue than the route's.
func WrongQueue() *Refusal { r := *errWrongQueue; return &r }

// Gate decides whether a request's admission token lets it through: the logic of every
// guard (the Fiber guard, the net/http guard, GET /api/verify).
type Gate struct {
	Tokens  TokenStore
	Tickets *queue.Signer
	// Keys verifies signed tokens; nil accepts only bare tokens.
	Keys *KeyRing
	// RejectBare refuses bare UUID tokens. An instance that hands out bare tokens
	// (WR_TOKEN_FORMAT=uuid, or an older release: docs/UPGRADING.md, mixed versions) needs
	// them accepted. They are checked in Redis (live, the caller's ticket, the route's
	// queue), but a signed token's jti can be presented bare, skipping the signature: refuse
	// them once every instance hands out signed tokens and one token lifetime has passed.
	RejectBare bool
}

// Pass is a request the gate let through, to be settled after the handler.
type Pass struct {
	Ticket  queue.Ticket
	Verdict queue.Verdict
	jti     string
	key     string
}

// Claim checks the request's token for a route that admits from queues and claims it for
// the request identified by reqKey (idem: a client Idempotency-Key that repeats share), so
// concurrent uses of one token cannot both pass. A refusal is a *Refusal; any other error
// is the token store's (Redis unreachable: queue.ErrUnavailable) — the Pass then still
// names the ticket, for a fail-open caller.
func (g *Gate) Claim(ctx context.Context, r Request, queues []string, reqKey string, idem bool) (Pass, error) {
	return g.run(ctx, r, queues, reqKey, idem, true)
}

// Check is Claim without claiming: whether the token may be used now. Nothing changes.
func (g *Gate) Check(ctx context.Context, r Request, queues []string) (Pass, error) {
	return g.run(ctx, r, queues, "", false, false)
}

// Settle ends a claimed pass: the token is consumed when the handler succeeded, else the
// claim is released and the token stays usable until its TTL. Run it with a context that
// outlives the request.
func (g *Gate) Settle(ctx context.Context, p Pass, ok bool) error {
	switch {
	case ok && p.Verdict != queue.TokenReplay:
		return g.Tokens.ConsumeToken(ctx, p.Ticket, p.jti, p.key)
	case !ok && p.Verdict == queue.TokenLive:
		return g.Tokens.ReleaseToken(ctx, p.Ticket, p.jti, p.key)
	}
	return nil
}

func (g *Gate) run(ctx context.Context, r Request, queues []string, reqKey string, idem, claim bool) (Pass, error) {
	if r.Token == "" {
		return Pass{}, errTokenMissing
	}
	op := func(t queue.Ticket, jti string) (queue.Verdict, error) {
		if claim {
			v, _, err := g.Tokens.ClaimToken(ctx, t, jti, reqKey, idem)
			return v, err
		}
		v, _, err := g.Tokens.CheckToken(ctx, t, jti)
		return v, err
	}
	if strings.Count(r.Token, ".") == 2 {
		if g.Keys == nil {
			return Pass{}, errTokenInvalid
		}
		return g.signed(ctx, r, queues, reqKey, op)
	}
	if g.RejectBare {
		return Pass{}, errTokenInvalid
	}
	return g.bare(ctx, r, queues, reqKey, op)
}

// signed handles a JWS: its signature and claims say which queue and ticket it belongs
// to, so a token of another queue is refused without asking Redis.
func (g *Gate) signed(ctx context.Context, r Request, queues []string, reqKey string, op func(queue.Ticket, string) (queue.Verdict, error)) (Pass, error) {
	c, err := g.Keys.Verify(ctx, r.Token)
	switch {
	case errors.Is(err, queue.ErrUnavailable):
		return Pass{}, err
	case errors.Is(err, ErrExpired):
		return Pass{}, errTokenExpired
	case errors.Is(err, ErrKeyRevoked):
		return Pass{}, errKeyRevoked
	case err != nil:
		return Pass{}, refuse(401, "token_invalid", "This admission token is not valid here.")
	}
	if len(queues) > 0 && !slices.Contains(queues, c.Audience) {
		return Pass{}, errWrongQueue
	}
	t, rf := g.ticketFor(r, c.Audience)
	if rf != nil {
		return Pass{}, rf
	}
	if t.ID != c.Subject {
		return Pass{}, errNotYours
	}
	p := Pass{Ticket: t, jti: c.ID, key: reqKey}
	revoked, err := g.Tokens.TokenRevoked(ctx, t, c.ID)
	switch {
	case err != nil:
		return p, err
	case revoked:
		return Pass{}, errTokenRevoked
	}
	p.Verdict, err = op(t, c.ID)
	if err != nil {
		return p, err
	}
	if rf := verdictRefusal(p.Verdict); rf != nil {
		return p, rf
	}
	return p, nil
}

// ticketFor is the caller's ticket for queue name: the explicit one (which must be of that
// queue), else the queue's cookie, else the legacy cookie holding a ticket of that queue.
func (g *Gate) ticketFor(r Request, name string) (queue.Ticket, *Refusal) {
	if r.Ticket != "" {
		t, err := g.Tickets.Parse(r.Ticket)
		switch {
		case err != nil:
			return queue.Ticket{}, errTicketInvalid
		case t.Queue != name:
			return queue.Ticket{}, errWrongQueue
		}
		return t, nil
	}
	for _, cookie := range []string{TicketCookie(name), LegacyTicketCookie} {
		if t, err := g.Tickets.Parse(r.cookie(cookie)); err == nil && t.Queue == name {
			return t, nil
		}
	}
	if len(g.cookieTickets(r)) > 0 {
		return queue.Ticket{}, errWrongQueue
	}
	return queue.Ticket{}, errTicketMissing
}

func (r Request) cookie(name string) string {
	if r.Cookie == nil {
		return ""
	}
	return r.Cookie(name)
}

// bare handles a bare token (a UUID; docs/UPGRADING.md, mixed versions). It names no queue
// or ticket, so the caller's tickets for the route's queues are tried in turn — at most
// MaxTokenChecks token-store calls in all.
func (g *Gate) bare(ctx context.Context, r Request, queues []string, reqKey string, op func(queue.Ticket, string) (queue.Verdict, error)) (Pass, error) {
	if !queue.ValidToken(r.Token) {
		return Pass{}, errTokenInvalid
	}
	tickets, rf := g.bareTickets(r, queues)
	if rf != nil {
		return Pass{}, rf
	}
	var p Pass
	var err error
	tried := 0
	for _, t := range tickets[:min(len(tickets), MaxTokenChecks)] {
		tried++
		p = Pass{Ticket: t, jti: r.Token, key: reqKey}
		if p.Verdict, err = op(t, r.Token); err != nil || p.Verdict != queue.TokenUnknown {
			break
		}
	}
	if err != nil {
		return p, err
	}
	if p.Verdict == queue.TokenUnknown && len(queues) > 0 && g.tokenOfOtherQueue(ctx, r, queues, MaxTokenChecks-tried) {
		return p, errWrongQueue
	}
	if rf := verdictRefusal(p.Verdict); rf != nil {
		return p, rf
	}
	// Live for this ticket: refused when revoked (checked after the token is found, so
	// the tickets tried each cost one call, not two). A claim just taken is given back.
	revoked, err := g.Tokens.TokenRevoked(ctx, p.Ticket, r.Token)
	switch {
	case err != nil:
		return p, err
	case revoked:
		if p.Verdict == queue.TokenLive && reqKey != "" {
			_ = g.Tokens.ReleaseToken(ctx, p.Ticket, r.Token, reqKey)
		}
		return Pass{}, errTokenRevoked
	}
	return p, nil
}

// bareTickets are the caller's tickets for the route's queues: an explicit ticket must be
// of one of them; else each queue's cookie (or the legacy one) holding a ticket of it;
// with no route queue (GET /api/verify without X-Waitroom-Queue), the request's first
// MaxTicketCookies ticket cookies. A caller whose only tickets are of other queues is
// refused token_wrong_queue.
func (g *Gate) bareTickets(r Request, queues []string) ([]queue.Ticket, *Refusal) {
	if r.Ticket != "" {
		t, err := g.Tickets.Parse(r.Ticket)
		switch {
		case err != nil:
			return nil, errTicketInvalid
		case len(queues) > 0 && !slices.Contains(queues, t.Queue):
			return nil, errWrongQueue
		}
		return []queue.Ticket{t}, nil
	}
	var out []queue.Ticket
	if len(queues) == 0 {
		out = g.cookieTickets(r)
	}
	for _, q := range queues[:min(len(queues), MaxTokenChecks)] {
		for _, cookie := range []string{TicketCookie(q), LegacyTicketCookie} {
			if t, err := g.Tickets.Parse(r.cookie(cookie)); err == nil && t.Queue == q && !slices.Contains(out, t) {
				out = append(out, t)
				break
			}
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	if len(g.cookieTickets(r)) > 0 {
		return nil, errWrongQueue
	}
	return nil, errTicketMissing
}

// cookieTickets lists the valid tickets of the request's first MaxTicketCookies ticket
// cookies (the ones after them are not parsed).
func (g *Gate) cookieTickets(r Request) []queue.Ticket {
	var out []queue.Ticket
	if r.Cookies == nil {
		return nil
	}
	seen := 0
	r.Cookies(func(name, v string) {
		if name != LegacyTicketCookie && !strings.HasPrefix(name, TicketCookiePrefix) {
			return
		}
		if seen++; seen > MaxTicketCookies {
			return
		}
		if t, err := g.Tickets.Parse(v); err == nil && !slices.Contains(out, t) {
			out = append(out, t)
		}
	})
	return out
}

// tokenOfOtherQueue reports whether a bare token unknown in the route's queues is live for
// a ticket cookie of another queue (named after its ticket's queue), asking about at most
// budget of them.
func (g *Gate) tokenOfOtherQueue(ctx context.Context, r Request, queues []string, budget int) bool {
	checked := 0
	for _, o := range g.cookieTickets(r) {
		if slices.Contains(queues, o.Queue) || r.cookie(TicketCookie(o.Queue)) == "" {
			continue
		}
		if checked++; checked > budget {
			return false
		}
		if v, _, err := g.Tokens.CheckToken(ctx, o, r.Token); err == nil && v != queue.TokenUnknown {
			return true
		}
	}
	return false
}

func verdictRefusal(v queue.Verdict) *Refusal {
	switch v {
	case queue.TokenLive, queue.TokenShared, queue.TokenReplay:
		return nil
	case queue.TokenExpired:
		return errTokenExpired
	case queue.TokenNotYours:
		return errNotYours
	case queue.TokenBusy:
		return errTokenBusy
	case queue.TokenUsed:
		return errTokenUsed
	}
	return errTokenInvalid
}
