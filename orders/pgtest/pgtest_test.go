package pgtest_test

import (
	"context"
	"fmt"
	"sync/atomic"
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

// A template is prepared once per binary however many tests ask for it at once, and each
// copy starts as the template was and is a database of its own.
func TestMustDBFromCopiesATemplatePreparedOnce(t *testing.T) {
	t.Parallel()
	var prepared atomic.Int32
	prepare := func(ctx context.Context, url string) error {
		prepared.Add(1)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")
		return err
	}
	t.Run("copies", func(t *testing.T) {
		for i := range 4 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				conn, err := pgx.Connect(ctx, pgtest.MustDBFrom(t, pgtest.Template(t, "kept", prepare)))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				// Every copy reads the template's 7, whatever the others wrote to theirs.
				var v int
				if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 7 {
					t.Fatalf("v %d, %v; want the template's 7", v, err)
				}
				if _, err := conn.Exec(ctx, "UPDATE kept SET v = 8"); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
	if n := prepared.Load(); n != 1 {
		t.Fatalf("prepared %d times, want once", n)
	}
}
