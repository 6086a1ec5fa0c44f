package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/waitroom/waitroom/orders/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func currentDB(t *testing.T, dsn string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var name string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestMustDBGivesEachTestItsOwnDatabase(t *testing.T) {
	t.Parallel()
	var names [2]string
	for i := range names {
		t.Run("db", func(t *testing.T) {
			names[i] = currentDB(t, pgtest.MustDB(t))
		})
	}
	if names[0] == names[1] || names[0] == "" {
		t.Fatalf("databases %q and %q", names[0], names[1])
	}
	// Dropped by the subtests' Cleanup: connecting must now fail.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := pgtest.MustDB(t)
	conn, err := pgx.Connect(ctx, pgtest.WithDatabase(admin, names[0]))
	if err == nil {
		conn.Close(ctx)
		t.Fatalf("database %s still exists after its test ended", names[0])
	}
}

func TestMustPrivateCanBeRestarted(t *testing.T) {
	t.Parallel()
	in := pgtest.MustPrivate(t)
	if got := currentDB(t, in.URL()); got != "postgres" {
		t.Fatalf("database = %q", got)
	}
	if err := in.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := in.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got := currentDB(t, in.URL()); got != "postgres" {
		t.Fatalf("database after restart = %q", got)
	}
}
