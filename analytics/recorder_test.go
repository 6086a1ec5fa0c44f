package analytics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/orders/pgtest"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/topology"
)

// env is a Store on a fresh database (migrated by orders.Open and Migrate) and a real Redis.
type env struct {
	st     *Store
	orders *orders.Store
	q      *queue.Queue
	signer *queue.Signer
	adm    *queue.Admitter
	dsn    string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	// Generous bounds (connection start, pool wait, statements): these tests run side by side
	// and are not about the bounds.
	dsn := pgtest.MustDB(t)
	if strings.Contains(dsn, "?") {
		dsn += "&connect_timeout=60"
	} else {
		dsn += "?connect_timeout=60"
	}
	ctx := ctxT(t)
	ost, err := orders.Open(ctx, orders.Config{URL: dsn, AcquireTimeout: 10 * time.Second, QueryTimeout: 20 * time.Second}, prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("open orders: %v", err)
	}
	t.Cleanup(ost.Close)
	pool, err := OpenPool(ctx, dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate analytics: %v", err)
	}
	rdb := redistest.Start(t).Client()
	q := queue.New(rdb, queue.Config{OpTimeout: 10 * time.Second}, nil)
	return &env{st: New(pool, q, topology.New(rstore.New(rdb, q.OpTimeout())), Config{Log: zerolog.Nop(), QueryTimeout: 20 * time.Second}), orders: ost, q: q,
		signer: queue.NewSigner([]byte("test-secret")), adm: queue.NewAdmitter(q, queue.AdmitConfig{Owner: "t"}), dsn: dsn}
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func (e *env) mkQueue(t *testing.T, name string, rate float64) {
	t.Helper()
	if _, _, err := e.q.Put(context.Background(), name, queue.SettingsPatch{RatePerSecond: &rate}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) join(t *testing.T, name string, n int) []queue.Ticket {
	t.Helper()
	out := make([]queue.Ticket, n)
	for i := range out {
		tk, _ := e.signer.New(name)
		if _, _, err := e.q.Join(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
		out[i] = tk
	}
	return out
}

// tick runs one real tick of name and shows it to r as run at at.
func (e *env) tick(t *testing.T, r *Recorder, name string, at time.Time) queue.TickResult {
	t.Helper()
	res, err := e.adm.TickOnce(context.Background(), name)
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	r.ObserveTick(name, at, res)
	return res
}

// row reads one stored row.
func (e *env) row(t *testing.T, name string, step int, at time.Time) histRow {
	t.Helper()
	rows, err := e.st.readRows(ctxT(t), name, step, at, at.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows of %s at %v (step %d), want 1", len(rows), name, at, step)
	}
	return rows[0]
}

// exec runs sql on the env's own pool: a connection per statement (exec) cost a backend
// start each, and TestHistoryStepsOnTheUnixGrid writes 120 rows (8 CPU-seconds of its 10).
func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.st.pool.Exec(ctxT(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func exec(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctxT(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestRecorderWritesStepsWithDeltasAndWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	const name = "rec"
	e.mkQueue(t, name, 0) // nobody admitted until the rate is set
	r := NewRecorder(e.st)
	t0 := time.Now().Truncate(Step).Add(-time.Hour).UTC()

	e.tick(t, r, name, t0.Add(time.Second)) // the first mark: nobody joined yet
	e.join(t, name, 4)
	if res := e.tick(t, r, name, t0.Add(2*time.Second)); res.Tail != 4 || res.Head != 0 {
		t.Fatalf("after 4 joins: tail %d head %d, want 4 and 0", res.Tail, res.Head)
	}
	for sec := 3; sec <= 6; sec++ { // the leader ticks on (ticks more than leadGap apart are another leader's)
		e.tick(t, r, name, t0.Add(time.Duration(sec)*time.Second))
	}
	e.mkQueue(t, name, 1000)
	for i := 0; ; i++ {
		if res := e.tick(t, r, name, t0.Add(7*time.Second)); res.Head == 4 {
			break
		}
		if i > 50 {
			t.Fatal("4 users not admitted in 50 ticks")
		}
	}
	r.flush(ctx, t0.Add(Step))
	first := e.row(t, name, 10, t0)
	if first.joined != 4 || first.admitted != 4 || first.waiting != 4 || first.left != 0 {
		t.Errorf("first step: joined %d admitted %d waiting %d left %d, want 4 4 4 0", first.joined, first.admitted, first.waiting, first.left)
	}
	if first.p50 == nil || *first.p50 != 5 || *first.p95 != 5 || first.hist.count() != 4 || first.hist[bucketOf(5)] != 4 {
		t.Errorf("first step waits: p50 %v p95 %v hist %v, want exactly 5 s for 4 users", first.p50, first.p95, first.hist)
	}
	if first.rate == nil || *first.rate != 1000 {
		t.Errorf("rate %v, want 1000", first.rate)
	}

	t.Run("the next step counts only what happened in it", func(t *testing.T) {
		tk := e.join(t, name, 2)
		if err := e.q.Leave(ctx, tk[0]); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			if res := e.tick(t, r, name, t0.Add(13*time.Second)); res.Head == 6 {
				break
			}
			if i > 50 {
				t.Fatal("the user left not admitted in 50 ticks")
			}
		}
		r.flush(ctx, t0.Add(2*Step))
		got := e.row(t, name, 10, t0.Add(Step))
		if got.joined != 2 || got.admitted != 1 || got.left != 1 {
			t.Errorf("second step: joined %d admitted %d left %d, want 2 1 1", got.joined, got.admitted, got.left)
		}
	})

	t.Run("a new leader takes the previous totals from PostgreSQL", func(t *testing.T) {
		r2 := NewRecorder(e.st) // nothing in memory
		e.join(t, name, 3)
		for i := 0; ; i++ {
			if res := e.tick(t, r2, name, t0.Add(25*time.Second)); res.Head == 9 {
				break
			}
			if i > 50 {
				t.Fatal("3 users not admitted in 50 ticks")
			}
		}
		r2.flush(ctx, t0.Add(3*Step))
		got := e.row(t, name, 10, t0.Add(2*Step))
		if got.joined != 3 || got.admitted != 3 {
			t.Errorf("after a leader change: joined %d admitted %d, want 3 3", got.joined, got.admitted)
		}
		if got.hist.count() != 0 {
			t.Errorf("a new leader measured %d waits of users who joined before it led", got.hist.count())
		}
	})

	t.Run("two leaders of one step count it once", func(t *testing.T) {
		ra, rb := NewRecorder(e.st), NewRecorder(e.st)
		e.join(t, name, 2)
		e.tick(t, ra, name, t0.Add(31*time.Second))
		e.join(t, name, 1)
		e.tick(t, rb, name, t0.Add(36*time.Second))
		ra.flush(ctx, t0.Add(4*Step))
		rb.flush(ctx, t0.Add(4*Step))
		ra.flush(ctx, t0.Add(4*Step)) // nothing left to write: no change
		got := e.row(t, name, 10, t0.Add(3*Step))
		if got.joined != 3 {
			t.Errorf("hand-over step: joined %d, want 3", got.joined)
		}
	})

	t.Run("a counter that went down was reset and counts its value", func(t *testing.T) {
		e.exec(t, `UPDATE queue_history SET joined_total = 1000000 WHERE queue = $1 AND t = $2`, name, t0.Add(3*Step))
		e.join(t, name, 1)
		e.tick(t, r, name, t0.Add(41*time.Second))
		r.flush(ctx, t0.Add(5*Step))
		st, err := e.q.Stats(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.row(t, name, 10, t0.Add(4*Step)); got.joined != st.Joined {
			t.Errorf("after a reset: joined %d, want the counter's value %d", got.joined, st.Joined)
		}
	})
}

func TestRecorderDropsRowsWhileTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "down"
	e.mkQueue(t, name, 1000)
	r := NewRecorder(e.st)
	t0 := time.Now().Truncate(Step).Add(-time.Hour).UTC()
	e.join(t, name, 2)
	e.tick(t, r, name, t0.Add(time.Second))
	e.st.pool.Close() // every statement now fails at once
	done := make(chan struct{})
	go func() { r.flush(context.Background(), t0.Add(Step)); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("flush blocked on a closed database")
	}
	// ObserveTick never touches the database: it goes on.
	e.tick(t, r, name, t0.Add(11*time.Second))
	r.mu.Lock()
	defer r.mu.Unlock()
	if tr := r.queues[name]; tr == nil || tr.cur == nil || !tr.cur.start.Equal(t0.Add(Step)) {
		t.Fatal("the recorder stopped recording after a failed write")
	}
}

func TestWaitsOfOldSequencesAreNotMeasured(t *testing.T) {
	t.Parallel()
	// Pure memory: marks and measurement without Redis.
	r := &Recorder{queues: map[string]*tracker{}}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	prev := int64(0)
	obs := func(at time.Duration, head, tail int64) {
		var seqs []int64
		for s := prev + 1; s <= head; s++ {
			seqs = append(seqs, s)
		}
		r.ObserveTick("m", t0.Add(at), queue.TickResult{Head: head, Tail: tail, Admitted: head - prev, Seqs: seqs})
		prev = head
	}
	obs(0, 0, 10)                       // 10 waiting before this instance led
	obs(time.Second, 0, 12)             // 2 join
	obs(1100*time.Millisecond, 0, 13)   // within 500 ms: counted from the last mark
	obs(3*time.Second, 13, 13)          // all admitted: only 11..13 are measured
	for sec := 4; sec <= 10; sec += 2 { // ticks on (a gap past leadGap would be another leader)
		obs(time.Duration(sec)*time.Second, 13, 13)
	}
	obs(10*time.Second+time.Second, 13, 14) // the next step
	obs(10*time.Second+4*time.Second, 14, 14)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) != 1 {
		t.Fatalf("%d finished steps, want 1", len(r.pending))
	}
	h := r.pending[0].hist
	if h.count() != 3 || h[bucketOf(2)] != 3 {
		t.Errorf("first step: %v, want 3 waits of 2 s (sequences 1..10 unmeasured)", h)
	}
	if cur := r.queues["m"].cur; cur.hist.count() != 1 || cur.samples[0] != 3 {
		t.Errorf("second step: %v %v, want one wait of 3 s", cur.hist, cur.samples)
	}
}

func TestWaitsCountOnlyTheAdmitted(t *testing.T) {
	t.Parallel()
	// The head passes places that left: 10 sequences, 4 of them admitted (the tick names
	// them), 2 more by an invite lane.
	r := &Recorder{queues: map[string]*tracker{}}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r.ObserveTick("l", t0, queue.TickResult{})
	r.ObserveTick("l", t0.Add(time.Second), queue.TickResult{Tail: 10})
	r.ObserveTick("l", t0.Add(2*time.Second), queue.TickResult{Tail: 10, Head: 10, Admitted: 6, AdmittedPriority: 2, Seqs: []int64{2, 4, 7, 9}})
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.queues["l"].cur.hist; h.count() != 4 || h[bucketOf(1)] != 4 {
		t.Errorf("waits %v, want 4 of 1 s", h)
	}
}

// TestWaitsOfTheLotteryAreItsPicks: under method random the tick names the sequences it
// admitted (anywhere in the line) while the head stays below the lowest one still waiting;
// each pick's wait is from its own join, and a later jump of the head measures nothing more.
func TestWaitsOfTheLotteryAreItsPicks(t *testing.T) {
	t.Parallel()
	r := &Recorder{queues: map[string]*tracker{}}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r.ObserveTick("lot", t0, queue.TickResult{})
	r.ObserveTick("lot", t0.Add(time.Second), queue.TickResult{Tail: 10})   // 1-10 joined by 1 s
	r.ObserveTick("lot", t0.Add(3*time.Second), queue.TickResult{Tail: 20}) // 11-20 by 3 s
	r.ObserveTick("lot", t0.Add(5*time.Second), queue.TickResult{Tail: 20, Admitted: 2, Seqs: []int64{17, 3}})
	r.ObserveTick("lot", t0.Add(6*time.Second), queue.TickResult{Tail: 20, Head: 20, Admitted: 1, Seqs: []int64{1}})
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.queues["lot"].cur.hist
	// 17 waited 2 s, 3 waited 4 s, 1 waited 5 s: three waits, not the head's jump over 20.
	if h.count() != 3 || h[bucketOf(2)] != 1 || h[bucketOf(5)] != 2 || len(r.queues["lot"].cur.samples) != 3 {
		t.Errorf("waits %v %v, want 2 s, 4 s and 5 s", h, r.queues["lot"].cur.samples)
	}
}

// TestFirstRowOfAQueueFromBeforeTheTotals: a queue made under the release before has an
// admitted total for its whole life but running totals of joins from 0; its first row is a
// baseline (counts nothing), and the next row counts the step's own activity. A queue made
// now counts everything in its first row.
func TestFirstRowOfAQueueFromBeforeTheTotals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	t0 := time.Now().UTC().Truncate(Step).Add(-time.Minute)
	rows := []stepRow{
		{queue: "old", t: t0, joined: 3, admitted: 1_000_000, expired: 7},
		{queue: "new", t: t0, joined: 30, admitted: 20, expired: 1},
	}
	if err := e.st.writeSteps(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := e.st.writeSteps(ctx, []stepRow{{queue: "old", t: t0.Add(Step), joined: 10, admitted: 1_000_005, expired: 8}}); err != nil {
		t.Fatal(err)
	}
	if r := e.row(t, "old", 10, t0); r.joined != 0 || r.admitted != 0 || r.expired != 0 {
		t.Errorf("old queue's first row counts %d joined, %d admitted, %d expired; want a baseline of 0", r.joined, r.admitted, r.expired)
	}
	if r := e.row(t, "old", 10, t0.Add(Step)); r.joined != 7 || r.admitted != 5 || r.expired != 1 {
		t.Errorf("old queue's second row %d/%d/%d, want 7 joined, 5 admitted, 1 expired", r.joined, r.admitted, r.expired)
	}
	if r := e.row(t, "new", 10, t0); r.joined != 30 || r.admitted != 20 || r.expired != 1 {
		t.Errorf("new queue's first row %d/%d/%d, want 30/20/1", r.joined, r.admitted, r.expired)
	}
}
