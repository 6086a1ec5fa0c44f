package orders

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// QueueStock is a judgement of a queue's stock made inside the transaction that changed it:
// whether the queue is sold out (at least one product names it and every product that does
// has stock 0) and the judgement's version. Versions of one queue grow in the order the
// judgements were made, and each judgement sees the stock every earlier one left, so the
// one with the highest version is the truth; the sold-out flag keeps that one (see
// queue.Queue.SetSoldOut).
type QueueStock struct {
	Queue   string
	SoldOut bool
	Version int64
}

// judgeStock judges queue name's stock in tx. The upsert of the queue's version row comes
// first: its row lock, held until tx ends, makes a later judgement of the same queue wait,
// and the count that follows (a new statement: a new snapshot) sees what every earlier
// judgement's transaction committed. The version is the clock in microseconds, or one
// above the last version if the clock has not moved past it.
func judgeStock(ctx context.Context, tx pgx.Tx, name string) (QueueStock, error) {
	st := QueueStock{Queue: name}
	err := tx.QueryRow(ctx, `
		INSERT INTO queue_stock_versions AS v (queue, version)
		VALUES ($1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
		ON CONFLICT (queue) DO UPDATE SET version = GREATEST(v.version + 1, EXCLUDED.version)
		RETURNING version`, name).Scan(&st.Version)
	if err != nil {
		return st, err
	}
	err = tx.QueryRow(ctx, `SELECT count(*) > 0 AND COALESCE(bool_and(stock = 0), false) FROM products WHERE queue = $1`,
		name).Scan(&st.SoldOut)
	return st, err
}

// judgeQueues judges each of names (sorted, each once, "" left out) in tx: the sorted order
// is the lock order, so two transactions that judge the same queues cannot deadlock.
func judgeQueues(ctx context.Context, tx pgx.Tx, names ...string) ([]QueueStock, error) {
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "" })
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]QueueStock, 0, len(names))
	for _, n := range names {
		st, err := judgeStock(ctx, tx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// QueueSoldOut judges queue name's stock now (at start, when stock may have changed while
// no instance ran, or to check a flag): a transaction of its own.
func (s *Store) QueueSoldOut(ctx context.Context, name string) (QueueStock, error) {
	var st QueueStock
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			var err error
			st, err = judgeStock(ctx, tx, name)
			return err
		})
	})
	if err != nil {
		return QueueStock{}, fmt.Errorf("orders: queue %q sold out: %w", name, err)
	}
	return st, nil
}
