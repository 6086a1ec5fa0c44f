package web

import (
	"errors"
	"testing"
)

// statusOf is the HTTP status a parse error maps to.
func statusOf(err error) int { return mapError(err).Status }

func FuzzParseOrder(f *testing.F) {
	for _, s := range []string{
		`{"product_id":"demo","quantity":1}`, `{"product_id":"demo","quantity":0}`, `{"product_id":1,"quantity":"x"}`,
		`{`, ``, `null`, `[]`, `{"product_id":"../x","quantity":2}`, `{"product_id":"a","quantity":1e99}`,
		`{"product_id":"a","quantity":-1}`, `{"product_id":"` + string(make([]byte, 70)) + `","quantity":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		id, qty, err := parseOrder(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("parse error without a status: %v", err)
			}
			if st := statusOf(err); st != 400 && st != 422 {
				t.Fatalf("body %q: status %d, want 400 or 422", body, st)
			}
			return
		}
		if qty < 1 || qty > 1000 || len(id) < 1 || len(id) > 64 {
			t.Fatalf("body %q accepted as %q × %d", body, id, qty)
		}
	})
}

func FuzzParseQueueBody(f *testing.F) {
	for _, s := range []string{`{"rate_per_second":5}`, `{"token_ttl_seconds":-1}`, `{"paused":"yes"}`, `{}`, `{"max_active":1.5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := parseQueueBody(body)
		if err != nil {
			if st := statusOf(err); st != 400 && st != 422 {
				t.Fatalf("body %q: status %d", body, st)
			}
			return
		}
		if p.TokenTTL != nil && *p.TokenTTL < 0 {
			t.Fatalf("negative ttl accepted from %q", body)
		}
	})
}
