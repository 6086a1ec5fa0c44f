// Package pgmigrate applies a package's embedded SQL migrations to PostgreSQL. Each package
// that owns tables (orders, analytics) has its own Set: its files, and its own table that
// records the versions applied (a version is a file's name without ".sql"). Files run in
// name order, each in its own transaction unless it starts with NoTransaction.
//
// Every run on a database, whatever its Set, holds one session-level advisory lock
// (LockKey), the key the orders migrations of older releases hold too: instances starting
// at once, of one release or two, apply each migration exactly once, and a Set that reads
// another's record table (Moved) never sees it half-written.
package pgmigrate

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// LockKey is the pg_advisory_lock key held around a whole migration run ("waitroom" in
// ASCII).
const LockKey int64 = 0x77616974726f6f6d

// NoTransaction starts a migration file that must run outside a transaction (CREATE INDEX
// CONCURRENTLY). Such a file is sent as one statement.
const NoTransaction = "-- migrate: no transaction"

// lockPoll is how often a run waiting for another's tries the lock again.
const lockPoll = 50 * time.Millisecond

// Set is one package's migrations.
type Set struct {
	// Name starts the errors ("orders: migrate: …").
	Name string
	// Files holds the migrations, *.sql at its root.
	Files fs.FS
	// Table records the versions this Set applied.
	Table string
	// Moved names the migrations that older releases run as another Set's, and where they
	// record them; nil when there are none.
	Moved *Moved
	// Classify maps a driver or server error onto the package's errors; nil keeps it.
	Classify func(error) error
	// Unavailable is the package's error for a database that did not answer; it wraps the
	// context's error when the lock was not had in time.
	Unavailable error
}

// Moved names migrations that older releases run as another Set's and record in that Set's
// table, Table. A version listed here that Table records is adopted: recorded in the Set's
// own table without running again. A version listed here that the Set runs (or finds
// recorded in its own table) is written into Table too, so an older release, whose Set
// still lists it, counts it as applied and does not run it over the existing tables.
// Table's rows are never deleted.
type Moved struct {
	Table    string
	Versions []string
}

// Run applies the migrations of s not yet recorded, in file name order, and returns how
// many it ran (adopted ones are not counted).
func (s Set) Run(ctx context.Context, pool *pgxpool.Pool) (applied int, err error) {
	names, err := fs.Glob(s.Files, "*.sql")
	if err != nil {
		return 0, fmt.Errorf("%s: migrations: %w", s.Name, err)
	}
	sort.Strings(names)

	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, s.fail("migrate", err)
	}
	unlock, err := s.lock(ctx, conn)
	if err != nil {
		conn.Release()
		return 0, err
	}
	defer unlock()

	done, err := s.prepare(ctx, conn)
	if err != nil {
		return 0, s.fail("migrate", err)
	}
	for _, name := range names {
		version := strings.TrimSuffix(path.Base(name), ".sql")
		if done[version] {
			continue
		}
		sql, err := fs.ReadFile(s.Files, name)
		if err != nil {
			return applied, fmt.Errorf("%s: migration %s: %w", s.Name, version, err)
		}
		if strings.HasPrefix(string(sql), NoTransaction) {
			err = s.runConcurrently(ctx, conn, version, string(sql))
		} else {
			err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				// No arguments: sent with the simple protocol, so a file may hold several
				// statements.
				if _, err := tx.Exec(ctx, string(sql)); err != nil {
					return err
				}
				return s.record(ctx, tx, version)
			})
		}
		if err != nil {
			return applied, s.fail("migration "+version, err)
		}
		applied++
	}
	return applied, nil
}

// prepare makes the record tables, adopts the moved versions another Set recorded, writes
// the moved versions this Set recorded into the other Set's table, and returns the versions
// recorded.
func (s Set) prepare(ctx context.Context, conn *pgxpool.Conn) (map[string]bool, error) {
	if err := createTable(ctx, conn, s.Table); err != nil {
		return nil, err
	}
	if s.Moved != nil {
		if err := createTable(ctx, conn, s.Moved.Table); err != nil {
			return nil, err
		}
		if err := copyVersions(ctx, conn, s.Moved.Table, s.Table, s.Moved.Versions); err != nil {
			return nil, err
		}
		if err := copyVersions(ctx, conn, s.Table, s.Moved.Table, s.Moved.Versions); err != nil {
			return nil, err
		}
	}
	rows, err := conn.Query(ctx, "SELECT version FROM "+ident(s.Table))
	if err != nil {
		return nil, err
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	done := make(map[string]bool, len(versions))
	for _, v := range versions {
		done[v] = true
	}
	return done, nil
}

// createTable makes a record table: one row per version applied.
func createTable(ctx context.Context, conn *pgxpool.Conn, table string) error {
	_, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+ident(table)+` (
		version    text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	return err
}

// copyVersions records in table to those of versions that table from records, with the
// time they were applied there.
func copyVersions(ctx context.Context, conn *pgxpool.Conn, from, to string, versions []string) error {
	_, err := conn.Exec(ctx, `INSERT INTO `+ident(to)+` (version, applied_at)
		SELECT version, applied_at FROM `+ident(from)+` WHERE version = ANY($1)
		ON CONFLICT (version) DO NOTHING`, versions)
	return err
}

// execer is a connection or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// record writes version into the Set's table and, for a moved version, into the table of
// the Set it moved from.
func (s Set) record(ctx context.Context, db execer, version string) error {
	if _, err := db.Exec(ctx, "INSERT INTO "+ident(s.Table)+" (version) VALUES ($1)", version); err != nil {
		return err
	}
	if s.Moved == nil || !slices.Contains(s.Moved.Versions, version) {
		return nil
	}
	_, err := db.Exec(ctx, "INSERT INTO "+ident(s.Moved.Table)+" (version) VALUES ($1) ON CONFLICT (version) DO NOTHING", version)
	return err
}

// runConcurrently runs a no-transaction migration: CREATE INDEX CONCURRENTLY, which cannot
// run in a transaction. A build that fails or is cut off (a crash, a deadline) leaves an
// INVALID index behind that IF NOT EXISTS would then skip, so invalid indexes are dropped
// before the build, and the version is recorded only when no index is left invalid. The
// build does not inherit the start-up deadline: on a large table it may take minutes, and
// cancelling it half-way would only leave work for the next start.
func (s Set) runConcurrently(ctx context.Context, conn *pgxpool.Conn, version, sql string) error {
	bctx := context.WithoutCancel(ctx)
	if err := dropInvalidIndexes(bctx, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(bctx, sql); err != nil {
		return err
	}
	if bad, err := invalidIndexes(bctx, conn); err != nil || len(bad) > 0 {
		if err == nil {
			err = fmt.Errorf("index build left invalid indexes %v", bad)
		}
		return err
	}
	return pgx.BeginFunc(bctx, conn, func(tx pgx.Tx) error { return s.record(bctx, tx, version) })
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
		if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+ident(name)); err != nil {
			return err
		}
	}
	return nil
}

// lock takes the migration lock on conn, a session-level advisory lock, and returns what
// releases it and the connection. If unlocking fails the connection is closed instead of
// going back to the pool still holding the lock. It tries the lock and sleeps between tries
// rather than block in pg_advisory_lock: a session blocked there is an open transaction,
// which CREATE INDEX CONCURRENTLY (run by the holder) would wait for — a deadlock.
func (s Set) lock(ctx context.Context, conn *pgxpool.Conn) (unlock func(), err error) {
	for {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", LockKey).Scan(&got); err != nil {
			return nil, s.fail("migrate: lock", err)
		}
		if got {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: migrate: lock: %w", s.Name, s.unavailable(ctx.Err()))
		case <-time.After(lockPoll):
		}
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", LockKey); err != nil {
			_ = conn.Conn().Close(context.Background())
		}
		conn.Release()
	}, nil
}

// fail wraps err, classified, as what of the Set failed.
func (s Set) fail(what string, err error) error {
	if s.Classify != nil {
		err = s.Classify(err)
	}
	return fmt.Errorf("%s: %s: %w", s.Name, what, err)
}

func (s Set) unavailable(err error) error {
	if s.Unavailable == nil {
		return err
	}
	return fmt.Errorf("%w: %w", s.Unavailable, err)
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
