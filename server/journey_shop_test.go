package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestJourneyMultiQueueShop (J1, the multi-queue shop): one instance with the zero-config demo
// (queue demo selling product demo, first in the product list) and two more queues, each
// with its own products in its own currency — line sells a sneaker in KRW, fest a day pass
// and a camping add-on in EUR. Ana (desktop, English) waits in line, Min (phone, Korean) in
// fest. Each is let in, follows the waiting page's own link and reaches the order page of
// the queue that admitted them, which offers that queue's products only: Ana sees the
// sneaker and nothing to choose, Min a chooser of fest's two products, picks the day pass
// with the keyboard (the address then names it, and a reload with ?product= keeps it).
// Ana's link to fest's product (and to the demo's) says that it is not sold in her line and
// offers no buy button. Both buy and get a receipt in the product's currency (₩189,000;
// €90.00 for two passes); the stock fell by what they bought and the demo product sold
// nothing. axe runs at every state (waiting, admitted, order, not sold here, receipt; the
// chooser in light and dark at both widths).
//
// Waiting is reached deterministically: each queue holds one admitted buyer already with
// max_active 1, so the person waits first in line until the cap is lifted.
func TestJourneyMultiQueueShop(t *testing.T) {
	t.Parallel() // journeys overlap their waits (see scripts/test.sh: -parallel)
	ctx, in := browserInstance(t, "journey-shop", 150*time.Second, map[string]string{"WR_DEMO": "true"})
	mustAdmin(t, in, "PUT", "/admin/api/products/sneaker", map[string]any{"name": "Seoul runner", "price": 189000, "currency": "KRW", "stock": 10, "queue": "line"})
	mustAdmin(t, in, "PUT", "/admin/api/products/ticket", map[string]any{"name": "Festival day pass", "price": 4500, "currency": "EUR", "stock": 20, "queue": "fest"})
	mustAdmin(t, in, "PUT", "/admin/api/products/camp", map[string]any{"name": "Camping add-on", "price": 1250, "currency": "EUR", "stock": 30, "queue": "fest"})
	for _, q := range []string{"line", "fest"} {
		admittedUsers(t, in, q, 1) // holds the queue's one active place until the cap is lifted
		mustAdmin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"max_active": 1, "rate_per_second": 50, "token_ttl_seconds": 300})
	}

	j := newJourney(t, ctx)
	ana := j.person("ana", journeyDesktop)
	minji := j.person("min", journeyPhone)

	// 1. Both wait, first in their own line.
	ana.navigate(in.url + "/q/line?lang=en")
	minji.navigate(in.url + "/q/fest?lang=ko")
	for _, p := range []*journeyPerson{ana, minji} {
		p.waitJS("first in line", 15*time.Second, `!document.getElementById('waiting').hidden &&
			document.getElementById('position').dataset.position === '1'`)
		j.state(p, "waiting")
	}

	// 2. The cap is lifted: both are let in, and the page's link leads to their own queue's
	// order page.
	for _, q := range []string{"line", "fest"} {
		mustAdmin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"max_active": 0})
	}
	for p, q := range map[*journeyPerson]string{ana: "line", minji: "fest"} {
		p.waitJS("admitted", 15*time.Second, `!document.getElementById('admitted').hidden &&
			document.getElementById('go-order').getAttribute('href') === '/q/`+q+`/order'`)
		j.state(p, "admitted")
	}

	// 3. Ana follows the link: line's page, the sneaker in won, nothing else offered.
	ana.click("go-order")
	ana.waitJS("line's order page", 10*time.Second, `location.pathname === '/q/line/order' &&
		document.getElementById('token-state').dataset.state === 'valid' &&
		document.getElementById('product-name').textContent === 'Seoul runner' &&
		document.getElementById('price').textContent === '₩189,000' && !document.getElementById('buy').disabled`)
	if got := offeredOn(t, ana); !slices.Equal(got, []string{"sneaker"}) {
		t.Errorf("line's order page offers %v, want [sneaker]", got)
	}
	if ana.eval(`String(document.getElementById('chooser').hidden && document.querySelector('input[name=product]') === null)`) != "true" {
		t.Error("line sells one product, yet its page shows a chooser")
	}
	j.state(ana, "order")

	// 4. Min follows hers: fest's two products in a chooser, the first in stock chosen.
	minji.click("go-order")
	minji.waitJS("fest's order page with the chooser", 10*time.Second, `location.pathname === '/q/fest/order' &&
		document.getElementById('token-state').dataset.state === 'valid' &&
		document.getElementById('choice-camp').checked && document.getElementById('product-name').textContent === 'Camping add-on' &&
		document.getElementById('price').textContent === '€12.50' &&
		document.querySelector('[data-price-of="ticket"]').textContent === '€45.00' && !document.getElementById('buy').disabled`)
	if got := offeredOn(t, minji); !slices.Equal(got, []string{"camp", "ticket"}) {
		t.Errorf("fest's order page offers %v, want [camp ticket]", got)
	}
	j.stateMatrix(minji, "order-chooser")

	// With the keyboard: the arrow key moves the choice to the day pass; the address names it.
	minji.do("arrow to the day pass", 5*time.Second, chromedp.Focus(chromedp.ID("choice-camp")), chromedp.KeyEvent(kb.ArrowDown))
	minji.waitJS("the day pass chosen", 5*time.Second, `document.getElementById('choice-ticket').checked &&
		document.activeElement === document.getElementById('choice-ticket') &&
		document.getElementById('product-name').textContent === 'Festival day pass' &&
		document.getElementById('price').textContent === '€45.00' && location.search === '?product=ticket'`)
	// A reload with ?product= keeps the choice (the server preselects it).
	minji.navigate(in.url + "/q/fest/order?product=ticket")
	minji.waitJS("the day pass preselected", 10*time.Second, `document.getElementById('choice-ticket').checked &&
		!document.getElementById('choice-camp').checked && document.getElementById('shop').dataset.productId === 'ticket' &&
		document.getElementById('token-state').dataset.state === 'valid' && !document.getElementById('buy').disabled`)

	// 5. Ana opens a link to fest's product, then to the demo's: not sold in her line, no buy
	// button, the line that sells it named; her own product offered instead.
	for _, c := range []struct{ product, soldIn string }{{"ticket", "fest"}, {"demo", "demo"}} {
		ana.navigate(in.url + "/q/line/order?product=" + c.product)
		ana.waitJS("not sold here: "+c.product, 10*time.Second, `document.getElementById('shop').dataset.state === 'not_here' &&
			document.getElementById('buy') === null && document.getElementById('sold-in').textContent === '`+c.soldIn+`' &&
			document.querySelector('#sold-here a[data-product="sneaker"]') !== null &&
			document.querySelector('#sold-here .hint').textContent === '₩189,000'`)
		if c.product == "ticket" {
			j.state(ana, "not-sold-here")
		}
	}

	// 6. Both buy; receipts in the product's currency.
	ana.navigate(in.url + "/q/line/order")
	ana.waitJS("line's order page again", 10*time.Second, `document.getElementById('token-state').dataset.state === 'valid' &&
		document.getElementById('product-name').textContent === 'Seoul runner' && !document.getElementById('buy').disabled`)
	ana.click("buy")
	minji.do("two day passes", 5*time.Second, chromedp.SetValue(chromedp.ID("qty"), "2"))
	minji.click("buy")
	for _, c := range []struct {
		p                            *journeyPerson
		product, unit, total, curncy string
	}{
		{ana, "Seoul runner", "₩189,000", "₩189,000", "KRW"},
		{minji, "Festival day pass", "€45.00", "€90.00", "EUR"},
	} {
		c.p.waitJS("the receipt", 10*time.Second, fmt.Sprintf(`!document.getElementById('receipt').hidden &&
			document.getElementById('order-result').dataset.outcome === 'success' &&
			document.getElementById('receipt-product').textContent === %q && document.getElementById('receipt-unit').textContent === %q &&
			document.getElementById('receipt-total').textContent === %q && document.getElementById('receipt-total').dataset.currency === %q &&
			document.activeElement === document.getElementById('receipt-title')`, c.product, c.unit, c.total, c.curncy))
	}
	if minji.eval(`String(document.getElementById('chooser').hidden)`) != "true" {
		t.Error("the chooser is still offered after the order used the token")
	}
	j.state(ana, "receipt")
	j.state(minji, "receipt")

	for product, want := range map[string]int64{"sneaker": 9, "ticket": 18, "camp": 30, "demo": 100} {
		if got := stockOf(t, in, product); got != want {
			t.Errorf("stock of %s: %d, want %d", product, got, want)
		}
	}
}

// offeredOn lists the ids of the products the person's order page offers (#wr-products).
func offeredOn(t *testing.T, p *journeyPerson) []string {
	t.Helper()
	var list []struct{ ID string }
	if err := json.Unmarshal([]byte(p.eval(`document.getElementById('wr-products').textContent`)), &list); err != nil {
		t.Fatalf("%s: #wr-products: %v", p.name, err)
	}
	ids := make([]string, 0, len(list))
	for _, x := range list {
		ids = append(ids, x.ID)
	}
	return ids
}
