package main

import (
	"testing"
	"time"
)

// TestBrowserOrderRetriesWithTheReplacementToken: the order page holds a token the server
// no longer knows (as after a Redis failover that lost it, the buyer admitted again with
// another token): its order answers 401 token_invalid; the page asks /status once, gets the
// buyer's current token, and orders with it — one click, one order (201), the receipt shown,
// the stock down by one.
func TestBrowserOrderRetriesWithTheReplacementToken(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "ack28-order", 60*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 20})
	mustAdmin(t, in, "PUT", "/admin/api/products/tee", map[string]any{"name": "Tee", "price": 2500, "stock": 5, "queue": "drop"})
	b := startBrowser(t, ctx)
	p := b.open(t, "buyer")
	p.navigate(in.url + "/q/drop")
	p.waitJS("admitted", 15*time.Second, `!document.getElementById('admitted').hidden`)
	held, err := evalJS[string](p, `JSON.parse(sessionStorage.getItem('wr_token:drop')).token`)
	if err != nil || held == "" {
		t.Fatalf("the stored token: %q %v", held, err)
	}
	// The page keeps a token the server does not know (same shape: a lost one's id).
	if _, err := evalJS[bool](p, `(() => {
		const rec = JSON.parse(sessionStorage.getItem('wr_token:drop'));
		rec.token = '00000000-0000-4000-8000-000000000000';
		sessionStorage.setItem('wr_token:drop', JSON.stringify(rec));
		return true;
	})()`); err != nil {
		t.Fatal(err)
	}
	p.navigate(in.url + "/q/drop/order?product=tee")
	p.waitJS("the order page", 10*time.Second, `document.getElementById('token-state').dataset.state === 'valid' && !document.getElementById('buy').disabled`)
	p.click("buy")
	p.waitJS("the receipt", 15*time.Second, `!document.getElementById('receipt').hidden`)
	type view struct {
		Outcome string
		Stored  bool
	}
	v, err := evalJS[view](p, `({Outcome: document.getElementById('order-result').dataset.outcome,
		Stored: sessionStorage.getItem('wr_token:drop') !== null})`)
	if err != nil {
		t.Fatal(err)
	}
	if v.Outcome != "success" || v.Stored {
		t.Fatalf("after the click: outcome %q, token still stored %v; want success and the used token cleared\n%s", v.Outcome, v.Stored, p.diagnose())
	}
	if got := stockOf(t, in, "tee"); got != 4 {
		t.Fatalf("stock %d after one order, want 4", got)
	}
}
