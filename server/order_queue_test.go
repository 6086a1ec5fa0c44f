package main

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/queue/redistest"
)

// orderPageView is what /q/{queue}/order says, read from its HTML: the state, the products
// it offers (#wr-products), the chosen one, whether it has a buy button, and the sentence
// and link of a product not sold here.
type orderPageView struct {
	Status   int
	State    string
	Products []string
	Chosen   string
	Buy      bool
	Chooser  bool
	Checked  string
	NotHere  string
	SoldIn   string
}

var (
	reShopState = regexp.MustCompile(`id="shop" data-queue="[^"]*" data-state="([^"]*)" data-product-id="([^"]*)"`)
	reProducts  = regexp.MustCompile(`(?s)<script type="application/json" id="wr-products">(.*?)</script>`)
	reChecked   = regexp.MustCompile(`name="product" id="choice-[^"]*" value="([^"]*)" checked`)
	reNotHere   = regexp.MustCompile(`<p id="not-here-text">([^<]*)</p>`)
	reSoldIn    = regexp.MustCompile(`<a id="sold-in" href="/q/([^"]*)">`)
)

func getOrderPage(t *testing.T, in *instance, path string) orderPageView {
	t.Helper()
	res := call(t, "GET", in.url+path, "", nil, nil, "Accept-Language", "en")
	b, _ := io.ReadAll(res.Body)
	page := string(b)
	v := orderPageView{Status: res.StatusCode, Buy: strings.Contains(page, `id="buy"`), Chooser: strings.Contains(page, `<input type="radio" name="product"`)}
	if m := reShopState.FindStringSubmatch(page); m != nil {
		v.State, v.Chosen = m[1], m[2]
	} else {
		t.Fatalf("%s: no #shop in the page:\n%s", path, page)
	}
	if m := reProducts.FindStringSubmatch(page); m != nil {
		var list []struct{ ID string }
		if err := json.Unmarshal([]byte(m[1]), &list); err != nil {
			t.Fatalf("%s: #wr-products %q: %v", path, m[1], err)
		}
		for _, p := range list {
			v.Products = append(v.Products, p.ID)
		}
	}
	if m := reChecked.FindStringSubmatch(page); m != nil {
		v.Checked = m[1]
	}
	if m := reNotHere.FindStringSubmatch(page); m != nil {
		v.NotHere = html.UnescapeString(m[1])
	}
	if m := reSoldIn.FindStringSubmatch(page); m != nil {
		v.SoldIn = m[1]
	}
	return v
}

func productIDs(t *testing.T, in *instance, query string) (int, []string, string) {
	t.Helper()
	var body struct {
		Products []struct{ ID string }
		Error    struct{ Code, Field string }
	}
	res := call(t, "GET", in.url+"/api/products"+query, "", nil, &body)
	var ids []string
	for _, p := range body.Products {
		ids = append(ids, p.ID)
	}
	return res.StatusCode, ids, body.Error.Code + "/" + body.Error.Field
}

// TestOrderPageBelongsToItsQueue: /q/{queue}/order offers only what its queue sells — the
// zero-config demo product and another queue's product are never in it, a product of no
// queue only where WR_UNBOUND_PRODUCTS_QUEUE sells it; ?product= preselects one of its own
// and is refused (404, no buy button, the queue that sells it named) for any other; an
// unknown queue and a queue selling nothing say so, and so does the page while the products
// cannot be read (503, then the page as before); admitted.redirect leads to the admitting
// queue's page. GET /api/products?queue= lists the same products. Server-side, a token of one queue never buys another queue's product (403
// token_wrong_queue, nothing sold), and its refusal leaves the token good for its own.
func TestOrderPageBelongsToItsQueue(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	db := testDB(t)
	in := startInProcess(t, "orderpage", tolerantEnv(rs.URL(), db, map[string]string{
		"WR_DEMO": "true", "WR_UNBOUND_PRODUCTS_QUEUE": "line",
	}))
	mustAdmin(t, in, "PUT", "/admin/api/products/sneaker", map[string]any{"name": "Seoul runner", "price": 189000, "currency": "KRW", "stock": 10, "queue": "line"})
	mustAdmin(t, in, "PUT", "/admin/api/products/ticket", map[string]any{"name": "Festival day pass", "price": 4500, "currency": "EUR", "stock": 10, "queue": "fest"})
	mustAdmin(t, in, "PUT", "/admin/api/products/camp", map[string]any{"name": "Camping add-on", "price": 1250, "currency": "EUR", "stock": 0, "queue": "fest"})
	mustAdmin(t, in, "PUT", "/admin/api/products/old", map[string]any{"name": "Old stock", "price": 500, "currency": "USD", "stock": 10})
	lineTickets, lineTokens := admittedUsers(t, in, "line", 2)
	festTickets, festTokens := admittedUsers(t, in, "fest", 1)
	mustAdmin(t, in, "PUT", "/admin/api/queues/empty", map[string]any{"rate_per_second": 1})

	t.Run("products by queue", func(t *testing.T) {
		for _, c := range []struct {
			query, code string
			status      int
			want        []string
		}{
			{"", "/", 200, []string{"camp", "demo", "old", "sneaker", "ticket"}},
			{"?queue=line", "/", 200, []string{"old", "sneaker"}}, // old: no queue, sold through line
			{"?queue=fest", "/", 200, []string{"camp", "ticket"}},
			{"?queue=demo", "/", 200, []string{"demo"}},
			{"?queue=nope", "/", 200, nil},
			{"?queue=", "invalid_queue/queue", 422, nil},
			{"?queue=no%20spaces", "invalid_queue/queue", 422, nil},
		} {
			status, ids, code := productIDs(t, in, c.query)
			if status != c.status || code != c.code || !slices.Equal(ids, c.want) {
				t.Errorf("GET /api/products%s: %d %s %v; want %d %s %v", c.query, status, code, ids, c.status, c.code, c.want)
			}
		}
	})

	t.Run("admitted.redirect is the order page of the admitting queue", func(t *testing.T) {
		for q, ticket := range map[string]string{"line": lineTickets[0], "fest": festTickets[0]} {
			s := mustStream(t, in.url+"/api/queues/"+q+"/stream", ticket)
			ev, ok := s.next(t, 30*time.Second, "admitted")
			if !ok || ev.Data["redirect"] != "/q/"+q+"/order" {
				t.Errorf("%s: admitted event %v (%v), want redirect /q/%s/order", q, ev.Data, ok, q)
			}
			s.close()
		}
	})

	t.Run("the page offers its queue's products only", func(t *testing.T) {
		for _, c := range []struct {
			path, state, chosen string
			status              int
			products            []string
			buy, chooser        bool
		}{
			{"/q/line/order", "ready", "old", 200, []string{"old", "sneaker"}, true, true},
			{"/q/line/order?product=sneaker", "ready", "sneaker", 200, []string{"old", "sneaker"}, true, true},
			// The first in stock is chosen when nothing is asked (camp is sold out).
			{"/q/fest/order", "ready", "ticket", 200, []string{"camp", "ticket"}, true, true},
			{"/q/fest/order?product=camp", "ready", "camp", 200, []string{"camp", "ticket"}, true, true},
			{"/q/demo/order", "ready", "demo", 200, []string{"demo"}, true, false},
			{"/q/empty/order", "empty", "", 200, nil, false, false},
			{"/q/nosuch/order", "no_queue", "", 404, nil, false, false},
		} {
			v := getOrderPage(t, in, c.path)
			if v.Status != c.status || v.State != c.state || v.Chosen != c.chosen || !slices.Equal(v.Products, c.products) ||
				v.Buy != c.buy || v.Chooser != c.chooser {
				t.Errorf("%s: %+v; want %d %s chosen %q products %v buy %v chooser %v", c.path, v, c.status, c.state, c.chosen, c.products, c.buy, c.chooser)
			}
			if c.chooser && v.Checked != c.chosen {
				t.Errorf("%s: the radio checked is %q, want %q", c.path, v.Checked, c.chosen)
			}
		}
	})

	t.Run("another queue's product is not sold here", func(t *testing.T) {
		for _, c := range []struct {
			path, soldIn, says string
		}{
			{"/q/line/order?product=ticket", "fest", `“Festival day pass” is sold through the line “fest”`},
			{"/q/line/order?product=demo", "demo", `“Limited sneaker drop” is sold through the line “demo”`},
			{"/q/fest/order?product=sneaker", "line", `“Seoul runner” is sold through the line “line”`},
			{"/q/fest/order?product=old", "line", `“Old stock” is sold through the line “line”`}, // unbound: sold through line only
			{"/q/fest/order?product=nothing", "", `There is no product “nothing”.`},
			{"/q/fest/order?product=%3Cscript%3E", "", `There is no product “?”.`},
		} {
			v := getOrderPage(t, in, c.path)
			if v.Status != 404 || v.State != "not_here" || v.Buy || v.Chooser || v.SoldIn != c.soldIn || !strings.Contains(v.NotHere, c.says) {
				t.Errorf("%s: %+v; want 404 not_here without a buy button, sold in %q, saying %q", c.path, v, c.soldIn, c.says)
			}
			if v.Chosen != "" {
				t.Errorf("%s: a product is chosen (%q) on a page that sells it not", c.path, v.Chosen)
			}
		}
	})

	t.Run("products that cannot be read: the page says so and comes back", func(t *testing.T) {
		conn, err := pgx.Connect(testContext(t), db)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(testContext(t), "ALTER TABLE products RENAME TO products_away"); err != nil {
			t.Fatal(err)
		}
		v := getOrderPage(t, in, "/q/line/order")
		res := call(t, "GET", in.url+"/q/line/order", "", nil, nil)
		if _, err := conn.Exec(testContext(t), "ALTER TABLE products_away RENAME TO products"); err != nil {
			t.Fatal(err)
		}
		if v.Status != 503 || v.State != "unavailable" || v.Buy || res.Header.Get("Retry-After") != "2" {
			t.Errorf("products unreadable: %+v, Retry-After %q; want 503 unavailable without a buy button, Retry-After 2", v, res.Header.Get("Retry-After"))
		}
		if v := getOrderPage(t, in, "/q/line/order"); v.Status != 200 || v.State != "ready" || !v.Buy {
			t.Errorf("products readable again: %+v", v)
		}
	})

	t.Run("a token of one queue never buys another's product", func(t *testing.T) {
		for _, c := range []struct {
			name, ticket, token, product string
		}{
			{"fest token, line's product", festTickets[0], festTokens[0], "sneaker"},
			{"fest token, a product of no queue sold through line", festTickets[0], festTokens[0], "old"},
			{"line token, fest's product", lineTickets[0], lineTokens[0], "ticket"},
			{"line token, the demo product", lineTickets[0], lineTokens[0], "demo"},
		} {
			before := stockOf(t, in, c.product)
			res, e, _ := order(t, in, c.ticket, c.token, "", map[string]any{"product_id": c.product, "quantity": 1})
			if res.StatusCode != 403 || e.Error.Code != "token_wrong_queue" {
				t.Errorf("%s: %d %s, want 403 token_wrong_queue", c.name, res.StatusCode, e.Error.Code)
			}
			if after := stockOf(t, in, c.product); after != before {
				t.Errorf("%s: the stock of %s moved %d → %d", c.name, c.product, before, after)
			}
		}
		// The refusals spent nothing: each token still buys what its own queue sells.
		for _, c := range []struct{ ticket, token, product string }{
			{festTickets[0], festTokens[0], "ticket"},
			{lineTickets[0], lineTokens[0], "sneaker"},
			{lineTickets[1], lineTokens[1], "old"},
		} {
			if res, e, _ := order(t, in, c.ticket, c.token, "", map[string]any{"product_id": c.product, "quantity": 1}); res.StatusCode != 201 {
				t.Errorf("its own queue's %s: %d %s, want 201", c.product, res.StatusCode, e.Error.Code)
			}
		}
	})
}
