package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// raw sends one request with the given headers and returns the response with its body read.
func raw(t *testing.T, method, url string, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := specClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

// TestCrossOriginRules: a queue's allowed_origins get exact CORS answers on the buyer
// routes, every other origin gets none, preflights offer only the route's methods and
// headers, and the admin API stays same-origin.
func TestCrossOriginRules(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "cors", tolerantEnv(rs.URL(), testDB(t), nil))
	const shop, evil = "http://127.0.0.2:8090", "http://127.0.0.9:8090"

	// Settings: origins are normalised; anything but an origin is refused.
	var st map[string]any
	if res := call(t, "PUT", in.url+"/admin/api/queues/co", adminToken,
		map[string]any{"allowed_origins": []string{"HTTP://127.0.0.2:8090", shop}, "places_per_ip": 0, "rate_per_second": 0}, &st); res.StatusCode != 201 {
		t.Fatalf("put: %d", res.StatusCode)
	}
	if o, _ := st["allowed_origins"].([]any); len(o) != 1 || o[0] != shop {
		t.Fatalf("allowed_origins stored as %v", st["allowed_origins"])
	}
	for _, bad := range []string{"*", "null", "https://shop.example/path", "shop.example", "https://u@shop.example"} {
		var e errResp
		if res := call(t, "PUT", in.url+"/admin/api/queues/co", adminToken, map[string]any{"allowed_origins": []string{bad}}, &e); res.StatusCode != 422 || e.Error.Code != "invalid_settings" {
			t.Errorf("origin %q: %d %s", bad, res.StatusCode, e.Error.Code)
		}
	}

	// Preflights.
	pre := func(origin, path, method, headers string) *http.Response {
		res, _ := raw(t, "OPTIONS", in.url+path, "", "Origin", origin, "Access-Control-Request-Method", method,
			"Access-Control-Request-Headers", headers)
		return res
	}
	res := pre(shop, "/api/queues/co/join", "POST", "authorization, content-type")
	if res.StatusCode != 204 || res.Header.Get("Access-Control-Allow-Origin") != shop ||
		res.Header.Get("Access-Control-Allow-Credentials") != "true" || res.Header.Get("Access-Control-Allow-Methods") != "POST" ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), "authorization") || !strings.Contains(res.Header.Get("Vary"), "Origin") {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}
	for name, r := range map[string]*http.Response{
		"method not offered": pre(shop, "/api/queues/co/join", "PUT", ""),
		"DELETE on status":   pre(shop, "/api/queues/co/status", "DELETE", ""),
		"header not taken":   pre(shop, "/api/queues/co/join", "POST", "x-evil"),
		"origin not allowed": pre(evil, "/api/queues/co/join", "POST", ""),
		"another queue":      pre(shop, "/api/queues/other/join", "POST", ""),
	} {
		if r.StatusCode == 204 || r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight, %s: %d ACAO %q", name, r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
		}
	}

	// The admin API answers no preflight (outside the contract: checked without the spec).
	areq, _ := http.NewRequest("OPTIONS", in.url+"/admin/api/queues/co", nil)
	areq.Header.Set("Origin", shop)
	areq.Header.Set("Access-Control-Request-Method", "PUT")
	if ares, err := (&http.Client{Transport: http.DefaultTransport}).Do(areq); err != nil || ares.StatusCode < 400 || ares.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("admin preflight: %v %v", err, ares)
	} else {
		ares.Body.Close()
	}

	// Real requests, as a browser on the shop sends them (Sec-Fetch-Site: cross-site).
	var j joinResp
	res = call(t, "POST", in.url+"/api/queues/co/join", "", nil, &j, "Origin", shop, "Sec-Fetch-Site", "cross-site")
	if res.StatusCode != 201 || res.Header.Get("Access-Control-Allow-Origin") != shop || res.Header.Get("Access-Control-Allow-Credentials") != "true" ||
		!strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Fatalf("cross-origin join: %d %v", res.StatusCode, res.Header)
	}
	res = call(t, "GET", in.url+"/api/queues/co/status", j.Ticket, nil, nil, "Origin", shop, "Sec-Fetch-Site", "cross-site")
	if res.StatusCode != 200 || res.Header.Get("Access-Control-Allow-Origin") != shop {
		t.Fatalf("cross-origin status: %d %v", res.StatusCode, res.Header)
	}
	// Another origin: a state change is refused; a read is answered without CORS headers
	// (the browser does not let that page read it).
	var e errResp
	res = call(t, "POST", in.url+"/api/queues/co/join", "", nil, &e, "Origin", evil, "Sec-Fetch-Site", "cross-site")
	if res.StatusCode != 403 || e.Error.Code != "cross_origin" || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("join from another origin: %d %s %v", res.StatusCode, e.Error.Code, res.Header)
	}
	res = call(t, "GET", in.url+"/api/queues/co/status", j.Ticket, nil, nil, "Origin", evil)
	if res.Header.Get("Access-Control-Allow-Origin") != "" || res.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("status from another origin carries CORS headers: %v", res.Header)
	}
	// The admin API stays same-origin even for an allowed origin.
	res = call(t, "PUT", in.url+"/admin/api/queues/co", adminToken, map[string]any{"paused": true}, &e, "Origin", shop, "Sec-Fetch-Site", "cross-site")
	if res.StatusCode != 403 || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("admin from an allowed origin: %d %v", res.StatusCode, res.Header)
	}
	// The shop's routes answer an origin any queue allows.
	res = call(t, "GET", in.url+"/api/products", "", nil, nil, "Origin", shop)
	if res.Header.Get("Access-Control-Allow-Origin") != shop {
		t.Fatalf("products for an allowed origin: %v", res.Header)
	}
	// The stream: the hijacked answer carries the CORS headers too.
	s, sres := openStreamWith(t, specClient, in.url+"/api/queues/co/stream?ticket="+j.Ticket, "", "", "Origin", shop)
	defer s.close()
	if sres.Header.Get("Access-Control-Allow-Origin") != shop || sres.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Fatalf("stream for an allowed origin: %v", sres.Header)
	}
	s2, sres2 := openStreamWith(t, specClient, in.url+"/api/queues/co/stream?ticket="+j.Ticket, "", "", "Origin", evil)
	defer s2.close()
	if sres2.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("stream for another origin: %v", sres2.Header)
	}
	// A live change of allowed_origins is followed (the settings cache keeps it 2 s).
	admin(t, in, "PUT", "/admin/api/queues/co", map[string]any{"allowed_origins": []string{}})
	testwait.For(t, 30*time.Second, "no CORS answer once allowed_origins is emptied", func() bool {
		res := call(t, "GET", in.url+"/api/queues/co/status", j.Ticket, nil, nil, "Origin", shop)
		return res.Header.Get("Access-Control-Allow-Origin") == ""
	})
}

// TestReturnToRefused: the waiting page follows return_to only to an allowed origin; every
// trick gets a 400 page that says so, with no redirect and no join.
func TestReturnToRefused(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "rt", tolerantEnv(rs.URL(), testDB(t), nil))
	admin(t, in, "PUT", "/admin/api/queues/rt", map[string]any{"allowed_origins": []string{"https://shop.example"}})
	res, body := raw(t, "GET", in.url+"/q/rt?return_to="+qs("https://shop.example/back?x=1"), "")
	if res.StatusCode != 200 || !strings.Contains(body, `data-return-to="https://shop.example/back?x=1"`) {
		t.Fatalf("allowed return_to: %d", res.StatusCode)
	}
	for _, bad := range []string{"//evil.example", "https://shop.example.evil.example/", "javascript:alert(1)",
		"https:%2F%2Fevil.example", "https://shop.example@evil.example/", "https://evil.example/", "%2F%2Fevil.example",
		"https://shop.example%2eevil.example/", "https://shop.example/#x"} {
		res, body := raw(t, "GET", in.url+"/q/rt?return_to="+qs(bad), "")
		if res.StatusCode != 400 || !strings.Contains(body, `data-reason="return_to_refused"`) || strings.Contains(body, "data-return-to") ||
			res.Header.Get("Location") != "" || strings.Contains(body, `id="room"`) {
			t.Errorf("return_to %q: %d", bad, res.StatusCode)
		}
	}
}

func qs(s string) string { return url.QueryEscape(s) }
