package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/examples/shop"
	"github.com/waitroom/waitroom/orders/pgtest"
	"github.com/waitroom/waitroom/queue/redistest"
)

// TestBrowserShopOnAnotherSite runs the example shop on 127.0.0.2 and the waiting room on
// 127.0.0.3 — two sites to Chromium — and drives both integrations in a real browser: the
// redirect flow (shop → line → back with the signed token in the fragment → the shop's
// backend verifies it with the JWKS and redeems it once; the same token replayed from a URL
// is refused) and the embedded widget (live positions pushed across origins, the
// admission, then an order from the shop's page).
func TestBrowserShopOnAnotherSite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	db := pgtest.MustDB(t)
	room := startInProcess(t, "room", baseEnv(redistest.Start(t).URL(), db, map[string]string{"WR_ADDR": "127.0.0.3:0"}))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	shopURL := "http://" + ln.Addr().String()
	// The shop, with a tap on what its page hands to its backend (the token from the URL).
	sh, err := shop.New(shop.Config{Room: room.url, Queue: "drop", Product: "sneaker"})
	if err != nil {
		t.Fatal(err)
	}
	handed := make(chan string, 4)
	tap := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/shop/api/admit" {
			b, _ := io.ReadAll(r.Body)
			var body struct{ Token string }
			_ = json.Unmarshal(b, &body)
			select {
			case handed <- body.Token:
			default:
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		sh.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: tap, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	mustAdmin(t, room, "PUT", "/admin/api/queues/drop", map[string]any{"allowed_origins": []string{shopURL}, "rate_per_second": 0, "places_per_ip": 0})
	mustAdmin(t, room, "PUT", "/admin/api/products/sneaker", map[string]any{"name": "Sneaker", "price": 12000, "stock": 10, "queue": "drop"})
	b := startBrowser(t, ctx)

	t.Run("redirect flow", func(t *testing.T) {
		p := b.open(t, "redirect-buyer")
		defer p.close()
		p.navigate(shopURL + "/redirect.html")
		p.click("join")
		p.waitJS("on the room's waiting page", 10*time.Second,
			`location.origin === '`+room.url+`' && !!document.getElementById('position') && document.getElementById('position').dataset.position === '1'`)
		if got := p.eval(`document.getElementById('room').dataset.returnTo`); got != shopURL+"/redirect.html" {
			t.Fatalf("return_to on the page: %q", got)
		}
		mustAdmin(t, room, "PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 50})
		p.waitJS("back at the shop with a session", 20*time.Second,
			`location.origin === '`+shopURL+`' && document.getElementById('status').dataset.state === 'admitted'`)
		if h := p.eval(`location.hash`); h != "" {
			t.Fatalf("the token stayed in the address: %q", h)
		}
		// The shop's session exists (its backend redeemed the token).
		if s := p.eval(`(() => { const x = new XMLHttpRequest(); x.open('GET', '/shop/api/session', false); x.send(); return String(x.status); })()`); s != "200" {
			t.Fatalf("shop session: %s", s)
		}
		// The same token replayed from a URL (a shared link, the history): refused.
		tok := <-handed
		if c := tokenClaims(t, tok); c["aud"] != "drop" || room.url == "" {
			t.Fatalf("the token handed to the shop: %v", c)
		}
		p.navigate(shopURL + "/redirect.html?shared=1#wr_token=" + tok) // a link someone shared: a new page load
		p.waitJS("the replay refused", 10*time.Second, `document.getElementById('status').dataset.state === 'used'`)
		p.checkConsole()
		mustAdmin(t, room, "PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 0})
	})

	t.Run("embedded widget", func(t *testing.T) {
		mustAdmin(t, room, "PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 0})
		// Two buyers ahead (through the API), so the shop's buyer sees the line move.
		for range 2 {
			call(t, "POST", room.url+"/api/queues/drop/join", "", nil, nil)
		}
		p := b.open(t, "embed-buyer")
		defer p.close()
		p.navigate(shopURL + "/embed.html")
		p.waitJS("third in line", 10*time.Second, `document.getElementById('place').dataset.position === '3'`)
		p.waitJS("the stream live across origins", 10*time.Second, `document.getElementById('conn').textContent === 'live'`)
		mustAdmin(t, room, "PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 1})
		seen := map[string]bool{}
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && !seen["0"] {
			seen[p.eval(`document.getElementById('place').dataset.position`)] = true
			time.Sleep(50 * time.Millisecond)
		}
		if !seen["2"] || !seen["1"] || !seen["0"] {
			t.Fatalf("positions seen on the shop's page: %v", seen)
		}
		p.waitJS("the buy button", 5*time.Second, `!document.getElementById('buy').hidden`)
		p.click("buy")
		p.waitJS("ordered", 10*time.Second, `document.getElementById('result').dataset.state === 'ordered'`)
		if stock := stockOf(t, room, "sneaker"); stock != 9 {
			t.Fatalf("stock %d after one order, want 9", stock)
		}
		// The page shows the room's order (the one in PostgreSQL) and the stock that fell.
		var id string
		if err := pgQueryRow(t, db, `SELECT id::text FROM orders WHERE product_id = 'sneaker'`, &id); err != nil {
			t.Fatalf("the order in PostgreSQL: %v", err)
		}
		if shown := p.eval(`document.getElementById('order-id').dataset.orderId`); shown != id {
			t.Fatalf("order id on the page %q, in PostgreSQL %q", shown, id)
		}
		if got := p.eval(`document.getElementById('stock-before').dataset.stock + ' ' + document.getElementById('stock-after').dataset.stock`); got != "10 9" {
			t.Fatalf("stock on the page (before, after): %s", got)
		}
		// The ticket stayed with the page: no cookie of the room's site was needed.
		if c := p.eval(`document.cookie`); strings.Contains(c, "wr_ticket") {
			t.Fatalf("shop page cookies: %q", c)
		}
		p.checkConsole()
	})
}

// pgQueryRow reads one row from the test's database.
func pgQueryRow(t *testing.T, db, sql string, dest ...any) error {
	t.Helper()
	conn, err := pgx.Connect(testContext(t), db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(testContext(t), sql).Scan(dest...)
}
