package web

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Sold out (API.md, Drop day): a queue is sold out when at least one product names it and
// every product that does has stock 0. The stock lives in PostgreSQL and the flag in the
// queue's Redis settings, where joins and the admission tick read it; web keeps the two in
// step where stock or the products of a queue change — an order, an admin product PUT, the
// creation of a queue — and SyncSoldOut covers whatever changed while no instance ran.

// soldOutRecheck is how long after marking a queue sold out it is checked again. An
// order's check can race an admin restock (the order reads stock 0, the restock writes
// and clears the flag, then the order's stale "sold out" lands); the second look, made
// after both have finished, puts the flag right.
const soldOutRecheck = time.Second

// soldOutTimeout bounds one check (a PostgreSQL query and a Redis write).
const soldOutTimeout = 3 * time.Second

// soldOutChecks tracks the pending re-checks: at most one per queue, all ended by
// Shutdown.
type soldOutChecks struct {
	mu      sync.Mutex
	pending map[string]bool
	wg      sync.WaitGroup
}

// wait waits for the pending re-checks to end; s.closing must be closed. Taking the lock
// first orders it after any re-check being scheduled (which looks at s.closing under it).
func (c *soldOutChecks) wait() {
	c.mu.Lock()
	c.mu.Unlock()
	c.wg.Wait()
}

// SyncSoldOut sets every queue's sold-out flag from the products' stock (at start: stock
// may have changed in the database while no instance was running).
func (s *Server) SyncSoldOut(ctx context.Context) error {
	names, err := s.d.Queue.Names(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if _, err := s.syncSoldOut(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncSoldOut sets queue name's flag from its products and reports the value.
func (s *Server) syncSoldOut(ctx context.Context, name string) (bool, error) {
	so, err := s.d.Orders.QueueSoldOut(ctx, name)
	if err != nil {
		return false, err
	}
	if err := s.d.Queue.SetSoldOut(ctx, name, so); err != nil {
		return false, err
	}
	if so {
		s.recheckSoldOut(name)
	}
	return so, nil
}

// afterOrder runs after an order for a product of queue name committed. An order only
// lowers stock, so it can only make the queue sold out: nothing is written unless it did.
// A failure is logged, never the order's: the order stands, and the next order, product
// change or start puts the flag right.
func (s *Server) afterOrder(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), soldOutTimeout)
	defer cancel()
	so, err := s.d.Orders.QueueSoldOut(ctx, name)
	if err == nil && so {
		if err = s.d.Queue.SetSoldOut(ctx, name, true); err == nil {
			s.recheckSoldOut(name)
		}
	}
	if err != nil {
		s.log.Warn().Err(err).Str("queue", name).Msg("sold out: cannot check after an order")
	}
}

// resyncSoldOut sets the flag of each of queues from their products: after an admin
// product PUT that changed stock or queue, for the queues the product named before and
// after (a product moved from A to B changes both), and for a queue an admin PUT created
// (its products may exist already). A failure is logged: the admin's change stands, and the
// dashboard shows the flag.
func (s *Server) resyncSoldOut(ctx context.Context, queues ...string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), soldOutTimeout)
	defer cancel()
	for i, name := range queues {
		if name == "" || (i > 0 && name == queues[0]) {
			continue
		}
		if _, err := s.syncSoldOut(ctx, name); err != nil {
			s.log.Error().Err(err).Str("queue", name).Msg("sold out: cannot update after an admin change")
		}
	}
}

// recheckSoldOut checks queue name again after soldOutRecheck, once however many times it
// is asked meanwhile; pending checks are dropped when the server shuts down.
func (s *Server) recheckSoldOut(name string) {
	c := &s.soldOut
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[name] {
		return
	}
	if c.pending == nil {
		c.pending = map[string]bool{}
	}
	select {
	case <-s.closing:
		return
	default:
	}
	c.pending[name] = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTimer(soldOutRecheck)
		defer t.Stop()
		select {
		case <-s.closing:
		case <-t.C:
		}
		c.mu.Lock()
		delete(c.pending, name)
		c.mu.Unlock()
		select {
		case <-s.closing:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), soldOutTimeout)
		defer cancel()
		so, err := s.d.Orders.QueueSoldOut(ctx, name)
		if err == nil {
			err = s.d.Queue.SetSoldOut(ctx, name, so)
		}
		if err != nil {
			s.log.Warn().Err(err).Str("queue", name).Msg("sold out: re-check failed")
		}
	}()
}
