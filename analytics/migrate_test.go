package analytics

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/internal/pgmigrate"
	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/orders/pgtest"
)

// previousVersions are the orders migrations of the release before this one, which ran the
// history and audit migrations as orders migrations.
var previousVersions = []string{
	"001_products", "002_orders", "003_product_sale", "004_orders_ticket_index",
	"005_product_currency", "006_orders_token_id", "007_orders_token_id_index",
	"008_history", "009_audit", "010_orders_created_index", "011_history_sale_edges",
}

// previousRelease is the orders migrator of the release before, up to and including
// version last: its files (the orders files of this release and the three that moved here,
// unchanged) run by the same loop, into schema_migrations, under the same lock.
func previousRelease(t *testing.T, last string) pgmigrate.Set {
	t.Helper()
	files := fstest.MapFS{}
	for _, v := range previousVersions {
		if v > last {
			break
		}
		sql, err := os.ReadFile(filepath.Join("..", "orders", "migrations", v+".sql"))
		if os.IsNotExist(err) {
			sql, err = os.ReadFile(filepath.Join("migrations", v+".sql"))
		}
		if err != nil {
			t.Fatalf("migration %s of the release before: %v", v, err)
		}
		files[v+".sql"] = &fstest.MapFile{Data: sql}
	}
	return pgmigrate.Set{Name: "orders", Files: files, Table: "schema_migrations"}
}

// runPrevious starts an instance of the release before (set, from previousRelease) on dsn as
// far as its migrations go, and returns how many it applied.
func runPrevious(ctx context.Context, set pgmigrate.Set, dsn string) (int, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	return set.Run(ctx, pool)
}

// runThis starts an instance of this release on dsn as far as its migrations go (orders.Open,
// then Migrate, as the server does) and returns how many analytics migrations it applied.
func runThis(ctx context.Context, dsn string) (int, error) {
	st, err := orders.Open(ctx, orders.Config{URL: dsn, AcquireTimeout: 10 * time.Second}, nil)
	if err != nil {
		return 0, err
	}
	st.Close()
	pool, err := OpenPool(ctx, dsn, 2)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	return Migrate(ctx, pool)
}

func migrateCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recorded returns the versions table records, with when each was applied.
func recorded(t *testing.T, dsn, table string) map[string]time.Time {
	t.Helper()
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT version, applied_at FROM "+pgx.Identifier{table}.Sanitize())
	if err != nil {
		t.Fatalf("%s: %v", table, err)
	}
	out := map[string]time.Time{}
	var v string
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&v, &at}, func() error { out[v] = at; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func versionsOf(m map[string]time.Time) []string {
	out := make([]string, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// wantSchema checks the analytics tables are there as this release reads them, and the
// records: analytics' three versions in its table, and schema_migrations as the release
// before (all of previousVersions) needs it to start, with this release's orders migrations.
func wantSchema(t *testing.T, dsn string) {
	t.Helper()
	exec(t, dsn, `SELECT queue, step_seconds, t, wait_buckets, dropped, dropped_total FROM queue_history LIMIT 0`)
	exec(t, dsn, `SELECT queue, sold_out_at, restocked_at FROM queue_sellouts LIMIT 0`)
	exec(t, dsn, `SELECT id, at, actor, action, target, queue, before, after FROM audit_log LIMIT 0`)
	if got := versionsOf(recorded(t, dsn, "analytics_schema_migrations")); !slices.Equal(got, ordersVersions) {
		t.Errorf("analytics_schema_migrations: %v, want %v", got, ordersVersions)
	}
	// Every version the release before needs, and this release's own orders migrations.
	want := append(slices.Clone(previousVersions), "012_queue_stock_versions")
	if got := versionsOf(recorded(t, dsn, "schema_migrations")); !slices.Equal(got, want) {
		t.Errorf("schema_migrations: %v, want %v", got, want)
	}
}

// A new database: this release's migrators make the tables and record analytics' versions
// in both tables; the release before then starts on it without running anything.
func TestMigrateFreshDatabase(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MustDB(t)
	ctx := migrateCtx(t)
	if n, err := runThis(ctx, dsn); err != nil || n != len(ordersVersions) {
		t.Fatalf("this release on a new database: applied %d, %v; want %d", n, err, len(ordersVersions))
	}
	wantSchema(t, dsn)
	if n, err := runThis(ctx, dsn); err != nil || n != 0 {
		t.Fatalf("this release again: applied %d, %v; want 0", n, err)
	}
	if n, err := runPrevious(ctx, previousRelease(t, "011_history_sale_edges"), dsn); err != nil || n != 0 {
		t.Fatalf("the release before after this one: applied %d, %v; want 0", n, err)
	}

	// Rows of schema_migrations lost (by hand, or by a start cut off between two of its
	// statements) are written again from analytics' record.
	exec(t, dsn, "DELETE FROM schema_migrations WHERE version = ANY($1)", ordersVersions)
	if n, err := runThis(ctx, dsn); err != nil || n != 0 {
		t.Fatalf("this release with the orders records gone: applied %d, %v; want 0", n, err)
	}
	wantSchema(t, dsn)
}

// A database the release before migrated (008, 009 and 011 recorded as orders migrations):
// this release runs nothing again, adopts the three, keeps their rows in schema_migrations,
// and the release before still starts on it afterwards.
func TestMigrateUpgradeFromOrdersMigrations(t *testing.T) {
	t.Parallel()
	t.Run("from the release before", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.MustDB(t)
		ctx := migrateCtx(t)
		if n, err := runPrevious(ctx, previousRelease(t, "011_history_sale_edges"), dsn); err != nil || n != len(previousVersions) {
			t.Fatalf("the release before: applied %d, %v", n, err)
		}
		before := recorded(t, dsn, "schema_migrations")
		exec(t, dsn, `INSERT INTO queue_history (queue, step_seconds, t, joined, dropped) VALUES ('q', 10, now(), 7, 1)`)
		exec(t, dsn, `INSERT INTO audit_log (at, actor, action, target) VALUES (now(), 'alice', 'queue.update', 'queue:q')`)

		if n, err := runThis(ctx, dsn); err != nil || n != 0 {
			t.Fatalf("this release on the upgraded database: applied %d, %v; want 0 (adopted)", n, err)
		}
		wantSchema(t, dsn)
		after := recorded(t, dsn, "schema_migrations")
		for v, at := range before {
			if !after[v].Equal(at) {
				t.Errorf("schema_migrations %s: applied at %v, was %v", v, after[v], at)
			}
		}
		for v, at := range recorded(t, dsn, "analytics_schema_migrations") {
			if !at.Equal(before[v]) {
				t.Errorf("adopted %s: applied at %v, want %v (when the release before ran it)", v, at, before[v])
			}
		}
		var rows int
		if err := pgxQueryRow(t, dsn, `SELECT (SELECT count(*) FROM queue_history WHERE joined = 7 AND dropped = 1)
			+ (SELECT count(*) FROM audit_log WHERE actor = 'alice')`, &rows); err != nil || rows != 2 {
			t.Fatalf("rows from before the upgrade: %d, %v; want 2", rows, err)
		}
		if n, err := runPrevious(ctx, previousRelease(t, "011_history_sale_edges"), dsn); err != nil || n != 0 {
			t.Fatalf("the release before after the upgrade: applied %d, %v; want 0", n, err)
		}
	})
	t.Run("from a release without 011", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.MustDB(t)
		ctx := migrateCtx(t)
		if n, err := runPrevious(ctx, previousRelease(t, "010_orders_created_index"), dsn); err != nil || n != 10 {
			t.Fatalf("the older release: applied %d, %v; want 10", n, err)
		}
		if n, err := runThis(ctx, dsn); err != nil || n != 1 {
			t.Fatalf("this release: applied %d, %v; want 1 (011; 008 and 009 adopted)", n, err)
		}
		wantSchema(t, dsn)
		if n, err := runPrevious(ctx, previousRelease(t, "011_history_sale_edges"), dsn); err != nil || n != 0 {
			t.Fatalf("the release before after the upgrade: applied %d, %v; want 0", n, err)
		}
	})
}

// Instances starting at once apply each migration exactly once: of this release alone, and
// of this release beside the release before (a rolling deploy onto a new database).
func TestMigrateRunsOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	const n = 4
	t.Run("this release", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.MustDB(t)
		ctx := migrateCtx(t)
		applied := make([]int, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { applied[i], errs[i] = runThis(ctx, dsn) })
		}
		wg.Wait()
		total := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("instance %d: %v", i, errs[i])
			}
			total += applied[i]
		}
		if total != len(ordersVersions) {
			t.Fatalf("%d instances applied %v analytics migrations; want %d in all", n, applied, len(ordersVersions))
		}
		wantSchema(t, dsn)
	})
	t.Run("beside the release before", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.MustDB(t)
		ctx := migrateCtx(t)
		previous := previousRelease(t, "011_history_sale_edges")
		errs := make([]error, 2*n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[2*i] = runThis(ctx, dsn) })
			wg.Go(func() { _, errs[2*i+1] = runPrevious(ctx, previous, dsn) })
		}
		wg.Wait()
		// A migration run twice fails (its CREATE TABLE or ADD COLUMN finds what it makes,
		// or its record's primary key is taken): no error is each run once.
		for i, err := range errs {
			if err != nil {
				t.Fatalf("instance %d (%s): %v", i, map[bool]string{true: "this release", false: "the release before"}[i%2 == 0], err)
			}
		}
		wantSchema(t, dsn)
	})
}

func pgxQueryRow(t *testing.T, dsn, sql string, dest ...any) error {
	t.Helper()
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dest...)
}
