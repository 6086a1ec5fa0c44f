package analytics

import (
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// TestReportSaleEdges: a sale recorded step by step — six join, two are admitted, one
// leaves, the queue sells out, is restocked and sells out again between two steps, the end
// drops the two still waiting — and the report says where every place went (joined =
// admitted + abandoned + left + dropped at the end + still waiting, nothing unaccounted),
// lists both sold-out periods (the first closed by the restock) and counts what happened
// after the last recorded step from the queue's running totals.
func TestReportSaleEdges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	const name = "edge"
	e.mkQueue(t, name, 0)
	r := NewRecorder(e.st)
	t0 := time.Now().Truncate(Step).Add(-time.Hour).UTC()
	e.st.now = func() time.Time { return t0.Add(time.Minute) }

	tks := e.join(t, name, 6)
	if err := e.q.Leave(ctx, tks[5]); err != nil {
		t.Fatal(err)
	}
	e.tick(t, r, name, t0.Add(time.Second))
	maxActive := int64(2)
	rate := 1000.0
	if _, _, err := e.q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: &rate, MaxActive: &maxActive}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if res := e.tick(t, r, name, t0.Add(2*time.Second)); res.Head == 2 {
			break
		}
		if i > 50 {
			t.Fatal("2 users not admitted in 50 ticks")
		}
	}
	// Sold out, restocked, sold out again within one step: the log keeps both periods.
	for _, so := range []bool{true, false, true} {
		if err := e.q.SetSoldOut(ctx, name, so, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond) // the periods' instants apart (ms)
	}
	r.flush(ctx, t0.Add(Step))
	rp, err := e.st.Report(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Joined != 6 || rp.Admitted != 2 || rp.Left != 1 || rp.StillWaiting != 3 || rp.Dropped != 0 || rp.Unaccounted != 0 {
		t.Errorf("before the end: %+v", rp)
	}
	ps := rp.SoldOutPeriods
	if len(ps) != 2 || ps[0].To == nil || ps[1].To != nil || ps[1].From.Before(*ps[0].To) || rp.SoldOutAt == nil ||
		!rp.SoldOutAt.Equal(ps[0].From) {
		t.Fatalf("sold out %v, periods %+v: want the first closed, the second open", rp.SoldOutAt, ps)
	}
	var recorded int
	if err := e.st.pool.QueryRow(ctx, `SELECT count(*) FROM queue_sellouts WHERE queue = $1`, name).Scan(&recorded); err != nil || recorded != 2 {
		t.Errorf("%d periods recorded (%v), want 2", recorded, err)
	}

	// Restocked: the period ends at the restock's instant.
	if err := e.q.SetSoldOut(ctx, name, false, 0); err != nil {
		t.Fatal(err)
	}
	r.flush(ctx, t0.Add(2*Step))
	e.tick(t, r, name, t0.Add(Step+time.Second))
	r.flush(ctx, t0.Add(2*Step))
	st, _ := e.q.Stats(ctx, name)
	if rp, err = e.st.Report(ctx, name); err != nil {
		t.Fatal(err)
	}
	// Stock is back (a product with stock left): the report still says when it sold out
	// (it used to say "not sold out" as soon as any product had stock).
	e.product(t, "edge-p", name, 3)
	if rp, err = e.st.Report(ctx, name); err != nil {
		t.Fatal(err)
	}
	if rp.SoldOutAt == nil || !rp.SoldOutAt.Equal(ps[0].From) {
		t.Errorf("restocked: sold out at %v, want the first sell-out %v", rp.SoldOutAt, ps[0].From)
	}
	if len(rp.SoldOutPeriods) != 2 || rp.SoldOutPeriods[1].To == nil || !rp.SoldOutPeriods[1].To.Equal(st.SoldOutPeriods[1].To) ||
		!rp.SoldOutPeriods[0].From.Equal(ps[0].From) {
		t.Errorf("after the restock: periods %+v, want the second ended at %v", rp.SoldOutPeriods, st.SoldOutPeriods[1].To)
	}
	var open int
	if err := e.st.pool.QueryRow(ctx, `SELECT count(*) FROM queue_sellouts WHERE queue = $1 AND restocked_at IS NULL`, name).Scan(&open); err != nil || open != 0 {
		t.Errorf("%d periods recorded open after the restock (%v), want 0", open, err)
	}

	// The end: the places still waiting are dropped; the report counts them at once, from
	// the running totals (no step recorded since).
	// Far enough ahead to be in the future when Put checks it on a busy machine; then the
	// wait for the instant itself (Redis TIME and this clock are the same machine's).
	end := time.Now().Add(300 * time.Millisecond)
	if _, _, err := e.q.Put(ctx, name, queue.SettingsPatch{EndsAt: &end}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(end) + 10*time.Millisecond)
	e.tick(t, r, name, t0.Add(2*Step+time.Second))
	if rp, err = e.st.Report(ctx, name); err != nil {
		t.Fatal(err)
	}
	if rp.Joined != 6 || rp.Dropped != 3 || rp.StillWaiting != 0 || rp.Unaccounted != 0 ||
		rp.Joined != rp.Admitted+rp.Abandoned+rp.Left+rp.Dropped+rp.StillWaiting {
		t.Errorf("after the end: joined %d admitted %d abandoned %d left %d dropped %d waiting %d unaccounted %d; want 6 = 2+0+1+3+0",
			rp.Joined, rp.Admitted, rp.Abandoned, rp.Left, rp.Dropped, rp.StillWaiting, rp.Unaccounted)
	}
	// Recorded, the same numbers (the step's row holds the drops, the tail is empty).
	r.flush(ctx, t0.Add(3*Step))
	if row := e.row(t, name, 10, t0.Add(2*Step)); row.dropped != 3 {
		t.Errorf("the end's step recorded %d dropped, want 3", row.dropped)
	}
	again, err := e.st.Report(ctx, name)
	if err != nil || again.Joined != 6 || again.Dropped != 3 || again.Left != 1 || again.Admitted != 2 {
		t.Errorf("recorded: %+v (%v)", again, err)
	}
	if again.minutes[len(again.minutes)-1].dropped != 3 {
		t.Errorf("CSV minutes %+v: the last should hold the 3 dropped", again.minutes)
	}

	t.Run("a row of the release before (no dropped_total) counts nothing twice", func(t *testing.T) {
		e.exec(t, `INSERT INTO queue_history (queue, step_seconds, t, joined_total, admitted_total, abandoned_total,
			expired_total, left_total) VALUES ($1, 10, $2, 6, 2, 0, 0, 1)`, name, t0.Add(3*Step))
		e.tick(t, r, name, t0.Add(4*Step+time.Second))
		r.flush(ctx, t0.Add(5*Step))
		if row := e.row(t, name, 10, t0.Add(4*Step)); row.dropped != 0 {
			t.Errorf("the step after an old row counted %d dropped again, want 0", row.dropped)
		}
		if rp, err := e.st.Report(ctx, name); err != nil || rp.Dropped != 3 || rp.Unaccounted != 0 {
			t.Errorf("report: dropped %d, unaccounted %d (%v); want 3 and 0", rp.Dropped, rp.Unaccounted, err)
		}
	})
}
