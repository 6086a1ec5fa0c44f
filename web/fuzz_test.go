package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
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
		err := decodeStrict(body, &b)
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
		`{"token_ttl_seconds":9223372036854775807}`, `{"rate_per_second":5,"paused":true}`, `{"rate_per_second":-0,"priority_share":-0}`,
		`{"brand_message":"a\u2067b"}`, `{"brand_name":"\u200fשלום"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := parseQueueBody(body)
		var s queue.Settings
		if err == nil {
			err = p.Validate() // as queue.Put: the patch's own rules, then the result's ranges
		}
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
			s.TokenTTL < queue.MinTokenTTL || s.TokenTTL > queue.MaxTokenTTL || s.PlacesPerIP < 0 || s.PlacesPerIP > queue.MaxPlacesPerIP ||
			math.Signbit(s.RatePerSecond) || math.Signbit(s.PriorityShare) || strings.ContainsAny(s.BrandMessage+s.BrandName, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069") {
			t.Fatalf("body %q accepted as %+v", body, s)
		}
	})
}

// The live limits body likewise.
func FuzzLimitsBody(f *testing.F) {
	for _, s := range []string{`{"join_per_ip_per_second":-1}`, `{"order_global_burst":99999999999}`, `{"status_per_ticket_per_second":1e400}`, `{}`,
		`{"join_global_per_second":-0}`, `{"JOIN_GLOBAL_PER_SECOND":3}`, `{"join_global_burst":1,"join_global_burst":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		l := queue.DefaultLimits()
		err := decodeStrict(body, &l)
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

// FuzzAdminBody: the strict decoder never panics and answers 400 or 422 with the JSON error
// shape; a body it accepts is a UTF-8 JSON object that names each key once (at every
// depth) and only keys of the target type, spelt exactly. Checked against encoding/json:
// the keys the tokens name are as many as the keys of the decoded maps (a duplicate
// would collapse), and every top-level key is a field name of the target.
func FuzzAdminBody(f *testing.F) {
	for _, s := range []string{`{"rate_per_second":1,"RATE_PER_SECOND":7}`, `{"rate_per_secnd":9}`,
		`{"rate_per_second":1,"rate_per_second":7}`, `{"inner":{"a":"x","a":"y"}}`, `{"raw":{"k":[{"k":1,"k":2}]}}`,
		`{"rate\u005fper_second":1}`, `{"list":[{"a":"x"},{"A":"y"}]}`, `{"auto_min":1,"rate_mode":"auto"}`,
		`{"brand_message":"\u202e"}`, `{"allowed_origins":["https://a.example:0443"]}`, `null`, `[]`, `{} {}`, "{\"raw\":\"\xff\"}",
		`{"starts_at":null,"ends_at":"2030-01-01T00:00:00Z","method":"fifo"}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, target := range []any{newQueueBody(), &strictOuter{}} {
			err := decodeStrict(body, target)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || (e.Status != 400 && e.Status != 422) || e.Message == "" {
					t.Fatalf("body %q: %v", body, err)
				}
				if e.Code == codeUnknownField || e.Code == codeDuplicateKey {
					last := e.Field[strings.LastIndexAny(e.Field, ".]")+1:]
					if !strings.Contains(string(body), last) && !bytes.ContainsRune(body, '\\') {
						t.Fatalf("body %q: %s names %q, not in the body", body, e.Code, e.Field)
					}
				}
				continue
			}
			if !utf8.Valid(body) || !json.Valid(body) {
				t.Fatalf("accepted %q: not UTF-8 JSON", body)
			}
			var top map[string]json.RawMessage
			if json.Unmarshal(body, &top) != nil || top == nil {
				t.Fatalf("accepted %q: not an object", body)
			}
			fields, _ := jsonFields(reflect.TypeOf(target).Elem())
			for k := range top {
				if _, ok := fields[k]; !ok {
					t.Fatalf("accepted %q with the key %q", body, k)
				}
			}
			var all any
			_ = json.Unmarshal(body, &all)
			if n, m := keyTokens(body), mapKeys(all); n != m {
				t.Fatalf("accepted %q: %d keys written, %d distinct", body, n, m)
			}
		}
	})
}

// keyTokens counts the object keys a JSON text writes.
func keyTokens(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	n := 0
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				if _, err := dec.Token(); err != nil {
					return false
				}
				n++
				if !walk() {
					return false
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if !walk() {
					return false
				}
			}
			_, err = dec.Token()
		}
		return err == nil
	}
	walk()
	return n
}

// mapKeys counts the keys of every object in a decoded JSON value.
func mapKeys(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			n += 1 + mapKeys(x)
		}
	case []any:
		for _, x := range v {
			n += mapKeys(x)
		}
	}
	return n
}
