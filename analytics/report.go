package analytics

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// Report is GET /admin/api/queues/{queue}/report's answer: a queue's whole recorded
// history (the minute rows' 90 days) in totals, peaks and its wait distribution.
//
// Where the places went: Joined = Admitted + Abandoned + Left + Dropped + StillWaiting.
// The counts are the recorded steps' plus what the queue's running totals show since the
// last recorded step (so a report read right after the end counts the end), and
// StillWaiting is the line now (every lane and the pre-queue). Unaccounted is what the
// identity misses: 0 unless an instance without the running totals took part and counted
// nothing of what it did (an older release during a rolling deploy: docs/UPGRADING.md, mixed
// versions), the history is older than its 90 days, or the line changed between the reads of
// the running totals (they are one pipeline, not one transaction).
type Report struct {
	Queue       string     `json:"queue"`
	GeneratedAt time.Time  `json:"generated_at"`
	From        *time.Time `json:"from"` // the first recorded step (nil: none)
	To          *time.Time `json:"to"`   // the last recorded step
	Joined      int64      `json:"joined"`
	Drawn       int64      `json:"drawn"` // the draw's participants (0 without a draw)
	Admitted    int64      `json:"admitted"`
	Bought      int64      `json:"bought"` // orders
	Units       int64      `json:"units"`  // quantity bought
	Abandoned   int64      `json:"abandoned"`
	Left        int64      `json:"left"`
	Expired     int64      `json:"expired"` // tokens that lapsed unused (part of Admitted)
	// Dropped are the places still waiting when the sale ended (ends_at).
	Dropped      int64 `json:"dropped_at_end"`
	StillWaiting int64 `json:"still_waiting"`
	Unaccounted  int64 `json:"unaccounted"`
	// SoldOutAt is when the queue first sold out (its first sold-out period's start);
	// SoldOutPeriods every period, oldest first, each to its restock (nil: still sold out).
	// A sell-out flagged by an instance that logs no sold-out periods (an older release) has
	// no recorded instant: SoldOutAt is then the latest order's time while every product of
	// the queue has no stock.
	SoldOutAt          *time.Time      `json:"sold_out_at"`
	SoldOutPeriods     []SoldOutPeriod `json:"sold_out_periods"`
	PeakWaiting        int64           `json:"peak_waiting"`
	PeakWaitingAt      *time.Time      `json:"peak_waiting_at"`
	PeakSSEConnections int64           `json:"peak_sse_connections"`
	PeakSSEAt          *time.Time      `json:"peak_sse_at"`
	WaitSeconds        WaitSummary     `json:"wait_seconds"`
	OrdersPerMinute    []MinuteCount   `json:"orders_per_minute"`

	minutes []csvMinute
}

// SoldOutPeriod is one time the queue was sold out: from when the flag was set to the
// restock that cleared it (nil while it lasts).
type SoldOutPeriod struct {
	From time.Time  `json:"from"`
	To   *time.Time `json:"to"`
}

// csvMinute is one CSV row: the minute's point and the counts the history answer leaves out.
type csvMinute struct {
	Point
	left, dropped int64
}

// WaitSummary is the wait-time distribution of the users admitted.
type WaitSummary struct {
	Count   int64        `json:"count"`
	P50     *float64     `json:"p50"`
	P95     *float64     `json:"p95"`
	P99     *float64     `json:"p99"`
	Buckets []WaitBucket `json:"buckets"`
}

// WaitBucket is one histogram bucket: waits ≤ LeSeconds (nil: +Inf).
type WaitBucket struct {
	LeSeconds *float64 `json:"le_seconds"`
	Count     int64    `json:"count"`
}

// MinuteCount is the orders of one minute.
type MinuteCount struct {
	T      time.Time `json:"t"`
	Orders int64     `json:"orders"`
}

// Report builds the report of queue name (which the caller has checked exists).
func (s *Store) Report(ctx context.Context, name string) (Report, error) {
	now := s.now().UTC()
	rp := Report{Queue: name, GeneratedAt: now, OrdersPerMinute: []MinuteCount{}, SoldOutPeriods: []SoldOutPeriod{}}
	bs, err := s.buckets(ctx, name, now.Add(-MaxRange).Truncate(time.Minute), now.Add(time.Minute), time.Minute)
	if err != nil {
		return Report{}, err
	}
	var hist histogram
	for _, b := range bs {
		if b.rows > 0 {
			if rp.From == nil || b.first.Before(*rp.From) {
				f := b.first
				rp.From = &f
			}
			if rp.To == nil || b.last.After(*rp.To) {
				l := b.last
				rp.To = &l
			}
			if rp.PeakWaitingAt == nil || b.waiting > rp.PeakWaiting {
				at := b.waitingAt
				rp.PeakWaiting, rp.PeakWaitingAt = b.waiting, &at
			}
			if rp.PeakSSEAt == nil || b.sse > rp.PeakSSEConnections {
				at := b.sseAt
				rp.PeakSSEConnections, rp.PeakSSEAt = b.sse, &at
			}
		}
		rp.Joined += b.joined
		rp.Admitted += b.admitted
		rp.Abandoned += b.abandoned
		rp.Left += b.left
		rp.Expired += b.expired
		rp.Dropped += b.dropped
		hist.merge(b.hist)
		rp.OrdersPerMinute = append(rp.OrdersPerMinute, MinuteCount{T: b.t, Orders: b.orders})
		rp.minutes = append(rp.minutes, csvMinute{b.point(time.Minute, false), b.left, b.dropped})
	}
	rp.WaitSeconds = waitSummary(hist)
	if err := s.refinePeaks(ctx, name, &rp); err != nil {
		return Report{}, err
	}
	st, err := s.src.Stats(ctx, name)
	if err != nil {
		return Report{}, err
	}
	if err := s.since(ctx, name, st, &rp); err != nil {
		return Report{}, err
	}
	if err := s.soldOut(ctx, name, st, &rp); err != nil {
		return Report{}, err
	}
	if err := s.sales(ctx, name, &rp); err != nil {
		return Report{}, err
	}
	d, err := s.src.Draw(ctx, name)
	switch {
	case err == nil:
		rp.Drawn = d.Participants
	case errors.Is(err, queue.ErrNoDraw):
	default:
		return Report{}, err
	}
	return rp, nil
}

// refinePeaks moves a peak found in a minute row to the 10-s step it happened in, while
// the minute's 10-s rows are kept (48 h).
func (s *Store) refinePeaks(ctx context.Context, name string, rp *Report) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	for _, pk := range []struct {
		at    *time.Time
		value int64
		of    func(histRow) int64
	}{{rp.PeakWaitingAt, rp.PeakWaiting, func(r histRow) int64 { return r.waiting }},
		{rp.PeakSSEAt, rp.PeakSSEConnections, func(r histRow) int64 { return r.sse }}} {
		if pk.at == nil || pk.at.Truncate(time.Minute) != *pk.at {
			continue // none, or already a 10-s step
		}
		rows, err := s.readRows(ctx, name, 10, *pk.at, pk.at.Add(time.Minute))
		if err != nil {
			return err
		}
		for _, r := range rows {
			if pk.of(r) == pk.value {
				*pk.at = r.t
				break
			}
		}
	}
	return nil
}

func waitSummary(h histogram) WaitSummary {
	w := WaitSummary{Count: h.count(), Buckets: make([]WaitBucket, nBuckets)}
	for i := range h {
		w.Buckets[i].Count = h[i]
		if i < len(WaitBounds) {
			le := WaitBounds[i]
			w.Buckets[i].LeSeconds = &le
		}
	}
	for _, q := range []struct {
		q   float64
		dst **float64
	}{{0.5, &w.P50}, {0.95, &w.P95}, {0.99, &w.P99}} {
		if v, ok := h.quantile(q.q); ok {
			v = round3(v)
			*q.dst = &v
		}
	}
	return w
}

// sales reads what the queue's products sold (every order, not only the last 90 days) and
// when they sold out.
func (s *Store) sales(ctx context.Context, name string, rp *Report) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	var soldOut bool
	var last *time.Time
	err := s.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) > 0 AND bool_and(stock = 0) FROM products WHERE queue = $1),
			count(o.id), coalesce(sum(o.quantity), 0), max(o.created_at)
		FROM orders o JOIN products p ON p.id = o.product_id WHERE p.queue = $1`, name).
		Scan(&soldOut, &rp.Bought, &rp.Units, &last)
	if err != nil {
		return fmt.Errorf("analytics: report %s: %w", name, classify(err))
	}
	if len(rp.SoldOutPeriods) > 0 {
		t := rp.SoldOutPeriods[0].From
		rp.SoldOutAt = &t
	} else if soldOut && last != nil {
		t := last.UTC()
		rp.SoldOutAt = &t
	}
	return nil
}

// CSVHeader is the report CSV's header row.
var CSVHeader = []string{"minute", "joined", "admitted", "abandoned", "expired", "orders", "peak_waiting",
	"peak_sse_connections", "wait_p50_seconds", "wait_p95_seconds", "left", "dropped_at_end"}

// WriteCSV writes the report's minutes as CSV: the header, then one row per minute with
// data (empty p50/p95 cells when nobody was admitted).
func (rp Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	i := strconv.FormatInt
	f := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'f', -1, 64)
	}
	for _, p := range rp.minutes {
		if err := cw.Write([]string{p.T.Format(time.RFC3339), i(p.Joined, 10), i(p.Admitted, 10),
			i(p.Abandoned, 10), i(p.Expired, 10), i(p.Orders, 10), i(p.Waiting, 10), i(p.SSEConnections, 10),
			f(p.WaitP50), f(p.WaitP95), i(p.left, 10), i(p.dropped, 10)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
