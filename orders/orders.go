// Package orders owns the protected resource: products and their stock, and the orders
// placed against them, in PostgreSQL (pgx v5 pool, embedded migrations).
//
// The properties it guarantees:
//   - Never oversell: stock is decremented by a guarded UPDATE (stock >= quantity) in the
//     same transaction that inserts the order, and a CHECK (stock >= 0) backs it up.
//   - Idempotent: an Idempotency-Key makes at most one order, also under concurrency (a
//     UNIQUE index decides); a repeat returns the first order.
//   - Fail fast: a pooled connection must be free within Config.AcquireTimeout and every
//     statement finishes within Config.QueryTimeout, else ErrUnavailable. Deadlocks and
//     serialization failures are retried at most 3 times with jitter; a COMMIT whose
//     outcome is unknown is resolved by looking the order up, never by a blind retry.
//
// The package knows nothing about HTTP, admission tokens or tickets beyond storing the
// ticket string with the order. Errors wrap the sentinels in errors.go.
package orders

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures Open.
type Config struct {
	// URL is the PostgreSQL connection string (postgres://… or key=value).
	URL string
	// MaxConns caps the pool; 0 keeps pool_max_conns from URL, else 20.
	MaxConns int32
	// MinConns keeps this many connections open; 0 keeps the URL's value (default 0).
	MinConns int32
	// AcquireTimeout bounds the wait for a pooled connection; default 500ms. A full pool
	// answers ErrUnavailable after it instead of queueing callers without end.
	AcquireTimeout time.Duration
	// QueryTimeout bounds the statements of one call (one PlaceOrder attempt); default 2s.
	QueryTimeout time.Duration
	// Tracer, when set, sees every statement (the tracing's PostgreSQL spans); nil: none.
	Tracer pgx.QueryTracer
}

const defaultMaxConns = 20

// Store is the products and orders store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	m    *metrics

	// Test hooks (set only through export_test.go, before use).
	beforeCommit func(ctx context.Context, tx pgx.Tx) error
	afterCommit  func() error
}

// Open connects, applies the embedded migrations (serialised across instances by an
// advisory lock) and registers the metrics on reg (nil: no metrics registered). A
// database that cannot be reached makes Open fail with ErrUnavailable.
func Open(ctx context.Context, cfg Config, reg prometheus.Registerer) (*Store, error) {
	if cfg.AcquireTimeout <= 0 {
		cfg.AcquireTimeout = 500 * time.Millisecond
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 2 * time.Second
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("orders: database url: %w", err)
	}
	switch {
	case cfg.MaxConns > 0:
		pcfg.MaxConns = cfg.MaxConns
	case !strings.Contains(cfg.URL, "pool_max_conns"):
		pcfg.MaxConns = defaultMaxConns
	}
	if cfg.MinConns > 0 {
		pcfg.MinConns = cfg.MinConns
	}
	if pcfg.MinConns > pcfg.MaxConns {
		return nil, fmt.Errorf("orders: MinConns %d > MaxConns %d", pcfg.MinConns, pcfg.MaxConns)
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if cfg.Tracer != nil {
		pcfg.ConnConfig.Tracer = cfg.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("orders: open pool: %w", classify(err))
	}
	s := &Store{pool: pool, cfg: cfg}
	if _, err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	m, err := newMetrics(reg, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.m = m
	return s, nil
}

// Close unregisters the metrics and closes the pool, waiting for connections in use to
// be returned. Safe to call more than once.
func (s *Store) Close() {
	s.m.unregister()
	s.pool.Close()
}

// Ping checks that PostgreSQL answers, within AcquireTimeout + QueryTimeout; for /readyz.
func (s *Store) Ping(ctx context.Context) error {
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.Ping(ctx)
	})
	if err != nil {
		return fmt.Errorf("orders: ping: %w", err)
	}
	return nil
}

// acquire takes a pooled connection within AcquireTimeout.
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, s.cfg.AcquireTimeout)
	defer cancel()
	c, err := s.pool.Acquire(actx)
	if err == nil {
		return c, nil
	}
	if ctx.Err() == nil && actx.Err() != nil {
		return nil, fmt.Errorf("no database connection free within %v: %w", s.cfg.AcquireTimeout, ErrUnavailable)
	}
	return nil, fmt.Errorf("connect: %w", classify(err))
}

// withConn runs fn on a pooled connection with QueryTimeout and classified errors.
func (s *Store) withConn(ctx context.Context, fn func(context.Context, *pgxpool.Conn) error) error {
	c, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	qctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	return classify(fn(qctx, c))
}
