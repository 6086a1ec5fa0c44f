package analytics

import (
	"bytes"
	"encoding/csv"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

// put stores one row as given (counts are the step's own).
func (e *env) put(t *testing.T, name string, step int, at time.Time, waiting, joined, admitted int64, waits ...float64) {
	t.Helper()
	var h histogram
	for _, w := range waits {
		h.add(w)
	}
	e.exec(t, `INSERT INTO queue_history (queue, step_seconds, t, waiting, sse_connections, joined, admitted,
		abandoned, expired, left_places, wait_count, wait_buckets, rate_per_second, rate_reason)
		VALUES ($1, $2, $3, $4::bigint, $4::bigint / 2, $5, $6, 1, 2, 3, $7, $8, 50, 'fixed')`,
		name, step, at, waiting, joined, admitted, h.count(), h[:])
}

func (e *env) order(t *testing.T, product string, qty int, at time.Time) {
	t.Helper()
	e.exec(t, `INSERT INTO orders (id, product_id, quantity, request_hash, created_at) VALUES ($1, $2, $3, 'h', $4)`,
		uuid.New(), product, qty, at)
}

func (e *env) product(t *testing.T, id, queueName string, stock int) {
	t.Helper()
	e.exec(t, `INSERT INTO products (id, name, stock, queue) VALUES ($1, $1, $2, $3)`, id, stock, queueName)
}

func TestHistorySteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	now := time.Now().UTC()
	m := now.Truncate(time.Minute).Add(-30 * time.Minute) // a minute half an hour ago
	e.st.now = func() time.Time { return now }
	// Two 10-s rows, a gap of 20 s, one more; an older minute already rolled up.
	e.put(t, "h", 10, m, 8, 5, 4, 1, 1, 3, 7)
	e.put(t, "h", 10, m.Add(10*time.Second), 12, 6, 6, 2)
	e.put(t, "h", 10, m.Add(40*time.Second), 3, 1, 2)
	e.put(t, "h", 60, m.Add(-5*time.Minute), 30, 100, 90, 20)
	e.put(t, "other", 10, m, 99, 99, 99)
	e.product(t, "p1", "h", 10)
	e.product(t, "px", "other", 10)
	e.order(t, "p1", 2, m.Add(15*time.Second))
	e.order(t, "p1", 1, m.Add(55*time.Second)) // a step with orders and no row
	e.order(t, "px", 1, m.Add(15*time.Second)) // another queue's product

	t.Run("10-s steps are the rows, gaps stay gaps", func(t *testing.T) {
		a, err := e.st.History(ctx, "h", m, m.Add(time.Minute), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Points) != 4 {
			t.Fatalf("%d points, want 4 (3 rows and a step with an order): %+v", len(a.Points), a.Points)
		}
		p := a.Points[0]
		if !p.T.Equal(m) || p.Waiting != 8 || p.Joined != 5 || p.Admitted != 4 || p.AdmitRate != 0.4 || p.Orders != 0 ||
			p.SSEConnections != 4 {
			t.Errorf("first point %+v", p)
		}
		if p.WaitP50 == nil || *p.WaitP50 != 1 || p.RatePerSecond == nil || *p.RatePerSecond != 50 || p.RateReason != "fixed" {
			t.Errorf("first point waits/rate: p50 %v rate %v %q", p.WaitP50, p.RatePerSecond, p.RateReason)
		}
		if a.Points[1].Orders != 1 || a.Points[3].Orders != 1 || !a.Points[3].T.Equal(m.Add(50*time.Second)) || a.Points[3].WaitP50 != nil {
			t.Errorf("orders per step: %+v / %+v", a.Points[1], a.Points[3])
		}
		if a.Points[2].WaitP50 != nil {
			t.Errorf("a step that measured no wait has p50 %v, want null", *a.Points[2].WaitP50)
		}
	})

	t.Run("longer steps sum counts and take peaks", func(t *testing.T) {
		a, err := e.st.History(ctx, "h", m, m.Add(time.Minute), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Points) != 2 {
			t.Fatalf("%d points, want 2", len(a.Points))
		}
		p := a.Points[0]
		if p.Waiting != 12 || p.Joined != 11 || p.Admitted != 10 || p.Orders != 1 || p.AdmitRate != round3(10.0/30) {
			t.Errorf("30-s point %+v", p)
		}
		if p.WaitP50 == nil || p.WaitP95 == nil || *p.WaitP50 <= 1 || *p.WaitP50 > 2 || *p.WaitP95 <= 5 || *p.WaitP95 > 10 {
			t.Errorf("30-s point p50 %v p95 %v: want in (1,2] and (5,10]", p.WaitP50, p.WaitP95)
		}
	})

	t.Run("minute steps read minute rows and the minutes not rolled up", func(t *testing.T) {
		a, err := e.st.History(ctx, "h", m.Add(-10*time.Minute), m.Add(time.Minute), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Points) != 2 || a.Points[0].Joined != 100 || a.Points[1].Joined != 12 || a.Points[1].Orders != 2 {
			t.Fatalf("minute points %+v", a.Points)
		}
	})

	t.Run("an empty range has no points", func(t *testing.T) {
		a, err := e.st.History(ctx, "h", m.Add(-3*time.Hour), m.Add(-2*time.Hour), 60*time.Second)
		if err != nil || a.Points == nil || len(a.Points) != 0 {
			t.Fatalf("points %v err %v, want an empty list", a.Points, err)
		}
	})
}

func TestRollupAndRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	m := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	for i := range 6 {
		e.put(t, "r", 10, m.Add(time.Duration(i)*10*time.Second), int64(i*10), 2, 1, float64(i))
	}
	e.put(t, "r", 10, m.Add(time.Minute), 1, 1, 1) // the next minute, not finished at m+1min
	if err := e.st.rollup(ctx, m.Add(time.Minute+5*time.Second)); err != nil {
		t.Fatal(err)
	}
	got := e.row(t, "r", 60, m)
	if got.waiting != 50 || got.joined != 12 || got.admitted != 6 || got.abandoned != 6 || got.left != 18 ||
		got.hist.count() != 6 || got.sse != 25 {
		t.Errorf("minute row %+v", got)
	}
	if got.p50 == nil || *got.p50 <= 1 || *got.p50 > 2 {
		t.Errorf("minute p50 %v, want in (1,2] (waits 0..5 s)", got.p50)
	}
	if rows, _ := e.st.readRows(ctx, "r", 60, m.Add(time.Minute), m.Add(2*time.Minute)); len(rows) != 0 {
		t.Errorf("an unfinished minute was rolled up")
	}
	// A late row of the same minute: the next rollup recomputes it.
	e.exec(t, `UPDATE queue_history SET joined = 102 WHERE queue = 'r' AND step_seconds = 10 AND t = $1`, m)
	if err := e.st.rollup(ctx, m.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := e.row(t, "r", 60, m); got.joined != 112 {
		t.Errorf("recomputed minute joined %d, want 112", got.joined)
	}

	t.Run("expired rows are deleted in batches", func(t *testing.T) {
		e.exec(t, `INSERT INTO queue_history (queue, step_seconds, t)
			SELECT 'old', 10, $1::timestamptz - make_interval(secs => 10 * g) FROM generate_series(1, 2500) g`, m)
		if err := e.st.deleteExpired(ctx, m.Add(keep10s+time.Second)); err != nil {
			t.Fatal(err)
		}
		var n10, n60 int
		conn := e.st.pool
		if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE step_seconds = 10), count(*) FILTER (WHERE step_seconds = 60) FROM queue_history`).Scan(&n10, &n60); err != nil {
			t.Fatal(err)
		}
		// Kept: the 10-s rows after m (5 of its minute, 1 of the next), every minute row.
		if n10 != 6 || n60 != 2 {
			t.Errorf("after 48 h: %d 10-s rows, %d minute rows, want 6 and 2", n10, n60)
		}
		if err := e.st.deleteExpired(ctx, m.Add(keepMinutes+2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM queue_history`).Scan(&n10); err != nil || n10 != 0 {
			t.Errorf("after 90 days: %d rows left (%v), want 0", n10, err)
		}
	})
}

func TestReport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	e.mkQueue(t, "rp", 10)
	now := time.Now().UTC()
	e.st.now = func() time.Time { return now }
	m := now.Truncate(time.Minute).Add(-3 * time.Minute)
	e.put(t, "rp", 60, m.Add(-time.Minute), 40, 50, 30, 1, 2, 30, 400)
	e.put(t, "rp", 10, m, 70, 10, 5, 3)
	e.put(t, "rp", 10, m.Add(20*time.Second), 20, 5, 5)
	e.product(t, "a", "rp", 0)
	e.product(t, "b", "rp", 0)
	e.order(t, "a", 2, m.Add(5*time.Second))
	e.order(t, "b", 1, m.Add(65*time.Second))

	rp, err := e.st.Report(ctx, "rp")
	if err != nil {
		t.Fatal(err)
	}
	if rp.Joined != 65 || rp.Admitted != 40 || rp.Abandoned != 3 || rp.Expired != 6 || rp.Left != 9 ||
		rp.Bought != 2 || rp.Units != 3 || rp.Drawn != 0 {
		t.Errorf("totals %+v", rp)
	}
	if rp.From == nil || !rp.From.Equal(m.Add(-time.Minute)) || rp.To == nil || !rp.To.Equal(m.Add(20*time.Second)) {
		t.Errorf("from %v to %v", rp.From, rp.To)
	}
	if rp.PeakWaiting != 70 || rp.PeakWaitingAt == nil || !rp.PeakWaitingAt.Equal(m) || rp.PeakSSEConnections != 35 {
		t.Errorf("peaks %d at %v, sse %d", rp.PeakWaiting, rp.PeakWaitingAt, rp.PeakSSEConnections)
	}
	if rp.SoldOutAt == nil || !rp.SoldOutAt.Equal(m.Add(65*time.Second)) {
		t.Errorf("sold out at %v, want the last order's time", rp.SoldOutAt)
	}
	if w := rp.WaitSeconds; w.Count != 5 || len(w.Buckets) != nBuckets || w.Buckets[nBuckets-1].LeSeconds != nil ||
		w.P50 == nil || w.P99 == nil || *w.P99 <= 300 {
		t.Errorf("waits %+v", w)
	}
	if len(rp.OrdersPerMinute) != 3 || rp.OrdersPerMinute[1].Orders != 1 || rp.OrdersPerMinute[2].Orders != 1 {
		t.Errorf("orders per minute %+v", rp.OrdersPerMinute)
	}
	var b bytes.Buffer
	if err := rp.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || len(recs[0]) != 12 || recs[0][0] != "minute" || recs[2][1] != "15" || recs[2][8] == "" {
		t.Errorf("csv %q", recs)
	}

	t.Run("a product with stock left: not sold out", func(t *testing.T) {
		e.exec(t, `UPDATE products SET stock = 1 WHERE id = 'b'`)
		rp, err := e.st.Report(ctx, "rp")
		if err != nil || rp.SoldOutAt != nil {
			t.Errorf("sold out at %v (%v), want null", rp.SoldOutAt, err)
		}
	})

	t.Run("a queue with no history", func(t *testing.T) {
		e.mkQueue(t, "empty", 1)
		rp, err := e.st.Report(ctx, "empty")
		if err != nil || rp.From != nil || rp.PeakWaitingAt != nil || rp.WaitSeconds.P50 != nil || len(rp.OrdersPerMinute) != 0 {
			t.Errorf("empty report %+v (%v)", rp, err)
		}
	})

	t.Run("a peak in a rolled-up minute has its 10-s step's time", func(t *testing.T) {
		e.mkQueue(t, "rp2", 1)
		mm := m.Add(-10 * time.Minute)
		e.put(t, "rp2", 60, mm, 90, 3, 3)
		e.put(t, "rp2", 10, mm.Add(10*time.Second), 80, 1, 1)
		e.put(t, "rp2", 10, mm.Add(30*time.Second), 90, 1, 1)
		e.put(t, "rp2", 10, mm.Add(40*time.Second), 90, 1, 1)
		rp, err := e.st.Report(ctx, "rp2")
		if err != nil || rp.PeakWaiting != 90 || rp.PeakWaitingAt == nil || !rp.PeakWaitingAt.Equal(mm.Add(30*time.Second)) ||
			rp.PeakSSEAt == nil || !rp.PeakSSEAt.Equal(mm.Add(30*time.Second)) || rp.Joined != 3 {
			t.Errorf("peak %d at %v, sse at %v, joined %d (%v); want 90 at %v, joined 3 (the minute row)", rp.PeakWaiting,
				rp.PeakWaitingAt, rp.PeakSSEAt, rp.Joined, err, mm.Add(30*time.Second))
		}
	})

	t.Run("the database away is ErrUnavailable", func(t *testing.T) {
		e.st.pool.Close()
		if _, err := e.st.Report(ctx, "rp"); !errors.Is(err, ErrUnavailable) {
			t.Errorf("report with the pool closed: %v, want ErrUnavailable", err)
		}
	})
}

// TestHistoryStepsOnTheUnixGrid: a step that does not divide a day (28 min, the dashboard's
// 7-day step) is counted from the Unix epoch, so every point's time is a multiple of it and
// each minute row lands in exactly one step.
func TestHistoryStepsOnTheUnixGrid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now().UTC()
	e.st.now = func() time.Time { return now }
	step := 1680 * time.Second
	from := time.Unix(now.Add(-3*time.Hour).Unix()/1680*1680, 0).UTC()
	for i := range 120 { // two hours of minute rows, 3 admitted each
		e.put(t, "grid", 60, from.Add(time.Duration(i)*time.Minute), 1, 3, 3)
	}
	ctx := ctxT(t) // after the 120 writes, which can take a while on a busy machine
	a, err := e.st.History(ctx, "grid", from, from.Add(2*time.Hour), step)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for i, p := range a.Points {
		if p.T.Unix()%1680 != 0 {
			t.Fatalf("point %d at %v: not on the 1680-s grid", i, p.T)
		}
		if i < len(a.Points)-1 && p.Admitted != 28*3 {
			t.Errorf("point %d admitted %d, want 84 (28 minutes of 3)", i, p.Admitted)
		}
		total += p.Admitted
	}
	if total != 360 {
		t.Fatalf("admitted %d in all, want 360", total)
	}
}
