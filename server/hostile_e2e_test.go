package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue/redistest"
)

// TestHostileClients: slowloris on join is cut at the read timeout without slowing
// anyone else; oversized headers get 431 and bodies 413; malformed input gets 400/422
// with the error JSON and never a 5xx.
func TestHostileClients(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "h", baseEnv(rs.URL(), testDB(t), map[string]string{"WR_READ_TIMEOUT": "1s", "WR_WRITE_TIMEOUT": "1s"}))
	admin(t, in, "PUT", "/admin/api/queues/h", map[string]any{"rate_per_second": 1})
	addr := strings.TrimPrefix(in.url, "http://")

	t.Run("slowloris is cut at the read timeout", func(t *testing.T) {
		t.Parallel()
		var conns []net.Conn
		for range 50 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _ = io.WriteString(c, "POST /api/queues/h/join HTTP/1.1\r\nHost: x\r\n")
			conns = append(conns, c)
		}
		// A normal client is served meanwhile: before the server has cut the slowloris
		// connections (they are still open after its answer), so it did not wait for them.
		if res := call(t, "POST", in.url+"/api/queues/h/join", "", nil, nil); res.StatusCode != 201 {
			t.Fatalf("join beside slowloris: %d", res.StatusCode)
		}
		last := conns[len(conns)-1]
		_ = last.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := last.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the last slowloris connection was cut before a normal join was answered (%v): the join waited for them", err)
		}
		// Dribbling one header byte every 200 ms (the slow client's pace) does not keep a
		// connection open: the read timeout (1 s) cuts it.
		c := conns[0]
		closedAt := time.Time{}
		start := time.Now()
		for time.Since(start) < 30*time.Second {
			if _, err := io.WriteString(c, "X"); err != nil {
				closedAt = time.Now()
				break
			}
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			buf := make([]byte, 512)
			if n, err := c.Read(buf); err == io.EOF || (err == nil && n > 0) {
				closedAt = time.Now()
				break
			}
		}
		if closedAt.IsZero() {
			t.Fatal("slowloris connection still open after 30 s")
		}
		t.Logf("slowloris connection cut after %v", closedAt.Sub(start).Round(100*time.Millisecond))
	})

	t.Run("oversized and malformed requests", func(t *testing.T) {
		t.Parallel()
		// A 2 MiB body is refused from its Content-Length, before it is read (the server
		// then closes the connection, so the client reads the answer before sending it all).
		for _, p := range []string{"/api/queues/h/join", "/admin/api/queues/h", "/api/orders"} {
			status, body := rawRequest(t, addr, "PUT "+p+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+adminToken+
				"\r\nContent-Type: application/json\r\nContent-Length: 2097152\r\n\r\n"+strings.Repeat("{", 1024))
			if status != 413 || !strings.Contains(body, `"code":"body_too_large"`) {
				t.Errorf("2 MiB body to %s: %d %q", p, status, body)
			}
		}
		cases := []struct {
			name, method, path, bearer string
			body                       any
			hdr                        []string
			status                     int
			code                       string
		}{
			{"malformed JSON", "PUT", "/admin/api/queues/h", adminToken, `{"rate_per_second":`, nil, 400, "malformed_json"},
			{"wrong type", "PUT", "/admin/api/queues/h", adminToken, `{"rate_per_second":"fast"}`, nil, 422, "invalid_field"},
			{"invalid value", "PUT", "/admin/api/queues/h", adminToken, `{"rate_per_second":-3}`, nil, 422, "invalid_settings"},
			{"bad queue name", "PUT", "/admin/api/queues/..%2fx", adminToken, `{}`, nil, 404, ""},
			{"unknown queue", "POST", "/api/queues/nope/join", "", nil, nil, 404, "queue_not_found"},
			{"forged ticket", "GET", "/api/queues/h/status", "h.AAAAAAAAAAAAAAAAAAAAAA.sig", nil, nil, 401, "ticket_invalid"},
			{"no ticket", "GET", "/api/queues/h/stream", "", nil, nil, 401, "ticket_missing"},
			{"admin without bearer", "GET", "/admin/api/stats", "", nil, nil, 401, "admin_unauthorized"},
			{"admin wrong bearer", "GET", "/admin/api/stats", "test-admin-tokeX", nil, nil, 401, "admin_unauthorized"},
			{"unknown api route", "GET", "/api/nothing", "", nil, nil, 404, "not_found"},
			{"unknown admin route", "GET", "/admin/api/nothing", adminToken, nil, nil, 404, "not_found"},
			{"huge headers", "GET", "/api/products", "", nil, []string{"X-Junk", strings.Repeat("j", 16<<10)}, 431, "headers_too_large"},
		}
		for _, c := range cases {
			var e errResp
			res := call(t, c.method, in.url+c.path, c.bearer, c.body, &e, c.hdr...)
			if res.StatusCode != c.status || (c.code != "" && e.Error.Code != c.code) {
				t.Errorf("%s: %d %q, want %d %q", c.name, res.StatusCode, e.Error.Code, c.status, c.code)
			}
			if res.StatusCode >= 500 {
				t.Errorf("%s: server error %d", c.name, res.StatusCode)
			}
		}
		// A closed queue refuses joiners with 423.
		admin(t, in, "PUT", "/admin/api/queues/shut", map[string]any{"closed": true})
		var e errResp
		if res := call(t, "POST", in.url+"/api/queues/shut/join", "", nil, &e); res.StatusCode != 423 || e.Error.Code != "queue_closed" {
			t.Errorf("closed queue: %d %s", res.StatusCode, e.Error.Code)
		}
	})

	t.Run("static files cannot escape their folder", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"/static/../../go.mod", "/static/..%2f..%2fgo.mod", "/static/%2e%2e/%2e%2e/etc/passwd", "/static/../server/main.go"} {
			res := call(t, "GET", in.url+p, "", nil, nil)
			body := readAll(res)
			if res.StatusCode == 200 && (strings.Contains(body, "module ") || strings.Contains(body, "root:") || strings.Contains(body, "package main")) {
				t.Fatalf("%s served a file outside static/: %q", p, body[:min(80, len(body))])
			}
		}
		if res := call(t, "GET", in.url+"/static/waitroom.js", "", nil, nil); res.StatusCode != 200 || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("waitroom.js: %d %v", res.StatusCode, res.Header)
		}
	})

	t.Run("CORS is not open and pages carry security headers", func(t *testing.T) {
		t.Parallel()
		var e errResp
		res := call(t, "POST", in.url+"/api/queues/h/join", "", nil, &e, "Origin", "https://evil.example")
		if v := res.Header.Get("Access-Control-Allow-Origin"); v != "" {
			t.Fatalf("join answered a foreign origin with Access-Control-Allow-Origin %q", v)
		}
		// A cross-site form cannot join (and overwrite the visitor's ticket cookie).
		if res.StatusCode != 403 || e.Error.Code != "cross_origin" {
			t.Fatalf("cross-site join: %d %s", res.StatusCode, e.Error.Code)
		}
		if res := call(t, "POST", in.url+"/api/queues/h/join", "", nil, nil, "Origin", in.url); res.StatusCode != 201 {
			t.Fatalf("same-origin join: %d", res.StatusCode)
		}
		req, _ := http.NewRequest("OPTIONS", in.url+"/api/orders", nil)
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		pre, err := specClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		pre.Body.Close()
		if v := pre.Header.Get("Access-Control-Allow-Origin"); v != "" {
			t.Fatalf("preflight allowed %q", v)
		}
		page := call(t, "GET", in.url+"/q/h", "", nil, nil)
		csp := page.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
			page.Header.Get("X-Content-Type-Options") != "nosniff" || page.Header.Get("Referrer-Policy") == "" {
			t.Fatalf("page headers: %v", page.Header)
		}
		if strings.Contains(readAll(page), adminToken) {
			t.Fatal("a page contains the admin token")
		}
	})

	t.Run("the admin stream outlives the write timeout", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", in.url+"/admin/api/stream", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := streamClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		// Three stats events, the last one after the 1 s write timeout: the stream was not
		// cut at it. (The stream's own pace sets how long this takes; the scan ends at the
		// third event, or when the stream ends, or at the request's 30 s deadline.)
		opened := time.Now()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		events := 0
		for events < 3 && sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: stats") {
				events++
			}
		}
		if lived := time.Since(opened); events < 3 || lived <= time.Second {
			t.Fatalf("admin stream gave %d events in %v with a 1 s write timeout: %v", events, lived, sc.Err())
		}
	})
}

// rawRequest writes req on a new connection and returns the response status and body.
func rawRequest(t *testing.T, addr, req string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestNoSecretsInLogs runs a whole journey — join, stream, admission, order, admin — at
// debug level and reads every log line: no ticket, token, admin token or secret in them.
func TestNoSecretsInLogs(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	env := tolerantEnv(rs.URL(), testDB(t), nil)
	in := startInProcess(t, "logs", env)
	admin(t, in, "PUT", "/admin/api/products/p", map[string]any{"stock": 5, "queue": "logs"})
	tickets, tokens := admittedUsers(t, in, "logs", 1)
	s, _ := openStream(t, in.url+"/api/queues/logs/stream?ticket="+tickets[0], tickets[0], "")
	if s == nil {
		t.Fatal("stream")
	}
	if _, ok := s.next(t, 3*time.Second, "admitted"); !ok {
		t.Fatal("no admitted event")
	}
	s.close()
	if res, _, _ := order(t, in, tickets[0], tokens[0], "idem-1", map[string]any{"product_id": "p", "quantity": 1}); res.StatusCode != 201 {
		t.Fatalf("order: %d", res.StatusCode)
	}
	call(t, "GET", in.url+"/api/queues/logs/status?ticket="+tickets[0], "", nil, nil)
	in.stop()
	logs := in.logs.String()
	if !strings.Contains(logs, `"message":"request"`) || !strings.Contains(logs, `"request_id"`) {
		t.Fatalf("no request log lines:\n%s", logs[:min(2000, len(logs))])
	}
	id := strings.Split(tickets[0], ".")[1]
	for what, secret := range map[string]string{"ticket": tickets[0], "ticket id": id, "token": tokens[0],
		"admin token": adminToken, "secret": env["WR_SECRET"]} {
		if strings.Contains(logs, secret) {
			t.Errorf("the logs contain the %s", what)
		}
	}
}
