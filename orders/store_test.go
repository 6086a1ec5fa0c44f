package orders_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/orders/pgtest"
)

func TestMigrationsRunOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MustDB(t)
	const n = 5
	applied := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { applied[i], errs[i] = orders.Migrate(ctxT(t), dsn) })
	}
	wg.Wait()
	total := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
		total += applied[i]
	}
	shipped, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(shipped) == 0 {
		t.Fatalf("migration files: %v, %v", shipped, err)
	}
	files := query[int](t, dsn, "SELECT count(*)::int FROM schema_migrations")
	if files != len(shipped) || total != files {
		t.Fatalf("%d migrations recorded, %d applied by %d concurrent runs (%v); want each applied once",
			files, total, n, applied)
	}
	t.Logf("%d concurrent migration runs applied %v: %d migrations, each once", n, applied, total)

	t.Run("concurrent Open on a fresh database", func(t *testing.T) {
		dsn := pgtest.MustDB(t)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				s, err := orders.Open(ctxT(t), orders.Config{URL: dsn}, nil)
				if err != nil {
					t.Errorf("open: %v", err)
					return
				}
				s.Close()
			})
		}
		wg.Wait()
	})
}

func TestProducts(t *testing.T) {
	t.Parallel()
	s, _ := mustOpen(t, orders.Config{})
	ctx := ctxT(t)
	name, price, stock := "Limited sneaker", int64(129_000), 7

	p, created, err := s.PutProduct(ctx, "shoe", orders.ProductPatch{})
	if err != nil || !created || p.Name != "shoe" || p.Price != 0 || p.Stock != 0 {
		t.Fatalf("create with defaults: %+v created=%v err=%v", p, created, err)
	}
	p, created, err = s.PutProduct(ctx, "shoe", orders.ProductPatch{Name: &name, Stock: &stock})
	if err != nil || created || p.Name != name || p.Stock != 7 || p.Price != 0 {
		t.Fatalf("partial update: %+v created=%v err=%v", p, created, err)
	}
	p, _, err = s.PutProduct(ctx, "shoe", orders.ProductPatch{Price: &price})
	if err != nil || p.Name != name || p.Stock != 7 || p.Price != price {
		t.Fatalf("price only: %+v err=%v", p, err)
	}

	if created, err := s.EnsureProduct(ctx, orders.Product{ID: "demo", Stock: 100}); err != nil || !created {
		t.Fatalf("ensure new: %v %v", created, err)
	}
	if created, err := s.EnsureProduct(ctx, orders.Product{ID: "demo", Stock: 5}); err != nil || created {
		t.Fatalf("ensure existing: %v %v", created, err)
	}
	list, err := s.Products(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "demo" || list[0].Stock != 100 || list[0].Name != "demo" || list[1].ID != "shoe" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if got, err := s.Product(ctx, "shoe"); err != nil || got.Price != price {
		t.Fatalf("get: %+v %v", got, err)
	}
	for _, id := range []string{"missing", "bad id", ""} {
		if _, err := s.Product(ctx, id); !errors.Is(err, orders.ErrNotFound) {
			t.Fatalf("Product(%q): %v, want ErrNotFound", id, err)
		}
	}

	queue, noQueue := "drop", ""
	if p, _, err := s.PutProduct(ctx, "shoe", orders.ProductPatch{Queue: &queue}); err != nil || p.Queue != "drop" ||
		p.MaxPerOrder != orders.DefaultMaxPerOrder || p.MaxPerTicket != orders.DefaultMaxPerTicket {
		t.Fatalf("name a queue: %+v %v", p, err)
	}
	if p, _, err := s.PutProduct(ctx, "shoe", orders.ProductPatch{Stock: &stock}); err != nil || p.Queue != "drop" {
		t.Fatalf("a patch without queue keeps it: %+v %v", p, err)
	}
	if p, _, err := s.PutProduct(ctx, "shoe", orders.ProductPatch{Queue: &noQueue}); err != nil || p.Queue != "" {
		t.Fatalf("take off sale: %+v %v", p, err)
	}

	// Every refused value names its field; every accepted one fits its column (the edges
	// of each range are stored for real).
	neg, negStock, empty := int64(-1), -1, ""
	maxPrice, overPrice, i64 := int64(orders.MaxPrice), int64(orders.MaxPrice+1), int64(9223372036854775807)
	maxStock, overStock := orders.MaxStock, orders.MaxStock+1
	zero, overCap, maxCap := 0, orders.MaxPerBuyer+1, orders.MaxPerBuyer
	nul, ctl, longName, okName := "a\x00b", "tab\there", strings.Repeat("é", orders.MaxNameLen+1), strings.Repeat("é", orders.MaxNameLen)
	badQueue := "no/slash"
	for _, tc := range []struct {
		name  string
		id    string
		patch orders.ProductPatch
		field string // "" = accepted
	}{
		{"bad id", "no/slash", orders.ProductPatch{}, "id"},
		{"negative price", "x", orders.ProductPatch{Price: &neg}, "price"},
		{"price above 2^53-1", "x", orders.ProductPatch{Price: &overPrice}, "price"},
		{"price at int64 max", "x", orders.ProductPatch{Price: &i64}, "price"},
		{"price at 2^53-1", "x", orders.ProductPatch{Price: &maxPrice}, ""},
		{"negative stock", "x", orders.ProductPatch{Stock: &negStock}, "stock"},
		{"stock above max", "x", orders.ProductPatch{Stock: &overStock}, "stock"},
		{"stock at max", "x", orders.ProductPatch{Stock: &maxStock}, ""},
		{"empty name", "x", orders.ProductPatch{Name: &empty}, "name"},
		{"NUL in name", "x", orders.ProductPatch{Name: &nul}, "name"},
		{"control character in name", "x", orders.ProductPatch{Name: &ctl}, "name"},
		{"name too long", "x", orders.ProductPatch{Name: &longName}, "name"},
		{"name at max length", "x", orders.ProductPatch{Name: &okName}, ""},
		{"bad queue", "x", orders.ProductPatch{Queue: &badQueue}, "queue"},
		{"max_per_order 0", "x", orders.ProductPatch{MaxPerOrder: &zero}, "max_per_order"},
		{"max_per_ticket above max", "x", orders.ProductPatch{MaxPerTicket: &overCap}, "max_per_ticket"},
		{"caps at max", "x", orders.ProductPatch{MaxPerOrder: &maxCap, MaxPerTicket: &maxCap}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.PutProduct(ctx, tc.id, tc.patch)
			var ie *orders.InvalidError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.Is(err, orders.ErrInvalid) || !errors.As(err, &ie) || ie.Field != tc.field):
				t.Fatalf("err = %v, want an InvalidError for %q", err, tc.field)
			}
		})
	}
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"foreign key", &pgconn.PgError{Code: "23503"}, orders.ErrNotFound},
		{"stock check", &pgconn.PgError{Code: "23514", ConstraintName: "products_stock_check"}, orders.ErrSoldOut},
		{"too many connections", &pgconn.PgError{Code: "53300"}, orders.ErrUnavailable},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, orders.ErrUnavailable},
		{"connection failure", &pgconn.PgError{Code: "08006"}, orders.ErrUnavailable},
		{"query canceled", &pgconn.PgError{Code: "57014"}, orders.ErrUnavailable},
		{"deadline", context.DeadlineExceeded, orders.ErrUnavailable},
		{"out of range", &pgconn.PgError{Code: "22003"}, orders.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := orders.Classify(tc.err); !errors.Is(got, tc.want) {
				t.Fatalf("classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	if got := orders.Classify(&pgconn.PgError{Code: "42P01"}); orders.IsKnown(got) {
		t.Fatalf("undefined_table mapped to a sentinel: %v", got)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	s, _, reg := mustOpenReg(t, orders.Config{MaxConns: 7})
	mustProduct(t, s, "m", 1)
	ctx := ctxT(t)
	_, _, _ = s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "m", Quantity: 1, IdempotencyKey: "a"})
	_, _, _ = s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "m", Quantity: 1, IdempotencyKey: "a"})
	_, _, _ = s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "m", Quantity: 1})
	_, _, _ = s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "zz", Quantity: 1})
	_, _, _ = s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "m", Quantity: 0})
	for result, want := range map[string]float64{"created": 1, "replayed": 1, "sold_out": 1, "not_found": 1, "invalid": 1, "unavailable": 0} {
		if got := metricValue(t, reg, "order_outcomes_total", "result", result); got != want {
			t.Errorf("order_outcomes_total{result=%q} = %v, want %v", result, got, want)
		}
	}
	if got := metricValue(t, reg, "orders_pool_max_conns", "", ""); got != 7 {
		t.Errorf("orders_pool_max_conns = %v, want 7", got)
	}
	if got := metricValue(t, reg, "orders_pool_acquire_total", "", ""); got < 5 {
		t.Errorf("orders_pool_acquire_total = %v", got)
	}
	for _, name := range []string{"order_duration_seconds", "orders_pool_acquired_conns", "orders_pool_idle_conns",
		"orders_pool_total_conns", "orders_pool_empty_acquire_total", "orders_pool_canceled_acquire_total"} {
		if family(t, reg, name) == nil {
			t.Errorf("metric %s missing", name)
		}
	}
	if h := family(t, reg, "order_duration_seconds"); h != nil && h.Metric[0].GetHistogram().GetSampleCount() != 5 {
		t.Errorf("order_duration_seconds count = %d, want 5", h.Metric[0].GetHistogram().GetSampleCount())
	}
	s.Close()
	if family(t, reg, "orders_pool_max_conns") != nil {
		t.Error("pool metrics still registered after Close")
	}
}

func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// metricValue returns the counter or gauge value of name with label=value ("" for none).
func metricValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	f := family(t, reg, name)
	if f == nil {
		t.Fatalf("metric %s not registered", name)
	}
	for _, m := range f.Metric {
		match := label == ""
		for _, l := range m.Label {
			if l.GetName() == label && l.GetValue() == value {
				match = true
			}
		}
		if match {
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("metric %s{%s=%q} not found", name, label, value)
	return 0
}

func BenchmarkPlaceOrder(b *testing.B) {
	s, _ := mustOpen(b, orders.Config{MaxConns: 16, AcquireTimeout: 5 * time.Second})
	mustProduct(b, s, "bench", 1_000_000_000)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := s.PlaceOrder(context.Background(), orders.OrderRequest{ProductID: "bench", Quantity: 1}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func TestQueryTimeoutOnALockedRow(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	s, dsn := mustOpen(t, orders.Config{QueryTimeout: timeout})
	// The set-up has the same 300 ms: on a busy machine it may time out too (and write
	// nothing), so it is tried until it is not unavailable.
	stock, maxBuy := 5, orders.MaxPerBuyer
	testwait.For(t, 30*time.Second, "the product stored", func() bool {
		_, _, err := s.PutProduct(context.Background(), "locked", orders.ProductPatch{Stock: &stock, MaxPerOrder: &maxBuy, MaxPerTicket: &maxBuy})
		if err != nil && !errors.Is(err, orders.ErrUnavailable) {
			t.Fatalf("put product: %v", err)
		}
		return err == nil
	})
	_, release := holdRow(t, dsn, "locked")
	start := time.Now()
	_, _, err := s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "locked", Quantity: 1, IdempotencyKey: "k"})
	took := time.Since(start)
	// About the query timeout (the upper bound is loose: a busy machine adds to it).
	if !errors.Is(err, orders.ErrUnavailable) || took > timeout+5*time.Second {
		t.Fatalf("err %v after %v, want ErrUnavailable after about %v", err, took, timeout)
	}
	release()
	if n := query[int](t, dsn, "SELECT count(*)::int FROM orders"); n != 0 {
		t.Fatalf("%d orders after a timed-out attempt", n)
	}
	// The retry has the same 300 ms: on a busy machine an attempt may time out again, and
	// (as just checked) writes nothing — retried until one is not unavailable.
	var replayed bool
	testwait.For(t, 30*time.Second, "a retry that is not unavailable", func() bool {
		_, replayed, err = s.PlaceOrder(ctxT(t), orders.OrderRequest{ProductID: "locked", Quantity: 1, IdempotencyKey: "k"})
		return !errors.Is(err, orders.ErrUnavailable)
	})
	if err != nil || replayed {
		t.Fatalf("retry with the same key: replayed=%v err=%v, want a new order", replayed, err)
	}
	t.Logf("row locked elsewhere: ErrUnavailable after %v (QueryTimeout %v), nothing written; the retry with the same key succeeded",
		took.Round(time.Millisecond), timeout)
}

// A concurrent index build that was cut off leaves an INVALID index; the next start drops it
// and builds it again instead of recording the migration over a useless index.
func TestInvalidIndexIsRebuilt(t *testing.T) {
	t.Parallel()
	s, dsn := mustOpen(t, orders.Config{})
	mustProduct(t, s, "p", 10)
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{
		"INSERT INTO orders (id, product_id, ticket, quantity, request_hash) VALUES (gen_random_uuid(), 'p', 't', 1, 'a'), (gen_random_uuid(), 'p', 't', 1, 'b')",
		"DROP INDEX orders_ticket_product_idx",
		"DELETE FROM schema_migrations WHERE version = '004_orders_ticket_index'",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// A unique build over duplicate rows fails half-way and leaves the index INVALID, as a
	// build cut off by a deadline or a crash does.
	if _, err := conn.Exec(ctx, "CREATE UNIQUE INDEX CONCURRENTLY orders_ticket_product_idx ON orders (ticket, product_id)"); err == nil {
		t.Fatal("the unique build over duplicates succeeded")
	}
	if n := query[int](t, dsn, "SELECT count(*)::int FROM pg_index WHERE NOT indisvalid"); n != 1 {
		t.Fatalf("%d invalid indexes, want 1 to start from", n)
	}
	if applied, err := orders.Migrate(ctx, dsn); err != nil || applied != 1 {
		t.Fatalf("migrate again: applied %d, %v", applied, err)
	}
	valid := query[bool](t, dsn, `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname = 'orders_ticket_product_idx'`)
	if !valid {
		t.Fatal("the index is still invalid after the migration was recorded")
	}
}
