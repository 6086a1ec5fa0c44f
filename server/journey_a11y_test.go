package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/static"
)

// TestJourneyA11yStates: axe-core (the pinned copy, contrast included) at every state of
// every page a buyer or an operator meets, each in light and dark at 1280 and 375 px
// (stateMatrix): the index; the waiting page waiting (a branded line), paused, stale (the
// connection frozen), sold out, before a scheduled start (the pre-queue), drawing (the
// start passed, the draw not made yet), ended (live, and the page served after the end),
// admitted and expired; the order page and its
// receipt; the dashboard and the report. Korean and Japanese pages are checked too (their
// own words, their own line breaks). Each state is reached by what the server holds and
// what the page says in its data attributes, never by racing a timer:
//   - stale: the buyer's connection runs through a gate that stops passing bytes (the
//     server, as far as the page can tell, is frozen); with a 1 s heartbeat the page calls
//     the numbers stale after its 5 s floor, and the gate reopened clears it;
//   - drawing: the queue's admission lease is held by an owner that never ticks, so the
//     start passes without a draw, as when the leader is slow;
//   - ended, expired: ends_at and the shortest token lifetime (10 s) pass while the other
//     states are checked.
//
// A control comes first: axe must see a page broken on purpose, else "no findings" would
// prove nothing.
func TestJourneyA11yStates(t *testing.T) {
	t.Parallel() // journeys overlap their waits (see scripts/test.sh: -parallel)
	// The deadline is a guard for a machine under load, not the budget (the suite's running
	// time is measured by the test command).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	rs := redistest.Start(t)
	in := startInProcess(t, "a11y-j", baseEnv(rs.URL(), testDB(t), withBrowserEnv(map[string]string{"WR_HEARTBEAT": "1s"})))
	started := time.Now()

	// The draw queue's lease goes to an owner that never ticks before its start is set.
	rdb := rs.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Set(context.Background(), "wr:{q:draw}:lease", "a11y-frozen-leader", 5*time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	soon := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }
	j := newJourney(t, ctx)
	timed := func(what string, check func()) {
		t.Helper()
		start := time.Now()
		check()
		t.Logf("timing: %s checked in %v", what, time.Since(start).Round(10*time.Millisecond))
	}
	matrix := func(p *journeyPerson, name string) { t.Helper(); timed(name, func() { j.stateMatrix(p, name) }) }
	state := func(p *journeyPerson, name string) { t.Helper(); timed(name, func() { j.state(p, name) }) }

	mustAdmin(t, in, "PUT", "/admin/api/queues/line", map[string]any{"rate_per_second": 0, "token_ttl_seconds": 300,
		"brand_name": "Acme Shoes", "brand_color": "#8a1c7c", "brand_message": "Drop at ten. One pair each.", "support_url": "/help"})
	if res := call(t, "PUT", in.url+"/admin/api/queues/line/logo", adminToken, brandingPNG(t, 120, 40), nil, "Content-Type", "image/png"); res.StatusCode != 200 {
		t.Fatalf("upload the logo: %d", res.StatusCode)
	}

	// The operator's dashboard while it shows one queue, branded: signed in, in English and in
	// Korean and Japanese (the branding form's words). Every queue card makes the page
	// longer (its screenshot at 375 px is already tall).
	ops := j.person("ops", journeyDesktop)
	ops.navigate(in.url + "/admin")
	ops.waitJS("the token form", 30*time.Second, `!document.getElementById('login').hidden`)
	state(ops, "sign-in")
	signInDashboard(ops.browserPage, adminToken)
	dashboard := `!document.getElementById('dashboard').hidden && document.getElementById('admin-conn').dataset.state === 'live' &&
		document.querySelector('[data-testid=queue-card][data-queue="line"] [data-testid=branding-form]') !== null`
	ops.waitJS("the live dashboard", 30*time.Second, dashboard)
	matrix(ops, "dashboard")
	for _, lang := range []string{"ko", "ja"} {
		ops.navigate(in.url + "/admin?lang=" + lang)
		ops.waitJS("the dashboard", 30*time.Second, `document.documentElement.lang === '`+lang+`' && `+dashboard)
		// The branding form speaks the page's language (its words were English before).
		if got, want := ops.eval(`document.querySelector('[data-queue="line"] [data-testid=branding-form] .sale-title').textContent`),
			static.Builtin().Messages(lang)["admin_branding"]; got != want {
			t.Errorf("%s dashboard: the branding form's title is %q, want %q", lang, got, want)
		}
		state(ops, lang+" dashboard")
	}

	// The buyer before the draw joins first: the pre-queue closes at the start.
	mustAdmin(t, in, "PUT", "/admin/api/queues/draw", map[string]any{"rate_per_second": 5, "starts_at": soon(10 * time.Second)})
	cy := j.person("cy", journeyDesktop)
	cy.navigate(in.url + "/q/draw")
	cy.waitJS("the pre-queue", 30*time.Second, `!document.getElementById('prequeue').hidden`)
	// So does the buyer who will be in line when the sale ends.
	mustAdmin(t, in, "PUT", "/admin/api/queues/ending", map[string]any{"rate_per_second": 0, "ends_at": soon(15 * time.Second)})
	eve := j.person("eve", journeyPhone)
	eve.navigate(in.url + "/q/ending")
	eve.waitJS("waiting", 30*time.Second, `!document.getElementById('waiting').hidden`)
	mustAdmin(t, in, "PUT", "/admin/api/queues/soon", map[string]any{"rate_per_second": 5, "starts_at": soon(2 * time.Hour)})
	mustAdmin(t, in, "PUT", "/admin/api/queues/hold", map[string]any{"rate_per_second": 5, "paused": true})
	mustAdmin(t, in, "PUT", "/admin/api/queues/sold", map[string]any{"rate_per_second": 0})
	mustAdmin(t, in, "PUT", "/admin/api/products/last-pair", map[string]any{"name": "Last pair", "price": 9900, "currency": "EUR", "stock": 1, "queue": "sold"})
	mustAdmin(t, in, "PUT", "/admin/api/queues/brief", map[string]any{"rate_per_second": 50, "token_ttl_seconds": 10})
	mustAdmin(t, in, "PUT", "/admin/api/queues/shop", map[string]any{"rate_per_second": 50, "token_ttl_seconds": 300})
	mustAdmin(t, in, "PUT", "/admin/api/products/tote", map[string]any{"name": "Tote", "price": 12900, "currency": "JPY", "stock": 50, "queue": "shop"})
	for _, q := range []string{"line", "hold", "sold"} { // someone is ahead: the buyers below are 2nd or later
		if res := call(t, "POST", in.url+"/api/queues/"+q+"/join", "", nil, nil); res.StatusCode != 201 {
			t.Fatalf("filler join %s: %d", q, res.StatusCode)
		}
	}
	g := startGate(t, in.url)

	// The buyer whose token will expire starts early too.
	fay := j.person("fay", journeyPhone)
	fay.navigate(in.url + "/q/brief")
	fay.waitJS("admitted", 30*time.Second, `!document.getElementById('admitted').hidden`)
	a11yControl(t, j, in)

	// The index.
	ana := j.person("ana", journeyDesktop)
	ana.navigate(in.url + "/")
	ana.waitJS("the index", 30*time.Second, `document.getElementById('queues') !== null`)
	matrix(ana, "index")

	// Waiting, paused and stale: one buyer, through the gate.
	ana.navigate(g.url + "/q/line")
	ana.waitJS("waiting", 30*time.Second, `!document.getElementById('waiting').hidden &&
		Number(document.getElementById('position').dataset.position) >= 2 &&
		document.getElementById('brand-bar') !== null && document.getElementById('brand-logo').complete`)
	matrix(ana, "waiting")
	g.freeze(true)
	ana.waitJS("stale", 30*time.Second, `document.getElementById('room').dataset.stale === 'true' && !document.getElementById('stale').hidden`)
	matrix(ana, "stale")
	g.freeze(false)
	ana.waitJS("fresh again", 30*time.Second, `document.getElementById('room').dataset.stale === 'false' && document.getElementById('stale').hidden`)
	ana.navigate(in.url + "/q/hold")
	ana.waitJS("paused", 30*time.Second, `!document.getElementById('waiting').hidden && !document.getElementById('paused-note').hidden`)
	matrix(ana, "paused")

	// Before a scheduled start.
	ben := j.person("ben", journeyPhone)
	ben.navigate(in.url + "/q/soon")
	ben.waitJS("the pre-queue", 30*time.Second, `!document.getElementById('prequeue').hidden &&
		Number(document.getElementById('starts-countdown').dataset.seconds) > 0`)
	matrix(ben, "pre-queue")

	// Sold out while in line.
	dan := j.person("dan", journeyPhone)
	dan.navigate(in.url + "/q/sold")
	dan.waitJS("waiting", 30*time.Second, `!document.getElementById('waiting').hidden && Number(document.getElementById('position').dataset.position) >= 2`)
	mustAdmin(t, in, "PUT", "/admin/api/products/last-pair", map[string]any{"stock": 0})
	dan.waitJS("sold out", 30*time.Second, `!document.getElementById('sold-out').hidden`)
	matrix(dan, "sold out")

	// The start passed and the draw is not made (its lease is held).
	cy.waitJS("drawing", 30*time.Second, `document.getElementById('prequeue').dataset.state === 'drawing' && !document.getElementById('prequeue').hidden`)
	matrix(cy, "drawing")

	// The sale ended: said to the buyer in line, and by the page to anyone who comes after.
	eve.waitJS("ended", 30*time.Second, `!document.getElementById('ended').hidden`)
	matrix(eve, "ended")
	eve.navigate(in.url + "/q/ending")
	eve.waitJS("the ended page", 30*time.Second, `document.querySelector('[data-reason="queue_ended"]:not([hidden])') !== null`)
	matrix(eve, "ended page")

	// Admitted, the order page and the receipt.
	gus := j.person("gus", journeyDesktop)
	gus.navigate(in.url + "/q/shop")
	gus.waitJS("admitted", 30*time.Second, `!document.getElementById('admitted').hidden`)
	matrix(gus, "admitted")
	gus.navigate(in.url + "/q/shop/order?product=tote")
	gus.waitJS("the order form", 30*time.Second, `document.getElementById('token-state').dataset.state === 'valid' && !document.getElementById('buy').disabled`)
	matrix(gus, "order")
	gus.click("buy")
	gus.waitJS("the receipt", 30*time.Second, `!document.getElementById('receipt').hidden`)
	matrix(gus, "receipt")

	// The turn that lapsed (10 s after fay's admission).
	fay.waitJS("expired", 30*time.Second, `!document.getElementById('expired').hidden`)
	matrix(fay, "expired")

	// The report of the queue that sold.
	ops.navigate(in.url + "/admin/queues/shop/report?lang=en")
	ops.waitJS("the report", 30*time.Second, `!document.getElementById('report-body').hidden`)
	matrix(ops, "report")

	// Korean and Japanese: the waiting page and the order page in their words.
	for _, lang := range []string{"ko", "ja"} {
		p := j.person("buyer-"+lang, journeyPhone)
		p.navigate(in.url + "/q/line?lang=" + lang)
		p.waitJS("waiting", 30*time.Second, `document.documentElement.lang === '`+lang+`' && !document.getElementById('waiting').hidden &&
			Number(document.getElementById('position').dataset.position) >= 2`)
		state(p, lang+" waiting")
		p.navigate(in.url + "/q/shop?lang=" + lang)
		p.waitJS("admitted", 30*time.Second, `!document.getElementById('admitted').hidden`)
		p.navigate(in.url + "/q/shop/order?product=tote")
		p.waitJS("the order form", 30*time.Second, `document.documentElement.lang === '`+lang+`' &&
			document.getElementById('token-state').dataset.state === 'valid'`)
		state(p, lang+" order")
	}
	t.Logf("%d states checked in %v", j.states, time.Since(started).Round(100*time.Millisecond))
}

// a11yControl: axe must report an image without alt, an unlabelled input and grey on white
// on a page broken on purpose. Its findings are the control's, not the journey's.
func a11yControl(t *testing.T, j *journey, in *instance) {
	t.Helper()
	p := j.b.open(t, "control")
	p.navigate(in.url + "/")
	p.waitJS("the index", 30*time.Second, `document.getElementById('queues') !== null`)
	p.eval(`(() => { const m = document.getElementById('main');
		m.insertAdjacentHTML('beforeend', '<img src="data:,"><input type="text"><p class="wr-axe-probe">Low contrast sentence</p>');
		const probe = m.querySelector('.wr-axe-probe'); probe.style.color = '#bbb'; probe.style.background = '#fff';
		return 'ok'; })()`)
	control := strings.Join(axeCheck(t, p, j.axe, "control (broken on purpose)"), "\n")
	for _, rule := range []string{"image-alt", "label", "color-contrast"} {
		if !strings.Contains(control, "] "+rule+" (") {
			t.Errorf("axe did not report %s on the broken control page", rule)
		}
	}
	p.close()
}

// gate is a TCP relay in front of an instance that can stop passing bytes both ways (the
// connections stay open): to the page behind it the server is frozen.
type gate struct {
	url    string
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	conns  []net.Conn
}

func startGate(t *testing.T, target string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveGate(t, ln, strings.TrimPrefix(target, "http://"))
}

// serveGate relays every connection ln accepts to the address target until the test ends.
func serveGate(t *testing.T, ln net.Listener, target string) *gate {
	t.Helper()
	g := &gate{url: "http://" + ln.Addr().String(), target: target}
	g.cond = sync.NewCond(&g.mu)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		g.freeze(false)
		g.mu.Lock()
		for _, c := range g.conns {
			_ = c.Close()
		}
		g.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", g.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			g.mu.Lock()
			g.conns = append(g.conns, c, up)
			g.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); g.pipe(up, c) }()
			go func() { defer wg.Done(); g.pipe(c, up) }()
		}
	}()
	return g
}

// pipe copies src to dst, holding each chunk while the gate is frozen.
func (g *gate) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			g.mu.Lock()
			for g.frozen {
				g.cond.Wait()
			}
			g.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or a closed connection: both ends close
			return
		}
	}
}

func (g *gate) freeze(on bool) {
	g.mu.Lock()
	g.frozen = on
	g.mu.Unlock()
	g.cond.Broadcast()
}
