package web

import (
	"testing"

	"github.com/waitroom/waitroom/orders"
)

func TestChooseProduct(t *testing.T) {
	t.Parallel()
	sold := []orders.Product{{ID: "a", Stock: 0}, {ID: "b", Stock: 3}, {ID: "c", Stock: 1}}
	for _, c := range []struct {
		name   string
		sold   []orders.Product
		asked  string
		want   string
		wantOK bool
	}{
		{"nothing asked: the first in stock", sold, "", "b", true},
		{"asked and sold here, even sold out", sold, "a", "a", true},
		{"asked and sold here", sold, "c", "c", true},
		{"asked, not sold here", sold, "z", "", false},
		{"all sold out: the first", []orders.Product{{ID: "x"}, {ID: "y"}}, "", "x", true},
		{"nothing sold", nil, "", "", true},
		{"nothing sold, one asked", nil, "a", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := chooseProduct(c.sold, c.asked)
			if got != c.want || ok != c.wantOK {
				t.Fatalf("chooseProduct(%q) = %q, %v; want %q, %v", c.asked, got, ok, c.want, c.wantOK)
			}
		})
	}
}

func TestSellsThrough(t *testing.T) {
	t.Parallel()
	all := []orders.Product{{ID: "demo", Queue: "demo"}, {ID: "old"}, {ID: "sneaker", Queue: "line"}, {ID: "ticket", Queue: "fest"}}
	ids := func(ps []orders.Product) (out []string) {
		for _, p := range ps {
			out = append(out, p.ID)
		}
		return out
	}
	for _, c := range []struct {
		unbound, queue string
		want           []string
	}{
		{"", "line", []string{"sneaker"}},
		{"", "fest", []string{"ticket"}},
		{"", "", nil}, // a product of no queue is never sold through "no queue"
		{"line", "line", []string{"old", "sneaker"}},
		{"line", "fest", []string{"ticket"}},
		{"", "nope", nil},
	} {
		s := &Server{cfg: Config{UnboundQueue: c.unbound}}
		got := ids(s.sellsThrough(all, c.queue))
		if len(got) != len(c.want) {
			t.Errorf("unbound %q, queue %q: %v, want %v", c.unbound, c.queue, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("unbound %q, queue %q: %v, want %v", c.unbound, c.queue, got, c.want)
			}
		}
	}
}

func TestMinorText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		minor  int64
		digits int
		want   string
	}{
		{189000, 0, "189,000"},
		{4500, 2, "45.00"},
		{1250, 2, "12.50"},
		{5, 2, "0.05"},
		{0, 2, "0.00"},
		{123456789, 3, "123,456.789"},
		{999, 0, "999"},
		{1000, 0, "1,000"},
	} {
		if got := minorText(c.minor, c.digits); got != c.want {
			t.Errorf("minorText(%d, %d) = %q, want %q", c.minor, c.digits, got, c.want)
		}
	}
}
