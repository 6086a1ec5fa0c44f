package orders

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockPoll is how often an instance waiting for another's migration run tries the
// lock again.
const migrationLockPoll = 50 * time.Millisecond

// noTransaction starts a migration file that must run outside a transaction.
const noTransaction = "-- migrate: no transaction"

// migrationLockKey is the pg_advisory_lock key held around a whole migration run, so
// instances starting at once apply each migration exactly once ("waitroom" in ASCII).
const migrationLockKey int64 = 0x77616974726f6f6d

// migrate applies the embedded migrations not yet recorded in schema_migrations, in file
// name order, each in its own transaction, and returns how many it applied.
func migrate(ctx context.Context, pool *pgxpool.Pool) (applied int, err error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return 0, fmt.Errorf("orders: migrations: %w", err)
	}
	sort.Strings(names)

	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("orders: migrate: %w", classify(err))
	}
	unlock, err := lockMigrations(ctx, conn)
	if err != nil {
		conn.Release()
		return 0, err
	}
	defer unlock()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, fmt.Errorf("orders: migrate: %w", classify(err))
	}
	done := map[string]bool{}
	rows, err := conn.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return 0, fmt.Errorf("orders: migrate: %w", classify(err))
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("orders: migrate: %w", classify(err))
	}
	for _, v := range versions {
		done[v] = true
	}

	for _, name := range names {
		version := strings.TrimSuffix(path.Base(name), ".sql")
		if done[version] {
			continue
		}
		sql, err := migrationFiles.ReadFile(name)
		if err != nil {
			return applied, fmt.Errorf("orders: migration %s: %w", version, err)
		}
		if strings.HasPrefix(string(sql), noTransaction) {
			if err := migrateConcurrently(ctx, conn, version, string(sql)); err != nil {
				return applied, err
			}
			applied++
			continue
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// No arguments: sent with the simple protocol, so a file may hold several
			// statements.
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", version)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("orders: migration %s: %w", version, classify(err))
		}
		applied++
	}
	return applied, nil
}

// migrateConcurrently runs a no-transaction migration: CREATE INDEX CONCURRENTLY, which
// cannot run in a transaction. A build that fails or is cut off (a crash, a deadline) leaves
// an INVALID index behind that IF NOT EXISTS would then skip, so invalid indexes are dropped
// before the build, and the version is recorded only when no index is left invalid. The
// build does not inherit the start-up deadline: on a large orders table it may take
// minutes, and cancelling it half-way would only leave work for the next start.
func migrateConcurrently(ctx context.Context, conn *pgxpool.Conn, version, sql string) error {
	fail := func(err error) error { return fmt.Errorf("orders: migration %s: %w", version, classify(err)) }
	bctx := context.WithoutCancel(ctx)
	if err := dropInvalidIndexes(bctx, conn); err != nil {
		return fail(err)
	}
	if _, err := conn.Exec(bctx, sql); err != nil {
		return fail(err)
	}
	if bad, err := invalidIndexes(bctx, conn); err != nil || len(bad) > 0 {
		if err == nil {
			err = fmt.Errorf("index build left invalid indexes %v", bad)
		}
		return fail(err)
	}
	if _, err := conn.Exec(bctx, "INSERT INTO schema_migrations (version) VALUES ($1)", version); err != nil {
		return fail(err)
	}
	return nil
}

// invalidIndexes lists the indexes of this schema that a cut-off concurrent build left
// invalid.
func invalidIndexes(ctx context.Context, conn *pgxpool.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE NOT i.indisvalid AND n.nspname = current_schema()`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func dropInvalidIndexes(ctx context.Context, conn *pgxpool.Conn) error {
	bad, err := invalidIndexes(ctx, conn)
	if err != nil {
		return err
	}
	for _, name := range bad {
		if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

// lockMigrations takes the migration lock on conn, a session-level advisory lock, and returns
// what releases it and the connection. If unlocking fails the connection is closed instead of
// going back to the pool still holding the lock. It tries the lock and sleeps between tries
// rather than block in pg_advisory_lock: a session blocked there is an open transaction,
// which CREATE INDEX CONCURRENTLY (run by the holder) would wait for — a deadlock.
func lockMigrations(ctx context.Context, conn *pgxpool.Conn) (unlock func(), err error) {
	for {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", migrationLockKey).Scan(&got); err != nil {
			return nil, fmt.Errorf("orders: migrate: lock: %w", classify(err))
		}
		if got {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("orders: migrate: lock: %w: %w", ErrUnavailable, ctx.Err())
		case <-time.After(migrationLockPoll):
		}
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", migrationLockKey); err != nil {
			_ = conn.Conn().Close(context.Background())
		}
		conn.Release()
	}, nil
}
