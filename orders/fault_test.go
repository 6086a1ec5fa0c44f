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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/orders/pgtest"
)

// holdRow opens a connection that holds products row id FOR UPDATE until release.
func holdRow(t *testing.T, dsn, id string) (pid uint32, release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM products WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = tx.Rollback(ctx)
			_ = conn.Close(ctx)
		})
	}
	t.Cleanup(release)
	return conn.PgConn().PID(), release
}

// waitLockWaiters waits until n backends of the current database wait for a lock.
func waitLockWaiters(t *testing.T, dsn string, n int) {
	t.Helper()
	testwait.For(t, 30*time.Second, fmt.Sprintf("%d backends waiting for a lock", n), func() bool {
		return query[int](t, dsn, `SELECT count(*)::int FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`) >= n
	})
}

func TestPoolExhaustedFailsFast(t *testing.T) {
	t.Parallel()
	const acquire = 200 * time.Millisecond
	s, dsn := mustOpen(t, orders.Config{MaxConns: 2, AcquireTimeout: acquire, QueryTimeout: 20 * time.Second})
	mustProduct(t, s, "hot", 10)
	// The vicious circle: a locked hot row holds every pooled connection.
	_, release := holdRow(t, dsn, "hot")
	var wg sync.WaitGroup
	held := make([]error, 2)
	for i := range held {
		wg.Go(func() {
			// Until it has a connection (a new one may take longer than the 200 ms to open
			// on a busy machine; an unavailable call writes nothing): then it waits on the row.
			for deadline := time.Now().Add(30 * time.Second); ; {
				_, _, held[i] = s.PlaceOrder(context.Background(), orders.OrderRequest{ProductID: "hot", Quantity: 1})
				if !errors.Is(held[i], orders.ErrUnavailable) || time.Now().After(deadline) {
					return
				}
			}
		})
	}
	waitLockWaiters(t, dsn, 2)

	start := time.Now()
	_, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "hot", Quantity: 1})
	took := time.Since(start)
	if !errors.Is(err, orders.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	// About the acquire timeout, far from the 20 s the held calls wait (the upper bound is
	// loose: a busy machine adds to it).
	if took < acquire || took > acquire+5*time.Second {
		t.Fatalf("answered after %v, want about the acquire timeout %v", took, acquire)
	}
	if _, err := s.Products(ctxT(t)); !errors.Is(err, orders.ErrUnavailable) {
		t.Fatalf("Products with a full pool: %v, want ErrUnavailable", err)
	}
	t.Logf("pool of 2 held by a locked row: PlaceOrder answered %q after %v (AcquireTimeout %v)",
		err, took.Round(time.Millisecond), acquire)

	release()
	wg.Wait()
	for i, err := range held {
		if err != nil {
			t.Fatalf("held call %d: %v", i, err)
		}
	}
}

func TestDatabaseDownThenBack(t *testing.T) {
	t.Parallel()
	pg := pgtest.MustPrivate(t)
	s, _ := mustOpen(t, orders.Config{URL: pg.URL(), AcquireTimeout: 500 * time.Millisecond, QueryTimeout: 2 * time.Second})
	mustProduct(t, s, "p", 10)
	if _, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "p", Quantity: 1, IdempotencyKey: "before"}); err != nil {
		t.Fatal(err)
	}

	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "p", Quantity: 1, IdempotencyKey: "during"})
	took := time.Since(start)
	if !errors.Is(err, orders.ErrUnavailable) {
		t.Fatalf("PlaceOrder with PostgreSQL killed: %v, want ErrUnavailable", err)
	}
	if took > 3*time.Second {
		t.Fatalf("PlaceOrder took %v with PostgreSQL down", took)
	}
	t.Logf("PostgreSQL killed: PlaceOrder answered %q after %v", err, took.Round(time.Millisecond))
	if err := s.Ping(ctxT(t)); !errors.Is(err, orders.ErrUnavailable) {
		t.Fatalf("Ping: %v, want ErrUnavailable", err)
	}
	if _, err := s.Product(ctxT(t), "p"); !errors.Is(err, orders.ErrUnavailable) {
		t.Fatalf("Product: %v, want ErrUnavailable", err)
	}
	_, err = orders.Open(ctxT(t), orders.Config{URL: pg.URL()}, prometheus.NewRegistry())
	if !errors.Is(err, orders.ErrUnavailable) {
		t.Fatalf("Open while down: %v, want ErrUnavailable", err)
	}

	if err := pg.Restart(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	attempts := 0
	testwait.For(t, 10*time.Second, "an order to succeed after the restart", func() bool {
		attempts++
		_, replayed, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "p", Quantity: 1, IdempotencyKey: "during"})
		if err == nil {
			if replayed {
				t.Fatal("the order made while down exists")
			}
			return true
		}
		if !errors.Is(err, orders.ErrUnavailable) {
			t.Fatalf("after restart: %v", err)
		}
		return false
	})
	p, err := s.Product(ctxT(t), "p")
	if err != nil || p.Stock != 8 {
		t.Fatalf("after restart: stock %d, %v; want 8", p.Stock, err)
	}
	t.Logf("restarted: order succeeded on attempt %d, stock 10 → 8 (two orders, none while down)", attempts)
}

func TestLostCommitAnswerIsResolvedByLookup(t *testing.T) {
	t.Parallel()
	s, dsn, reg := mustOpenReg(t, orders.Config{})
	mustProduct(t, s, "p", 5)
	lost := true
	orders.SetCommitHooks(s, nil, func() error {
		if lost {
			lost = false
			return errors.New("connection reset after COMMIT was sent") // the answer is lost
		}
		return nil
	})
	o, replayed, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "p", Quantity: 2, Ticket: "t"})
	if err != nil || replayed || o.ID == "" {
		t.Fatalf("got %+v replayed=%v err=%v, want the committed order", o, replayed, err)
	}
	if n := query[int](t, dsn, "SELECT count(*) FROM orders"); n != 1 {
		t.Fatalf("orders = %d, want 1", n)
	}
	if n := query[int](t, dsn, "SELECT stock FROM products"); n != 3 {
		t.Fatalf("stock = %d, want 3", n)
	}
	if got := metricValue(t, reg, "order_retries_total", "reason", "unknown_outcome"); got != 1 {
		t.Fatalf("unknown_outcome retries = %v, want 1", got)
	}
}

func TestCommitOnDeadConnectionMakesOneOrder(t *testing.T) {
	t.Parallel()
	s, dsn := mustOpen(t, orders.Config{})
	mustProduct(t, s, "p", 5)
	dropped := false
	orders.SetCommitHooks(s, func(ctx context.Context, tx pgx.Tx) error {
		if !dropped {
			dropped = true
			// The connection dies under the COMMIT: pgx cannot know whether it happened.
			return tx.Conn().PgConn().Close(ctx)
		}
		return nil
	}, nil)
	_, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "p", Quantity: 1, IdempotencyKey: "k"})
	if err != nil {
		t.Fatalf("PlaceOrder: %v", err)
	}
	if n := query[int](t, dsn, "SELECT count(*) FROM orders"); n != 1 {
		t.Fatalf("orders = %d, want 1", n)
	}
	if n := query[int](t, dsn, "SELECT stock FROM products"); n != 4 {
		t.Fatalf("stock = %d, want 4", n)
	}
}

func TestDeadlockIsRetried(t *testing.T) {
	t.Parallel()
	// Budgets far past anything the test waits for: the test is about the deadlock, not the
	// budgets. The test binary's -timeout still ends a real hang.
	s, dsn, reg := mustOpenReg(t, orders.Config{QueryTimeout: 5 * time.Minute, AcquireTimeout: 5 * time.Minute})
	mustProduct(t, s, "p", 5)
	ctx := context.Background()
	conn := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	// PostgreSQL checks a lock wait for a deadlock once, deadlock_timeout (1 s) after the
	// wait began. For PlaceOrder to be the victim, its wait must close the cycle, not the
	// other transaction's — whose check comes 10 minutes after its own wait began, so never
	// here. A gate makes that order certain however busy the machine (beside a CPU hog the
	// test once closed the cycle more than a second after PlaceOrder began waiting, and the
	// other transaction became the victim): a trigger of this test's database makes every
	// insert into orders take an advisory lock the gate session holds, so PlaceOrder, its
	// key inserted, stops there until the other transaction waits for that key.
	gate := conn()
	for _, q := range []string{
		`CREATE FUNCTION test_gate() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$`,
		`CREATE TRIGGER test_gate AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION test_gate()`,
		`SELECT pg_advisory_lock(4242)`,
	} {
		if _, err := gate.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	other := conn()
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '10min'"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE products SET updated_at = now() WHERE id = 'p'"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		o   orders.Order
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, _, err := s.PlaceOrder(context.Background(), orders.OrderRequest{ProductID: "p", Quantity: 1, IdempotencyKey: "k"})
		done <- result{o, err}
	}()
	// waitFor waits until n backends of this database wait for a lock of that type,
	// failing at once with PlaceOrder's answer if it ended instead.
	waitFor := func(what, lockType string, n int) {
		t.Helper()
		testwait.For(t, 4*time.Minute, what, func() bool {
			select {
			case r := <-done:
				t.Fatalf("PlaceOrder ended while the test waited for %s: order %v, err %v", what, r.o.ID, r.err)
			default:
			}
			return query[int](t, dsn, `SELECT count(*)::int FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE NOT l.granted AND l.locktype = $1 AND a.datname = current_database()`, lockType) >= n
		})
	}
	waitFor("PlaceOrder, its key inserted, to stop at the gate", "advisory", 1)
	// The other transaction inserts the same key: it waits for PlaceOrder's transaction.
	inserted := make(chan error, 1)
	go func() {
		_, err := tx.Exec(ctx, `INSERT INTO orders (id, product_id, quantity, idempotency_key, request_hash)
			VALUES (gen_random_uuid(), 'p', 1, 'k', 'other')`)
		inserted <- err
	}()
	waitFor("the other transaction to wait for PlaceOrder's key k", "transactionid", 1)
	// The gate opens: PlaceOrder goes on to the stock row the other transaction holds and
	// closes the cycle; its deadlock check aborts it (40P01), which lets the INSERT through.
	if _, err := gate.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-inserted:
		if err != nil {
			t.Fatalf("other transaction: %v", err)
		}
	case r := <-done:
		t.Fatalf("PlaceOrder ended before the deadlock let the other transaction through: order %v, err %v", r.o.ID, r.err)
	case <-time.After(4 * time.Minute):
		t.Fatal("the other transaction's INSERT still waits 4 minutes after the gate opened")
	}
	// PlaceOrder's retry inserts key k again and waits for the other transaction's row.
	waitFor("the retry to wait for the other transaction's key k", "transactionid", 1)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("PlaceOrder after a deadlock: %v", r.err)
	}
	if got := metricValue(t, reg, "order_retries_total", "reason", "deadlock"); got < 1 {
		t.Fatalf("deadlock retries = %v, want ≥ 1", got)
	}
	if n := query[int](t, dsn, "SELECT stock FROM products"); n != 4 {
		t.Fatalf("stock = %d, want 4", n)
	}
	t.Logf("real deadlock (40P01) retried: order %s placed once", r.o.ID)
}

func TestRetriesStopAfterThree(t *testing.T) {
	t.Parallel()
	s, dsn, reg := mustOpenReg(t, orders.Config{})
	mustProduct(t, s, "p", 5)
	calls := 0
	orders.SetCommitHooks(s, func(context.Context, pgx.Tx) error {
		calls++
		return &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
	}, nil)
	_, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "p", Quantity: 1})
	if !errors.Is(err, orders.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if calls != 4 {
		t.Fatalf("attempts = %d, want 1 + 3 retries", calls)
	}
	if got := metricValue(t, reg, "order_retries_total", "reason", "deadlock"); got != 3 {
		t.Fatalf("retries = %v, want 3", got)
	}
	if n := query[int](t, dsn, "SELECT stock FROM products"); n != 5 {
		t.Fatalf("stock = %d, want 5 (every attempt rolled back)", n)
	}
}
