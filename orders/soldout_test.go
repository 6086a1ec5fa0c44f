package orders_test

import (
	"testing"

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
		if err != nil || got != want {
			t.Fatalf("%s: QueueSoldOut(%q) = %v, %v; want %v", step, queue, got, err, want)
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
