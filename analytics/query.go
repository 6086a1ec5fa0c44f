package analytics

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// Point is one step of a queue's history (the history answer's shape).
type Point struct {
	T              time.Time `json:"t"`
	Waiting        int64     `json:"waiting"`
	Prequeue       int64     `json:"prequeue"`
	Joined         int64     `json:"joined"`
	Admitted       int64     `json:"admitted"`
	Abandoned      int64     `json:"abandoned"`
	Expired        int64     `json:"expired"`
	Orders         int64     `json:"orders"`
	SSEConnections int64     `json:"sse_connections"`
	// AdmitRate is the users really admitted per second in the step.
	AdmitRate float64 `json:"admit_rate"`
	// WaitP50 and WaitP95 are nil when nobody was admitted (or measured) in the step.
	WaitP50 *float64 `json:"wait_p50_seconds"`
	WaitP95 *float64 `json:"wait_p95_seconds"`
	// RatePerSecond is the admission rate setting in force at the step's end.
	RatePerSecond *float64 `json:"rate_per_second"`
	RateReason    string   `json:"rate_reason"`
}

// HistoryAnswer is GET /admin/api/queues/{queue}/history's answer.
type HistoryAnswer struct {
	Queue       string    `json:"queue"`
	StepSeconds int64     `json:"step_seconds"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Points      []Point   `json:"points"`
}

// histRow is one stored row.
type histRow struct {
	queue                                               string
	step                                                int
	t                                                   time.Time
	waiting, prequeue, sse                              int64
	joined, admitted, abandoned, expired, left, dropped int64
	hist                                                histogram
	p50, p95, rate                                      *float64
	reason                                              string
}

const rowColumns = `queue, step_seconds, t, waiting, prequeue, sse_connections, joined, admitted, abandoned,
	expired, left_places, wait_buckets, wait_p50, wait_p95, rate_per_second, rate_reason, dropped`

func scanRow(rows pgx.Rows, r *histRow, extra ...any) error {
	var buckets []int64
	dest := append([]any{&r.queue, &r.step, &r.t, &r.waiting, &r.prequeue, &r.sse, &r.joined, &r.admitted,
		&r.abandoned, &r.expired, &r.left, &buckets, &r.p50, &r.p95, &r.rate, &r.reason, &r.dropped}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	r.hist, r.t = histogramOf(buckets), r.t.UTC()
	return nil
}

// bucket merges the rows of one answer step.
type bucket struct {
	t                                          time.Time
	rows                                       int
	waiting, prequeue, sse                     int64
	joined, admitted, abandoned, expired, left int64
	dropped                                    int64
	orders, units                              int64
	hist                                       histogram
	p50, p95                                   *float64 // the one row's, when the bucket is one 10-s row
	rate                                       *float64
	reason                                     string
	first, last                                time.Time // the rows' steps
	waitingAt, sseAt                           time.Time // the step of each peak
}

func (b *bucket) add(r histRow) {
	if b.rows == 0 || r.t.Before(b.first) {
		b.first = r.t
	}
	if b.rows == 0 || !r.t.Before(b.last) {
		b.last, b.rate, b.reason = r.t, r.rate, r.reason
	}
	if b.rows == 0 || r.waiting > b.waiting {
		b.waiting, b.waitingAt = r.waiting, r.t
	}
	if b.rows == 0 || r.sse > b.sse {
		b.sse, b.sseAt = r.sse, r.t
	}
	b.rows++
	b.prequeue = max(b.prequeue, r.prequeue)
	b.joined += r.joined
	b.admitted += r.admitted
	b.abandoned += r.abandoned
	b.expired += r.expired
	b.left += r.left
	b.dropped += r.dropped
	b.hist.merge(r.hist)
	b.p50, b.p95 = r.p50, r.p95
}

// quantiles are the bucket's p50/p95: a single 10-s row's own (exact when its step admitted
// few) when exact is set, else interpolated from the merged histogram; nil when empty.
func (b *bucket) quantiles(exact bool) (p50, p95 *float64) {
	if exact && b.rows == 1 && b.p50 != nil {
		return b.p50, b.p95
	}
	v50, ok := b.hist.quantile(0.5)
	if !ok {
		return nil, nil
	}
	v95, _ := b.hist.quantile(0.95)
	return &v50, &v95
}

func (b *bucket) point(step time.Duration, exact bool) Point {
	p := Point{T: b.t, Waiting: b.waiting, Prequeue: b.prequeue, Joined: b.joined, Admitted: b.admitted,
		Abandoned: b.abandoned, Expired: b.expired, Orders: b.orders, SSEConnections: b.sse,
		AdmitRate: round3(float64(b.admitted) / step.Seconds()), RatePerSecond: b.rate, RateReason: b.reason}
	p.WaitP50, p.WaitP95 = b.quantiles(exact)
	for _, v := range []**float64{&p.WaitP50, &p.WaitP95} {
		if *v != nil {
			r := round3(**v)
			*v = &r
		}
	}
	return p
}

// History answers a queue's history from from to to (to excluded) in steps of step (a
// multiple of 10 s; see ParseRange): 10-s rows for steps under a minute, else minute rows
// and the 10-s rows of minutes not yet rolled up. Only steps with rows or orders appear.
func (s *Store) History(ctx context.Context, name string, from, to time.Time, step time.Duration) (HistoryAnswer, error) {
	bs, err := s.buckets(ctx, name, from, to, step)
	if err != nil {
		return HistoryAnswer{}, err
	}
	a := HistoryAnswer{Queue: name, StepSeconds: int64(step / time.Second), From: from.UTC(), To: to.UTC(),
		Points: make([]Point, 0, len(bs))}
	for _, b := range bs {
		a.Points = append(a.Points, b.point(step, step == Step))
	}
	return a, nil
}

// buckets reads the rows and orders of [from, to) and merges them into steps of step, in
// time order.
func (s *Store) buckets(ctx context.Context, name string, from, to time.Time, step time.Duration) ([]*bucket, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	var rows []histRow
	var err error
	if step < time.Minute {
		rows, err = s.readRows(ctx, name, 10, from, to)
	} else {
		rows, err = s.minuteRows(ctx, name, from, to)
	}
	if err != nil {
		return nil, err
	}
	byT := map[time.Time]*bucket{}
	// Steps are aligned to the Unix epoch (time.Truncate counts from year 1, which for a
	// step that does not divide a day would shift them off the grid clients ask on).
	secs := int64(step / time.Second)
	get := func(t time.Time) *bucket {
		u := t.Unix()
		t = time.Unix(u-((u%secs)+secs)%secs, 0).UTC()
		b := byT[t]
		if b == nil {
			b = &bucket{t: t}
			byT[t] = b
		}
		return b
	}
	for _, r := range rows {
		get(r.t).add(r)
	}
	grain := 10
	if step >= time.Minute {
		grain = 60
	}
	if err := s.orderCounts(ctx, name, from, to, grain, func(t time.Time, n, units int64) {
		b := get(t)
		b.orders += n
		b.units += units
	}); err != nil {
		return nil, err
	}
	out := make([]*bucket, 0, len(byT))
	for _, b := range byT {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].t.Before(out[j].t) })
	return out, nil
}

// readRows reads one queue's rows of one step size with from ≤ t < to (an index range scan
// of the primary key).
func (s *Store) readRows(ctx context.Context, name string, step int, from, to time.Time) ([]histRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+rowColumns+` FROM queue_history
		WHERE queue = $1 AND step_seconds = $2 AND t >= $3 AND t < $4 ORDER BY t`, name, step, from, to)
	if err != nil {
		return nil, fmt.Errorf("analytics: history %s: %w", name, classify(err))
	}
	defer rows.Close()
	var out []histRow
	for rows.Next() {
		var r histRow
		if err := scanRow(rows, &r); err != nil {
			return nil, fmt.Errorf("analytics: history %s: %w", name, classify(err))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("analytics: history %s: %w", name, classify(err))
	}
	return out, nil
}

// minuteRows reads the minute rows of [from, to) and, after the last of them, the 10-s rows
// of the minutes not yet rolled up (within the 10-s rows' 48 h).
func (s *Store) minuteRows(ctx context.Context, name string, from, to time.Time) ([]histRow, error) {
	rows, err := s.readRows(ctx, name, 60, from.Truncate(time.Minute), to)
	if err != nil {
		return nil, err
	}
	since := later(from, s.now().Add(-keep10s))
	if n := len(rows); n > 0 {
		since = later(since, rows[n-1].t.Add(time.Minute))
	}
	if !since.Before(to) {
		return rows, nil
	}
	recent, err := s.readRows(ctx, name, 10, since, to)
	if err != nil {
		return nil, err
	}
	return append(rows, recent...), nil
}

// orderCounts calls fn with the orders (and units) of queue name's products per grain
// seconds of created_at in [from, to). A product counts for the queue it names now.
func (s *Store) orderCounts(ctx context.Context, name string, from, to time.Time, grain int, fn func(t time.Time, n, units int64)) error {
	rows, err := s.pool.Query(ctx, `SELECT date_bin(make_interval(secs => $4), o.created_at, timestamptz '2001-01-01 00:00:00+00'),
			count(*), sum(o.quantity)
		FROM orders o JOIN products p ON p.id = o.product_id
		WHERE p.queue = $1 AND o.created_at >= $2 AND o.created_at < $3 GROUP BY 1`, name, from, to, grain)
	if err != nil {
		return fmt.Errorf("analytics: orders of %s: %w", name, classify(err))
	}
	defer rows.Close()
	for rows.Next() {
		var t time.Time
		var n, units int64
		if err := rows.Scan(&t, &n, &units); err != nil {
			return fmt.Errorf("analytics: orders of %s: %w", name, classify(err))
		}
		fn(t, n, units)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("analytics: orders of %s: %w", name, classify(err))
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
