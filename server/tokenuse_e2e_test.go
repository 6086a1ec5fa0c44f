package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/queue/redistest"
)

// tokenRedisState is what consuming an admission token changes in Redis (internal/rstore/lua/token.lua):
// the token key (deleted), the ticket's state in the queue's tickets hash ("a:…" becomes
// "u:…"), and its entry in the active set (removed). The claim key exists only while a
// request holds the token.
type tokenRedisState struct {
	tokenKey, ticketsKey, activeKey, ticket string
	dump                                    string
	ttl                                     time.Duration
	state                                   string
	score                                   float64
}

// snapshotToken reads that state of a signed token before it is used.
func snapshotToken(t *testing.T, rdb redis.Cmdable, token string) tokenRedisState {
	t.Helper()
	c := tokenClaims(t, token)
	name, _ := c["aud"].(string)
	ticket, _ := c["sub"].(string)
	p := "wr:{q:" + name + "}:"
	s := tokenRedisState{tokenKey: p + "token:" + jtiOf(t, token), ticketsKey: p + "tickets", activeKey: p + "active", ticket: ticket}
	ctx := testContext(t)
	var err error
	if s.dump, err = rdb.Dump(ctx, s.tokenKey).Result(); err != nil {
		t.Fatalf("DUMP %s: %v", s.tokenKey, err)
	}
	if s.ttl, err = rdb.PTTL(ctx, s.tokenKey).Result(); err != nil || s.ttl <= 0 {
		t.Fatalf("PTTL %s: %v %v", s.tokenKey, s.ttl, err)
	}
	if s.state, err = rdb.HGet(ctx, s.ticketsKey, ticket).Result(); err != nil || !strings.HasPrefix(s.state, "a:") {
		t.Fatalf("HGET tickets %s: %q %v, want an admitted state", ticket, s.state, err)
	}
	if s.score, err = rdb.ZScore(ctx, s.activeKey, ticket).Result(); err != nil {
		t.Fatalf("ZSCORE active %s: %v", ticket, err)
	}
	return s
}

// restore puts the state back as a Redis Cluster failover does when the write that
// consumed the token had not reached the replica that is promoted: the token looks unused.
func (s tokenRedisState) restore(t *testing.T, rdb redis.Cmdable) {
	t.Helper()
	ctx := testContext(t)
	if err := rdb.RestoreReplace(ctx, s.tokenKey, s.ttl, s.dump).Err(); err != nil {
		t.Fatalf("RESTORE %s: %v", s.tokenKey, err)
	}
	if err := rdb.HSet(ctx, s.ticketsKey, s.ticket, s.state).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, s.activeKey, redis.Z{Score: s.score, Member: s.ticket}).Err(); err != nil {
		t.Fatal(err)
	}
}

// usedState is the ticket's state in Redis now, and whether the token key is gone.
func (s tokenRedisState) usedState(t *testing.T, rdb redis.Cmdable) (state string, tokenGone bool) {
	t.Helper()
	ctx := testContext(t)
	state, _ = rdb.HGet(ctx, s.ticketsKey, s.ticket).Result()
	n, err := rdb.Exists(ctx, s.tokenKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	return state, n == 0
}

type orderAnswer struct {
	status        int
	code, message string
	orderID       string
}

// placeWith posts one order and reads either answer.
func placeWith(t *testing.T, in *instance, ticket, token, idem string) orderAnswer {
	t.Helper()
	var out struct {
		Order struct {
			ID string `json:"id"`
		} `json:"order"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	res := call(t, "POST", in.url+"/api/orders", ticket, map[string]any{"product_id": "tu-shoe", "quantity": 1}, &out,
		"X-Admission-Token", token, "Idempotency-Key", idem)
	return orderAnswer{status: res.StatusCode, code: out.Error.Code, message: out.Error.Message, orderID: out.Order.ID}
}

// placeAnswered is placeWith that tries again, as the answer asks, while it is 503
// database_unavailable ("your token is kept. Try again shortly."): on a busy machine a
// statement can outlast the order store's 2 s budget, and that answer is the product's way
// through it, not the outcome under test. It also returns how many such answers it met.
func placeAnswered(t *testing.T, in *instance, ticket, token, idem string) (orderAnswer, int) {
	t.Helper()
	for n := 0; ; n++ {
		a := placeWith(t, in, ticket, token, idem)
		if a.status != 503 || a.code != "database_unavailable" || n == 30 {
			return a, n
		}
		time.Sleep(100 * time.Millisecond) // the buyer's pause before trying again: the scenario
	}
}

// dbCount runs one count query on the test database.
func dbCount(t *testing.T, db, sql string, args ...any) int {
	t.Helper()
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// tokenUsedOutcomes is order_outcomes_total{result="token_used"}: orders the order store
// refused because their token had bought.
func tokenUsedOutcomes(t *testing.T, in *instance) string {
	t.Helper()
	line := metricLine(readAll(call(t, "GET", in.url+"/metrics", "", nil, nil)), `order_outcomes_total{result="token_used"}`)
	return strings.TrimPrefix(line, `order_outcomes_total{result="token_used"} `)
}

// TestTokenUseSurvivesFailover: the order store (PostgreSQL) is the durable record of an
// admission token's use. A used token whose "used" mark a Redis failover lost (simulated by
// putting back the keys consume changed) is refused with the used-token answer, the stock
// moves once, one order row holds the token, and the mark is written again in Redis (later
// tries are refused by the guard; the first order's Idempotency-Key still replays it).
// Also concurrently: ten orders with one token make one order, before and after the loss.
func TestTokenUseSurvivesFailover(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	db := testDB(t)
	in := startInProcess(t, "tu", tolerantEnv(rs.URL(), db, nil))
	admin(t, in, "PUT", "/admin/api/products/tu-shoe", map[string]any{"name": "Shoe", "price": 100, "stock": 50, "queue": "tu"})
	tickets, tokens := admittedUsers(t, in, "tu", 2)
	rdb := rs.Client()
	countFor := func(token string) int {
		return dbCount(t, db, "SELECT count(*)::int FROM orders WHERE token_id = $1", jtiOf(t, token))
	}

	t.Run("a token restored by a failover does not buy twice", func(t *testing.T) {
		ticket, token := tickets[0], tokens[0]
		before := snapshotToken(t, rdb, token)

		first := placeWith(t, in, ticket, token, "first")
		if first.status != 201 || first.orderID == "" {
			t.Fatalf("first order: %+v, want 201", first)
		}
		if got := stockOf(t, in, "tu-shoe"); got != 49 {
			t.Fatalf("stock %d after one order, want 49", got)
		}
		// The guard's answer to a used token, while Redis remembers the use.
		guard := placeWith(t, in, ticket, token, "second")
		if guard.status != 401 || guard.code != "token_invalid" {
			t.Fatalf("used token, Redis intact: %+v, want 401 token_invalid", guard)
		}

		// The failover: the consume is lost, the token looks live again.
		before.restore(t, rdb)
		if code, e := verifyCall(t, in, ticket, token, "tu"); code != 204 {
			t.Fatalf("the restored token is not live (%d %s): the test simulates nothing", code, e)
		}
		again := placeWith(t, in, ticket, token, "third")
		if again.status != guard.status || again.code != guard.code || again.message != guard.message {
			t.Fatalf("restored token's second order: %+v, want the used-token answer %+v", again, guard)
		}
		if got := stockOf(t, in, "tu-shoe"); got != 49 {
			t.Fatalf("stock %d after the restored token's second order, want 49", got)
		}
		if n := countFor(token); n != 1 {
			t.Fatalf("%d orders for the token, want 1", n)
		}
		if got := tokenUsedOutcomes(t, in); got != "1" {
			t.Fatalf("order store refusals %q, want 1", got)
		}

		// Marked used again, under the first order's key.
		state, gone := before.usedState(t, rdb)
		if !gone || !strings.HasPrefix(state, "u:") || !strings.HasSuffix(state, ":first") {
			t.Fatalf("after the refusal Redis has state %q, token key gone %v; want used by key first", state, gone)
		}
		if r := placeWith(t, in, ticket, token, "first"); r.status != 201 || r.orderID != first.orderID {
			t.Fatalf("repeat of the first order: %+v, want 201 with order %s", r, first.orderID)
		}
		if r := placeWith(t, in, ticket, token, "fourth"); r != guard {
			t.Fatalf("a later try: %+v, want %+v", r, guard)
		}
		if got := tokenUsedOutcomes(t, in); got != "1" {
			t.Fatalf("order store refusals %q after a later try, want 1 (the guard refuses it)", got)
		}

		// The same admission presented bare (its jti) is the same token in the order store.
		before.restore(t, rdb)
		if r := placeWith(t, in, ticket, jtiOf(t, token), "fifth"); r != guard {
			t.Fatalf("restored token presented bare: %+v, want %+v", r, guard)
		}
		if got, n := stockOf(t, in, "tu-shoe"), countFor(token); got != 49 || n != 1 {
			t.Fatalf("after the bare try: stock %d, %d orders for the token; want 49 and 1", got, n)
		}
		if got := tokenUsedOutcomes(t, in); got != "2" {
			t.Fatalf("order store refusals %q, want 2", got)
		}
		if n := dbCount(t, db, "SELECT count(*)::int FROM orders"); n != 1 {
			t.Fatalf("%d orders in all, want 1", n)
		}
	})

	t.Run("ten concurrent orders with one token: one order, also after the failover", func(t *testing.T) {
		ticket, token := tickets[1], tokens[1]
		before := snapshotToken(t, rdb, token)
		burst := func(round string) (created int, others map[string]int) {
			answers := make([]orderAnswer, 10)
			retried := make([]int, len(answers))
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range answers {
				wg.Go(func() {
					<-start
					answers[i], retried[i] = placeAnswered(t, in, ticket, token, fmt.Sprintf("%s-%d", round, i))
				})
			}
			close(start)
			wg.Wait()
			if n := slices.Max(retried); n > 0 {
				t.Logf("%s: answers 503 database_unavailable tried again (up to %d times)", round, n)
			}
			others = map[string]int{}
			for _, a := range answers {
				switch {
				case a.status == 201:
					created++
				case a.status == 401 && a.code == "token_invalid", a.status == 409 && a.code == "token_in_use":
					others[fmt.Sprint(a.status, " ", a.code)]++
				default:
					t.Errorf("%s: unexpected answer %+v", round, a)
				}
			}
			return created, others
		}

		created, others := burst("fresh")
		if created != 1 {
			t.Fatalf("fresh token, 10 concurrent orders: %d created (others %v), want 1", created, others)
		}
		t.Logf("fresh token: 1 created, others %v", others)
		before.restore(t, rdb)
		created, others = burst("restored")
		if created != 0 {
			t.Fatalf("restored token, 10 concurrent orders: %d created (others %v), want 0", created, others)
		}
		t.Logf("restored token: none created, others %v", others)
		if got, n := stockOf(t, in, "tu-shoe"), countFor(token); got != 48 || n != 1 {
			t.Fatalf("stock %d, %d orders for the token; want 48 and 1", got, n)
		}
		if state, gone := before.usedState(t, rdb); !gone || !strings.HasPrefix(state, "u:") {
			t.Fatalf("after the bursts Redis has state %q, token key gone %v; want used", state, gone)
		}
	})
}
