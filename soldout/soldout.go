// Package soldout keeps each queue's sold-out flag, which joins and the admission tick read
// in Redis, in step with its products' stock in PostgreSQL. It is the flag's one writer.
//
// The stock is judged inside the transactions that change it (orders.QueueStock: an order
// that takes the last of a product, an admin change of a product's stock or queue) or in a
// transaction of its own (a new queue, the start). Each judgement carries a version that
// grows in the order judgements of one queue were made, and the flag keeps the judgement
// with the highest version (queue.Queue.SetSoldOut), so judgements that reach Redis out of
// order — an order's "sold out" landing after a restock's "not" — leave the newest.
package soldout

import (
	"context"
	"errors"

	"github.com/waitroom/waitroom/orders"
)

// Flags is where the flag lives (implemented by *queue.Queue).
type Flags interface {
	SetSoldOut(ctx context.Context, name string, soldOut bool, version int64) error
	Names(ctx context.Context) ([]string, error)
}

// Stock judges a queue's stock in a transaction of its own (implemented by *orders.Store).
type Stock interface {
	QueueSoldOut(ctx context.Context, name string) (orders.QueueStock, error)
}

// Keeper writes the judgements to the flags.
type Keeper struct {
	flags Flags
	stock Stock
}

// New returns a Keeper.
func New(flags Flags, stock Stock) *Keeper {
	return &Keeper{flags: flags, stock: stock}
}

// Apply writes judgements made in the transactions that changed the stock. A judgement older
// than the one a flag holds changes nothing.
func (k *Keeper) Apply(ctx context.Context, judged ...orders.QueueStock) error {
	var errs []error
	for _, st := range judged {
		if err := k.flags.SetSoldOut(ctx, st.Queue, st.SoldOut, st.Version); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Judge judges each of names now and writes the result (a queue just created may sell
// products that exist already).
func (k *Keeper) Judge(ctx context.Context, names ...string) error {
	var errs []error
	for _, n := range names {
		st, err := k.stock.QueueSoldOut(ctx, n)
		if err == nil {
			err = k.Apply(ctx, st)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Sync judges every queue (at start: stock may have changed while no instance ran).
func (k *Keeper) Sync(ctx context.Context) error {
	names, err := k.flags.Names(ctx)
	if err != nil {
		return err
	}
	return k.Judge(ctx, names...)
}
