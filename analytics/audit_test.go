package analytics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/orders/pgtest"
)

// auditTestPool is a pool on a database migrated as an instance migrates it (orders.Open,
// then Migrate).
func auditTestPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := orders.Open(ctx, orders.Config{URL: dsn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	pool, err := OpenPool(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

type auditLogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *auditLogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *auditLogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestAuditLogRecordsAndLists(t *testing.T) {
	t.Parallel()
	pool := auditTestPool(t, pgtest.MustDB(t))
	a := NewAuditLog(pool, zerolog.Nop())
	defer a.Close(context.Background())
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	a.Record(AuditEntry{At: t0, Actor: "alice", Action: "queue.create", Target: "queue:a", Queue: "a",
		After: json.RawMessage(`{"rate_per_second":5}`)})
	a.Record(AuditEntry{At: t0.Add(time.Second), Actor: "bob", Action: "queue.update", Target: "queue:a", Queue: "a",
		Before: json.RawMessage(`{"rate_per_second":5}`), After: json.RawMessage(`{"rate_per_second":9}`)})
	a.Record(AuditEntry{At: t0.Add(2 * time.Second), Actor: "alice", Action: "limits.update", Target: "limits",
		Before: json.RawMessage(`null`), After: json.RawMessage(`{"join_global_burst":3}`)})

	t.Run("newest first, read after write", func(t *testing.T) {
		got, err := a.List(ctx, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Action != "limits.update" || got[1].Action != "queue.update" || got[2].Action != "queue.create" {
			t.Fatalf("entries: %+v", got)
		}
		if got[0].Queue != "" || got[0].Before != nil || !got[0].At.Equal(t0.Add(2*time.Second)) {
			t.Fatalf("limits entry: %+v (JSON null is stored as NULL)", got[0])
		}
		var before, after map[string]float64
		if json.Unmarshal(got[1].Before, &before) != nil || json.Unmarshal(got[1].After, &after) != nil ||
			before["rate_per_second"] != 5 || after["rate_per_second"] != 9 || got[1].Actor != "bob" {
			t.Fatalf("update entry: %+v", got[1])
		}
	})
	t.Run("limit", func(t *testing.T) {
		got, err := a.List(ctx, 1, "")
		if err != nil || len(got) != 1 || got[0].Action != "limits.update" {
			t.Fatalf("limit 1: %+v %v", got, err)
		}
		for _, bad := range []int{0, -1, AuditMaxLimit + 1} {
			if _, err := a.List(ctx, bad, ""); err == nil {
				t.Errorf("limit %d accepted", bad)
			}
		}
	})
	t.Run("queue filter", func(t *testing.T) {
		got, err := a.List(ctx, 10, "a")
		if err != nil || len(got) != 2 || got[0].Queue != "a" || got[1].Queue != "a" {
			t.Fatalf("queue a: %+v %v", got, err)
		}
		got, err = a.List(ctx, 10, "nobody")
		if err != nil || len(got) != 0 {
			t.Fatalf("queue nobody: %+v %v", got, err)
		}
	})
}

func TestAuditLogBatchesABurst(t *testing.T) {
	t.Parallel()
	pool := auditTestPool(t, pgtest.MustDB(t))
	a := NewAuditLog(pool, zerolog.Nop())
	n := AuditBatch*2 + 7
	for range n {
		a.Record(AuditEntry{At: time.Now(), Actor: "op", Action: "queue.update", Target: "queue:b", Queue: "b"})
	}
	// Close writes what waits.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a.Close(ctx)
	var count int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit_log WHERE queue = 'b'").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Fatalf("%d rows written, want %d", count, n)
	}
	// Record after Close does not block and does not panic.
	a.Record(AuditEntry{At: time.Now(), Actor: "op", Action: "keys.rotate", Target: "keys"})
	a.Close(ctx) // idempotent
}

// With PostgreSQL down the change is not held up: Record returns at once, the writer
// retries, then logs the entry at error level with its content; List reports
// ErrUnavailable.
func TestAuditLogDatabaseDown(t *testing.T) {
	t.Parallel()
	pg := pgtest.MustPrivate(t)
	pool := auditTestPool(t, pg.URL())
	var logs auditLogBuffer
	a := NewAuditLog(pool, zerolog.New(&logs))
	a.retries = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}
	defer a.Close(context.Background())
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a.Record(AuditEntry{At: time.Now(), Actor: "alice", Action: "queue.update", Target: "queue:c", Queue: "c",
		Before: json.RawMessage(`{"paused":false}`), After: json.RawMessage(`{"paused":true}`)})
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Record took %v with the database down", d)
	}
	testwait.For(t, 30*time.Second, "the lost entry in the log", func() bool {
		return strings.Contains(logs.String(), "audit entry lost")
	})
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "audit entry lost") {
			line = l
		}
	}
	for _, want := range []string{`"level":"error"`, `"actor":"alice"`, `"action":"queue.update"`, `"target":"queue:c"`,
		`"before":{"paused":false}`, `"after":{"paused":true}`} {
		if !strings.Contains(line, want) {
			t.Errorf("lost entry line lacks %s: %s", want, line)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.List(ctx, 10, ""); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("List with the database down: %v, want ErrUnavailable", err)
	}
}
