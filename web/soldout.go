package web

import (
	"context"
	"time"

	"github.com/waitroom/waitroom/orders"
)

// Sold out (API.md, "Sold out"): a queue is sold out when at least one product names it and
// every product that does has stock 0. The flag's one writer is package soldout: the
// handlers that change stock hand it the judgements their transactions made (an order that
// took the last of a product, an admin product change), a new queue is judged at once, and
// the start judges every queue.

// soldOutTimeout bounds the writing of judgements after a change (Redis writes).
const soldOutTimeout = 3 * time.Second

// SyncSoldOut sets every queue's sold-out flag from the products' stock (at start: stock
// may have changed in the database while no instance was running).
func (s *Server) SyncSoldOut(ctx context.Context) error { return s.sold.Sync(ctx) }

// applySoldOut writes the judgements a change made. A failure is logged, never the
// change's: the change stands, and the next change of the queue's stock or the next start
// writes a newer judgement.
func (s *Server) applySoldOut(ctx context.Context, what string, judged ...orders.QueueStock) {
	if len(judged) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), soldOutTimeout)
	defer cancel()
	if err := s.sold.Apply(ctx, judged...); err != nil {
		s.log.Warn().Err(err).Str("after", what).Msg("sold out: cannot write the flag")
	}
}

// judgeSoldOut judges queue name now and writes the flag (a queue an admin PUT created may
// sell products that exist already).
func (s *Server) judgeSoldOut(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), soldOutTimeout)
	defer cancel()
	if err := s.sold.Judge(ctx, name); err != nil {
		s.log.Error().Err(err).Str("queue", name).Msg("sold out: cannot judge a new queue")
	}
}
