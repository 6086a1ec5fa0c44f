package analytics

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// keep10s and keepMinutes are the retention of the 10-s and the minute rows.
	keep10s     = 48 * time.Hour
	keepMinutes = 90 * 24 * time.Hour
	// deleteBatch rows are deleted per statement, at most deleteBatches statements per run.
	deleteBatch   = 1000
	deleteBatches = 20
	// rollupBack is how far back each rollup recomputes finished minutes (rows written late
	// by another instance, a rollup missed in an outage).
	rollupBack = 3 * time.Minute
	// rollupLockKey is the advisory lock that lets one instance at a time roll up
	// ("wrhist" in ASCII).
	rollupLockKey int64 = 0x777268697374
)

// stepRow is one 10-s row as the recorder writes it: joined … left are the cumulative
// counters at the step's end; the statement turns them into the step's deltas.
type stepRow struct {
	queue                                      string
	t                                          time.Time
	waiting, prequeue, sse                     int64
	joined, admitted, abandoned, expired, left int64
	dropped                                    int64 // places dropped at the end (running total)
	hist                                       histogram
	p50, p95                                   *float64
	rate                                       float64
	reason                                     string
	sellouts                                   []SoldOutPeriod // to record: the queue's log, when it changed
	soldLogKey                                 string          // sellouts' key (soldLogKey), remembered once written
}

// insertStep writes one 10-s row. The deltas come from the queue's latest earlier row (10-s,
// or minute once the 10-s rows have expired): a counter that went down was reset and counts
// its whole value; a queue's first row counts everything since the queue was made — unless
// more were admitted than joined, which only a queue made by a release without the running
// totals shows (its admitted total is its life's, its joined total starts at 0): that first
// row is the baseline and counts nothing. The dropped delta comes from the latest row that has
// dropped_total (rows written by an older release leave it NULL; docs/UPGRADING.md, mixed
// versions). Two instances that both led the queue in one step (a hand-over) upsert the same
// row: the counts grow by what the second saw beyond the first's totals, the peaks take the
// larger, the histograms add, p50/p95 are those of the larger sample.
const insertStep = `
INSERT INTO queue_history AS h (queue, step_seconds, t, waiting, prequeue, sse_connections,
	joined, admitted, abandoned, expired, left_places,
	joined_total, admitted_total, abandoned_total, expired_total, left_total,
	wait_count, wait_buckets, wait_p50, wait_p95, rate_per_second, rate_reason, dropped, dropped_total)
SELECT $1, 10, $2, $3, $4, $5,
	CASE WHEN p.joined_total IS NULL AND $7::bigint > $6::bigint THEN 0 WHEN p.joined_total IS NULL OR $6 < p.joined_total THEN $6 ELSE $6 - p.joined_total END,
	CASE WHEN p.admitted_total IS NULL AND $7::bigint > $6::bigint THEN 0 WHEN p.admitted_total IS NULL OR $7 < p.admitted_total THEN $7 ELSE $7 - p.admitted_total END,
	CASE WHEN p.abandoned_total IS NULL AND $7::bigint > $6::bigint THEN 0 WHEN p.abandoned_total IS NULL OR $8 < p.abandoned_total THEN $8 ELSE $8 - p.abandoned_total END,
	CASE WHEN p.expired_total IS NULL AND $7::bigint > $6::bigint THEN 0 WHEN p.expired_total IS NULL OR $9 < p.expired_total THEN $9 ELSE $9 - p.expired_total END,
	CASE WHEN p.left_total IS NULL AND $7::bigint > $6::bigint THEN 0 WHEN p.left_total IS NULL OR $10 < p.left_total THEN $10 ELSE $10 - p.left_total END,
	$6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
	CASE WHEN p.joined_total IS NULL AND $7::bigint > $6::bigint THEN 0 WHEN d.dropped_total IS NULL OR $17 < d.dropped_total THEN $17 ELSE $17 - d.dropped_total END,
	$17
FROM (SELECT 1) AS one LEFT JOIN LATERAL (
	SELECT * FROM (
		(SELECT t, joined_total, admitted_total, abandoned_total, expired_total, left_total
			FROM queue_history WHERE queue = $1 AND step_seconds = 10 AND t < $2 ORDER BY t DESC LIMIT 1)
		UNION ALL
		(SELECT t, joined_total, admitted_total, abandoned_total, expired_total, left_total
			FROM queue_history WHERE queue = $1 AND step_seconds = 60 AND t < $2 ORDER BY t DESC LIMIT 1)
	) AS latest ORDER BY t DESC LIMIT 1) AS p ON true
LEFT JOIN LATERAL (
	SELECT * FROM (
		(SELECT t, dropped_total FROM queue_history
			WHERE queue = $1 AND step_seconds = 10 AND t < $2 AND dropped_total IS NOT NULL ORDER BY t DESC LIMIT 1)
		UNION ALL
		(SELECT t, dropped_total FROM queue_history
			WHERE queue = $1 AND step_seconds = 60 AND t < $2 AND dropped_total IS NOT NULL ORDER BY t DESC LIMIT 1)
	) AS latest ORDER BY t DESC LIMIT 1) AS d ON true
ON CONFLICT (queue, step_seconds, t) DO UPDATE SET
	waiting = greatest(h.waiting, excluded.waiting),
	prequeue = greatest(h.prequeue, excluded.prequeue),
	sse_connections = greatest(h.sse_connections, excluded.sse_connections),
	joined = h.joined + greatest(excluded.joined_total - h.joined_total, 0),
	admitted = h.admitted + greatest(excluded.admitted_total - h.admitted_total, 0),
	abandoned = h.abandoned + greatest(excluded.abandoned_total - h.abandoned_total, 0),
	expired = h.expired + greatest(excluded.expired_total - h.expired_total, 0),
	left_places = h.left_places + greatest(excluded.left_total - h.left_total, 0),
	dropped = CASE WHEN h.dropped_total IS NULL THEN h.dropped + excluded.dropped
		ELSE h.dropped + greatest(excluded.dropped_total - h.dropped_total, 0) END,
	joined_total = greatest(h.joined_total, excluded.joined_total),
	admitted_total = greatest(h.admitted_total, excluded.admitted_total),
	abandoned_total = greatest(h.abandoned_total, excluded.abandoned_total),
	expired_total = greatest(h.expired_total, excluded.expired_total),
	left_total = greatest(h.left_total, excluded.left_total),
	dropped_total = greatest(h.dropped_total, excluded.dropped_total),
	wait_count = h.wait_count + excluded.wait_count,
	wait_buckets = (SELECT array_agg(coalesce(a, 0) + coalesce(b, 0) ORDER BY i)
		FROM unnest(h.wait_buckets, excluded.wait_buckets) WITH ORDINALITY AS u(a, b, i)),
	wait_p50 = CASE WHEN excluded.wait_count > h.wait_count THEN excluded.wait_p50 ELSE h.wait_p50 END,
	wait_p95 = CASE WHEN excluded.wait_count > h.wait_count THEN excluded.wait_p95 ELSE h.wait_p95 END,
	rate_per_second = excluded.rate_per_second,
	rate_reason = excluded.rate_reason`

// upsertSellout records one sold-out period of a queue (queue_sellouts): its start, and
// its end once known (set once; an unchanged period writes nothing).
const upsertSellout = `
INSERT INTO queue_sellouts AS s (queue, sold_out_at, restocked_at) VALUES ($1, $2, $3)
ON CONFLICT (queue, sold_out_at) DO UPDATE SET restocked_at = excluded.restocked_at
	WHERE s.restocked_at IS NULL AND excluded.restocked_at IS NOT NULL`

// writeSteps writes rows in one batch (one implicit transaction).
func (s *Store) writeSteps(ctx context.Context, rows []stepRow) error {
	if len(rows) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	var b pgx.Batch
	for _, r := range rows {
		b.Queue(insertStep, r.queue, r.t, r.waiting, r.prequeue, r.sse, r.joined, r.admitted, r.abandoned,
			r.expired, r.left, r.hist.count(), r.hist[:], r.p50, r.p95, r.rate, r.reason, r.dropped)
		for _, p := range r.sellouts {
			b.Queue(upsertSellout, r.queue, p.From, p.To)
		}
	}
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("analytics: write %d steps: %w", len(rows), classify(err))
	}
	return nil
}

// upsertMinute writes one minute row, replacing what an earlier rollup wrote.
const upsertMinute = `
INSERT INTO queue_history (queue, step_seconds, t, waiting, prequeue, sse_connections,
	joined, admitted, abandoned, expired, left_places,
	joined_total, admitted_total, abandoned_total, expired_total, left_total,
	wait_count, wait_buckets, wait_p50, wait_p95, rate_per_second, rate_reason, dropped, dropped_total)
VALUES ($1, 60, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
ON CONFLICT (queue, step_seconds, t) DO UPDATE SET
	waiting = excluded.waiting, prequeue = excluded.prequeue, sse_connections = excluded.sse_connections,
	joined = excluded.joined, admitted = excluded.admitted, abandoned = excluded.abandoned,
	expired = excluded.expired, left_places = excluded.left_places,
	joined_total = excluded.joined_total, admitted_total = excluded.admitted_total,
	abandoned_total = excluded.abandoned_total, expired_total = excluded.expired_total,
	left_total = excluded.left_total, wait_count = excluded.wait_count, wait_buckets = excluded.wait_buckets,
	wait_p50 = excluded.wait_p50, wait_p95 = excluded.wait_p95,
	rate_per_second = excluded.rate_per_second, rate_reason = excluded.rate_reason,
	dropped = excluded.dropped, dropped_total = excluded.dropped_total`

// rollup recomputes the minute rows of every queue for the finished minutes of the
// rollupBack before until (a minute boundary) from their 10-s rows. One instance at a
// time: the others skip (the next boundary recomputes anyway).
func (s *Store) rollup(ctx context.Context, until time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 4*s.cfg.QueryTimeout)
	defer cancel()
	until = until.Truncate(time.Minute)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", rollupLockKey).Scan(&got); err != nil || !got {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+rowColumns+`, joined_total, admitted_total, abandoned_total,
			expired_total, left_total, dropped_total FROM queue_history
			WHERE step_seconds = 10 AND t >= $1 AND t < $2 ORDER BY queue, t`, until.Add(-rollupBack), until)
		if err != nil {
			return err
		}
		type key struct {
			queue string
			t     time.Time
		}
		var order []key
		minutes := map[key]*bucket{}
		totals := map[key][5]int64{}
		dropped := map[key]*int64{} // the minute's last dropped_total (NULL: none known)
		for rows.Next() {
			var r histRow
			var tot [5]int64
			var dt *int64
			if err := scanRow(rows, &r, &tot[0], &tot[1], &tot[2], &tot[3], &tot[4], &dt); err != nil {
				rows.Close()
				return err
			}
			k := key{r.queue, r.t.Truncate(time.Minute)}
			b := minutes[k]
			if b == nil {
				b = &bucket{t: k.t}
				minutes[k] = b
				order = append(order, k)
			}
			b.add(r)
			totals[k] = tot // rows are in time order: the minute's last totals
			if dt != nil {
				dropped[k] = dt
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var batch pgx.Batch
		for _, k := range order {
			b, tot := minutes[k], totals[k]
			p50, p95 := b.quantiles(false)
			batch.Queue(upsertMinute, k.queue, k.t, b.waiting, b.prequeue, b.sse, b.joined, b.admitted,
				b.abandoned, b.expired, b.left, tot[0], tot[1], tot[2], tot[3], tot[4], b.hist.count(), b.hist[:],
				p50, p95, b.rate, b.reason, b.dropped, dropped[k])
		}
		if batch.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, &batch).Close()
	})
	if err != nil {
		return fmt.Errorf("analytics: rollup: %w", classify(err))
	}
	return nil
}

// deleteExpired deletes 10-s rows older than 48 h and minute rows older than 90 days, in
// batches of deleteBatch rows so that no statement holds many locks or runs long.
func (s *Store) deleteExpired(ctx context.Context, now time.Time) error {
	for _, k := range []struct {
		step int
		keep time.Duration
	}{{10, keep10s}, {60, keepMinutes}} {
		for range deleteBatches {
			qctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
			tag, err := s.pool.Exec(qctx, `DELETE FROM queue_history WHERE ctid = ANY(ARRAY(
				SELECT ctid FROM queue_history WHERE step_seconds = $1 AND t < $2 LIMIT $3))`,
				k.step, now.Add(-k.keep), deleteBatch)
			cancel()
			if err != nil {
				return fmt.Errorf("analytics: delete expired rows: %w", classify(err))
			}
			if tag.RowsAffected() < deleteBatch {
				break
			}
		}
	}
	// Sold-out periods ended 90 days ago (few rows: one per sell-out).
	qctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	if _, err := s.pool.Exec(qctx, `DELETE FROM queue_sellouts WHERE restocked_at < $1`, now.Add(-keepMinutes)); err != nil {
		return fmt.Errorf("analytics: delete expired sold-out periods: %w", classify(err))
	}
	return nil
}
