package analytics

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/queue"
)

// since adds to rp what the queue's running totals show beyond its latest recorded step
// (the step being recorded now, and anything since the queue was last led), the places
// still in its line, and what the identity joined = admitted + abandoned + left + dropped
// + still waiting misses.
func (s *Store) since(ctx context.Context, name string, st queue.QueueStats, rp *Report) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	// The latest row of either step size (a minute row holds its last 10-s row's totals,
	// so at the same t it is the later), and the latest that knows dropped_total.
	var last [5]int64
	var dropped *int64
	err := s.pool.QueryRow(ctx, `SELECT joined_total, admitted_total, abandoned_total, expired_total, left_total
		FROM queue_history WHERE queue = $1 ORDER BY t DESC, step_seconds DESC LIMIT 1`, name).
		Scan(&last[0], &last[1], &last[2], &last[3], &last[4])
	none := err == pgx.ErrNoRows
	if err != nil && !none {
		return fmt.Errorf("analytics: report %s: %w", name, classify(err))
	}
	err = s.pool.QueryRow(ctx, `SELECT dropped_total FROM queue_history
		WHERE queue = $1 AND dropped_total IS NOT NULL ORDER BY t DESC, step_seconds DESC LIMIT 1`, name).Scan(&dropped)
	if err != nil && err != pgx.ErrNoRows {
		return fmt.Errorf("analytics: report %s: %w", name, classify(err))
	}
	// As a step's delta (insertStep): a total that went down was reset and counts whole; a
	// queue without rows counts its whole life, unless it was made before the running
	// totals (more admitted than joined), where nothing is known.
	tail := func(now, prev int64, have bool) int64 {
		switch {
		case !have || now < prev:
			return now
		default:
			return now - prev
		}
	}
	if !(none && st.AdmittedTotal > st.Joined) {
		rp.Joined += tail(st.Joined, last[0], !none)
		rp.Admitted += tail(st.AdmittedTotal, last[1], !none)
		rp.Abandoned += tail(st.Abandoned, last[2], !none)
		rp.Expired += tail(st.Expired, last[3], !none)
		rp.Left += tail(st.Left, last[4], !none)
		var d int64
		if dropped != nil {
			d = *dropped
		}
		rp.Dropped += tail(st.Dropped, d, dropped != nil)
	}
	rp.StillWaiting = st.Waiting + st.WaitingPriority + st.WaitingBypass + st.Prequeue
	rp.Unaccounted = rp.Joined - rp.Admitted - rp.Abandoned - rp.Left - rp.Dropped - rp.StillWaiting
	return nil
}

// soldOut reads the queue's recorded sold-out periods and adds those of its log not
// recorded yet (begun or ended within the current step, or while no instance led it).
func (s *Store) soldOut(ctx context.Context, name string, st queue.QueueStats, rp *Report) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT sold_out_at, restocked_at FROM queue_sellouts
		WHERE queue = $1 ORDER BY sold_out_at`, name)
	if err != nil {
		return fmt.Errorf("analytics: sold out %s: %w", name, classify(err))
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SoldOutPeriod, error) {
		var p SoldOutPeriod
		err := r.Scan(&p.From, &p.To)
		p.From = p.From.UTC()
		if p.To != nil {
			t := p.To.UTC()
			p.To = &t
		}
		return p, err
	})
	if err != nil {
		return fmt.Errorf("analytics: sold out %s: %w", name, classify(err))
	}
	// The log in Redis holds what the recorder may not have written yet; a period in both
	// is the same period (its start is its key).
	for _, lp := range sellouts(st) {
		i := slices.IndexFunc(ps, func(p SoldOutPeriod) bool { return p.From.Equal(lp.From) })
		switch {
		case i < 0:
			ps = append(ps, lp)
		case ps[i].To == nil:
			ps[i].To = lp.To
		}
	}
	slices.SortFunc(ps, func(a, b SoldOutPeriod) int { return a.From.Compare(b.From) })
	rp.SoldOutPeriods = append(rp.SoldOutPeriods, ps...)
	return nil
}
