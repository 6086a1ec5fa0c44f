package admission_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

// countingStore is a token store whose client counts its commands.
func countingStore(t *testing.T) (*queue.Queue, *redistest.CommandCounter, redis.UniversalClient) {
	rs := redistest.Start(t)
	cli := rs.Client()
	cnt := &redistest.CommandCounter{}
	cli.AddHook(cnt)
	return queue.New(cli, queue.Config{}, nil), cnt, cli
}

// manyTicketCookies is a request carrying token and n ticket cookies: valid tickets of
// queues q0…q{n-1}, the way a browser that has waited in many lines sends them, with
// extra[i] in place of the i-th.
func manyTicketCookies(signer *queue.Signer, token string, n int, extra map[int]string) admission.Request {
	names := make([]string, n)
	values := make([]string, n)
	for i := range n {
		if raw, ok := extra[i]; ok {
			tk, _ := signer.Parse(raw)
			names[i], values[i] = admission.TicketCookie(tk.Queue), raw
			continue
		}
		names[i] = admission.TicketCookie(fmt.Sprintf("q%d", i))
		_, values[i] = signer.New(fmt.Sprintf("q%d", i))
	}
	return admission.Request{
		Token: token,
		Cookie: func(name string) string {
			for i := range names {
				if names[i] == name {
					return values[i]
				}
			}
			return ""
		},
		Cookies: func(yield func(name, value string)) {
			for i := range names {
				yield(names[i], values[i])
			}
		},
	}
}

// TestGateCostBounded: whatever a request carries (50 ticket cookies, a bare or a signed
// token, a route queue or none, a live, revoked or unknown token), one gate decision
// costs at most admission.MaxGateCommands Redis commands, and a check (GET /api/verify)
// at most MaxTokenChecks + 1.
func TestGateCostBounded(t *testing.T) {
	t.Parallel()
	q, cnt, cli := countingStore(t)
	keys := newRing(t, keyStore(cli), admission.Config{})
	signer := queue.NewSigner([]byte(secret))
	g := &admission.Gate{Tokens: q, Tickets: signer, Keys: keys}
	ctx := context.Background()
	_, raws, jtis, tokens := admitted(t, q, signer, keys, "live", 2)
	if _, err := q.RevokeToken(ctx, "live", jtis[1]); err != nil {
		t.Fatal(err)
	}
	unknown := "0b6f2a4e-8c1d-4f5e-9a7b-3c2d1e0f4a5b"
	// The worst place for the caller's ticket: the last one a bare token is tried with.
	at := map[int]string{admission.MaxTokenChecks - 1: raws[0]}
	atRevoked := map[int]string{admission.MaxTokenChecks - 1: raws[1]}
	for _, tc := range []struct {
		name   string
		token  string
		queues []string
		extra  map[int]string
		want   string
	}{
		{"unknown bare token, no queue (GET /api/verify)", unknown, nil, nil, "token_invalid"},
		{"unknown bare token, one queue", unknown, []string{"q7"}, nil, "token_invalid"},
		{"unknown bare token, a queue without a cookie", unknown, []string{"other"}, nil, "token_wrong_queue"},
		{"live bare token, no queue, its ticket last tried", jtis[0], nil, at, ""},
		{"revoked bare token, no queue, its ticket last tried", jtis[1], nil, atRevoked, "token_revoked"},
		{"live bare token, its queue", jtis[0], []string{"live"}, at, ""},
		{"live bare token of another queue", jtis[0], []string{"q9"}, map[int]string{0: raws[0]}, "token_wrong_queue"},
		// Past the budget the gate stops asking: an unknown token, not a wrong queue.
		{"live bare token of another queue, its ticket past the budget", jtis[0], []string{"q9"}, at, "token_invalid"},
		{"live signed token, no queue", tokens[0], nil, at, ""},
		{"revoked signed token, its queue", tokens[1], []string{"live"}, atRevoked, "token_revoked"},
		{"signed token, no ticket of its queue", tokens[0], nil, nil, "token_wrong_queue"},
	} {
		for _, claim := range []bool{false, true} {
			r := manyTicketCookies(signer, tc.token, 50, tc.extra)
			cnt.N.Store(0)
			var err error
			if claim {
				var p admission.Pass
				p, err = g.Claim(ctx, r, tc.queues, "r-cost", false)
				n := cnt.N.Load()
				if err == nil {
					_ = g.Settle(ctx, p, false)
				}
				cnt.N.Store(n)
			} else {
				_, err = g.Check(ctx, r, tc.queues)
			}
			if c := refusalCode(err); c != tc.want {
				t.Fatalf("%s (claim %v): %q, want %q", tc.name, claim, c, tc.want)
			}
			bound := int64(admission.MaxGateCommands)
			if !claim {
				bound = admission.MaxTokenChecks + 1
			}
			if n := cnt.N.Load(); n > bound {
				t.Errorf("%s (claim %v): %d Redis commands, bound %d", tc.name, claim, n, bound)
			} else {
				t.Logf("%s (claim %v): %d Redis commands (bound %d)", tc.name, claim, n, bound)
			}
		}
	}
}
