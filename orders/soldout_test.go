package orders_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/orders"
)

// A queue is sold out when at least one product names it and every such product has stock
// 0; products of other queues or off sale do not count.
func TestQueueSoldOut(t *testing.T) {
	t.Parallel()
	s, _ := mustOpen(t, orders.Config{})
	ctx := ctxT(t)
	put := func(id, queue string, stock int) {
		t.Helper()
		if _, _, err := s.PutProduct(ctx, id, orders.ProductPatch{Queue: &queue, Stock: &stock}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step, queue string, want bool) {
		t.Helper()
		got, err := s.QueueSoldOut(ctx, queue)
		if err != nil || got.SoldOut != want || got.Queue != queue {
			t.Fatalf("%s: QueueSoldOut(%q) = %+v, %v; want %v", step, queue, got, err, want)
		}
	}
	check("no product names the queue", "drop", false)
	put("a", "drop", 2)
	check("one product in stock", "drop", false)
	put("a", "drop", 0)
	check("its only product at 0", "drop", true)
	put("b", "drop", 1)
	check("a second product in stock", "drop", false)
	put("b", "drop", 0)
	check("both at 0", "drop", true)
	put("c", "", 5)
	put("d", "other", 5)
	check("products off sale or of another queue do not count", "drop", true)
	check("the other queue", "other", false)
	put("b", "other", 0)
	check("a product moved away leaves the rest", "drop", true)
	put("a", "", 0)
	check("no product names it any more", "drop", false)
}

// The transactions that change stock judge their queue's stock before they commit: an
// order that takes the last of a product reports it (and the stock it left), an order that
// leaves some reports nothing, an admin change of stock or queue reports the queues the
// product was and is sold through — each judgement newer than the one before.
func TestStockJudgedInTheChangesTransaction(t *testing.T) {
	t.Parallel()
	s, _ := mustOpen(t, orders.Config{})
	ctx := ctxT(t)
	put := func(id string, p orders.ProductPatch) orders.Product {
		t.Helper()
		got, _, err := s.PutProduct(ctx, id, p)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	drop, other, two, one := "drop", "other", 2, 1
	p := put("a", orders.ProductPatch{Queue: &drop, Stock: &two})
	if len(p.Judged) != 1 || p.Judged[0].Queue != "drop" || p.Judged[0].SoldOut {
		t.Fatalf("new product in stock: judged %+v, want drop not sold out", p.Judged)
	}
	last := p.Judged[0].Version
	order := func(n int) orders.Order {
		t.Helper()
		o, _, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "a", Quantity: n})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if o := order(1); o.Left != 1 || o.Emptied != nil {
		t.Fatalf("an order leaving stock: left %d, emptied %+v; want 1, nil", o.Left, o.Emptied)
	}
	o := order(1)
	if o.Left != 0 || o.Emptied == nil || o.Emptied.Queue != "drop" || !o.Emptied.SoldOut || o.Emptied.Version <= last {
		t.Fatalf("the order taking the last: left %d, emptied %+v; want 0, drop sold out, version above %d", o.Left, o.Emptied, last)
	}
	last = o.Emptied.Version
	name := "renamed"
	if p := put("a", orders.ProductPatch{Name: &name}); p.Judged != nil {
		t.Fatalf("a change of name judged %+v", p.Judged)
	}
	p = put("a", orders.ProductPatch{Queue: &other, Stock: &one})
	if len(p.Judged) != 2 || p.Judged[0].Queue != "drop" || p.Judged[0].SoldOut || p.Judged[1].Queue != "other" || p.Judged[1].SoldOut ||
		p.Judged[0].Version <= last {
		t.Fatalf("moved to another queue with stock: judged %+v, want drop and other, neither sold out, newer than %d", p.Judged, last)
	}
}

// Judgements of one queue are made one after another, each seeing what the earlier one's
// transaction committed. A restock of product b judges the queue "not sold out" and has not
// committed yet; an order that takes the last of product a meanwhile must wait for it, and
// then sees b's new stock: its judgement is "not sold out" and newer. Judged without
// waiting, the order would see b at 0 and report the queue sold out — the stale flag a
// restock could lose to.
func TestJudgementsOfOneQueueAreOrdered(t *testing.T) {
	t.Parallel()
	s, dsn := mustOpen(t, orders.Config{})
	ctx := ctxT(t)
	drop, one, zero := "drop", 1, 0
	for id, stock := range map[string]*int{"a": &one, "b": &zero} {
		if _, _, err := s.PutProduct(ctx, id, orders.ProductPatch{Queue: &drop, Stock: stock}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `UPDATE products SET stock = 5 WHERE id = 'b'`); err != nil {
		t.Fatal(err)
	}
	restock, err := orders.JudgeStock(ctx, tx, "drop")
	if err != nil || restock.SoldOut {
		t.Fatalf("restock judged %+v, %v", restock, err)
	}
	type result struct {
		o   orders.Order
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, _, err := s.PlaceOrder(ctx, orders.OrderRequest{ProductID: "a", Quantity: 1})
		done <- result{o, err}
	}()
	waitLockWaiters(t, dsn, 1) // the order waits for the restock's judgement
	select {
	case r := <-done:
		t.Fatalf("the order judged before the restock committed: %+v, %v", r.o.Emptied, r.err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.o.Emptied == nil || r.o.Emptied.SoldOut || r.o.Emptied.Version <= restock.Version {
		t.Fatalf("order: %+v, %v; want drop judged not sold out, newer than the restock's %d", r.o.Emptied, r.err, restock.Version)
	}
}
