package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/orders/pgtest"
	"github.com/waitroom/waitroom/queue/redistest"
)

// joinUsers joins n users to queue through the API, par at a time, and returns their tickets.
func joinUsers(t *testing.T, in *instance, queue string, n, par int) []string {
	t.Helper()
	tickets := make([]string, n)
	failed := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// A 503 with Retry-After (Redis slow to answer on a busy machine: the join fails
			// fast) is asked again, as a client does, for up to 30 s.
			deadline := time.Now().Add(30 * time.Second)
			for {
				var j joinResp
				res := call(t, "POST", in.url+"/api/queues/"+queue+"/join", "", nil, &j)
				tickets[i], failed[i] = j.Ticket, ""
				if j.Ticket != "" {
					return
				}
				failed[i] = fmt.Sprintf("%d %s", res.StatusCode, readAll(res))
				if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || time.Now().After(deadline) {
					return
				}
				<-time.After(50 * time.Millisecond) // the client's pause before asking again
			}
		}()
	}
	wg.Wait()
	for i, f := range failed {
		if f != "" {
			t.Fatalf("join %d of %d to %s: %s", i, n, queue, f)
		}
	}
	return tickets
}

// admittedUsers joins n users to queue (admitting them quickly) and returns their
// tickets and tokens. The status polls run 16 at a time (each ticket's own poll until it
// is admitted), so a few thousand users take seconds, not a minute.
func admittedUsers(t *testing.T, in *instance, queue string, n int) (tickets, tokens []string) {
	t.Helper()
	// Every test client is 127.0.0.1: the per-address cap on places is off for these queues.
	admin(t, in, "PUT", "/admin/api/queues/"+queue, map[string]any{"rate_per_second": 50000, "places_per_ip": 0})
	tickets = joinUsers(t, in, queue, n, 32)
	tokens = make([]string, n)
	errs := make([]error, n)
	ctx := testContext(t)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			tokens[i], errs[i] = pollAdmitted(ctx, in, queue, tickets[i], 60*time.Second)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return tickets, tokens
}

// pollAdmitted polls a ticket's status until it is admitted and returns its token; it may
// run on any goroutine (it reports, never fails the test itself).
func pollAdmitted(ctx context.Context, in *instance, queue, ticket string, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	var wait time.Duration
	for {
		req, err := http.NewRequestWithContext(ctx, "GET", in.url+"/api/queues/"+queue+"/status", nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+ticket)
		res, err := specClient.Do(req)
		if err != nil {
			return "", fmt.Errorf("status of %s: %v", ticket, err)
		}
		var st joinResp
		err = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		if err == nil && st.State == "admitted" {
			return st.Token, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("timed out after %v waiting for the admission of %s (last: %d %+v %v)", within, ticket, res.StatusCode, st, err)
		}
		wait = testwait.Backoff(wait) // the poll's pace, as testwait.For's
		<-time.After(wait)
	}
}

func order(t *testing.T, in *instance, ticket, token, idem string, body any) (*http.Response, errResp, map[string]any) {
	t.Helper()
	var out map[string]any
	hdr := []string{"X-Admission-Token", token}
	if idem != "" {
		hdr = append(hdr, "Idempotency-Key", idem)
	}
	res := call(t, "POST", in.url+"/api/orders", ticket, body, &out, hdr...)
	var e errResp
	if o, ok := out["error"].(map[string]any); ok {
		e.Error.Code, _ = o["code"].(string)
	}
	return res, e, out
}

// sumCounts adds up a map of counts.
func sumCounts(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func stockOf(t *testing.T, in *instance, id string) int64 {
	var p struct{ Stock int64 }
	call(t, "GET", in.url+"/api/products/"+id, "", nil, &p)
	return p.Stock
}

// guardBuyers is the flood of TestOrdersThroughTheGuard's no-oversell case: 400 admitted
// buyers for 100 units in the test command, 200 of them ordering at once (the same outcome
// set as any size: exactly 100 × 201, the rest 409 or 503; 1,000 cost the test command ~15
// CPU-seconds more for no other check); WR_TEST_GUARD_BUYERS=10000 is the benchmark's flood.
func guardBuyers(t *testing.T) int {
	n := 400
	if v := os.Getenv("WR_TEST_GUARD_BUYERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			t.Fatalf("WR_TEST_GUARD_BUYERS=%q: want a number of buyers ≥ 100", v)
		}
	}
	return n
}

// TestOrdersThroughTheGuard: the order route behind the admission guard. Each case has a
// queue and a product of its own, so the cases after the flood run in parallel on one
// instance.
func TestOrdersThroughTheGuard(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	db := testDB(t)
	in := startInProcess(t, "o", baseEnv(rs.URL(), db, nil))
	buy := func(product string) map[string]any { return map[string]any{"product_id": product, "quantity": 1} }
	buyers := guardBuyers(t)

	// The flood runs alone first: its 200 concurrent orders keep the instance's PostgreSQL
	// pool busy (503 fail-fast answers are among its outcomes, not the other cases').
	t.Run(fmt.Sprintf("no oversell: %d admitted buyers, 100 units", buyers), func(t *testing.T) {
		admin(t, in, "PUT", "/admin/api/products/shoe", map[string]any{"name": "Shoe", "price": 5000, "stock": 100, "queue": "rush"})
		tickets, tokens := admittedUsers(t, in, "rush", buyers)
		var mu sync.Mutex
		codes := map[int]int{} // every attempt's answer
		final := map[int]int{} // each buyer's last answer
		var wg sync.WaitGroup
		sem := make(chan struct{}, 200)
		for i := range tickets {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				for {
					// One Idempotency-Key per buyer's purchase, reused on a retry, as the order
					// page does: a 503 whose order did commit (its outcome unknown to the
					// server, beside a CPU hog) is then answered with that order, where a
					// keyless retry gets the used-token answer (401; docs/API.md).
					res, _, _ := order(t, in, tickets[i], tokens[i], "flood-"+strconv.Itoa(i), buy("shoe"))
					mu.Lock()
					codes[res.StatusCode]++
					mu.Unlock()
					if res.StatusCode != 503 {
						mu.Lock()
						final[res.StatusCode]++
						mu.Unlock()
						return
					}
					// A fail-fast 503 (the pool is busy) keeps the token: the buyer tries
					// again, as the order page does, until it has an order or sold out.
					<-time.After(50 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		// Every attempt is an order (201), sold out (409) or a fail-fast 503 — never anything
		// else, never an oversell; in the end every buyer has an order or was told sold out.
		t.Logf("attempts %v; final answers %v", codes, final)
		if codes[201]+codes[409]+codes[503] != sumCounts(codes) || final[201] != 100 || final[409] != len(tickets)-100 || stockOf(t, in, "shoe") != 0 {
			t.Fatalf("attempts %v, final answers %v, stock %d; want only 201/409/503, exactly 100×201 and the rest 409 in the end, stock 0", codes, final, stockOf(t, in, "shoe"))
		}
		var orders int
		conn, err := pgx.Connect(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		_ = conn.QueryRow(context.Background(), "SELECT count(*) FROM orders WHERE product_id='shoe'").Scan(&orders)
		if orders != 100 {
			t.Fatalf("%d orders in the database, want 100", orders)
		}
	})

	t.Run("one token used 20 times concurrently makes one order", func(t *testing.T) {
		t.Parallel()
		admin(t, in, "PUT", "/admin/api/products/shoe-once", map[string]any{"stock": 50, "queue": "once"})
		tickets, tokens := admittedUsers(t, in, "once", 1)
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, _, _ := order(t, in, tickets[0], tokens[0], "", buy("shoe-once"))
				mu.Lock()
				codes[res.StatusCode]++
				if res.StatusCode == 409 && res.Header.Get("Retry-After") != "1" {
					codes[-409]++ // a 409 token_in_use without Retry-After: 1
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		// While the winner holds the token the others get 409 token_in_use (Retry-After: 1);
		// once it is used up, 401 token_invalid.
		if codes[201] != 1 || codes[401]+codes[409] != 19 || codes[-409] != 0 || stockOf(t, in, "shoe-once") != 49 {
			t.Fatalf("outcomes %v, stock %d; want one 201 and 19×(409 token_in_use with Retry-After 1, or 401 once used)", codes, stockOf(t, in, "shoe-once"))
		}
	})

	t.Run("idempotency: 20 concurrent repeats, one order", func(t *testing.T) {
		t.Parallel()
		admin(t, in, "PUT", "/admin/api/products/shoe-idem", map[string]any{"stock": 50, "queue": "idem"})
		tickets, tokens := admittedUsers(t, in, "idem", 1)
		ids := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, e, out := order(t, in, tickets[0], tokens[0], "key-123", buy("shoe-idem"))
				mu.Lock()
				defer mu.Unlock()
				if o, ok := out["order"].(map[string]any); ok && res.StatusCode == 201 {
					ids[o["id"].(string)]++
				} else {
					ids["status "+fmt.Sprint(res.StatusCode)+" "+e.Error.Code]++
				}
			}()
		}
		wg.Wait()
		if len(ids) != 1 {
			t.Fatalf("repeats gave %v, want one order id for all 20", ids)
		}
		// After consumption a repeat still answers with the first order.
		res, _, out := order(t, in, tickets[0], tokens[0], "key-123", buy("shoe-idem"))
		o, _ := out["order"].(map[string]any)
		if res.StatusCode != 201 || ids[fmt.Sprint(o["id"])] != 20 {
			t.Fatalf("repeat after consume: %d %v", res.StatusCode, out)
		}
		if res, e, _ := order(t, in, tickets[0], tokens[0], "key-456", buy("shoe-idem")); res.StatusCode != 401 || e.Error.Code != "token_invalid" {
			t.Fatalf("a used token with a new key: %d %s", res.StatusCode, e.Error.Code)
		}
	})

	t.Run("a failed order leaves the token usable", func(t *testing.T) {
		t.Parallel()
		// The stock runs out after the buyer was admitted: a queue whose products are all
		// out of stock admits nobody (drop day).
		tickets, tokens := admittedUsers(t, in, "retry", 1)
		admin(t, in, "PUT", "/admin/api/products/shoe-retry", map[string]any{"stock": 0, "queue": "retry"})
		if res, e, _ := order(t, in, tickets[0], tokens[0], "", buy("shoe-retry")); res.StatusCode != 409 || e.Error.Code != "sold_out" {
			t.Fatalf("sold out: %d %s", res.StatusCode, e.Error.Code)
		}
		if res, _, _ := order(t, in, tickets[0], tokens[0], "", map[string]any{"product_id": "shoe-retry", "quantity": 0}); res.StatusCode != 422 {
			t.Fatalf("quantity 0: %d", res.StatusCode)
		}
		admin(t, in, "PUT", "/admin/api/products/shoe-retry", map[string]any{"stock": 3})
		if res, _, _ := order(t, in, tickets[0], tokens[0], "", buy("shoe-retry")); res.StatusCode != 201 {
			t.Fatalf("same token after a failed order: %d", res.StatusCode)
		}
	})

	t.Run("token errors", func(t *testing.T) {
		t.Parallel()
		admin(t, in, "PUT", "/admin/api/products/shoe-errs", map[string]any{"stock": 10, "queue": "errs"})
		tickets, tokens := admittedUsers(t, in, "errs", 2)
		cases := []struct {
			name, ticket, token string
			status              int
			code                string
		}{
			{"missing", tickets[0], "", 401, "token_missing"},
			{"unknown", tickets[0], "00000000-0000-4000-8000-000000000000", 401, "token_invalid"},
			{"garbage", tickets[0], "../../etc/passwd", 401, "token_invalid"},
			{"not yours", tickets[1], tokens[0], 403, "token_not_yours"},
			{"forged ticket", "errs.AAAAAAAAAAAAAAAAAAAAAA.forged", tokens[0], 401, "ticket_invalid"},
		}
		for _, c := range cases {
			res, e, _ := order(t, in, c.ticket, c.token, "", buy("shoe-errs"))
			if res.StatusCode != c.status || e.Error.Code != c.code {
				t.Errorf("%s: %d %s, want %d %s", c.name, res.StatusCode, e.Error.Code, c.status, c.code)
			}
		}
		// Expiry: the token's key lapses (as at the end of its TTL).
		rdb := rs.Client()
		key := "wr:{q:errs}:token:" + jtiOf(t, tokens[1])
		if err := rdb.PExpire(context.Background(), key, time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 10*time.Second, "the token's key to lapse", func() bool {
			return rdb.Exists(context.Background(), key).Val() == 0
		})
		if res, e, _ := order(t, in, tickets[1], tokens[1], "", buy("shoe-errs")); res.StatusCode != 401 || e.Error.Code != "token_expired" {
			t.Errorf("expired: %d %s", res.StatusCode, e.Error.Code)
		}
	})
}

func TestRateLimitScopes(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "rl", tolerantEnv(rs.URL(), testDB(t), nil))
	// Out of stock only after the buyers were admitted: a sold-out queue admits nobody (drop day).
	tickets, tokens := admittedUsers(t, in, "rl", 12)
	admin(t, in, "PUT", "/admin/api/products/p", map[string]any{"stock": 0, "queue": "rl"})
	buy := map[string]any{"product_id": "p", "quantity": 1}

	// Refills so slow (one token per 1,000 s) that the test's own duration cannot refill a
	// bucket, however busy the machine (at one per 10 s, 17 requests beside a CPU hog took
	// long enough to refill one).
	admin(t, in, "PUT", "/admin/api/limits", map[string]any{"order_per_ticket_per_second": 0.001, "order_per_ticket_burst": 2, "order_global_per_second": 0.001, "order_global_burst": 10})
	scopes := map[string]int{}
	for range 6 { // one user hammering: 2 pass (409 sold out), 4 refused per user
		res, _, _ := order(t, in, tickets[0], tokens[0], "", buy)
		if res.StatusCode == 429 {
			if res.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			scopes[res.Header.Get("X-RateLimit-Scope")]++
		}
	}
	if scopes["user"] != 4 {
		t.Fatalf("one user over its limit: scopes %v, want 4×user", scopes)
	}
	// The 4 per-user refusals did not spend the global budget of 10: 2 used, 8 left.
	passed, global := 0, 0
	for i := 1; i < 12; i++ {
		res, _, _ := order(t, in, tickets[i], tokens[i], "", buy)
		switch {
		case res.StatusCode == 429 && res.Header.Get("X-RateLimit-Scope") == "global":
			global++
		case res.StatusCode != 429:
			passed++
		}
	}
	if passed != 8 || global != 3 {
		t.Fatalf("11 other users: %d passed, %d refused globally; want 8 and 3", passed, global)
	}
	var m string
	res := call(t, "GET", in.url+"/metrics", "", nil, nil)
	buf := new(strings.Builder)
	_, _ = fmt.Fprint(buf, res.Body)
	m = readAll(res)
	if !strings.Contains(m, `ratelimit_rejected_total{path="/api/orders",scope="global"} 3`) ||
		!strings.Contains(m, `ratelimit_rejected_total{path="/api/orders",scope="user"} 4`) {
		t.Fatalf("metrics lack the rejections:\n%s", grep(m, "ratelimit"))
	}
}

func readAll(res *http.Response) string {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestPostgresDown: with PostgreSQL stopped, orders answer 503 with the error JSON and
// the token is kept; once it is back, the same token orders.
func TestPostgresDown(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	pg := pgtest.MustPrivate(t)
	in := startInProcess(t, "pg", baseEnv(rs.URL(), pg.URL(), nil))
	admin(t, in, "PUT", "/admin/api/products/p", map[string]any{"stock": 5, "queue": "pg"})
	tickets, tokens := admittedUsers(t, in, "pg", 1)
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	res, e, _ := order(t, in, tickets[0], tokens[0], "k1", map[string]any{"product_id": "p", "quantity": 1})
	if res.StatusCode != 503 || e.Error.Code != "database_unavailable" || res.Header.Get("Retry-After") == "" {
		t.Fatalf("PostgreSQL down: %d %s", res.StatusCode, e.Error.Code)
	}
	if r := call(t, "GET", in.url+"/readyz", "", nil, nil); r.StatusCode != 503 {
		t.Fatalf("readyz with PostgreSQL down: %d", r.StatusCode)
	}
	if err := pg.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "readyz", func() bool {
		return call(t, "GET", in.url+"/readyz", "", nil, nil).StatusCode == 200
	})
	if res, _, _ := order(t, in, tickets[0], tokens[0], "k1", map[string]any{"product_id": "p", "quantity": 1}); res.StatusCode != 201 {
		t.Fatalf("after PostgreSQL returned: %d", res.StatusCode)
	}
}
