package pglocal_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/waitroom/waitroom/orders/pglocal"
)

// baseDir is a temporary directory the postgres OS user can traverse when the tests run
// as root (t.TempDir's directories are 0700).
func baseDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pglocal-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func start(t *testing.T, opts pglocal.Options) *pglocal.Instance {
	t.Helper()
	// Generous: initdb is CPU-bound, and these tests run theirs side by side.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts.BinDir = os.Getenv("PG_BINDIR")
	opts.NoSync = true
	opts.StartTimeout = 3 * time.Minute
	in, err := pglocal.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	return in
}

func exec(t *testing.T, dsn, sql string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func count(t *testing.T, dsn, sql string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestDataIsKeptBetweenStarts(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(baseDir(t), "data")
	in := start(t, pglocal.Options{DataDir: dataDir})
	if !strings.HasPrefix(in.URL(), "postgres://postgres:") || !strings.Contains(in.URL(), "@127.0.0.1:") {
		t.Fatalf("URL = %s", in.URL())
	}
	if err := exec(t, in.URL(), "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := in.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := in.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if err := exec(t, in.URL(), "SELECT 1"); err == nil {
		t.Fatal("server still answers after Stop")
	}

	again := start(t, pglocal.Options{DataDir: dataDir})
	if n := count(t, again.URL(), "SELECT v FROM kept"); n != 42 {
		t.Fatalf("kept value = %d, want 42", n)
	}
}

func TestKillThenRestartRecovers(t *testing.T) {
	t.Parallel()
	in := start(t, pglocal.Options{DataDir: filepath.Join(baseDir(t), "data")})
	port := in.Port()
	if err := exec(t, in.URL(), "CREATE TABLE t (v int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := in.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := exec(t, in.URL(), "SELECT 1"); err == nil {
		t.Fatal("server answers after Kill")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := in.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if in.Port() != port {
		t.Fatalf("port changed across restart: %d → %d", port, in.Port())
	}
	if n := count(t, in.URL(), "SELECT count(*) FROM t"); n != 1 {
		t.Fatalf("rows after crash recovery = %d, want 1", n)
	}
}

func TestTCPNeedsThePassword(t *testing.T) {
	t.Parallel()
	in := start(t, pglocal.Options{DataDir: filepath.Join(baseDir(t), "data")})
	u, err := url.Parse(in.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("postgres", "wrong")
	if err := exec(t, u.String(), "SELECT 1"); err == nil {
		t.Fatal("wrong password accepted over TCP")
	}
	u.User = url.User("postgres")
	if err := exec(t, u.String(), "SELECT 1"); err == nil {
		t.Fatal("no password accepted over TCP")
	}
}

func TestExplicitPortAndSettings(t *testing.T) {
	t.Parallel()
	first := start(t, pglocal.Options{DataDir: filepath.Join(baseDir(t), "a")})
	port := first.Port()
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	in := start(t, pglocal.Options{
		DataDir:  filepath.Join(baseDir(t), "b"),
		Port:     port,
		Settings: map[string]string{"max_connections": "37"},
	})
	if in.Port() != port {
		t.Fatalf("port = %d, want %d", in.Port(), port)
	}
	if n := count(t, in.URL(), "SELECT current_setting('max_connections')::int"); n != 37 {
		t.Fatalf("max_connections = %d, want 37", n)
	}
}

func TestBadBinDirIsAClearError(t *testing.T) {
	t.Parallel()
	_, err := pglocal.Start(context.Background(), pglocal.Options{BinDir: t.TempDir()})
	if !errors.Is(err, pglocal.ErrNoBinaries) {
		t.Fatalf("err = %v, want ErrNoBinaries", err)
	}
	if !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Fatalf("error does not tell the user what to do: %v", err)
	}
}

func TestUnreachableDataDirIsAClearError(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		// Not root: PostgreSQL runs as this user, every directory it made is reachable.
		in := start(t, pglocal.Options{DataDir: filepath.Join(t.TempDir(), "data")})
		if err := exec(t, in.URL(), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		return
	}
	private := t.TempDir() // 0700, owned by root
	_, err := pglocal.Start(context.Background(), pglocal.Options{
		BinDir: os.Getenv("PG_BINDIR"), DataDir: filepath.Join(private, "data"),
	})
	if err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("err = %v, want a 'cannot reach' error", err)
	}
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	dir, err := pglocal.FindBinDir(os.Getenv("PG_BINDIR"))
	if err != nil {
		t.Fatalf("no PostgreSQL binaries on this machine (the test command installs them: docs/TESTING.md): %v", err)
	}
	major, err := pglocal.MajorVersion(context.Background(), dir)
	if err != nil || major == "" {
		t.Fatalf("major version: %q, %v", major, err)
	}
	t.Logf("binaries %s, PostgreSQL %s", dir, major)
}

// TestInitCacheCopiesOneInitdb: two servers started at once with the same InitCache share
// one initdb'd cluster (the cache holds exactly one entry afterwards, whichever made it),
// each gets a data directory of its own (a table made in one is not in the other, 0700),
// and each keeps its own password (b refuses a's). A cache folder others may write to is
// not used: initdb runs as without one.
func TestInitCacheCopiesOneInitdb(t *testing.T) {
	t.Parallel()
	base := baseDir(t)
	cache := filepath.Join(base, "cache")
	ins := make([]*pglocal.Instance, 2)
	done := make(chan error, 2)
	for i, name := range []string{"a", "b"} {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			in, err := pglocal.Start(ctx, pglocal.Options{DataDir: filepath.Join(base, name), InitCache: cache,
				BinDir: os.Getenv("PG_BINDIR"), NoSync: true, StartTimeout: 3 * time.Minute})
			ins[i] = in
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("start: %v", err)
		}
	}
	a, b := ins[0], ins[1]
	t.Cleanup(func() { _ = a.Stop(); _ = b.Stop() })
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(entries) != 1 || !entries[0].IsDir() || !strings.HasPrefix(names[0], "pg") {
		t.Fatalf("the cache holds %v, want one initdb'd cluster", names)
	}
	if _, err := os.Stat(filepath.Join(cache, names[0], "PG_VERSION")); err != nil {
		t.Fatalf("the cached cluster: %v", err)
	}
	for _, in := range ins {
		if st, err := os.Stat(in.DataDir()); err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("data directory %s: %v %v, want 0700", in.DataDir(), st.Mode().Perm(), err)
		}
	}
	if err := exec(t, a.URL(), "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, b.URL(), "SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'"); n != 0 {
		t.Fatalf("a table made in a is in b: the copies share their files")
	}
	if n := count(t, a.URL(), "SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'"); n != 1 {
		t.Fatalf("a lost its table")
	}
	ua, _ := url.Parse(a.URL())
	ub, _ := url.Parse(b.URL())
	pa, _ := ua.User.Password()
	pb, _ := ub.User.Password()
	ub.User = url.UserPassword("postgres", pa)
	if pa == pb {
		t.Fatalf("a and b have the same password")
	}
	if err := exec(t, ub.String(), "SELECT 1"); err == nil {
		t.Fatalf("b accepted a's password")
	}

	// A cache folder others may write to: not used, and the server starts all the same.
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	c := start(t, pglocal.Options{DataDir: filepath.Join(base, "c"), InitCache: open})
	if n := count(t, c.URL(), "SELECT 1"); n != 1 {
		t.Fatalf("c answers %d", n)
	}
	if left, _ := os.ReadDir(open); len(left) != 0 {
		t.Fatalf("the open cache folder was used: %v", left)
	}
}
