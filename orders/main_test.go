package orders_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/orders/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// mustOpen opens a Store on a fresh database (on cfg.URL when set) with its own metrics
// registry, closes it when the test ends, and returns it with its database URL.
func mustOpen(tb testing.TB, cfg orders.Config) (*orders.Store, string) {
	tb.Helper()
	s, dsn, _ := mustOpenReg(tb, cfg)
	return s, dsn
}

func mustOpenReg(tb testing.TB, cfg orders.Config) (*orders.Store, string, *prometheus.Registry) {
	tb.Helper()
	if cfg.URL == "" {
		// A connection's start (SCRAM authentication) may take long on a busy machine: the
		// Store's default connect timeout (5 s) is not what these tests are about.
		cfg.URL = pgtest.MustDB(tb)
		if strings.Contains(cfg.URL, "?") {
			cfg.URL += "&connect_timeout=60"
		} else {
			cfg.URL += "?connect_timeout=60"
		}
	}
	// A test that does not set the fail-fast bounds is not about them: generous ones, so a
	// busy machine (tests in parallel, a CPU hog) does not turn its calls unavailable.
	if cfg.AcquireTimeout == 0 {
		cfg.AcquireTimeout = 10 * time.Second
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	s, err := orders.Open(ctx, cfg, reg)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(s.Close)
	return s, cfg.URL, reg
}

func mustProduct(tb testing.TB, s *orders.Store, id string, stock int) {
	tb.Helper()
	// Caps as high as an order may go: these tests are about stock, not per-buyer caps.
	maxBuy := orders.MaxPerBuyer
	if _, _, err := s.PutProduct(context.Background(), id, orders.ProductPatch{Stock: &stock, MaxPerOrder: &maxBuy, MaxPerTicket: &maxBuy}); err != nil {
		tb.Fatalf("put product: %v", err)
	}
}

// query runs one scalar query on its own connection (not the Store's pool).
func query[T any](tb testing.TB, dsn, sql string, args ...any) T {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var v T
	if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return v
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}
