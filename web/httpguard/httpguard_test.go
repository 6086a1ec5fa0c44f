package httpguard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/trust"
	"github.com/waitroom/waitroom/web/httpguard"
)

const secret = "0123456789abcdef-test-secret"

type fixture struct {
	q      *queue.Queue
	signer *queue.Signer
	keys   *admission.KeyRing
	adm    *queue.Admitter
}

func setup(t *testing.T) *fixture {
	t.Helper()
	rs := redistest.Start(t)
	q := queue.New(rs.Client(), queue.Config{}, nil)
	keys, err := admission.NewKeyRing(trust.NewFromClient(rs.Client(), 0), admission.Config{Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &fixture{q: q, signer: queue.NewSigner([]byte(secret)), keys: keys, adm: queue.NewAdmitter(q, queue.AdmitConfig{})}
}

// admitted returns n tickets of queue name (string form) with their signed tokens.
func (f *fixture) admitted(t *testing.T, name string, n int) (tickets, tokens []string) {
	t.Helper()
	ctx := context.Background()
	rate, places := float64(100000), int64(0)
	if _, _, err := f.q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: &rate, PlacesPerIP: &places}); err != nil {
		t.Fatal(err)
	}
	ts := make([]queue.Ticket, n)
	for i := range ts {
		var raw string
		ts[i], raw = f.signer.New(name)
		if _, _, err := f.q.Join(ctx, ts[i]); err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, raw)
	}
	for range 50 {
		if _, err := f.adm.TickOnce(ctx, name); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		p, err := f.q.Status(ctx, ts[n-1])
		if err != nil {
			t.Fatal(err)
		}
		if p.State == queue.StateAdmitted {
			break
		}
	}
	for _, tk := range ts {
		p, err := f.q.Status(ctx, tk)
		if err != nil || p.State != queue.StateAdmitted {
			t.Fatalf("not admitted: %v %v", p.State, err)
		}
		tok, err := f.keys.IssueMs(name, tk.ID, p.Token, p.TokenIssuedAt.UnixMilli(), p.TokenExpiresAt.UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok)
	}
	return tickets, tokens
}

type answer struct {
	status int
	code   string
}

func do(t *testing.T, url, ticket, token string) answer {
	t.Helper()
	req, _ := http.NewRequest("POST", url, nil)
	if ticket != "" {
		req.Header.Set("Authorization", "Bearer "+ticket)
	}
	if token != "" {
		req.Header.Set("X-Admission-Token", token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var e struct{ Error struct{ Code string } }
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &e)
	return answer{res.StatusCode, e.Error.Code}
}

// TestGuardSemantics: a plain net/http handler behind the guard — claim, handler, consume
// on success, release on failure — with every refusal of the contract.
func TestGuardSemantics(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tickets, tokens := f.admitted(t, "drop", 4)
	_, otherTokens := f.admitted(t, "other", 1)
	var fail atomic.Bool
	var seen atomic.Value
	mux := http.NewServeMux()
	guard := httpguard.New(httpguard.Config{Tokens: f.q, Tickets: f.signer, Keys: f.keys, Queues: []string{"drop"}})
	mux.Handle("POST /checkout", guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, _ := httpguard.From(r.Context())
		seen.Store(a)
		if fail.Load() {
			http.Error(w, "payment declined", http.StatusPaymentRequired)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	url := srv.URL + "/checkout"

	cases := []struct {
		name          string
		ticket, token string
		want          answer
	}{
		{"missing token", tickets[0], "", answer{401, "token_missing"}},
		{"garbage", tickets[0], "x.y.z", answer{401, "token_invalid"}},
		{"not yours", tickets[1], tokens[0], answer{403, "token_not_yours"}},
		{"other queue", tickets[0], otherTokens[0], answer{403, "token_wrong_queue"}},
		{"no ticket", "", tokens[0], answer{401, "ticket_missing"}},
		{"forged ticket", "drop.AAAAAAAAAAAAAAAAAAAAAA.forged", tokens[0], answer{401, "ticket_invalid"}},
	}
	for _, c := range cases {
		if got := do(t, url, c.ticket, c.token); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}

	// A failing handler releases the token; success consumes it.
	fail.Store(true)
	if got := do(t, url, tickets[0], tokens[0]); got.status != 402 {
		t.Fatalf("failing handler: %+v", got)
	}
	fail.Store(false)
	if got := do(t, url, tickets[0], tokens[0]); got.status != 201 {
		t.Fatalf("after a failure the token must still work: %+v", got)
	}
	if a := seen.Load().(httpguard.Admission); a.Queue != "drop" || a.Ticket == "" {
		t.Fatalf("handler saw %+v", a)
	}
	if got := do(t, url, tickets[0], tokens[0]); got != (answer{401, "token_invalid"}) {
		t.Fatalf("second use: %+v", got)
	}

	// Twenty concurrent uses of one token: exactly one passes.
	var wins atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if do(t, url, tickets[2], tokens[2]).status == 201 {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d concurrent uses passed, want 1", wins.Load())
	}

	// A panicking handler releases the token too.
	mux.Handle("POST /boom", guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })))
	req, _ := http.NewRequest("POST", srv.URL+"/boom", nil)
	req.Header.Set("Authorization", "Bearer "+tickets[3])
	req.Header.Set("X-Admission-Token", tokens[3])
	if res, err := http.DefaultClient.Do(req); err == nil { // net/http drops the connection
		res.Body.Close()
	}
	if got := do(t, url, tickets[3], tokens[3]); got.status != 201 {
		t.Fatalf("after a panic the token must still work: %+v", got)
	}
}

// TestGuardRevokedToken: a token revoked by an operator (queue.RevokeToken, by its jti) is
// refused 401 token_revoked, signed or as its bare jti, and the handler never runs; the
// queue's other tokens still pass.
func TestGuardRevokedToken(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tickets, tokens := f.admitted(t, "drop", 2)
	var calls atomic.Int64
	srv := httptest.NewServer(httpguard.New(httpguard.Config{Tokens: f.q, Tickets: f.signer, Keys: f.keys, Queues: []string{"drop"}})(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { calls.Add(1); w.WriteHeader(http.StatusCreated) })))
	defer srv.Close()
	c, err := f.keys.Verify(context.Background(), tokens[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.RevokeToken(context.Background(), "drop", c.ID); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{tokens[0], c.ID} {
		if got := do(t, srv.URL, tickets[0], tok); got != (answer{401, "token_revoked"}) {
			t.Errorf("revoked token %.8s…: %+v", tok, got)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("the handler ran %d times for a revoked token", calls.Load())
	}
	if got := do(t, srv.URL, tickets[1], tokens[1]); got.status != 201 {
		t.Fatalf("an unrevoked token: %+v", got)
	}
}

// TestGuardRedisDown: with Redis gone the guard answers 503 in the error shape (never lets
// the request through).
func TestGuardRedisDown(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t, redistest.Single()) // stopped below
	q := queue.New(rs.Client(), queue.Config{OpTimeout: 300 * time.Millisecond}, nil)
	keys, _ := admission.NewKeyRing(trust.NewFromClient(rs.Client(), 300*time.Millisecond), admission.Config{Secret: []byte(secret)})
	if err := keys.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	signer := queue.NewSigner([]byte(secret))
	tk, raw := signer.New("drop")
	tok, _ := keys.IssueMs("drop", tk.ID, "0b6f2a4e-8c1d-4f5e-9a7b-3c2d1e0f4a5b", time.Now().UnixMilli(), time.Now().Add(time.Minute).UnixMilli())
	called := false
	srv := httptest.NewServer(httpguard.New(httpguard.Config{Tokens: q, Tickets: signer, Keys: keys, Queues: []string{"drop"}})(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })))
	defer srv.Close()
	rs.Stop()
	if got := do(t, srv.URL, raw, tok); got != (answer{503, "queue_unavailable"}) || called {
		t.Fatalf("Redis down: %+v, handler called %v", got, called)
	}
}
