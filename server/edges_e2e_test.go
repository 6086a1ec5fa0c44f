package main

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/static"
	"github.com/waitroom/waitroom/web"
)

// cacheable are the routes whose successful answers may be cached, and how (API.md,
// "Caching"); every other answer of every route — and every error — is no-store.
var cacheable = map[string]string{
	"/.well-known/jwks.json":        "public, max-age=15",
	"/api/openapi.json":             "public, max-age=300",
	"/api/queues/:queue/draw/order": "public, max-age=60",
	"/q/:queue/logo":                "public, max-age=300, must-revalidate",
	"/q/:queue/brand.css":           "public, max-age=300",
}

// TestEdgesOverHTTP: one instance behind a trusted appending proxy.
//   - Every route of the app's route table (new routes are walked too) answers
//     Cache-Control: no-store — its successes that carry tickets, tokens, invite codes or
//     admin data, and its errors — except the few documented as cacheable; the routes open
//     to other origins vary by Origin.
//   - The client address is the rightmost X-Forwarded-For hop that is not a trusted proxy:
//     a client cannot escape places_per_ip by writing addresses to the left of its own.
//   - The logo answers If-None-Match lists, W/ and * with 304.
func TestEdgesOverHTTP(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "edges", tolerantEnv(rs.URL(), testDB(t), map[string]string{
		"WR_PROXY_HEADER": "X-Forwarded-For", "WR_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8"}))

	t.Run("forwarded addresses", func(t *testing.T) {
		admin(t, in, "PUT", "/admin/api/queues/fwd", map[string]any{"paused": true, "places_per_ip": 1})
		join := func(xff ...string) int {
			req, _ := http.NewRequestWithContext(testContext(t), "POST", in.url+"/api/queues/fwd/join", nil)
			for _, v := range xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			res, err := specClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		// An appending chain: the client wrote "203.0.113.1", the outer proxy 10.0.0.2
		// appended the client's address, the inner one (the peer, 127.0.0.1) appended 10.0.0.2.
		if got := join("203.0.113.1, 198.51.100.7, 10.0.0.2"); got != 201 {
			t.Fatalf("first join of 198.51.100.7: %d", got)
		}
		for _, forged := range []string{"203.0.113.2, 198.51.100.7, 10.0.0.2", "10.0.0.9, 198.51.100.7, 10.0.0.2", "garbage, 198.51.100.7, 10.0.0.2"} {
			if got := join(forged); got != 429 {
				t.Fatalf("%q: %d, want 429 (the same client, places_per_ip 1)", forged, got)
			}
		}
		if got := join("203.0.113.1", "198.51.100.7, 10.0.0.2"); got != 429 {
			t.Fatalf("the chain over two field lines: %d, want 429", got)
		}
		if got := join("198.51.100.7, 198.51.100.8, 10.0.0.2"); got != 201 {
			t.Fatalf("another client (198.51.100.8): %d, want 201", got)
		}
		if got := join("2001:db8:1:2::1, 10.0.0.2", "10.0.0.3"); got != 201 {
			t.Fatalf("an IPv6 client behind two proxies: %d, want 201", got)
		}
		if got := join("198.51.100.9, 2001:db8:1:2::99, 10.0.0.2"); got != 429 {
			t.Fatalf("the same IPv6 /64: %d, want 429", got)
		}
	})

	// Fixtures so the walk reaches the successful answers too.
	admin(t, in, "PUT", "/admin/api/queues/edge", map[string]any{"rate_per_second": 1000, "places_per_ip": 0, "brand_color": "#1a5fb4"})
	admin(t, in, "PUT", "/admin/api/products/edgeprod", map[string]any{"name": "Edge", "price": 1, "stock": 10, "queue": "edge"})
	var inv struct {
		Codes []string `json:"codes"`
	}
	if res := call(t, "POST", in.url+"/admin/api/queues/edge/invites", adminToken, map[string]any{"count": 1, "lane": "bypass"}, &inv); res.StatusCode != 201 || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("invites: %d, Cache-Control %q: want 201 and no-store (live codes)", res.StatusCode, res.Header.Get("Cache-Control"))
	}
	tickets, _ := admittedUsers(t, in, "edge", 1)
	ticket := tickets[0]
	png := brandingPNG(t, 4, 4)
	if res := call(t, "PUT", in.url+"/admin/api/queues/edge/logo", adminToken, png, nil, "Content-Type", "image/png"); res.StatusCode != 200 {
		t.Fatalf("logo upload: %d", res.StatusCode)
	}

	t.Run("If-None-Match", func(t *testing.T) {
		res := call(t, "GET", in.url+"/q/edge/logo", "", nil, nil)
		etag := res.Header.Get("ETag")
		for _, inm := range []string{etag, `"other", ` + etag, "W/" + etag, "*", `"a",W/` + etag + `,"b"`} {
			if res := call(t, "GET", in.url+"/q/edge/logo", "", nil, nil, "If-None-Match", inm); res.StatusCode != 304 {
				t.Errorf("If-None-Match %s: %d, want 304", inm, res.StatusCode)
			}
		}
		if res := call(t, "GET", in.url+"/q/edge/logo", "", nil, nil, "If-None-Match", `"other"`); res.StatusCode != 200 {
			t.Errorf("another ETag: %d, want 200", res.StatusCode)
		}
	})

	t.Run("no-store on every route", func(t *testing.T) {
		srv, err := web.New(web.Config{}, web.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		routes := srv.App().GetRoutes(true)
		// Changing and ending routes last, the ticket's leave at the very end.
		rank := func(m, p string) int {
			switch {
			case p == "/api/queues/:queue/ticket":
				return 3
			case m == "DELETE":
				return 2
			case m == "GET" || m == "HEAD":
				return 0
			}
			return 1
		}
		sort.SliceStable(routes, func(i, j int) bool {
			return rank(routes[i].Method, routes[i].Path) < rank(routes[j].Method, routes[j].Path)
		})
		params := map[string]string{":queue": "edge", ":id": "edgeprod", ":code": firstOr(inv.Codes, "none")}
		seen := map[string]int{}
		// Not specTransport: the walk sends any body to any route, to read the headers.
		raw := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		for _, r := range routes {
			if r.Method == "CONNECT" || r.Method == "TRACE" || r.Method == "OPTIONS" || strings.Contains(r.Path, "*") {
				continue
			}
			path := r.Path
			for _, seg := range strings.Split(r.Path, "/") {
				if strings.HasPrefix(seg, ":") {
					v, ok := params[seg]
					if !ok {
						v = "x"
					}
					path = strings.Replace(path, seg, v, 1)
				}
			}
			req, _ := http.NewRequestWithContext(testContext(t), r.Method, in.url+path, strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			if strings.HasPrefix(r.Path, "/admin") {
				req.Header.Set("Authorization", "Bearer "+adminToken)
			} else {
				req.Header.Set("Authorization", "Bearer "+ticket)
			}
			req.Header.Set("Origin", in.url)
			res, err := raw.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", r.Method, path, err)
			}
			res.Body.Close() // a stream: its headers are all the walk reads
			key := r.Method + " " + r.Path
			seen[key] = res.StatusCode
			cc, want := res.Header.Get("Cache-Control"), "no-store"
			if c, ok := cacheable[r.Path]; ok && res.StatusCode < 400 && res.StatusCode != 204 {
				want = c
			}
			if cc != want && !(want == "no-store" && strings.Contains(cc, "no-store")) {
				t.Errorf("%s → %d: Cache-Control %q, want %q", key, res.StatusCode, cc, want)
			}
			// A stream is no-store and never stored, so it need not name what it varies by.
			if strings.HasPrefix(r.Path, "/api/queues/") && !strings.Contains(res.Header.Get("Vary"), "Origin") && !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
				t.Errorf("%s → %d: Vary %q lacks Origin (a CORS route)", key, res.StatusCode, res.Header.Get("Vary"))
			}
		}
		// The static assets are walked by name (one Use route serves them all).
		for path, want := range map[string]string{
			static.AssetURL("queue.js"):   "public, max-age=31536000, immutable",
			"/static/queue.0123456789.js": "no-store", // a hash of another release
			"/static/waitroom.js":         "public, max-age=300",
			"/static/no-such-file.js":     "no-store",
		} {
			res := call(t, "GET", in.url+path, "", nil, nil)
			if got := res.Header.Get("Cache-Control"); got != want {
				t.Errorf("GET %s → %d: Cache-Control %q, want %q", path, res.StatusCode, got, want)
			}
		}
		// The answers that carry secrets were reached, not only their refusals.
		for key, want := range map[string]int{
			"POST /api/queues/:queue/join": 200, "GET /api/queues/:queue/status": 200, "GET /admin/api/queues/:queue/invites": 200,
			"GET /admin/api/keys": 200, "GET /admin/api/stats": 200, "GET /q/:queue": 200, "GET /admin": 200,
			"GET /.well-known/jwks.json": 200, "DELETE /api/queues/:queue/ticket": 204,
		} {
			if got, ok := seen[key]; !ok || got != want && !(key == "POST /api/queues/:queue/join" && got == 201) {
				t.Errorf("%s answered %d (walked: %v), want %d", key, got, ok, want)
			}
		}
		t.Logf("walked %d routes: %v", len(seen), seen)
		if len(seen) < 40 {
			t.Errorf("walked %d routes: %v", len(seen), seen)
		}
	})
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}
