// Package httpguard protects net/http handlers (the standard library, chi, echo, gin —
// anything that takes an http.Handler) with the waiting room's admission tokens, with the
// same semantics as the Fiber guard (web.Guard). It does not import Fiber.
//
//	keys, _ := admission.NewKeyRing(trust.NewFromClient(rdb, 0), admission.Config{Secret: secret})
//	_ = keys.Load(ctx); go keys.Run(ctx)
//	guard := httpguard.New(httpguard.Config{Tokens: q, Tickets: queue.NewSigner(secret), Keys: keys, Queues: []string{"drop"}})
//	mux.Handle("POST /checkout", guard(checkout))
//
// Before the handler the X-Admission-Token is verified and claimed for the request (so two
// concurrent uses cannot both pass); after it the token is consumed when the handler
// answered below 400, and released otherwise (also when it panics), so a failed checkout
// does not burn the buyer's turn.
package httpguard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/queue"
)

// Config configures a guard.
type Config struct {
	Tokens  admission.TokenStore // the queue store (*queue.Queue)
	Tickets *queue.Signer        // verifies tickets (the deployment's WR_SECRET)
	Keys    *admission.KeyRing   // verifies signed tokens (nil: bare tokens only)
	// RejectBare refuses bare UUID tokens (docs/UPGRADING.md, mixed versions).
	RejectBare bool
	// Queues are the queues whose admission tokens the route accepts.
	Queues []string
	// Timeout bounds each token-store call (default 2 s).
	Timeout time.Duration
}

type ctxKey struct{}

// Admission is what the guard tells the protected handler.
type Admission struct {
	Ticket string // the caller's ticket id
	Queue  string // the queue that admitted the caller
}

// From returns the admission the guard let through (false outside a guarded handler).
func From(ctx context.Context) (Admission, bool) {
	a, ok := ctx.Value(ctxKey{}).(Admission)
	return a, ok
}

var idemKey = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// New returns the middleware. It panics when no queue admits to the route (a wiring
// mistake, found at start).
func New(cfg Config) func(http.Handler) http.Handler {
	if len(cfg.Queues) == 0 {
		panic("httpguard: no queue admits to this route: set Config.Queues")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	gate := &admission.Gate{Tokens: cfg.Tokens, Tickets: cfg.Tickets, Keys: cfg.Keys, RejectBare: cfg.RejectBare}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key, idem := r.Header.Get("Idempotency-Key"), true
			if key == "" {
				key, idem = "r-"+newID(), false
			} else if !idemKey.MatchString(key) {
				writeError(w, 422, "invalid_idempotency_key", "Idempotency-Key must be 1-128 characters of A-Z a-z 0-9 _ . -")
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), cfg.Timeout)
			pass, err := gate.Claim(ctx, Request(r), cfg.Queues, key, idem)
			cancel()
			var rf *admission.Refusal
			switch {
			case errors.As(err, &rf):
				if rf.RetryAfter > 0 {
					w.Header().Set("Retry-After", strconv.Itoa(rf.RetryAfter))
				}
				writeError(w, rf.Status, rf.Code, rf.Message)
				return
			case err != nil:
				w.Header().Set("Retry-After", "2")
				writeError(w, 503, "queue_unavailable", "The waiting room is unavailable right now. Try again shortly.")
				return
			}
			rec := &recorder{ResponseWriter: w}
			ok := false
			defer func() {
				// Outlive the request: a client that hangs up must not leave the claim behind.
				sctx, scancel := context.WithTimeout(context.WithoutCancel(r.Context()), cfg.Timeout)
				defer scancel()
				_ = gate.Settle(sctx, pass, ok)
			}()
			next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), ctxKey{}, Admission{Ticket: pass.Ticket.ID, Queue: pass.Ticket.Queue})))
			ok = rec.status() < 400
		})
	}
}

// Request is what r presents to the gate: the token, the ticket (Authorization: Bearer)
// and the cookies.
func Request(r *http.Request) admission.Request {
	ticket := ""
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		ticket = strings.TrimSpace(a[7:])
	}
	return admission.Request{
		Token:  r.Header.Get("X-Admission-Token"),
		Ticket: ticket,
		Cookie: func(name string) string {
			if c, err := r.Cookie(name); err == nil {
				return c.Value
			}
			return ""
		},
		Cookies: func(yield func(name, value string)) {
			for _, c := range r.Cookies() {
				yield(c.Name, c.Value)
			}
		},
	}
}

// recorder remembers the status the handler wrote (200 when it wrote none).
type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer (Flush, deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// writeError writes the waiting room's error shape.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
