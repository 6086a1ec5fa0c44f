package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/notify/smtptest"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/topology"
)

// costRoute is one row of the cost table (docs/API.md, "Cost per request"): the most Redis
// commands one request of a public route may cost, whatever it carries and however many
// queues exist.
type costRoute struct {
	Route string // "METHOD path" as docs/API.md writes it
	Bound int
	// PerQueue is what the route still spends per existing queue (0 once it is bounded):
	// the bound is Bound + PerQueue × the number of queues.
	PerQueue int
}

// costBounds is the table. A command is one command as the server's client sends it:
// a script call (EVALSHA) is one, each command of a pipeline is one, MULTI and EXEC are
// one each. What a request makes another goroutine do later (a cache refresh, the hub's
// loops) is not the request's: docs/API.md states those separately.
var costBounds = []costRoute{
	{"GET /healthz", 0, 0},
	{"GET /readyz", 1, 0},
	{"GET /metrics", 0, 0},
	{"GET /.well-known/jwks.json", 0, 0},
	{"GET /api/openapi.json", 0, 0},
	{"POST /api/queues/{queue}/join", 6, 0},
	{"POST /api/queues/{queue}/challenge", 3, 0},
	{"GET /api/queues/{queue}/status", 5, 0},
	{"DELETE /api/queues/{queue}/ticket", 7, 0},
	{"POST /api/queues/{queue}/notify", 4, 0},
	{"GET /api/queues/{queue}/stream", 6, 0},
	{"HEAD /api/queues/{queue}/stream", 5, 0},
	{"GET /api/queues/{queue}/draw", 3, 0},
	{"GET /api/queues/{queue}/draw/order", 6, 0},
	{"GET /api/products", 1, 0},
	{"GET /api/products/{id}", 0, 0},
	{"POST /api/orders", 9, 0},
	{"GET /api/verify", 6, 0},
	{"POST /api/redeem", 5, 0},
	{"GET /", 0, 0},
	{"GET /q/{queue}", 3, 0},
	{"GET /q/{queue}/order", 2, 0},
	{"POST /q/{queue}/join", 9, 0},
	{"GET /q/{queue}/place", 7, 0},
	{"POST /q/{queue}/leave", 9, 0},
	{"GET /q/{queue}/logo", 1, 0},
	{"GET /q/{queue}/brand.css", 1, 0},
	{"GET /q/{queue}/back/{code}", 1, 0},
	{"POST /q/{queue}/back/{code}", 1, 0},
	{"GET /admin", 0, 0},
	{"GET /admin/queues/{queue}/report", 1, 0},
	{"GET /static/{file}", 0, 0},
	{"OPTIONS (CORS preflight of any route)", 1, 0},
	{"ANY /admin/api/… without a valid admin token", 0, 0},
	{"ANY other path (404)", 0, 0},
}

// costHook counts the commands the request goroutines send: fasthttp's connection
// goroutines and the stream's hijack goroutine. Background loops (admission, the hub, key
// and limit refreshes, the shared snapshot) run on goroutines of their own and are not
// counted, so the count of one request does not depend on what else the instance is doing.
type costHook struct {
	mu      sync.Mutex
	n       int
	names   []string
	scripts []string // the script calls, as MONITOR prints them
	wire    int      // commands counted from the wire (acknowledged writes), for the log
	// The goroutines of hijacked connections (the streams) seen in this measurement and in
	// the ones before: a stream measured up to its first event can still be setting up when
	// the next request is measured (beside a CPU hog: a HEAD counted a stream's HGETALLs,
	// 2026-12-03), and those commands are not that request's.
	hijackNow, hijackOld map[int64]bool
}

// setupCommands open a pooled connection; they are the pool's, not a request's.
var setupCommands = []string{"hello", "auth", "select", "client", "readonly"}

func (h *costHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *costHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.add(cmd)
		return err
	}
}

func (h *costHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.add(cmds...)
		return err
	}
}

// counts reports whether the calling goroutine's commands count for the request being
// measured: it serves an HTTP request, and not the stream of an earlier measurement.
func (h *costHook) counts() bool {
	ok, hijacked := fromRequest()
	if !ok || !hijacked {
		return ok
	}
	id := goroutineID()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hijackOld[id] {
		return false // an earlier measurement's stream, still setting up
	}
	if h.hijackNow == nil {
		h.hijackNow = map[int64]bool{}
	}
	h.hijackNow[id] = true
	return true
}

func (h *costHook) add(cmds ...redis.Cmder) {
	if !h.counts() {
		return
	}
	var names []string
	for _, c := range cmds {
		// go-redis sends EVAL after a NOSCRIPT answer: the script call is counted once.
		if c.Name() == "evalsha" && c.Err() != nil && strings.HasPrefix(c.Err().Error(), "NOSCRIPT") {
			continue
		}
		if slices.Contains(setupCommands, c.Name()) {
			continue
		}
		names = append(names, c.Name())
		if c.Name() == "evalsha" || c.Name() == "eval" {
			h.mu.Lock()
			h.scripts = append(h.scripts, monitorArgs(c.Args()))
			h.mu.Unlock()
		}
	}
	h.count(names...)
}

func (h *costHook) count(names ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n += len(names)
	h.names = append(h.names, names...)
}

// take returns the count since the last take and starts again.
func (h *costHook) take() (int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, names := h.n, h.names
	h.n, h.names, h.scripts = 0, nil, nil
	if h.hijackOld == nil {
		h.hijackOld = map[int64]bool{}
	}
	for id := range h.hijackNow {
		h.hijackOld[id] = true
	}
	h.hijackNow = nil
	return n, names
}

// takeScripts returns the script calls since the last take (call it before take).
func (h *costHook) takeScripts() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.scripts
}

// tap hooks the request path's client. On a Redis with replicas (the cluster) a join's
// script and the acknowledgement of a handed-out token go, each with its WAIT, through
// node clients of their own (queue/shard.go) that no hook sees: the client's dialer is
// wrapped, and a pipeline written with a WAIT by a request goroutine is counted from the
// wire — the hooked commands never carry a WAIT, so nothing is counted twice.
func (h *costHook) tap(rdb redis.UniversalClient) {
	rdb.AddHook(h)
	switch c := rdb.(type) {
	case *redis.Client:
		c.Options().Dialer = h.dialer(c.Options().Dialer)
	case *redis.ClusterClient:
		c.Options().Dialer = h.dialer(c.Options().Dialer)
	}
}

func (h *costHook) dialer(next func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if next == nil {
		next = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 5 * time.Minute}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return waitConn{Conn: c, h: h}, nil
	}
}

type waitConn struct {
	net.Conn
	h *costHook
}

func (c waitConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("\r\nWAIT\r\n")) && c.h.counts() {
		names := respCommands(b)
		c.h.count(names...)
		c.h.mu.Lock()
		c.h.wire += len(names)
		c.h.mu.Unlock()
	}
	return c.Conn.Write(b)
}

// respCommands names the commands of a RESP request buffer (arrays of bulk strings).
func respCommands(b []byte) []string {
	var names []string
	for len(b) > 0 && b[0] == '*' {
		line, rest, ok := bytes.Cut(b[1:], []byte("\r\n"))
		n, err := strconv.Atoi(string(line))
		if !ok || err != nil {
			return names
		}
		b = rest
		for i := range n {
			line, rest, ok := bytes.Cut(b, []byte("\r\n"))
			l, err := strconv.Atoi(strings.TrimPrefix(string(line), "$"))
			if !ok || err != nil || len(rest) < l+2 {
				return names
			}
			if i == 0 {
				names = append(names, strings.ToLower(string(rest[:l])))
			}
			b = rest[l+2:]
		}
	}
	return names
}

// fromRequest reports whether the calling goroutine serves an HTTP request, and whether
// that is a hijacked connection's (a stream's).
func fromRequest() (ok, hijacked bool) {
	pcs := make([]uintptr, 512)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "github.com/valyala/fasthttp.") {
			if strings.HasSuffix(f.Function, ".hijackConnHandler") {
				return true, true
			}
			if strings.HasSuffix(f.Function, ".serveConn") {
				return true, false
			}
		}
		if !more {
			return false, false
		}
	}
}

// goroutineID is the calling goroutine's number, from its stack's first line.
func goroutineID() int64 {
	var buf [64]byte
	line, _ := strings.CutPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ") // "goroutine 123 [running]:…"
	id, _ := strconv.ParseInt(line[:max(0, strings.IndexByte(line, ' '))], 10, 64)
	return id
}

// startCounted is startInProcess with hook on the request path's Redis client.
func startCounted(t *testing.T, id string, env map[string]string, hook *costHook) *instance {
	t.Helper()
	env = copyEnv(env)
	env["WR_INSTANCE_ID"] = id
	in := &instance{t: t, id: id, logs: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	getenv := func(k string) string { return env[k] }
	go func() {
		in.done <- func() error {
			cfg, err := loadConfig(getenv)
			if err != nil {
				return err
			}
			cfg.redisTap = hook.tap
			log := newLogger(cfg, in.logs)
			ln, err := net.Listen("tcp", cfg.Addr)
			if err != nil {
				return err
			}
			defer ln.Close()
			a, closeApp, err := build(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer closeApp()
			return a.serve(ctx, cfg, log, ln)
		}()
	}()
	in.url = waitListening(t, in.logs, in.done)
	t.Cleanup(in.stop)
	t.Cleanup(func() { // runs before the stop: what the instance warned about, on a failure
		if t.Failed() {
			var warned []string
			for _, l := range strings.Split(in.logs.String(), "\n") {
				if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) {
					warned = append(warned, l)
				}
			}
			t.Logf("instance %s: %d warnings and errors, the last 40:\n%s", id, len(warned), strings.Join(warned[max(0, len(warned)-40):], "\n"))
		}
	})
	return in
}

// costMeter keeps the most each route cost and the request that cost it.
type costMeter struct {
	t     *testing.T
	in    *instance
	hook  *costHook
	max   map[string]int
	worst map[string]string
	seen  map[string]int
	// queues is the most queues that existed while the route was measured.
	queues map[string]int
	nq     int
	// mon, when set, measures the commands run inside the request's scripts (inner).
	mon   *monitorFeed
	inner map[string]int
}

// measure runs one request of route (do returns when its answer, or a stream's first
// event, is in) and keeps its count.
func (m *costMeter) measure(route, variant string, do func()) {
	m.t.Helper()
	if !slices.ContainsFunc(costBounds, func(r costRoute) bool { return r.Route == route }) {
		m.t.Fatalf("cost: %q is not in costBounds", route)
	}
	m.hook.take()
	do()
	scripts := m.hook.takeScripts()
	n, names := m.hook.take()
	if m.mon != nil {
		m.inner[route] = max(m.inner[route], m.mon.inner(m.t, scripts))
	}
	m.seen[route]++
	m.queues[route] = max(m.queues[route], m.nq)
	if _, ok := m.max[route]; !ok || n > m.max[route] {
		m.max[route] = n
		m.worst[route] = variant + " [" + strings.Join(names, " ") + "]"
	}
}

// req measures one plain request; hdr are header name/value pairs.
func (m *costMeter) req(route, variant, method, path string, body any, hdr ...string) *http.Response {
	m.t.Helper()
	var res *http.Response
	m.measure(route, variant, func() { res = callVia(m.t, clientFor(variant, path), method, m.in.url+path, "", body, nil, hdr...) })
	return res
}

// formJoin measures one post of the no-script join form (its 303 is not followed: the
// place page it leads to is a request of its own).
func (m *costMeter) formJoin(variant, q string, hdr ...string) {
	m.t.Helper()
	m.formPost("POST /q/{queue}/join", variant, q, "join", hdr...)
}

// formPost measures one post of a no-script form (/q/{q}/join or /q/{q}/leave).
func (m *costMeter) formPost(route, variant, q, form string, hdr ...string) {
	m.t.Helper()
	m.measure(route, variant, func() {
		req, _ := http.NewRequestWithContext(testContext(m.t), "POST", m.in.url+"/q/"+q+"/"+form, strings.NewReader("invite="))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		client := &http.Client{Transport: clientFor(variant, "/q/"+q).Transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := client.Do(req)
		if err != nil {
			m.t.Fatalf("form join %s: %v", variant, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	})
}

// unchecked sends what the OpenAPI document does not describe (headers past the limit, a
// malformed queue name: refused before any handler) without the document's check.
var unchecked = &http.Client{Transport: &http.Transport{}}

func clientFor(variant, path string) *http.Client {
	if strings.Contains(variant, "huge header") || strings.Contains(path, "%20") {
		return unchecked
	}
	return specClient
}

// stream measures opening a stream up to its first event (or its refusal).
func (m *costMeter) stream(variant, method, path string, hdr ...string) {
	m.t.Helper()
	route := method + " /api/queues/{queue}/stream"
	m.measure(route, variant, func() {
		req, _ := http.NewRequestWithContext(testContext(m.t), method, m.in.url+path, nil)
		req.Header.Set("Accept", "text/event-stream")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		client := streamClient
		if clientFor(variant, path) == unchecked {
			client = unchecked
		}
		res, err := client.Do(req)
		if err != nil {
			m.t.Fatalf("stream %s: %v", variant, err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 || method == "HEAD" {
			_, _ = io.Copy(io.Discard, res.Body)
			return
		}
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: ") {
				return // the first event: the set-up is over
			}
		}
		m.t.Fatalf("stream %s ended before its first event", variant)
	})
}

// costEnv turns every rate limit on (their checks are part of the cost) without letting
// the test's own requests be refused; the refusals are measured with the live limits.
func costEnv(redisURL, db string) map[string]string {
	env := map[string]string{
		"WR_JOIN_RATE_PER_IP": "100000", "WR_ORDER_RATE_PER_TICKET": "100000", "WR_ORDER_RATE_GLOBAL": "100000",
		"WR_STATUS_RATE_PER_TICKET": "100000", "WR_LOG_LEVEL": "info",
	}
	if redistest.ClusterMode() {
		// The cluster has replicas: joins and handed-out tokens wait for one (EVALSHA or HSET,
		// then WAIT), the longest path of join and status.
		env["WR_REDIS_REPLICA_ACKS"] = "1"
	}
	return tolerantEnv(redisURL, db, env)
}

// TestCostPerRequest holds docs/API.md's "Cost per request": every public route, asked
// with what an attacker can put in one request (50 valid ticket cookies of 50 queues,
// forged tickets and tokens, bare tokens, unknown queues, origins, headers up to the size
// limit and past it), costs at most its bound in Redis commands — with 10,000 queues too
// (on one Redis; the cluster pass of the test command runs it on the shared cluster).
//
// Its two phases — a few queues (every route, the rate limits' refusals) and 2,000 queues
// (the routes a queue's count could make dearer) — run side by side, each with its own Redis,
// database and instance: each is a long chain of one request after another, which a busy
// machine slows by its latency rather than its work.
func TestCostPerRequest(t *testing.T) {
	t.Parallel()
	t.Run("few queues", func(t *testing.T) { t.Parallel(); costPerRequest(t, 0) })
	t.Run("2000 queues", func(t *testing.T) {
		t.Parallel()
		// 2,000 show any cost per queue as plainly as 10,000 (docs/API.md has a
		// 10,000-queue measurement) at a fifth of the set-up.
		costPerRequest(t, 2000)
	})
}

// costPerRequest measures every route with a few queues (many == 0), or the routes a
// queue's count could make dearer with many queues beside the test's.
func costPerRequest(t *testing.T, many int) {
	rs := redistest.Start(t)
	hook := &costHook{}
	// E-mail on, so that the reminder routes and the leave's forgetting are measured.
	env := costEnv(rs.URL(), testDB(t))
	env["WR_SMTP_URL"] = "smtp://" + smtptest.StartInbox(t).Addr + "?from=rooms%40example.com"
	env["WR_PUBLIC_URL"] = "http://rooms.example"
	in := startCounted(t, "cost", env, hook)
	m := &costMeter{t: t, in: in, hook: hook, max: map[string]int{}, worst: map[string]string{}, seen: map[string]int{}, queues: map[string]int{}, inner: map[string]int{}}

	put := func(name string, body map[string]any) {
		t.Helper()
		if res := admin(t, in, "PUT", "/admin/api/queues/"+name, body); res.StatusCode >= 300 {
			t.Fatalf("PUT queue %s: %d %s", name, res.StatusCode, readAll(res))
		}
	}
	// The line: "cost-wait" keeps its waiters (paused), "cost-go" admits at once and sells
	// the product, "cost-pow" asks for proof of work, "cost-draw" has a published draw.
	put("cost-wait", map[string]any{"paused": true, "places_per_ip": 0, "allowed_origins": []string{"https://shop.example"}})
	put("cost-go", map[string]any{"rate_per_second": 50000, "places_per_ip": 0, "allowed_origins": []string{"https://shop.example"}})
	put("cost-pow", map[string]any{"pow_difficulty": 8, "places_per_ip": 0})
	if res := admin(t, in, "PUT", "/admin/api/products/cost-shoe", map[string]any{"name": "Shoe", "price": 100, "stock": 1000000, "queue": "cost-go"}); res.StatusCode >= 300 {
		t.Fatalf("PUT product: %d %s", res.StatusCode, readAll(res))
	}
	logo := []byte("\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 64))
	if res := call(t, "PUT", in.url+"/admin/api/queues/cost-wait/logo", adminToken, logo, nil, "Content-Type", "image/png"); res.StatusCode >= 300 {
		t.Logf("logo upload: %d %s (the logo route is measured without one)", res.StatusCode, readAll(res))
	}
	start := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	put("cost-draw", map[string]any{"rate_per_second": 0, "places_per_ip": 0, "starts_at": rfc3339(start)})
	drawTickets := joinUsers(t, in, "cost-draw", 3, 3)

	// 50 queues and a valid ticket of each: the cookies of one hostile request.
	const nCookies = 50
	var cookies []string
	tickets := make([]string, nCookies)
	for i := range nCookies {
		name := fmt.Sprintf("cost-%02d", i)
		put(name, map[string]any{"paused": true, "places_per_ip": 0})
		var j joinResp
		call(t, "POST", in.url+"/api/queues/"+name+"/join", "", nil, &j)
		if j.Ticket == "" {
			t.Fatalf("join %s: no ticket", name)
		}
		tickets[i] = j.Ticket
		cookies = append(cookies, "wr_ticket_"+name+"="+j.Ticket)
	}
	wait := joinUsers(t, in, "cost-wait", 1, 1)[0]
	// The fifth one buys (the order that succeeds); admitted now, since with many queues
	// their resting loops' checks share the admission's connections with cost-go's ticks.
	goTickets, goTokens := admittedUsers(t, in, "cost-go", 5)
	testwait.For(t, 30*time.Second, "the draw published", func() bool {
		var d struct{ Seed string }
		call(t, "GET", in.url+"/api/queues/cost-draw/draw", "", nil, &d)
		return d.Seed != ""
	})

	forgedTicket := "cost-wait.AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	bare := "0b6f0c6e-8a8e-4bd4-9d59-8c1b3a1ef0aa"
	// The cookie header of an attacker: 50 valid tickets of 50 queues, the legacy cookie
	// holding one of them, and forged ones.
	cookieHdr := strings.Join(append(slices.Clone(cookies), "wr_ticket="+tickets[0],
		"wr_ticket_cost-wait="+forgedTicket, "wr_ticket_nope="+forgedTicket, "wr_lang=xx"), "; ")
	hostile := []string{"Cookie", cookieHdr, "X-Forwarded-For", strings.Repeat("10.0.0.1, ", 40) + "10.0.0.2",
		"Accept-Language", strings.Repeat("xx-YY;q=0.1, ", 30) + "ko", "Last-Event-ID", "99999999999"}
	if n := len(cookieHdr) + 1000; n > 8<<10 {
		t.Fatalf("the hostile headers (%d bytes) do not fit the 8 KiB header limit", n)
	}
	withOrigin := func(origin string, h []string) []string { return append(slices.Clone(h), "Origin", origin) }
	huge := []string{"X-Pad", strings.Repeat("a", 20<<10)} // past the header limit: 431
	// The request's variants: bare, hostile (with an origin CORS does not know, and one a
	// queue allows), and headers past the limit (refused before any handler: 431).
	variants := func(h []string, few bool) map[string][]string {
		if few {
			return map[string][]string{"hostile foreign origin": withOrigin("https://evil.example", h)}
		}
		return map[string][]string{
			"plain":                  nil,
			"hostile foreign origin": withOrigin("https://evil.example", h),
			"hostile allowed origin": withOrigin("https://shop.example", h),
			"huge header":            huge,
		}
	}
	nc := rs.Client()
	defer nc.Close()
	names := queue.New(nc, queue.Config{}, nil)
	run := func(phase string, few bool) {
		all, err := names.Names(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		m.nq = len(all)
		began := time.Now()
		defer func() { t.Logf("%s: measured in %v", phase, time.Since(began).Round(time.Millisecond)) }()
		// Plain routes with no queue in them.
		for v, h := range variants(hostile, few) {
			v = phase + " " + v
			m.req("GET /healthz", v, "GET", "/healthz", nil, h...)
			m.req("GET /readyz", v, "GET", "/readyz", nil, h...)
			if !few { // its size grows with the queues' series, not its Redis cost (none)
				m.req("GET /metrics", v, "GET", "/metrics", nil, h...)
			}
			m.req("GET /.well-known/jwks.json", v, "GET", "/.well-known/jwks.json", nil, h...)
			m.req("GET /api/openapi.json", v, "GET", "/api/openapi.json", nil, h...)
			m.req("GET /", v, "GET", "/", nil, h...)
			m.req("GET /", v+" page 2", "GET", "/?page=2", nil, h...)
			m.req("GET /admin", v, "GET", "/admin", nil, h...)
			m.req("GET /static/{file}", v, "GET", "/static/queue.js", nil, h...)
			m.req("GET /api/products", v, "GET", "/api/products", nil, h...)
			m.req("GET /api/products", v+" ?queue", "GET", "/api/products?queue=cost-go", nil, h...)
			m.req("GET /api/products/{id}", v, "GET", "/api/products/cost-shoe", nil, h...)
			m.req("GET /api/products/{id}", v+" unknown", "GET", "/api/products/nope", nil, h...)
			m.req("ANY /admin/api/… without a valid admin token", v, "GET", "/admin/api/stats", nil, h...)
			m.req("ANY /admin/api/… without a valid admin token", v+" bad bearer", "PUT", "/admin/api/queues/x", "{}", append(slices.Clone(h), "Authorization", "Bearer nope")...)
			m.req("ANY other path (404)", v, "GET", "/api/nope", nil, h...)
			m.req("ANY other path (404)", v+" page", "GET", "/nope/nope", nil, h...)
		}
		// Routes of one queue: a queue with waiters, the admitting one, a paused one with a
		// proof of work, unknown and malformed names.
		for _, q := range []string{"cost-wait", "cost-go", "cost-pow", "cost-draw", "cost-07", "no-such-queue", "bad%20name"} {
			if few && (q == "cost-pow" || q == "cost-07" || q == "bad%20name") {
				continue
			}
			ticket := map[string]string{"cost-wait": wait, "cost-go": goTickets[0], "cost-draw": drawTickets[0], "cost-07": tickets[7]}[q]
			for v, h := range variants(hostile, few) {
				v = phase + " " + q + " " + v
				m.req("GET /q/{queue}", v, "GET", "/q/"+q+"?return_to=https://shop.example/x", nil, h...)
				m.req("GET /q/{queue}/order", v, "GET", "/q/"+q+"/order?product=cost-shoe", nil, h...)
				// The no-script join (from this site, and as another site's post) and its page,
				// with the hostile cookies and with the queue's own ticket cookie.
				m.formJoin(v, q, h...)
				m.formJoin(v+" from this site", q, append(slices.Clone(h), "Sec-Fetch-Site", "same-origin")...)
				m.req("GET /q/{queue}/place", v, "GET", "/q/"+q+"/place", nil, h...)
				m.formPost("POST /q/{queue}/leave", v+" from this site", q, "leave", append(slices.Clone(h), "Sec-Fetch-Site", "same-origin")...)
				if ticket != "" {
					own := []string{"Cookie", "wr_ticket_" + q + "=" + ticket}
					m.formJoin(v+" own cookie", q, append(slices.Clone(own), "Sec-Fetch-Site", "same-origin")...)
					m.req("GET /q/{queue}/place", v+" own cookie", "GET", "/q/"+q+"/place", nil, own...)
					if q == "cost-07" { // a place the later rows do not need
						m.formPost("POST /q/{queue}/leave", v+" own cookie", q, "leave", append(slices.Clone(own), "Sec-Fetch-Site", "same-origin")...)
					}
				}
				m.req("GET /q/{queue}/logo", v, "GET", "/q/"+q+"/logo", nil, h...)
				m.req("GET /q/{queue}/brand.css", v, "GET", "/q/"+q+"/brand.css", nil, h...)
				m.req("GET /admin/queues/{queue}/report", v, "GET", "/admin/queues/"+q+"/report", nil, h...)
				m.req("GET /api/queues/{queue}/draw", v, "GET", "/api/queues/"+q+"/draw", nil, h...)
				m.req("GET /api/queues/{queue}/draw/order", v, "GET", "/api/queues/"+q+"/draw/order", nil, h...)
				m.req("POST /api/queues/{queue}/challenge", v, "POST", "/api/queues/"+q+"/challenge", nil, h...)
				for _, o := range []string{"https://shop.example", "https://evil.example"} {
					for _, p := range []string{"join", "stream"} {
						m.req("OPTIONS (CORS preflight of any route)", v+" "+o+" "+p, "OPTIONS", "/api/queues/"+q+"/"+p, nil,
							"Origin", o, "Access-Control-Request-Method", "GET", "Cookie", cookieHdr)
					}
					m.req("OPTIONS (CORS preflight of any route)", v+" "+o+" orders", "OPTIONS", "/api/orders", nil,
						"Origin", o, "Access-Control-Request-Method", "POST", "Cookie", cookieHdr)
				}
				bearers := map[string]string{"none": "", "forged": forgedTicket, "other queue": tickets[3]}
				if ticket != "" {
					bearers["own"] = ticket
				}
				for bn, b := range bearers {
					hb := slices.Clone(h)
					if b != "" {
						hb = append(hb, "Authorization", "Bearer "+b)
					}
					vb := v + " bearer " + bn
					m.req("GET /api/queues/{queue}/status", vb, "GET", "/api/queues/"+q+"/status", nil, hb...)
					m.stream(vb, "HEAD", "/api/queues/"+q+"/stream", hb...)
					m.stream(vb, "GET", "/api/queues/"+q+"/stream", hb...)
					m.req("POST /api/queues/{queue}/join", vb, "POST", "/api/queues/"+q+"/join", "{}", hb...)
					m.req("POST /api/queues/{queue}/join", vb+" invite+pow", "POST", "/api/queues/"+q+"/join",
						`{"invite":"AAAA-BBBB-CCCC","pow":{"challenge":"x.y.z","nonce":"1"}}`, hb...)
				}
			}
		}
		// Leaving: a ticket of its own (then gone), a forged one, one of another queue.
		for v, h := range variants(hostile, few) {
			v = phase + " " + v
			tk := joinUsers(t, in, "cost-wait", 1, 1)[0]
			m.req("DELETE /api/queues/{queue}/ticket", v+" own", "DELETE", "/api/queues/cost-wait/ticket", nil, append(slices.Clone(h), "Authorization", "Bearer "+tk)...)
			m.req("DELETE /api/queues/{queue}/ticket", v+" gone", "DELETE", "/api/queues/cost-wait/ticket", nil, append(slices.Clone(h), "Authorization", "Bearer "+tk)...)
			m.req("DELETE /api/queues/{queue}/ticket", v+" forged", "DELETE", "/api/queues/cost-wait/ticket", nil, append(slices.Clone(h), "Authorization", "Bearer "+forgedTicket)...)
			m.req("DELETE /api/queues/{queue}/ticket", v+" cookies only", "DELETE", "/api/queues/cost-09/ticket", nil, h...)
		}
		// E-mail reminders: a registration of its own place (again and again: the limits
		// refuse), a bad address, a forged ticket, cookies only; a link's page and its spend
		// with a code that has the shape and one that has not.
		for v, h := range variants(hostile, few) {
			v = phase + " " + v
			tk := joinUsers(t, in, "cost-wait", 1, 1)[0]
			own := append(slices.Clone(h), "Authorization", "Bearer "+tk)
			for i := range 3 {
				m.req("POST /api/queues/{queue}/notify", v+" own "+strconv.Itoa(i), "POST", "/api/queues/cost-wait/notify", `{"email":"cost@example.com"}`, own...)
			}
			m.req("POST /api/queues/{queue}/notify", v+" invalid", "POST", "/api/queues/cost-wait/notify", `{"email":"nope"}`, own...)
			m.req("POST /api/queues/{queue}/notify", v+" forged", "POST", "/api/queues/cost-wait/notify", `{"email":"cost@example.com"}`, append(slices.Clone(h), "Authorization", "Bearer "+forgedTicket)...)
			m.req("POST /api/queues/{queue}/notify", v+" cookies only", "POST", "/api/queues/cost-09/notify", `{"email":"cost@example.com"}`, h...)
			for cn, code := range map[string]string{"shaped": strings.Repeat("A", 43), "unshaped": "x"} {
				m.req("GET /q/{queue}/back/{code}", v+" "+cn, "GET", "/q/cost-wait/back/"+code, nil, h...)
				m.req("POST /q/{queue}/back/{code}", v+" "+cn, "POST", "/q/cost-wait/back/"+code, nil, h...)
			}
		}
		// Tokens: a live signed one with its ticket, the same used up, forged, bare (the
		// release before's form) with 50 ticket cookies, and none.
		forgedJWS := goTokens[1][:len(goTokens[1])-4] + "AAAA"
		// A token whose header names a key nobody has (the key ring may look it up).
		otherKid := encodeSeg(t, map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": "cost-" + phase}) + goTokens[1][strings.Index(goTokens[1], "."):]
		buy := map[string]any{"product_id": "cost-shoe", "quantity": 1}
		for v, h := range variants(hostile, few) {
			v = phase + " " + v
			for tn, tok := range map[string]string{"signed": goTokens[2], "forged": forgedJWS, "unknown kid": otherKid, "bare": bare, "none": "", "garbage": strings.Repeat("x.", 2) + "x"} {
				for bn, b := range map[string]string{"own ticket": goTickets[2], "none": "", "forged": forgedTicket} {
					hb := slices.Clone(h)
					if tok != "" {
						hb = append(hb, "X-Admission-Token", tok)
					}
					if b != "" {
						hb = append(hb, "Authorization", "Bearer "+b)
					}
					vt := v + " token " + tn + " bearer " + bn
					m.req("GET /api/verify", vt, "GET", "/api/verify", nil, hb...)
					m.req("GET /api/verify", vt+" queue", "GET", "/api/verify", nil, append(slices.Clone(hb), "X-Waitroom-Queue", "cost-go")...)
					m.req("GET /api/verify", vt+" other queue", "GET", "/api/verify", nil, append(slices.Clone(hb), "X-Waitroom-Queue", "cost-wait")...)
					m.req("POST /api/orders", vt, "POST", "/api/orders", buy, append(slices.Clone(hb), "Idempotency-Key", "cost-"+phase+"-"+strconv.Itoa(len(m.seen)))...)
					m.req("POST /api/orders", vt+" unknown product", "POST", "/api/orders", map[string]any{"product_id": "nope", "quantity": 1}, hb...)
				}
				hr := slices.Clone(h)
				if tok != "" {
					hr = append(hr, "X-Admission-Token", tok)
				}
				m.req("POST /api/redeem", v+" token "+tn, "POST", "/api/redeem", nil, hr...)
			}
		}
		// A live token redeemed, then again (used).
		for _, v := range []string{"live", "used"} {
			m.req("POST /api/redeem", phase+" "+v, "POST", "/api/redeem", nil, "X-Admission-Token", goTokens[3])
		}
		// An order that succeeds (the happy path pays the guard's claim and consume).
		m.req("POST /api/orders", phase+" an order", "POST", "/api/orders", buy, "X-Admission-Token", goTokens[4], "Authorization", "Bearer "+goTickets[4])
	}
	if many > 0 {
		// Many queues: no public request may cost more with them.
		made := time.Now()
		makeQueues(t, rs, many)
		t.Logf("%d queues made in %v", many, time.Since(made).Round(time.Millisecond))
		run(strconv.Itoa(many)+" queues", true)
		m.report(costMode(), false)
		return
	}

	// On one Redis, MONITOR also shows what the request's scripts run inside them (the
	// cluster's nodes are not followed; the scripts are the same).
	if !redistest.ClusterMode() {
		m.mon = startMonitor(t, rs)
	}
	run("few queues", false)
	if m.mon != nil {
		m.mon.stop()
		m.mon = nil
	}
	// Refused by the rate limits: a refusal is counted in Redis too.
	if res := admin(t, in, "PUT", "/admin/api/limits", map[string]any{"join_per_ip_per_second": 0.001, "join_per_ip_burst": 1,
		"order_per_ticket_per_second": 0.001, "order_per_ticket_burst": 1, "order_global_per_second": 0.001, "order_global_burst": 1,
		"status_per_ticket_per_second": 0.001, "status_per_ticket_burst": 1, "join_global_per_second": 0.001, "join_global_burst": 1}); res.StatusCode != 200 {
		t.Fatalf("PUT limits: %d %s", res.StatusCode, readAll(res))
	}
	for range 3 {
		h := append(slices.Clone(hostile), "Authorization", "Bearer "+wait)
		m.req("POST /api/queues/{queue}/join", "rate limited", "POST", "/api/queues/cost-wait/join", "{}", h...)
		m.req("GET /api/queues/{queue}/status", "rate limited", "GET", "/api/queues/cost-wait/status", nil, h...)
		m.stream("rate limited", "GET", "/api/queues/cost-wait/stream", h...)
		m.req("POST /api/orders", "rate limited", "POST", "/api/orders", map[string]any{"product_id": "cost-shoe", "quantity": 1},
			"X-Admission-Token", goTokens[0], "Authorization", "Bearer "+goTickets[0])
	}
	if res := admin(t, in, "PUT", "/admin/api/limits", map[string]any{"join_per_ip_per_second": 100000, "order_per_ticket_per_second": 100000,
		"order_global_per_second": 100000, "status_per_ticket_per_second": 100000, "join_global_per_second": 0}); res.StatusCode != 200 {
		t.Fatalf("PUT limits: %d %s", res.StatusCode, readAll(res))
	}
	m.report(costMode(), true)
}

// report checks every route measured against its bound (all: every route of costBounds must
// have been measured) and logs the table.
func (m *costMeter) report(mode string, all bool) {
	t, hook := m.t, m.hook
	t.Helper()
	var report []string
	for _, r := range costBounds {
		got, ok := m.max[r.Route]
		if !ok {
			if all {
				t.Errorf("cost: %s was never measured", r.Route)
			}
			continue
		}
		bound := r.Bound + r.PerQueue*m.queues[r.Route]
		inner := "-"
		if v, ok := m.inner[r.Route]; ok {
			inner = strconv.Itoa(v)
		}
		report = append(report, fmt.Sprintf("%-48s bound %2d+%d/queue  max %2d  inside scripts %s  (%d requests; worst: %.300s)", r.Route, r.Bound, r.PerQueue, got, inner, m.seen[r.Route], m.worst[r.Route]))
		if got > bound {
			t.Errorf("cost: %s cost %d Redis commands, over its bound %d (%d queues): %.300s", r.Route, got, bound, m.queues[r.Route], m.worst[r.Route])
		}
	}
	t.Logf("cost per request (%s; %d commands of acknowledged writes counted from the wire):\n%s", mode, hook.wire, strings.Join(report, "\n"))
}

// monitorFeed follows a private Redis's MONITOR: the commands the scripts of one request
// run inside it (a script's own commands follow its EVALSHA line, marked "lua").
type monitorFeed struct {
	mu      sync.Mutex
	entries []monitorEntry
	conn    net.Conn
	mark    redis.UniversalClient
	n       int
	marks   chan int // the feed's index just past each marker seen
}

type monitorEntry struct {
	args  string // the command's arguments as MONITOR prints them
	inner int    // commands a script ran inside it
}

func startMonitor(t *testing.T, rs *redistest.Server) *monitorFeed {
	t.Helper()
	c, err := net.Dial("tcp", rs.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	f := &monitorFeed{conn: c, mark: rs.Client(), marks: make(chan int, 16)}
	go func() {
		r := bufio.NewReaderSize(c, 1<<20)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			_, rest, ok := strings.Cut(line, " [")
			if !ok {
				continue
			}
			who, args, ok := strings.Cut(rest, "] ")
			if !ok {
				continue
			}
			args = strings.TrimRight(args, "\r\n")
			f.mu.Lock()
			if strings.HasSuffix(who, " lua") && len(f.entries) > 0 {
				f.entries[len(f.entries)-1].inner++
			} else {
				f.entries = append(f.entries, monitorEntry{args: args})
			}
			n := len(f.entries)
			f.mu.Unlock()
			if strings.HasPrefix(args, `"echo" "cost-mark-`) {
				f.marks <- n
			}
		}
	}()
	t.Cleanup(f.stop)
	return f
}

func (f *monitorFeed) stop() {
	_ = f.conn.Close()
	_ = f.mark.Close()
}

// inner waits until the feed holds everything sent so far (a marker of its own) and
// returns how many commands the scripts called as calls ran inside them; the feed is
// then emptied.
func (f *monitorFeed) inner(t *testing.T, calls []string) int {
	t.Helper()
	f.n++
	marker := "cost-mark-" + strconv.Itoa(f.n)
	if err := f.mark.Echo(context.Background(), marker).Err(); err != nil {
		t.Fatal(err)
	}
	want := `"echo" "` + marker + `"`
	var entries []monitorEntry
	for entries == nil {
		select {
		case n := <-f.marks:
			f.mu.Lock()
			if f.entries[n-1].args == want {
				entries = f.entries[:n-1]
				f.entries = slices.Clone(f.entries[n:])
			}
			f.mu.Unlock()
		case <-time.After(10 * time.Second):
			t.Fatalf("MONITOR did not show %s within 10 s", marker)
		}
	}
	n := 0
	for _, c := range calls {
		for i, e := range entries {
			if e.args == c {
				n += e.inner
				entries = slices.Delete(entries, i, i+1)
				break
			}
		}
	}
	return n
}

// monitorArgs renders a command's arguments the way MONITOR prints them.
func monitorArgs(args []any) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('"')
		for _, c := range []byte(wireArg(a)) {
			switch {
			case c == '\\' || c == '"':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c == '\a':
				b.WriteString(`\a`)
			case c == '\b':
				b.WriteString(`\b`)
			case c >= 0x20 && c < 0x7f:
				b.WriteByte(c)
			default:
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		}
		b.WriteByte('"')
	}
	return b.String()
}

// wireArg is an argument as go-redis writes it.
func wireArg(a any) string {
	switch v := a.(type) {
	case []byte:
		return string(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32)
	case bool:
		if v {
			return "1"
		}
		return "0"
	case time.Time:
		return v.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(a)
}

func costMode() string {
	if redistest.ClusterMode() {
		return "cluster"
	}
	return "one Redis"
}

// makeQueues makes n resting queues beside the test's: the first the way an admin PUT
// makes one, the others as copies of its settings hash, written in pipelines (an admin PUT
// each would take a minute on a busy machine); the instance finds them in the list of
// queues as it finds any new queue.
func makeQueues(t *testing.T, rs *redistest.Server, n int) {
	t.Helper()
	ctx := context.Background()
	rdb := rs.Client()
	defer rdb.Close()
	q := queue.New(rdb, queue.Config{}, nil)
	name := func(i int) string { return fmt.Sprintf("many-%05d", i) }
	if _, _, err := q.Put(ctx, name(0), queue.SettingsPatch{}); err != nil {
		t.Fatal(err)
	}
	cfgKey := func(n string) string { return "wr:{q:" + n + "}:cfg" }
	fields, err := rdb.HGetAll(ctx, cfgKey(name(0))).Result()
	if err != nil || len(fields) == 0 {
		t.Fatalf("the settings of %s at %s: %v %v", name(0), cfgKey(name(0)), fields, err)
	}
	members, err := rdb.SMembers(ctx, "wr:queues").Result()
	if err != nil || !slices.Contains(members, name(0)) {
		t.Fatalf("the list of queues is not wr:queues: %v", err)
	}
	for from := 1; from < n; from += 500 {
		pipe := rdb.Pipeline()
		for i := from; i < min(n, from+500); i++ {
			pipe.HSet(ctx, cfgKey(name(i)), fields)
			pipe.SAdd(ctx, "wr:queues", name(i))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("make queues: %v", err)
		}
	}
	if err := topology.New(rstore.New(rdb, q.OpTimeout())).Wake(ctx, name(n-1)); err != nil { // the instances read the list again
		t.Fatal(err)
	}
	if got, err := q.Names(ctx); err != nil || len(got) < n {
		t.Fatalf("%d queues listed, want %d or more: %v", len(got), n, err)
	}
}

// TestCostTableMatchesDocs: the table of docs/API.md's "Cost per request" names the same
// routes with the same bounds as costBounds, and every public route the server registers
// (web/server.go, web/pages.go) has its row.
func TestCostTableMatchesDocs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n## Cost per request\n")
	if !ok {
		t.Fatal(`docs/API.md has no "## Cost per request" section`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	row := regexp.MustCompile("^\\| `([^`]+)` \\| (\\d+) \\| (\\d+) \\|")
	var inDoc []costRoute
	for _, l := range strings.Split(sec, "\n") {
		if mm := row.FindStringSubmatch(l); mm != nil {
			n, _ := strconv.Atoi(mm[2])
			pq, _ := strconv.Atoi(mm[3])
			inDoc = append(inDoc, costRoute{mm[1], n, pq})
		}
	}
	if !slices.Equal(inDoc, costBounds) {
		t.Errorf("docs/API.md's cost table differs from costBounds:\n doc  %v\n test %v", inDoc, costBounds)
	}

	// Every public route registered has a row (the admin API has one row for all of it).
	reg := regexp.MustCompile(`\b(app|api|pages)\.(Get|Post|Put|Delete|Patch)\("([^"]+)"`)
	param := regexp.MustCompile(`:(\w+)`)
	var missing []string
	for _, f := range []string{"../web/server.go", "../web/pages.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, mm := range reg.FindAllStringSubmatch(string(src), -1) {
			path := param.ReplaceAllString(mm[3], "{$1}")
			if mm[1] == "api" {
				path = "/api" + path
			}
			route := strings.ToUpper(mm[2]) + " " + path
			if !slices.ContainsFunc(costBounds, func(r costRoute) bool { return r.Route == route }) {
				missing = append(missing, route)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("public routes without a row in the cost table: %v", missing)
	}
}
