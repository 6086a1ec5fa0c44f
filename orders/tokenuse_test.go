package orders_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/waitroom/waitroom/orders"
)

// One admission token buys once, whatever Idempotency-Key it comes with: the order store,
// not Redis (whose mark of a used token a failover can lose), is the record of its use. A
// repeat with the first order's key still gets that order.
func TestTokenBuysOnce(t *testing.T) {
	t.Parallel()
	s, dsn, reg := mustOpenReg(t, orders.Config{})
	mustProduct(t, s, "tok", 10)
	ctx := ctxT(t)
	const token = "6f1c1f2e-8a4b-4c1d-9e2f-0a1b2c3d4e5f"
	req := orders.OrderRequest{ProductID: "tok", Quantity: 2, Ticket: "ticket-1", IdempotencyKey: "k1", TokenID: token}

	first, replayed, err := s.PlaceOrder(ctx, req)
	if err != nil || replayed {
		t.Fatalf("first order: %+v replayed=%v %v", first, replayed, err)
	}

	// The same token under another key (a used token that a failover made look unused).
	second := req
	second.IdempotencyKey = "k2"
	_, _, err = s.PlaceOrder(ctx, second)
	var used *orders.TokenUsedError
	if !errors.Is(err, orders.ErrTokenUsed) || !errors.As(err, &used) {
		t.Fatalf("second order with the token: %v, want ErrTokenUsed", err)
	}
	if used.OrderID != first.ID || used.IdempotencyKey != "k1" {
		t.Fatalf("TokenUsedError %+v, want order %s key k1", used, first.ID)
	}

	// Without a key, with another quantity: still the token's second order.
	third := req
	third.IdempotencyKey, third.Quantity = "", 1
	if _, _, err := s.PlaceOrder(ctx, third); !errors.Is(err, orders.ErrTokenUsed) {
		t.Fatalf("keyless order with the token: %v, want ErrTokenUsed", err)
	}

	// The first request repeated: its order, not the token's refusal (the key is looked at
	// first).
	again, replayed, err := s.PlaceOrder(ctx, req)
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("repeat of the first request: %+v replayed=%v %v, want order %s replayed", again, replayed, err, first.ID)
	}
	// The first key with another request is still a key conflict, not a token refusal.
	other := req
	other.Quantity = 1
	if _, _, err := s.PlaceOrder(ctx, other); !errors.Is(err, orders.ErrIdempotencyConflict) {
		t.Fatalf("first key, other quantity: %v, want ErrIdempotencyConflict", err)
	}

	if n := query[int](t, dsn, "SELECT stock FROM products WHERE id = 'tok'"); n != 8 {
		t.Fatalf("stock = %d, want 8 (decremented once)", n)
	}
	if n := query[int](t, dsn, "SELECT count(*)::int FROM orders WHERE token_id = $1", token); n != 1 {
		t.Fatalf("%d orders for the token, want 1", n)
	}
	if got := query[string](t, dsn, "SELECT token_id FROM orders WHERE id = $1::uuid", first.ID); got != token {
		t.Fatalf("the order's token_id = %q, want %q", got, token)
	}

	// The token's refusal comes before the stock and the caps: sold out, it is still
	// "used" (the answer that lets the route mark it used again).
	zero := 0
	if _, _, err := s.PutProduct(ctx, "tok", orders.ProductPatch{Stock: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "tok", Quantity: 1, Ticket: "ticket-1", IdempotencyKey: "k3", TokenID: token}); !errors.Is(err, orders.ErrTokenUsed) {
		t.Fatalf("used token on a sold-out product: %v, want ErrTokenUsed", err)
	}
	// Another token of the same ticket (a later admission) buys as before; orders without a
	// token never collide.
	ten := 10
	if _, _, err := s.PutProduct(ctx, "tok", orders.ProductPatch{Stock: &ten}); err != nil {
		t.Fatal(err)
	}
	for i, tok := range []string{"0e5d3c2b-1a09-4f8e-8d7c-6b5a49382716", "", ""} {
		if _, _, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "tok", Quantity: 1, Ticket: fmt.Sprint("t-", i), TokenID: tok}); err != nil {
			t.Fatalf("order %d with token %q: %v", i, tok, err)
		}
	}

	// A keyless first order: the refusal names no key.
	const keyless = "1a2b3c4d-5e6f-4a0b-8c1d-2e3f4a5b6c7d"
	o, _, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "tok", Quantity: 1, Ticket: "t-k", TokenID: keyless})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "tok", Quantity: 1, Ticket: "t-k", IdempotencyKey: "x", TokenID: keyless})
	if !errors.As(err, &used) || used.OrderID != o.ID || used.IdempotencyKey != "" {
		t.Fatalf("after a keyless order: %v (%+v), want TokenUsedError for %s without a key", err, used, o.ID)
	}

	if got := metricValue(t, reg, "order_outcomes_total", "result", "token_used"); got != 4 {
		t.Errorf("order_outcomes_total{result=token_used} = %v, want 4", got)
	}
}

// Concurrent orders with one token and different keys (the token store let them all pass,
// as after a failover): exactly one is created. The others either see it before their
// insert or wait on the unique index for its COMMIT and then see it; the stock moves once.
func TestTokenBuysOnceConcurrently(t *testing.T) {
	t.Parallel()
	s, dsn := mustOpen(t, orders.Config{MaxConns: 30, AcquireTimeout: 10 * time.Second})
	mustProduct(t, s, "race", 100)
	// Hold every COMMIT a moment, so the others reach the insert while the winner's row is
	// still uncommitted (the ON CONFLICT wait, then the lookup by token).
	orders.SetCommitHooks(s, func(context.Context, pgx.Tx) error { time.Sleep(100 * time.Millisecond); return nil }, nil)
	const n = 20
	const token = "9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			_, _, errs[i] = s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "race", Quantity: 1,
				Ticket: "ticket-r", IdempotencyKey: fmt.Sprint("key-", i), TokenID: token})
		})
	}
	close(start)
	wg.Wait()
	created, refused := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		case errors.Is(err, orders.ErrTokenUsed):
			refused++
		default:
			t.Errorf("order %d: %v", i, err)
		}
	}
	if created != 1 || refused != n-1 {
		t.Fatalf("%d created, %d refused as used, want 1 and %d", created, refused, n-1)
	}
	if left := query[int](t, dsn, "SELECT stock FROM products WHERE id = 'race'"); left != 99 {
		t.Fatalf("stock = %d, want 99", left)
	}
	if rows := query[int](t, dsn, "SELECT count(*)::int FROM orders WHERE token_id = $1", token); rows != 1 {
		t.Fatalf("%d orders for the token, want 1", rows)
	}
}

// Migrations 006 and 007: the column, and the unique index whose name the error mapping
// knows (a unique violation on it is ErrTokenUsed; on another index it is not).
func TestTokenIndex(t *testing.T) {
	t.Parallel()
	s, dsn := mustOpen(t, orders.Config{})
	mustProduct(t, s, "ix", 5)
	valid := query[bool](t, dsn, `SELECT i.indisvalid AND i.indisunique AND i.indpred IS NOT NULL
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'orders_token_id_key'`)
	if !valid {
		t.Fatal("orders_token_id_key is not a valid, unique, partial index")
	}
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ins := "INSERT INTO orders (id, product_id, quantity, request_hash, token_id) VALUES (gen_random_uuid(), 'ix', 1, 'h', $1)"
	if _, err := conn.Exec(ctx, ins, "tok-a"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // NULLs (orders without a token, rows of old instances) never collide
		if _, err := conn.Exec(ctx, ins, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err = conn.Exec(ctx, ins, "tok-a")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.ConstraintName != "orders_token_id_key" {
		t.Fatalf("a second row for one token: %v, want 23505 on orders_token_id_key", err)
	}
	if got := orders.Classify(err); !errors.Is(got, orders.ErrTokenUsed) {
		t.Fatalf("classify(%v) = %v, want ErrTokenUsed", err, got)
	}
	other := &pgconn.PgError{Code: "23505", ConstraintName: "orders_idempotency_key_key"}
	if got := orders.Classify(other); errors.Is(got, orders.ErrTokenUsed) {
		t.Fatalf("a unique violation on another index mapped to ErrTokenUsed: %v", got)
	}
}
