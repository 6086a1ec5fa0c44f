package shop

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func newTestShop(t *testing.T) *Shop {
	t.Helper()
	s, err := New(Config{Room: "http://line.example:8080/", Queue: "demo", Product: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func do(t *testing.T, h http.Handler, method, path, ctype, body, cookie string) (int, map[string]any, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "shop_session", Value: cookie})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: %q: %v", method, path, rec.Body, err)
		}
	}
	return rec.Code, out, rec.Header()
}

func TestNewRefusesWrongSettings(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]Config{
		"room with a path":   {Room: "http://line.example/room", Queue: "demo", Product: "demo"},
		"room not http":      {Room: "ftp://line.example", Queue: "demo", Product: "demo"},
		"room not absolute":  {Room: "line.example:8080", Queue: "demo", Product: "demo"},
		"room with a query":  {Room: "http://line.example/?x=1", Queue: "demo", Product: "demo"},
		"queue with a space": {Room: "http://line.example", Queue: "de mo", Product: "demo"},
		"no product":         {Room: "http://line.example", Queue: "demo"},
		"product with quote": {Room: "http://line.example", Queue: "demo", Product: `de"mo`},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(c); err == nil {
				t.Fatalf("New(%+v) accepted", c)
			}
		})
	}
}

func TestPagesCarryTheRoomQueueAndProduct(t *testing.T) {
	t.Parallel()
	s := newTestShop(t)
	for _, p := range []string{"/", "/redirect.html", "/embed.html"} {
		code, _, h := do(t, s, "GET", p, "", "", "")
		if code != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self' http://line.example:8080;") {
			t.Fatalf("GET %s: %d, CSP %q", p, code, h.Get("Content-Security-Policy"))
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/embed.html", nil))
	for _, want := range []string{`<script src="http://line.example:8080/static/waitroom.js"`, `data-queue="demo"`, `data-product="demo"`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("embed.html lacks %s", want)
		}
	}
	if code, _, _ := do(t, s, "GET", "/../shop.go", "", "", ""); code != 404 {
		t.Errorf("GET /../shop.go: %d", code)
	}
	if code, _, _ := do(t, s, "POST", "/embed.html", "", "", ""); code != 405 {
		t.Errorf("POST /embed.html: %d", code)
	}
}

func TestBadRequestsGetClearErrorsAndChangeNothing(t *testing.T) {
	t.Parallel()
	s := newTestShop(t)
	for _, c := range []struct {
		name, method, path, ctype, body string
		want                            int
	}{
		{"admit as a form", "POST", "/shop/api/admit", "application/x-www-form-urlencoded", "token=x", 415},
		{"admit without a token", "POST", "/shop/api/admit", "application/json", `{}`, 400},
		{"admit with broken JSON", "POST", "/shop/api/admit", "application/json", `{"token":`, 400},
		{"admit a token that is no JWS", "POST", "/shop/api/admit", "application/json", `{"token":"not.a.token"}`, 401},
		{"admit by GET", "GET", "/shop/api/admit", "", "", 405},
		{"session without a cookie", "GET", "/shop/api/session", "", "", 401},
		{"order without a session", "POST", "/shop/api/orders", "application/json", `{"quantity":1}`, 401},
		{"order as a form", "POST", "/shop/api/orders", "text/plain", `{"quantity":1}`, 415},
		{"order of two", "POST", "/shop/api/orders", "application/json", `{"quantity":2}`, 422},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, _ := do(t, s, c.method, c.path, c.ctype, c.body, "")
			if code != c.want || out["error"] == "" || out["error"] == nil {
				t.Fatalf("%d %v, want %d with an error", code, out, c.want)
			}
		})
	}
	if len(s.sessions) != 0 {
		t.Fatalf("sessions after refusals: %d", len(s.sessions))
	}
}

func TestOneShopOrderPerSession(t *testing.T) {
	t.Parallel()
	s := newTestShop(t)
	s.sessions["sid"] = &session{TicketHash: "abc"} // what a redeemed token opens
	code, out, _ := do(t, s, "POST", "/shop/api/orders", "application/json", `{"quantity":1}`, "sid")
	if code != 201 {
		t.Fatalf("first order: %d %v", code, out)
	}
	first := out["order"].(map[string]any)
	if id, _ := first["id"].(string); !strings.HasPrefix(id, "S-") || first["product_id"] != "demo" {
		t.Fatalf("order: %v", first)
	}
	code, out, _ = do(t, s, "POST", "/shop/api/orders", "application/json", `{"quantity":1}`, "sid")
	if code != 409 || out["order"].(map[string]any)["id"] != first["id"] {
		t.Fatalf("second order: %d %v, want 409 with the first", code, out)
	}
	code, out, _ = do(t, s, "GET", "/shop/api/session", "", "", "sid")
	if code != 200 || out["order"].(map[string]any)["id"] != first["id"] || out["ticket_hash"] != "abc" {
		t.Fatalf("session: %d %v", code, out)
	}
	if code, _, _ := do(t, s, "GET", "/shop/api/session", "", "", "another"); code != 401 {
		t.Fatalf("an unknown session: %d", code)
	}
}
