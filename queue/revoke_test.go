package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/waitroom/waitroom/queue"
)

// A revoked token ends its admission: the guards refuse it by its mark, its max_active slot
// is free for the next buyer at once, and its holder can queue again for a new place (not
// handed the same revoked token back).
func TestRevokeEndsTheAdmission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "rv", 1000, 1)
	if _, _, err := f.q.Put(ctx, "rv", queue.SettingsPatch{Method: methodp(queue.MethodPassthrough)}); err != nil {
		t.Fatal(err)
	}
	ann, _ := f.signer.New("rv")
	p, _, err := f.q.JoinFrom(ctx, ann, "198.51.100.1")
	if err != nil || p.State != queue.StateAdmitted {
		t.Fatalf("ann: %s %v; want admitted", p.State, err)
	}
	bob, _ := f.signer.New("rv")
	if p, _, err := f.q.JoinFrom(ctx, bob, "198.51.100.2"); err != nil || p.State != queue.StateWaiting {
		t.Fatalf("bob with the one slot taken: %s %v; want waiting", p.State, err)
	}
	r, err := f.q.RevokeTicketToken(ctx, ann)
	if err != nil || r.Ticket != ann.ID || r.Token != p.Token || r.Again {
		t.Fatalf("revoke: %+v %v", r, err)
	}
	if revoked, err := f.q.TokenRevoked(ctx, ann, p.Token); err != nil || !revoked {
		t.Fatalf("revoked mark: %v %v", revoked, err)
	}
	// The row reads expired and the slot is free: the status says so.
	if st, err := f.q.Status(ctx, ann); err != nil || st.State != queue.StateExpired {
		t.Fatalf("ann's status after the revocation: %s %v; want expired", st.State, err)
	}
	// Ann queues again: a new place, never the revoked token.
	again, created, err := f.q.JoinFrom(ctx, ann, "198.51.100.1")
	if err != nil || !created || again.Token == p.Token {
		t.Fatalf("ann again: created %v token reused %v err %v; want a new place", created, again.Token == p.Token, err)
	}
	// Revoking again: the mark renewed, nothing else (the token is still there, the row is not).
	if r, err := f.q.RevokeToken(ctx, "rv", p.Token); err != nil || !r.Again {
		t.Fatalf("revoke again: %+v %v", r, err)
	}
	if _, err := f.q.RevokeToken(ctx, "rv", "0b6f3d9e-5f4a-4c1e-9a51-7d2c8e4b1a60"); !errors.Is(err, queue.ErrTokenNotLive) {
		t.Fatalf("an unknown jti: %v; want ErrTokenNotLive", err)
	}
}
