package queue

import (
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/rstore"
)

// Revocation of one admission token: a mark beside the token, under the queue's hash tag,
// living as long as the token could still be used (and a minute more). Every guard asks
// for the mark (TokenRevoked: one EXISTS) before it lets a token through, so a revocation
// holds on every instance as soon as it is written. The admission ends with it: the
// ticket's row reads expired (the buyer may join again, for a new place) and its
// max_active slot is free at once.

// ErrTokenNotLive: the token to revoke is not live in the queue (never issued, already
// used, lapsed, or the ticket holds none).
var ErrTokenNotLive = errors.New("no live admission token")

// revokeSlack is how much longer a revocation mark lives than its token: an instance whose
// clock is behind Redis's still refuses the token by the mark, not by its expiry.
const revokeSlack = time.Minute

// Revocation is a revoked token: its ticket and how long the mark lives.
type Revocation struct {
	Ticket string    // the ticket id the token was issued to
	Token  string    // the token as the store keeps it (a signed token's jti)
	Until  time.Time // when the mark lapses (the token's expiry plus a minute)
	// Again: the token was revoked already (its mark is renewed; nothing else changes).
	Again bool
}

// RevokeToken revokes token (a signed token's jti, or a bare token) of queue name: from
// now on TokenRevoked reports it. ErrTokenNotLive when it is not live in that queue.
// Revoking a revoked token again renews its mark.
func (q *Queue) RevokeToken(ctx context.Context, name, token string) (Revocation, error) {
	if !ValidToken(token) {
		return Revocation{}, ErrTokenNotLive
	}
	return q.revoke(ctx, name, token, "")
}

// RevokeTicketToken revokes the live admission token of ticket t (the one its status hands
// out). ErrNoPlace when the queue does not know the ticket, ErrTokenNotLive when the ticket
// holds no live token (waiting, used, lapsed).
func (q *Queue) RevokeTicketToken(ctx context.Context, t Ticket) (Revocation, error) {
	bctx, cancel := q.bound(ctx)
	cur, err := q.rdb.HGet(bctx, rstore.KeysFor(t.Queue).Tickets(), t.ID).Result()
	cancel()
	switch {
	case errors.Is(err, redis.Nil):
		return Revocation{}, ErrNoPlace
	case err != nil:
		return Revocation{}, fail("ticket state", err)
	}
	st := parseState(cur)
	if st.code != codeAdmitted || !ValidToken(st.token) {
		return Revocation{}, ErrTokenNotLive
	}
	return q.revoke(ctx, t.Queue, st.token, t.ID)
}

func (q *Queue) revoke(ctx context.Context, name, token, ticket string) (Revocation, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	res, err := rstore.Revoke.Run(ctx, q.rdb, []string{k.Token(token), k.Revoked(token), k.Tickets(), k.Active()},
		ticket, revokeSlack.Milliseconds(), (MaxTokenTTL + revokeSlack).Milliseconds(), token).Slice()
	if err != nil {
		return Revocation{}, fail("revoke token", err)
	}
	if len(res) < 4 || toString(res[0]) != "revoked" {
		return Revocation{}, ErrTokenNotLive
	}
	return Revocation{Ticket: toString(res[1]), Token: token,
		Until: time.Now().Add(time.Duration(toInt(res[2])) * time.Millisecond), Again: toInt(res[3]) == 1}, nil
}

// TokenRevoked reports whether token of t's queue was revoked (one EXISTS).
func (q *Queue) TokenRevoked(ctx context.Context, t Ticket, token string) (bool, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	n, err := q.rdb.Exists(ctx, rstore.KeysFor(t.Queue).Revoked(token)).Result()
	if err != nil {
		return false, fail("token revoked", err)
	}
	return n > 0, nil
}
