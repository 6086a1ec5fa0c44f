package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// The findings of the hostile review, each as the request that broke and what it gets now.

// Finding 1: a token from an empty, fast queue bought the product of a paused queue.
func TestTokenBoundToItsQueue(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "bind", tolerantEnv(rs.URL(), testDB(t), nil))
	admin(t, in, "PUT", "/admin/api/queues/slow", map[string]any{"paused": true})
	admin(t, in, "PUT", "/admin/api/products/p-slow", map[string]any{"stock": 10, "queue": "slow"})
	admin(t, in, "PUT", "/admin/api/products/p-fast", map[string]any{"stock": 10, "queue": "fast"})
	admin(t, in, "PUT", "/admin/api/products/p-none", map[string]any{"stock": 10})
	tickets, tokens := admittedUsers(t, in, "fast", 1)

	res, e, _ := order(t, in, tickets[0], tokens[0], "", map[string]any{"product_id": "p-slow", "quantity": 1})
	if res.StatusCode != 403 || e.Error.Code != "token_wrong_queue" {
		t.Fatalf("fast queue's token on the slow queue's product: %d %s, want 403 token_wrong_queue", res.StatusCode, e.Error.Code)
	}
	res, e, _ = order(t, in, tickets[0], tokens[0], "", map[string]any{"product_id": "p-none", "quantity": 1})
	if res.StatusCode != 403 || e.Error.Code != "product_not_on_sale" {
		t.Fatalf("product naming no queue: %d %s, want 403 product_not_on_sale", res.StatusCode, e.Error.Code)
	}
	// The same token, sent as a browser sends it (the fast queue's cookie), is refused too.
	res = call(t, "POST", in.url+"/api/orders", "", map[string]any{"product_id": "p-slow", "quantity": 1}, nil,
		"X-Admission-Token", tokens[0], "Cookie", "wr_ticket_fast="+tickets[0])
	if code := errCode(res); res.StatusCode != 403 || code != "token_wrong_queue" {
		t.Fatalf("cookie of the fast queue on the slow product: %d %s", res.StatusCode, code)
	}
	// …and with the fast queue's ticket put in the slow queue's cookie.
	res = call(t, "POST", in.url+"/api/orders", "", map[string]any{"product_id": "p-slow", "quantity": 1}, nil,
		"X-Admission-Token", tokens[0], "Cookie", "wr_ticket_slow="+tickets[0])
	if code := errCode(res); res.StatusCode != 403 || code != "token_wrong_queue" {
		t.Fatalf("fast ticket in the slow queue's cookie: %d %s", res.StatusCode, code)
	}
	if s := stockOf(t, in, "p-slow"); s != 10 {
		t.Fatalf("the slow queue's stock moved: %d", s)
	}
	// The refusals left the token usable where it belongs.
	if res, e, _ := order(t, in, tickets[0], tokens[0], "", map[string]any{"product_id": "p-fast", "quantity": 1}); res.StatusCode != 201 {
		t.Fatalf("its own queue's product: %d %s", res.StatusCode, e.Error.Code)
	}
}

// Finding 2: one buyer could take the whole stock in one order.
func TestPerBuyerCapsOverHTTP(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "caps", tolerantEnv(rs.URL(), testDB(t), nil))
	admin(t, in, "PUT", "/admin/api/products/p", map[string]any{"stock": 100, "queue": "caps"})
	tickets, tokens := admittedUsers(t, in, "caps", 1)
	var out map[string]any
	res := call(t, "POST", in.url+"/api/orders", tickets[0], map[string]any{"product_id": "p", "quantity": 100}, &out,
		"X-Admission-Token", tokens[0])
	e, _ := out["error"].(map[string]any)
	if res.StatusCode != 422 || e["code"] != "quantity_limit" || e["field"] != "quantity" || !strings.Contains(fmt.Sprint(e["message"]), "max_per_order") {
		t.Fatalf("quantity 100 of stock 100: %d %v, want 422 quantity_limit naming max_per_order", res.StatusCode, out)
	}
	if res, e, _ := order(t, in, tickets[0], tokens[0], "", map[string]any{"product_id": "p", "quantity": 4}); res.StatusCode != 201 {
		t.Fatalf("4 (the default max_per_order): %d %s", res.StatusCode, e.Error.Code)
	}
	if s := stockOf(t, in, "p"); s != 96 {
		t.Fatalf("stock %d, want 96", s)
	}
}

// Finding 3: one address made 349 places in 5 s and kept them all alive through /status.
func TestOneAddressHoldsAtMostTheCap(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "hoard", tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_STATUS_RATE_PER_TICKET": "2"}))
	const cap = 20
	admin(t, in, "PUT", "/admin/api/queues/hoard", map[string]any{"paused": true, "places_per_ip": cap})
	var held []string
	refused := 0
	for range cap + 15 {
		var j joinResp
		res := call(t, "POST", in.url+"/api/queues/hoard/join", "", nil, &j)
		switch res.StatusCode {
		case 201:
			held = append(held, j.Ticket)
		case 429:
			if code := errCode(res); code != "too_many_places" || res.Header.Get("X-RateLimit-Scope") != "ip" || res.Header.Get("Retry-After") == "" {
				t.Fatalf("over the cap: %s scope %q Retry-After %q", code, res.Header.Get("X-RateLimit-Scope"), res.Header.Get("Retry-After"))
			}
			refused++
		default:
			t.Fatalf("join: %d", res.StatusCode)
		}
	}
	if len(held) != cap || refused != 15 {
		t.Fatalf("%d places and %d refusals from one address, want %d and 15", len(held), refused, cap)
	}
	// Leaving gives the slot back at once; leave-and-rejoin never holds more than the cap.
	call(t, "DELETE", in.url+"/api/queues/hoard/ticket", held[0], nil, nil)
	var again joinResp
	if res := call(t, "POST", in.url+"/api/queues/hoard/join", "", nil, &again); res.StatusCode != 201 {
		t.Fatalf("leave and re-join: %d, want 201", res.StatusCode)
	}
	held[0] = again.Ticket
	if res := call(t, "POST", in.url+"/api/queues/hoard/join", "", nil, nil); res.StatusCode != 429 {
		t.Fatalf("one more after the re-join: %d, want 429", res.StatusCode)
	}
	// Status is limited per ticket: a burst of polls is cut off.
	// 30 polls at once (the bucket holds 10 and refills 2/s: they would have to spread over
	// 10 s to be all answered).
	limited, badScope := 0, ""
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := call(t, "GET", in.url+"/api/queues/hoard/status", held[1], nil, nil)
			mu.Lock()
			defer mu.Unlock()
			if res.StatusCode == 429 {
				if sc := res.Header.Get("X-RateLimit-Scope"); sc != "user" {
					badScope = sc
				}
				limited++
			}
		}()
	}
	wg.Wait()
	if badScope != "" {
		t.Fatalf("status 429 scope %q", badScope)
	}
	if limited == 0 {
		t.Fatal("30 status calls at once on one ticket were all answered")
	}
	var st struct {
		Queues []struct {
			Name        string `json:"name"`
			Waiting     int64  `json:"waiting"`
			PlacesPerIP int64  `json:"places_per_ip"`
		} `json:"queues"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
	for _, q := range st.Queues {
		if q.Name == "hoard" && (q.Waiting > cap || q.PlacesPerIP != cap) {
			t.Fatalf("stats: %d waiting, places_per_ip %d; want at most %d", q.Waiting, q.PlacesPerIP, cap)
		}
	}
	t.Logf("one address: %d places, %d joins refused, %d of 30 status polls limited", len(held), refused, limited)
}

// An IPv6 /64 is one client for the per-address limits.
func TestIPv6SlashSixtyFourIsOneClient(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "v6", tolerantEnv(rs.URL(), testDB(t), map[string]string{
		"WR_PROXY_HEADER": "X-Forwarded-For", "WR_TRUSTED_PROXIES": "127.0.0.1"}))
	admin(t, in, "PUT", "/admin/api/queues/v6", map[string]any{"paused": true, "places_per_ip": 1})
	join := func(addr string) int {
		return call(t, "POST", in.url+"/api/queues/v6/join", "", nil, nil, "X-Forwarded-For", addr).StatusCode
	}
	if got := join("2001:db8:1:2::1"); got != 201 {
		t.Fatalf("first address of the /64: %d", got)
	}
	if got := join("2001:db8:1:2:aaaa:bbbb:cccc:dddd"); got != 429 {
		t.Fatalf("another address of the same /64: %d, want 429", got)
	}
	if got := join("2001:db8:1:3::1"); got != 201 {
		t.Fatalf("the next /64: %d, want 201", got)
	}
}

// Finding 4: one wr_ticket cookie for all queues — joining queue B dropped the place in A.
func TestOneTicketPerQueueInOneBrowser(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "cookies", tolerantEnv(rs.URL(), testDB(t), nil))
	for _, q := range []string{"qa", "qb"} {
		admin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"paused": true})
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Transport: specClient.Transport}
	var a, b joinResp
	callVia(t, browser, "POST", in.url+"/api/queues/qa/join", "", nil, &a)
	callVia(t, browser, "POST", in.url+"/api/queues/qb/join", "", nil, &b)
	var names []string
	for _, c := range jar.Cookies(mustURL(t, in.url)) {
		names = append(names, c.Name)
	}
	if !slices.Contains(names, "wr_ticket_qa") || !slices.Contains(names, "wr_ticket_qb") {
		t.Fatalf("cookies %v, want one per queue", names)
	}
	for q, want := range map[string]joinResp{"qa": a, "qb": b} {
		var st joinResp
		res := callVia(t, browser, "GET", in.url+"/api/queues/"+q+"/status", "", nil, &st)
		if res.StatusCode != 200 || st.Ticket != want.Ticket || st.Position != 1 {
			t.Fatalf("status of %s with the browser's cookies: %d %+v", q, res.StatusCode, st)
		}
	}
	// Joining again keeps the place (same ticket, 200).
	var again joinResp
	if res := callVia(t, browser, "POST", in.url+"/api/queues/qa/join", "", nil, &again); res.StatusCode != 200 || again.Ticket != a.Ticket {
		t.Fatalf("re-join of qa: %d %s", res.StatusCode, again.Ticket)
	}
	// A browser that still holds the first release's single cookie keeps its place.
	var c joinResp
	call(t, "POST", in.url+"/api/queues/qa/join", "", nil, &c)
	var st joinResp
	res := call(t, "GET", in.url+"/api/queues/qa/status", "", nil, &st, "Cookie", "wr_ticket="+c.Ticket)
	if res.StatusCode != 200 || st.Ticket != c.Ticket {
		t.Fatalf("legacy wr_ticket cookie: %d %+v", res.StatusCode, st)
	}
}

// Finding 5: admin product PUT answered 500 for a price beyond int4 and for a NUL in a name.
func TestAdminValuesNeverAnswer500(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "values", tolerantEnv(rs.URL(), testDB(t), nil))
	for _, tc := range []struct {
		path, body string
		status     int
		field      string
	}{
		{"/admin/api/products/p", `{"price":2147483648}`, 201, ""},
		{"/admin/api/products/p", `{"price":9007199254740991}`, 200, ""},
		{"/admin/api/products/p", `{"price":9223372036854775807}`, 422, "price"},
		{"/admin/api/products/p", `{"price":92233720368547758070}`, 422, "price"},
		{"/admin/api/products/p", `{"name":"a\u0000b"}`, 422, "name"},
		{"/admin/api/products/p", `{"name":"tab\there"}`, 422, "name"},
		{"/admin/api/products/p", `{"stock":2147483648}`, 422, "stock"},
		{"/admin/api/products/p", `{"max_per_order":0}`, 422, "max_per_order"},
		{"/admin/api/products/p", `{"max_per_ticket":9223372036854775807}`, 422, "max_per_ticket"},
		{"/admin/api/products/p", `{"queue":"no/slash"}`, 422, "queue"},
		{"/admin/api/queues/q", `{"rate_per_second":1e308}`, 422, "rate_per_second"},
		{"/admin/api/queues/q", `{"max_active":9223372036854775807}`, 422, "max_active"},
		{"/admin/api/queues/q", `{"token_ttl_seconds":9223372036854775807}`, 422, "token_ttl_seconds"},
		{"/admin/api/queues/q", `{"places_per_ip":-1}`, 422, "places_per_ip"},
		{"/admin/api/limits", `{"join_per_ip_per_second":-1}`, 422, "join_per_ip_per_second"},
		{"/admin/api/limits", `{"status_per_ticket_burst":99999999999}`, 422, "status_per_ticket_burst"},
	} {
		var out map[string]any
		res := call(t, "PUT", in.url+tc.path, adminToken, tc.body, &out)
		e, _ := out["error"].(map[string]any)
		if res.StatusCode != tc.status || (tc.field != "" && e["field"] != tc.field) {
			t.Errorf("PUT %s %s: %d %v, want %d field %q", tc.path, tc.body, res.StatusCode, out, tc.status, tc.field)
		}
	}
}

// Finding 6: a stalled Redis answered joins and orders only after 5 s, and orders started
// during the stall waited up to 9.4 s. Redis is SIGSTOPped for 8 s under joins, status
// polls and orders on two instances: every request started during the stall is answered
// — 503 with Retry-After while Redis is stalled — within the budget, nothing is lost and
// nothing oversold.
func TestStalledRedisFailsFast(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t, redistest.Single()) // paused below
	db := testDB(t)
	env := baseEnv(rs.URL(), db, nil)
	a := startInProcess(t, "stall-a", env)
	b := startInProcess(t, "stall-b", env)
	ins := []*instance{a, b}
	admin(t, a, "PUT", "/admin/api/products/p", map[string]any{"stock": 1000, "queue": "stall", "max_per_ticket": 1000})
	tickets, tokens := admittedUsers(t, a, "stall", 40)

	// The stall is the scenario: longer than the bound below, so a request that waited for
	// Redis to come back would show.
	const stall = 8 * time.Second
	const workers = 12
	type result struct {
		what       string
		status     int
		retry      string
		latency    time.Duration
		start, end time.Time
	}
	var mu sync.Mutex
	var results []result
	// done[i]: requests worker i finished; doneAfter[i]: of them, started after the stall.
	var done, doneAfter [workers]int
	var stallEnd time.Time
	stop := make(chan struct{})
	var wg sync.WaitGroup
	worker := func(i int) {
		defer wg.Done()
		in := ins[i%2]
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			var what string
			var res *http.Response
			start := time.Now()
			switch n % 3 {
			case 0:
				what, res = "join", call(t, "POST", in.url+"/api/queues/stall/join", "", nil, nil)
			case 1:
				what, res = "status", call(t, "GET", in.url+"/api/queues/stall/status", tickets[i], nil, nil)
			default:
				what = "order"
				res = call(t, "POST", in.url+"/api/orders", tickets[i], map[string]any{"product_id": "p", "quantity": 1}, nil,
					"X-Admission-Token", tokens[i], "Idempotency-Key", fmt.Sprintf("k-%d-%d", i, n))
			}
			end := time.Now()
			mu.Lock()
			results = append(results, result{what, res.StatusCode, res.Header.Get("Retry-After"), end.Sub(start), start, end})
			done[i]++
			if !stallEnd.IsZero() && start.After(stallEnd) {
				doneAfter[i]++
			}
			mu.Unlock()
			<-time.After(20 * time.Millisecond) // a client's pace between requests
		}
	}
	for i := range workers {
		wg.Add(1)
		go worker(i)
	}
	everyWorker := func(counts *[workers]int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range counts {
				if c < 3 {
					return false
				}
			}
			return true
		}
	}
	testwait.For(t, 30*time.Second, "every worker's join, status and order answered before the stall", everyWorker(&done))
	stallStart := time.Now()
	rs.Pause()
	<-time.After(stall) // the stall itself
	rs.Resume()
	mu.Lock()
	stallEnd = time.Now()
	mu.Unlock()
	testwait.For(t, 30*time.Second, "every worker's join, status and order answered after the stall", everyWorker(&doneAfter))
	close(stop)
	wg.Wait()

	// Every request started during the stall counts, however long it took (one that waited
	// for Redis to come back took more than the bound).
	var during []time.Duration
	counts := map[string]int{}
	for _, r := range results {
		if !r.start.After(stallStart) || !r.start.Before(stallEnd) {
			continue
		}
		counts[fmt.Sprintf("%s %d", r.what, r.status)]++
		if r.status == 503 {
			if r.retry == "" {
				t.Errorf("%s 503 without Retry-After", r.what)
			}
			if r.end.Before(stallEnd) {
				during = append(during, r.latency)
			}
		} else if r.status >= 500 {
			t.Errorf("%s during the stall: %d", r.what, r.status)
		}
		// The budget is 1 s per Redis call (WR_REDIS_TIMEOUT); the bound here is looser only
		// so that a loaded 2-core CI machine does not turn scheduling into a failure (a
		// request that waited for Redis to come back, started in the stall's first 3 s,
		// still shows).
		if r.latency > 5*time.Second {
			t.Errorf("%s took %v during the stall", r.what, r.latency)
		}
	}
	slices.Sort(during)
	if len(during) < 20 {
		t.Fatalf("only %d requests answered 503 during the stall: %v", len(during), counts)
	}
	p := func(q float64) time.Duration { return during[min(len(during)-1, int(q*float64(len(during))))] }
	t.Logf("during a %v stall: %d × 503 (p50 %v, p99 %v, max %v); answers %v", stall, len(during), p(0.5), p(0.99), during[len(during)-1], counts)

	// Recovery: every instance is ready again, joins work, and the orders that were made
	// are exactly the stock that went (none lost, none doubled).
	for _, in := range ins {
		testwait.For(t, 30*time.Second, "ready after the stall", func() bool {
			return call(t, "GET", in.url+"/readyz", "", nil, nil).StatusCode == 200
		})
		if res := call(t, "POST", in.url+"/api/queues/stall/join", "", nil, nil); res.StatusCode != 201 {
			t.Fatalf("join after the stall: %d", res.StatusCode)
		}
	}
	orders := pgCount(t, db, "SELECT count(*)::int FROM orders WHERE product_id = 'p'")
	var left int64
	testwait.For(t, 30*time.Second, "the product answered", func() bool {
		var p struct{ Stock int64 }
		res := call(t, "GET", a.url+"/api/products/p", "", nil, &p)
		left = p.Stock
		return res.StatusCode == 200
	})
	if int(left) != 1000-orders {
		t.Fatalf("stock %d after %d orders of 1 from 1000", left, orders)
	}
	t.Logf("%d orders placed around the stall, stock consistent", orders)
}

// Finding 8, the smaller points.
func TestSmallerHardeningPoints(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "small", tolerantEnv(rs.URL(), testDB(t), nil))
	admin(t, in, "PUT", "/admin/api/queues/small", map[string]any{"paused": true})
	host := strings.TrimPrefix(in.url, "http://")

	t.Run("JSON answers carry nosniff", func(t *testing.T) {
		for _, path := range []string{"/api/products", "/api/queues/nope/status", "/healthz"} {
			if got := call(t, "GET", in.url+path, "", nil, nil).Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("%s: X-Content-Type-Options %q", path, got)
			}
		}
	})
	t.Run("X-Forwarded-Proto is not believed without a trusted proxy", func(t *testing.T) {
		res := call(t, "POST", in.url+"/api/queues/small/join", "", nil, nil, "X-Forwarded-Proto", "https")
		if sc := res.Header.Get("Set-Cookie"); sc == "" || strings.Contains(strings.ToLower(sc), "secure") {
			t.Fatalf("Set-Cookie %q: a client's X-Forwarded-Proto made the cookie Secure", sc)
		}
	})
	t.Run("same-origin compares the scheme", func(t *testing.T) {
		if res := call(t, "POST", in.url+"/api/queues/small/join", "", nil, nil, "Origin", "https://"+host); res.StatusCode != 403 || errCode(res) != "cross_origin" {
			t.Fatalf("Origin https://%s on an http server: %d %s", host, res.StatusCode, errCode(res))
		}
		if res := call(t, "POST", in.url+"/api/queues/small/join", "", nil, nil, "Origin", "http://"+host); res.StatusCode != 201 {
			t.Fatalf("same origin: %d", res.StatusCode)
		}
	})
	t.Run("HEAD on a stream has no body", func(t *testing.T) {
		var j joinResp
		call(t, "POST", in.url+"/api/queues/small/join", "", nil, &j)
		status, body := rawRequest(t, host, "HEAD /api/queues/small/stream HTTP/1.1\r\nHost: "+host+
			"\r\nAuthorization: Bearer "+j.Ticket+"\r\nConnection: close\r\n\r\n")
		if status != 200 || body != "" {
			t.Fatalf("HEAD stream: %d %q", status, body)
		}
	})
	t.Run("a JSON array as an order body names no empty field", func(t *testing.T) {
		var out map[string]any
		res := call(t, "POST", in.url+"/api/orders", "", `[1,2]`, &out, "X-Admission-Token", "00000000-0000-4000-8000-000000000000")
		msg := fmt.Sprint(out)
		if res.StatusCode != 422 || strings.Contains(msg, "Field  ") || !strings.Contains(msg, "JSON object") {
			t.Fatalf("array body: %d %s", res.StatusCode, msg)
		}
	})
}

// errCode reads the error code of an answer made by call.
func errCode(res *http.Response) string {
	var e errResp
	_ = jsonDecode(res, &e)
	return e.Error.Code
}

// jsonDecode reads the (buffered) body of an answer made by call into v.
func jsonDecode(res *http.Response, v any) error {
	b, err := io.ReadAll(res.Body)
	res.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// pgCount runs one count query on its own connection.
func pgCount(t *testing.T, dsn, sql string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Finding 7: ambiguous framing was accepted (two Content-Lengths: the last won; Content-Length
// with chunked: the rest ran as a second request). Now: 400 and the connection closed, on the
// instance and behind deploy/nginx.conf.
func TestAmbiguousFramingRefused(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "framing", tolerantEnv(rs.URL(), testDB(t), nil))
	admin(t, in, "PUT", "/admin/api/queues/fr", map[string]any{"paused": true})
	proxy := startNginx(t, nginxBinary(t), []*instance{in, in}) // both upstreams: this instance
	smuggled := "GET /api/queues/fr/status HTTP/1.1\r\nHost: x\r\n\r\n"
	cases := []struct{ name, req string }{
		{"two Content-Lengths", "POST /api/queues/fr/join HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: " +
			strconv.Itoa(len(smuggled)) + "\r\n\r\n" + smuggled},
		{"Content-Length with chunked", "POST /api/queues/fr/join HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n" +
			"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled},
		{"garbage request line", "HELLO\r\n\r\n"},
		{"unknown method", "FOO /api/products HTTP/1.1\r\nHost: x\r\n\r\n"},
	}
	for _, target := range []struct{ name, addr string }{{"instance", strings.TrimPrefix(in.url, "http://")}, {"nginx", strings.TrimPrefix(proxy, "http://")}} {
		for _, tc := range cases {
			if target.name == "nginx" && tc.name == "unknown method" {
				continue // nginx passes an unknown method on: the instance's answer is the case above
			}
			t.Run(target.name+"/"+tc.name, func(t *testing.T) {
				answers, closed := rawExchange(t, target.addr, tc.req)
				if len(answers) != 1 || answers[0] < 400 || answers[0] > 599 || !closed {
					t.Fatalf("answers %v, closed %v; want one 4xx/5xx answer and the connection closed", answers, closed)
				}
				if target.name == "instance" && answers[0] != 400 {
					t.Fatalf("instance answered %d, want 400", answers[0])
				}
			})
		}
	}
}

// rawExchange writes req on a new connection and reads every response until the server
// closes it (closed) or goes quiet for a second.
func rawExchange(t *testing.T, addr, req string) (statuses []int, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			var ne net.Error
			return statuses, !(errors.As(err, &ne) && ne.Timeout())
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		statuses = append(statuses, res.StatusCode)
	}
}
