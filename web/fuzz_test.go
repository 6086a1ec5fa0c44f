package web

import (
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/queue"
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

// Whatever an admin product body says, the answer is a 4xx naming the problem or a patch
// whose every value fits the products table (so PostgreSQL never refuses it with a 500).
func FuzzProductBody(f *testing.F) {
	for _, s := range []string{`{"price":2147483648}`, `{"price":9223372036854775807}`, `{"name":"a\u0000b"}`,
		`{"stock":2147483648}`, `{"queue":""}`, `{"queue":"a/b"}`, `{"max_per_order":0}`, `{"name":"\ud800"}`,
		`{"max_per_ticket":1e3}`, `[]`, `{"name":"Trail shoe","price":12900,"stock":1,"queue":"demo"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b productBody
		err := decodeBody(body, &b)
		if err == nil {
			err = toPatch(b).Validate()
		}
		if err != nil {
			if st := statusOf(err); st != 400 && st != 422 {
				t.Fatalf("body %q: status %d (%v)", body, st, err)
			}
			return
		}
		p := toPatch(b)
		switch {
		case p.Price != nil && (*p.Price < 0 || *p.Price > orders.MaxPrice),
			p.Stock != nil && (*p.Stock < 0 || *p.Stock > math.MaxInt32),
			p.MaxPerOrder != nil && (*p.MaxPerOrder < 1 || *p.MaxPerOrder > math.MaxInt32),
			p.MaxPerTicket != nil && (*p.MaxPerTicket < 1 || *p.MaxPerTicket > math.MaxInt32),
			p.Queue != nil && *p.Queue != "" && !queue.ValidName(*p.Queue),
			p.Name != nil && (!utf8.ValidString(*p.Name) || strings.ContainsRune(*p.Name, 0) || *p.Name == ""):
			t.Fatalf("body %q accepted as %+v", body, p)
		}
	})
}

// An admin queue body, applied to a new queue's defaults, is refused with a 4xx or gives
// settings inside their documented ranges.
func FuzzQueueSettings(f *testing.F) {
	for _, s := range []string{`{"rate_per_second":1e308}`, `{"max_active":9223372036854775807}`, `{"places_per_ip":-1}`,
		`{"token_ttl_seconds":9223372036854775807}`, `{"rate_per_second":5,"paused":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := parseQueueBody(body)
		var s queue.Settings
		if err == nil {
			s = p.Apply(queue.DefaultSettings("q"))
			err = s.Validate()
		}
		if err != nil {
			if st := statusOf(err); st != 400 && st != 422 {
				t.Fatalf("body %q: status %d (%v)", body, st, err)
			}
			return
		}
		if !(s.RatePerSecond >= 0 && s.RatePerSecond <= queue.MaxRatePerSecond) || s.MaxActive < 0 || s.MaxActive > queue.MaxMaxActive ||
			s.TokenTTL < queue.MinTokenTTL || s.TokenTTL > queue.MaxTokenTTL || s.PlacesPerIP < 0 || s.PlacesPerIP > queue.MaxPlacesPerIP {
			t.Fatalf("body %q accepted as %+v", body, s)
		}
	})
}

// The live limits body likewise.
func FuzzLimitsBody(f *testing.F) {
	for _, s := range []string{`{"join_per_ip_per_second":-1}`, `{"order_global_burst":99999999999}`, `{"status_per_ticket_per_second":1e400}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		l := queue.DefaultLimits()
		err := decodeBody(body, &l)
		if err == nil {
			err = l.Validate()
		}
		if err != nil {
			if st := statusOf(err); st != 400 && st != 422 {
				t.Fatalf("body %q: status %d (%v)", body, st, err)
			}
			return
		}
		for _, r := range []float64{l.OrderPerTicket, l.OrderGlobal, l.JoinPerIP, l.JoinGlobal, l.StatusPerTicket} {
			if !(r >= 0 && r <= queue.MaxLimitRate) {
				t.Fatalf("body %q accepted as %+v", body, l)
			}
		}
	})
}
