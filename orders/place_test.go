package orders_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/orders"
)

// TestNeverOversells: 1,000 buyers for 100 units in the test command — exactly 100 orders,
// every other buyer answered sold out (or, with a fail-fast pool, unavailable), stock 0;
// WR_TEST_ORDERS_BUYERS=10000 runs the benchmark's flood with the same outcome set.
func TestNeverOversells(t *testing.T) {
	t.Parallel()
	const workers, stock = 200, 100
	buyers := 1_000
	if n, err := strconv.Atoi(os.Getenv("WR_TEST_ORDERS_BUYERS")); err == nil && n > stock {
		buyers = n
	}
	run := func(t *testing.T, cfg orders.Config) (counts map[string]int, dsn string) {
		s, dsn := mustOpen(t, cfg)
		mustProduct(t, s, "drop", stock)
		jobs := make(chan int)
		var mu sync.Mutex
		counts = map[string]int{}
		var wg sync.WaitGroup
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for i := range jobs {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					_, replayed, err := s.PlaceOrder(ctx, orders.OrderRequest{
						ProductID: "drop", Quantity: 1,
						Ticket: fmt.Sprintf("ticket-%d", i), IdempotencyKey: fmt.Sprintf("key-%d", i),
					})
					cancel()
					mu.Lock()
					counts[label(replayed, err)]++
					mu.Unlock()
				}
			})
		}
		for i := range buyers {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		t.Logf("%d buyers, %d goroutines, stock %d, MaxConns %d, AcquireTimeout %v: %v in %v",
			buyers, workers, stock, cfg.MaxConns, cfg.AcquireTimeout, counts, time.Since(start).Round(time.Millisecond))
		return counts, dsn
	}

	t.Run("every buyer gets an answer: exactly 100 orders", func(t *testing.T) {
		counts, dsn := run(t, orders.Config{MaxConns: 40, AcquireTimeout: 20 * time.Second, QueryTimeout: 20 * time.Second})
		if counts["created"] != stock || counts["sold_out"] != buyers-stock || len(counts) != 2 {
			t.Fatalf("outcomes %v, want %d created and %d sold_out", counts, stock, buyers-stock)
		}
		if n := query[int](t, dsn, "SELECT count(*) FROM orders"); n != stock {
			t.Fatalf("orders rows = %d, want %d", n, stock)
		}
		if n := query[int](t, dsn, "SELECT stock FROM products WHERE id = 'drop'"); n != 0 {
			t.Fatalf("stock = %d, want 0", n)
		}
	})

	t.Run("fail-fast pool: some answered unavailable, still never oversold", func(t *testing.T) {
		counts, dsn := run(t, orders.Config{MaxConns: 8, AcquireTimeout: 50 * time.Millisecond})
		created := counts["created"]
		if counts["created"]+counts["sold_out"]+counts["unavailable"] != buyers || created > stock {
			t.Fatalf("outcomes %v", counts)
		}
		rows := query[int](t, dsn, "SELECT count(*) FROM orders")
		left := query[int](t, dsn, "SELECT stock FROM products WHERE id = 'drop'")
		if rows != created || left != stock-created || left < 0 {
			t.Fatalf("rows %d, stock left %d, created %d", rows, left, created)
		}
	})
}

func label(replayed bool, err error) string {
	switch {
	case err == nil && replayed:
		return "replayed"
	case err == nil:
		return "created"
	case errors.Is(err, orders.ErrSoldOut):
		return "sold_out"
	case errors.Is(err, orders.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, orders.ErrIdempotencyConflict):
		return "conflict"
	default:
		return "other: " + err.Error()
	}
}

func TestSameKeyConcurrentlyMakesOneOrder(t *testing.T) {
	t.Parallel()
	s, dsn := mustOpen(t, orders.Config{MaxConns: 20, AcquireTimeout: 10 * time.Second})
	mustProduct(t, s, "p1", 10)
	const n = 50
	ids := make([]string, n)
	replays := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			o, replayed, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{
				ProductID: "p1", Quantity: 2, Ticket: "t1", IdempotencyKey: "same-key",
			})
			ids[i], replays[i], errs[i] = o.ID, replayed, err
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("call %d got order %s, call 0 got %s", i, ids[i], ids[0])
		}
		if !replays[i] {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d calls report a new order, want 1", created)
	}
	if rows := query[int](t, dsn, "SELECT count(*) FROM orders"); rows != 1 {
		t.Fatalf("orders rows = %d, want 1", rows)
	}
	if left := query[int](t, dsn, "SELECT stock FROM products WHERE id = 'p1'"); left != 8 {
		t.Fatalf("stock = %d, want 8 (decremented once)", left)
	}
	t.Logf("%d concurrent calls with one key: 1 order (%s), %d replays, stock 10 → 8", n, ids[0], n-1)
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	s, dsn := mustOpen(t, orders.Config{})
	mustProduct(t, s, "a", 5)
	mustProduct(t, s, "b", 5)
	first, replayed, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "a", Quantity: 1, Ticket: "t", IdempotencyKey: "k"})
	if err != nil || replayed {
		t.Fatalf("first: %v, replayed %v", err, replayed)
	}

	t.Run("same request is replayed", func(t *testing.T) {
		again, replayed, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "a", Quantity: 1, Ticket: "t", IdempotencyKey: "k"})
		if err != nil || !replayed || again.ID != first.ID || !again.CreatedAt.Equal(first.CreatedAt) {
			t.Fatalf("replay: %+v replayed=%v err=%v; first %+v", again, replayed, err, first)
		}
	})
	for _, tc := range []struct {
		name string
		req  orders.OrderRequest
	}{
		{"other quantity conflicts", orders.OrderRequest{ProductID: "a", Quantity: 2, Ticket: "t", IdempotencyKey: "k"}},
		{"other product conflicts", orders.OrderRequest{ProductID: "b", Quantity: 1, Ticket: "t", IdempotencyKey: "k"}},
		{"other ticket conflicts", orders.OrderRequest{ProductID: "a", Quantity: 1, Ticket: "u", IdempotencyKey: "k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.PlaceOrder(ctxT(t), tc.req)
			if !errors.Is(err, orders.ErrIdempotencyConflict) {
				t.Fatalf("err = %v, want ErrIdempotencyConflict", err)
			}
		})
	}
	t.Run("no key makes a new order each time", func(t *testing.T) {
		for range 2 {
			if _, replayed, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "a", Quantity: 1}); err != nil || replayed {
				t.Fatalf("err %v replayed %v", err, replayed)
			}
		}
	})
	if left := query[int](t, dsn, "SELECT stock FROM products WHERE id = 'a'"); left != 2 {
		t.Fatalf("stock a = %d, want 2", left)
	}
	if left := query[int](t, dsn, "SELECT stock FROM products WHERE id = 'b'"); left != 5 {
		t.Fatalf("stock b = %d, want 5", left)
	}
}

func TestReplayAfterSellingTheLastUnit(t *testing.T) {
	t.Parallel()
	s, _ := mustOpen(t, orders.Config{})
	mustProduct(t, s, "last", 1)
	req := orders.OrderRequest{ProductID: "last", Quantity: 1, Ticket: "t", IdempotencyKey: "k-last"}
	first, _, err := s.PlaceOrder(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	again, replayed, err := s.PlaceOrder(ctxT(t), req)
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("replay after sell-out: %+v %v %v", again, replayed, err)
	}
	if _, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "last", Quantity: 1, IdempotencyKey: "k2"}); !errors.Is(err, orders.ErrSoldOut) {
		t.Fatalf("new key: %v, want ErrSoldOut", err)
	}
}

func TestSoldOutAndNotFound(t *testing.T) {
	t.Parallel()
	s, dsn := mustOpen(t, orders.Config{})
	mustProduct(t, s, "few", 3)
	if _, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "few", Quantity: 4}); !errors.Is(err, orders.ErrSoldOut) {
		t.Fatalf("quantity above stock: %v, want ErrSoldOut", err)
	}
	if _, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "few", Quantity: 3}); err != nil {
		t.Fatalf("exact stock: %v", err)
	}
	if _, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "few", Quantity: 1}); !errors.Is(err, orders.ErrSoldOut) {
		t.Fatalf("empty stock: %v, want ErrSoldOut", err)
	}
	if _, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "nope", Quantity: 1}); !errors.Is(err, orders.ErrNotFound) {
		t.Fatalf("unknown product: %v, want ErrNotFound", err)
	}
	if left := query[int](t, dsn, "SELECT stock FROM products WHERE id = 'few'"); left != 0 {
		t.Fatalf("stock = %d", left)
	}
}

func TestInvalidOrderIsRejected(t *testing.T) {
	t.Parallel()
	s, dsn := mustOpen(t, orders.Config{})
	mustProduct(t, s, "ok", 10)
	for _, tc := range []struct {
		name  string
		req   orders.OrderRequest
		field string
	}{
		{"zero quantity", orders.OrderRequest{ProductID: "ok", Quantity: 0}, "quantity"},
		{"negative quantity", orders.OrderRequest{ProductID: "ok", Quantity: -1}, "quantity"},
		{"quantity above 1000", orders.OrderRequest{ProductID: "ok", Quantity: 1001}, "quantity"},
		{"empty product", orders.OrderRequest{ProductID: "", Quantity: 1}, "product_id"},
		{"product with a space", orders.OrderRequest{ProductID: "a b", Quantity: 1}, "product_id"},
		{"product of 65 chars", orders.OrderRequest{ProductID: strings.Repeat("x", 65), Quantity: 1}, "product_id"},
		{"product with unicode", orders.OrderRequest{ProductID: "caf\u00e9", Quantity: 1}, "product_id"},
		{"idempotency key too long", orders.OrderRequest{ProductID: "ok", Quantity: 1, IdempotencyKey: strings.Repeat("k", 256)}, "Idempotency-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.PlaceOrder(ctxT(t), tc.req)
			var ie *orders.InvalidError
			if !errors.Is(err, orders.ErrInvalid) || !errors.As(err, &ie) || ie.Field != tc.field {
				t.Fatalf("err = %v, want an InvalidError for field %q", err, tc.field)
			}
		})
	}
	if n := query[int](t, dsn, "SELECT count(*) FROM orders"); n != 0 {
		t.Fatalf("%d orders made by invalid requests", n)
	}
}

func TestPerBuyerCaps(t *testing.T) {
	t.Parallel()
	s, dsn := mustOpen(t, orders.Config{})
	ctx := ctxT(t)
	stock, perOrder, perTicket := 100, 3, 5
	if _, _, err := s.PutProduct(ctx, "cap", orders.ProductPatch{Stock: &stock, MaxPerOrder: &perOrder, MaxPerTicket: &perTicket}); err != nil {
		t.Fatal(err)
	}
	var le *orders.QuantityLimitError
	if _, _, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "cap", Quantity: 4, Ticket: "t1"}); !errors.As(err, &le) || le.Limit != "max_per_order" || le.Max != 3 {
		t.Fatalf("4 > max_per_order 3: %v", err)
	}
	if _, _, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "cap", Quantity: 3, Ticket: "t1", IdempotencyKey: "k1"}); err != nil {
		t.Fatalf("3 of max 3: %v", err)
	}
	if _, _, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "cap", Quantity: 3, Ticket: "t1"}); !errors.As(err, &le) || le.Limit != "max_per_ticket" || le.Bought != 3 {
		t.Fatalf("3 more with 3 bought, max_per_ticket 5: %v", err)
	}
	// A repeat of the first request is its answer, not a new purchase over the cap.
	if _, replayed, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "cap", Quantity: 3, Ticket: "t1", IdempotencyKey: "k1"}); err != nil || !replayed {
		t.Fatalf("replay: %v %v", replayed, err)
	}
	if _, _, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "cap", Quantity: 2, Ticket: "t1"}); err != nil {
		t.Fatalf("2 more reaches max_per_ticket 5: %v", err)
	}
	if _, _, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "cap", Quantity: 3, Ticket: "t2"}); err != nil {
		t.Fatalf("another ticket has its own cap: %v", err)
	}
	if n := query[int](t, dsn, "SELECT stock FROM products WHERE id = 'cap'"); n != 92 {
		t.Fatalf("stock %d, want 100 - 3 - 2 - 3 = 92", n)
	}
}
