package admission_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
)

// admitted joins n tickets to queue name and admits them; it returns the tickets, their
// signed string forms, their stored tokens (jti) and their signed tokens.
func admitted(t *testing.T, q *queue.Queue, signer *queue.Signer, keys *admission.KeyRing, name string, n int) (ts []queue.Ticket, raws, jtis, tokens []string) {
	t.Helper()
	ctx := context.Background()
	rate, places := float64(100000), int64(0)
	if _, _, err := q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: &rate, PlacesPerIP: &places}); err != nil {
		t.Fatal(err)
	}
	for range n {
		tk, raw := signer.New(name)
		if _, _, err := q.Join(ctx, tk); err != nil {
			t.Fatal(err)
		}
		ts, raws = append(ts, tk), append(raws, raw)
	}
	adm := queue.NewAdmitter(q, queue.AdmitConfig{})
	// Each tick admits by the Redis TIME since the last one.
	testwait.For(t, 30*time.Second, "the last of them admitted", func() bool {
		if _, err := adm.TickOnce(ctx, name); err != nil {
			t.Fatal(err)
		}
		p, err := q.Status(ctx, ts[n-1])
		return err == nil && p.State == queue.StateAdmitted
	})
	for _, tk := range ts {
		p, err := q.Status(ctx, tk)
		if err != nil || p.State != queue.StateAdmitted {
			t.Fatalf("not admitted: %v %v", p.State, err)
		}
		tok, err := keys.IssueMs(name, tk.ID, p.Token, p.TokenIssuedAt.UnixMilli(), p.TokenExpiresAt.UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		jtis, tokens = append(jtis, p.Token), append(tokens, tok)
	}
	return ts, raws, jtis, tokens
}

func refusalCode(err error) string {
	var rf *admission.Refusal
	if errors.As(err, &rf) {
		return rf.Code
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return ""
}

// TestRevokedTokenRefused: a token revoked by its jti or by its ticket is refused
// token_revoked by every gate decision (check and claim, signed and bare, with and
// without the route's queue) on every instance (a second store on the same Redis); the
// other tokens of the queue still pass; revoking what is not live is ErrTokenNotLive or
// ErrNoPlace and changes nothing.
func TestRevokedTokenRefused(t *testing.T) {
	t.Parallel()
	q, _, cli := countingStore(t)
	keys := newRing(t, keyStore(cli), admission.Config{})
	signer := queue.NewSigner([]byte(secret))
	ts, raws, jtis, tokens := admitted(t, q, signer, keys, "rv", 3)
	ctx := context.Background()
	other := queue.New(cli, queue.Config{}, nil) // another instance
	g := &admission.Gate{Tokens: other, Tickets: signer, Keys: keys}

	decide := func(i int, tok string, queues []string, claim bool) string {
		r := admission.Request{Token: tok, Ticket: raws[i]}
		var err error
		if claim {
			var p admission.Pass
			p, err = g.Claim(ctx, r, queues, "r-"+time.Now().String(), false)
			if err == nil {
				_ = g.Settle(ctx, p, false) // give the claim back: the token stays usable
			}
		} else {
			_, err = g.Check(ctx, r, queues)
		}
		return refusalCode(err)
	}
	all := func(i int) []string {
		var out []string
		for _, tok := range []string{tokens[i], jtis[i]} {
			for _, queues := range [][]string{nil, {"rv"}} {
				for _, claim := range []bool{false, true} {
					out = append(out, decide(i, tok, queues, claim))
				}
			}
		}
		return out
	}
	for i := range ts {
		for _, c := range all(i) {
			if c != "" {
				t.Fatalf("ticket %d before any revocation: %q", i, c)
			}
		}
	}

	if _, err := q.RevokeToken(ctx, "rv", jtis[0]); err != nil {
		t.Fatal(err)
	}
	r, err := q.RevokeTicketToken(ctx, ts[1])
	if err != nil || r.Token != jtis[1] || r.Ticket != ts[1].ID || time.Until(r.Until) < 4*time.Minute {
		t.Fatalf("revoke by ticket: %+v %v", r, err)
	}
	for i, want := range []string{"token_revoked", "token_revoked", ""} {
		for n, c := range all(i) {
			if c != want {
				t.Errorf("ticket %d, decision %d: %q, want %q", i, n, c, want)
			}
		}
	}
	// Again: the same answer (the mark renewed, said to be a repeat), and nothing else revoked.
	if r, err := q.RevokeToken(ctx, "rv", jtis[0]); err != nil || !r.Again {
		t.Fatalf("revoke again: %+v %v", r, err)
	}
	if r.Again {
		t.Fatal("the first revocation by ticket is said to be a repeat")
	}
	for _, bad := range []struct {
		name string
		err  error
		want error
	}{
		{"a jti of another queue", func() error { _, err := q.RevokeToken(ctx, "elsewhere", jtis[2]); return err }(), queue.ErrTokenNotLive},
		{"an unknown jti", func() error { _, err := q.RevokeToken(ctx, "rv", "0b6f2a4e-8c1d-4f5e-9a7b-3c2d1e0f4a5b"); return err }(), queue.ErrTokenNotLive},
		{"not a token", func() error { _, err := q.RevokeToken(ctx, "rv", "x"); return err }(), queue.ErrTokenNotLive},
		{"an unknown ticket", func() error { tk, _ := signer.New("rv"); _, err := q.RevokeTicketToken(ctx, tk); return err }(), queue.ErrNoPlace},
	} {
		if !errors.Is(bad.err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.name, bad.err, bad.want)
		}
	}
	if c := decide(2, tokens[2], []string{"rv"}, true); c != "" {
		t.Fatalf("the unrevoked token after bad revocations: %q", c)
	}
	// A used token cannot be revoked (nothing left to refuse): ErrTokenNotLive.
	p, err := g.Claim(ctx, admission.Request{Token: tokens[2], Ticket: raws[2]}, []string{"rv"}, "r-use", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Settle(ctx, p, true); err != nil {
		t.Fatal(err)
	}
	if _, err := q.RevokeTicketToken(ctx, ts[2]); !errors.Is(err, queue.ErrTokenNotLive) {
		t.Fatalf("revoke a used token: %v", err)
	}
}
