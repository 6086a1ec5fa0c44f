// Package pgtest gives tests a real PostgreSQL: one private cluster per test binary
// (started by Main from TestMain), a throwaway database per test (MustDB, or MustDBFrom a
// copy of a database prepared once per binary: Template), and separate
// clusters that a fault test may kill and restart (MustPrivate).
//
// A missing PostgreSQL installation fails loudly, never skips: a test that silently skips
// would turn a missing backend green. PG_BINDIR points at the binaries when they are not
// found by pglocal.FindBinDir.
//
// The one cluster per test binary is package state by necessity (TestMain starts it, tests
// reach it through MustDB); it is set once in Main and never changed while tests run.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/waitroom/waitroom/orders/pglocal"
)

var shared *pglocal.Instance

// Main starts the shared cluster, runs the tests, stops the cluster and exits with the
// tests' code. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// The cluster is stopped on a normal return and on a panic in the TestMain goroutine; if
// the test binary dies another way (-timeout, a panic in a test goroutine, SIGKILL), the
// kernel stops it on Linux (see pglocal).
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	dir, err := traversableTempDir("pgtest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	in, err := start(filepath.Join(dir, "data"), map[string]string{"max_connections": "1000"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: cannot start the test PostgreSQL: %v\n", err)
		return 1
	}
	shared = in
	defer func() {
		if err := in.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop: %v\n", err)
		}
	}()
	return m.Run()
}

// MustDB creates an empty database with a unique name in the shared cluster and returns
// its URL; the database is dropped (with FORCE, so leftover connections do not block it)
// when the test ends.
func MustDB(tb testing.TB) string {
	tb.Helper()
	return mustDB(tb, "")
}

func mustDB(tb testing.TB, from string) string {
	tb.Helper()
	if shared == nil {
		tb.Fatal("pgtest.MustDB: no cluster; call pgtest.Main(m) from TestMain in this package")
	}
	name := "t_" + randomHex(8)
	admin := shared.URL()
	// STRATEGY FILE_COPY copies template1's files instead of writing each of its pages to the
	// WAL (PostgreSQL 15's default, WAL_LOG): with fsync off its two checkpoints cost little,
	// and a create + drop took 144 ms instead of 282 (2026-12-03, 2 cores) — the test
	// command makes a few hundred databases. A PostgreSQL before 15 has no STRATEGY: plain then.
	if err := createDB(admin, name+from); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := execSQL(admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return WithDatabase(admin, name)
}

// templates are the prepared databases of Template, by name.
var (
	templatesMu sync.Mutex
	templates   = map[string]*template{}
)

type template struct {
	once sync.Once
	db   string
	err  error
}

// Template returns the name of a database in the shared cluster that prepare made (given its
// URL) once per test binary and name — say, with every migration applied — for MustDBFrom to
// copy. prepare must close its connections before it returns: PostgreSQL copies no database
// that has sessions. A failed prepare fails every test that asks for that template.
func Template(tb testing.TB, name string, prepare func(ctx context.Context, url string) error) string {
	tb.Helper()
	if shared == nil {
		tb.Fatal("pgtest.Template: no cluster; call pgtest.Main(m) from TestMain in this package")
	}
	templatesMu.Lock()
	tp := templates[name]
	if tp == nil {
		tp = &template{}
		templates[name] = tp
	}
	templatesMu.Unlock()
	tp.once.Do(func() {
		db := "tmpl_" + randomHex(8)
		if tp.err = createDB(shared.URL(), db); tp.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if tp.err = prepare(ctx, WithDatabase(shared.URL(), db)); tp.err == nil {
			tp.db = db
		}
	})
	if tp.err != nil {
		tb.Fatalf("pgtest: template %s: %v", name, tp.err)
	}
	return tp.db
}

// MustDBFrom is MustDB with a copy of database template (Template) instead of an empty one.
func MustDBFrom(tb testing.TB, template string) string {
	tb.Helper()
	return mustDB(tb, " TEMPLATE "+template)
}

// MustPrivate starts a separate cluster for one test, which may Kill, Stop and Restart
// it; it is stopped and deleted when the test ends. Use MustDB unless the test needs to
// take the server down.
func MustPrivate(tb testing.TB) *pglocal.Instance {
	tb.Helper()
	dir, err := traversableTempDir("pgtest-private-")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	in, err := start(filepath.Join(dir, "data"), nil)
	if err != nil {
		tb.Fatalf("pgtest: cannot start a private PostgreSQL: %v", err)
	}
	tb.Cleanup(func() {
		if err := in.Stop(); err != nil {
			tb.Errorf("pgtest: stop private cluster: %v", err)
		}
	})
	return in
}

// WithDatabase returns dsn with its database replaced by db.
func WithDatabase(dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + db
	return u.String()
}

func start(dataDir string, settings map[string]string) (*pglocal.Instance, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return pglocal.Start(ctx, pglocal.Options{
		DataDir: dataDir,
		BinDir:  os.Getenv("PG_BINDIR"),
		NoSync:  true,
		// initdb once per machine and binaries, copied for every test binary and private
		// server after that (~25 a test command: 1.1 CPU-seconds each, a copy ~0.1).
		InitCache: filepath.Join(os.TempDir(), "waitroom-pgtest-initdb-"+strconv.Itoa(os.Geteuid())),
		Settings:  settings,
	})
}

// traversableTempDir makes a temporary directory that the postgres OS user can traverse
// when the tests run as root (os.MkdirTemp makes it 0700).
func traversableTempDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// createDB runs CREATE DATABASE what (a name, and a TEMPLATE clause if any) with STRATEGY
// FILE_COPY, or without it on a PostgreSQL before 15, which has no STRATEGY.
func createDB(admin, what string) error {
	err := execSQL(admin, "CREATE DATABASE "+what+" STRATEGY FILE_COPY")
	if err == nil {
		return nil
	}
	if plain := execSQL(admin, "CREATE DATABASE "+what); plain != nil {
		return fmt.Errorf("create database: %w (without STRATEGY: %v)", err, plain)
	}
	return nil
}

func execSQL(dsn, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
