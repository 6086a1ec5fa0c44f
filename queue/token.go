package queue

import (
	"context"
	"time"

	"github.com/waitroom/waitroom/internal/rstore"
)

// Verdict is what the token store says about a token presented with a ticket.
type Verdict string

// Verdicts of ClaimToken.
const (
	TokenLive     Verdict = "live"      // live, belongs to the ticket, now claimed by this request
	TokenShared   Verdict = "shared"    // live; a request with the same Idempotency-Key holds it
	TokenBusy     Verdict = "busy"      // live, but another request is using it right now
	TokenReplay   Verdict = "replay"    // already used by a request with this Idempotency-Key
	TokenUsed     Verdict = "used"      // already used by another request
	TokenExpired  Verdict = "expired"   // issued to this ticket, lapsed unused
	TokenUnknown  Verdict = "unknown"   // never issued (or not in this ticket's queue)
	TokenNotYours Verdict = "not_yours" // issued to another ticket
)

// ValidToken reports whether s has the shape of a token (a UUID string).
func ValidToken(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		default:
			return false
		}
	}
	return true
}

// ClaimToken checks token for ticket t and, when live, claims it for the request
// identified by reqKey until it is consumed or released (so concurrent uses of one token
// cannot both pass). idem says reqKey is a client Idempotency-Key, which repeats of the
// same request share. It returns the verdict and the token's expiry.
func (q *Queue) ClaimToken(ctx context.Context, t Ticket, token, reqKey string, idem bool) (Verdict, time.Time, error) {
	return q.tokenOp(ctx, "claim", t, token, reqKey, idem)
}

// CheckToken is ClaimToken without claiming: what the token store says about token for
// ticket t, changing nothing.
func (q *Queue) CheckToken(ctx context.Context, t Ticket, token string) (Verdict, time.Time, error) {
	return q.tokenOp(ctx, "check", t, token, "", false)
}

// ConsumeToken ends the token after a successful order: it can no longer be used and its
// max_active slot is free for the next tick.
func (q *Queue) ConsumeToken(ctx context.Context, t Ticket, token, reqKey string) error {
	_, _, err := q.tokenOp(ctx, "consume", t, token, reqKey, false)
	return err
}

// ReleaseToken drops reqKey's claim after a failed order, leaving the token usable.
func (q *Queue) ReleaseToken(ctx context.Context, t Ticket, token, reqKey string) error {
	_, _, err := q.tokenOp(ctx, "release", t, token, reqKey, false)
	return err
}

func (q *Queue) tokenOp(ctx context.Context, op string, t Ticket, token, reqKey string, idem bool) (Verdict, time.Time, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if !ValidToken(token) {
		return TokenUnknown, time.Time{}, nil
	}
	k := rstore.KeysFor(t.Queue)
	res, err := rstore.Token.Run(ctx, q.rdb,
		[]string{k.Token(token), k.Tickets(), k.Claim(token), k.Active()},
		op, t.ID, token, reqKey, q.cfg.ClaimTTL.Milliseconds(), boolStr(idem)).Slice()
	if err != nil {
		return "", time.Time{}, fail("token "+op, err)
	}
	v := Verdict(toString(res[0]))
	var exp time.Time
	if len(res) > 1 {
		if ms := toInt(res[1]); ms > 0 {
			exp = time.UnixMilli(ms)
		}
	}
	if len(res) > 2 && q.cfg.Claimed != nil {
		q.cfg.Claimed(ctx, t.Queue, toInt(res[2]))
	}
	return v, exp, nil
}
