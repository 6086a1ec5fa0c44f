package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/web"
)

// j2Ticket reads the ticket of queue q from the person's cookie (HttpOnly: the page's
// scripts cannot, the browser's protocol can).
func j2Ticket(p *journeyPerson, q string) string {
	p.t.Helper()
	var got network.GetCookiesResult
	p.do("read the ticket cookie", 5*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		var err error
		got, err = cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{})
		return err
	}))
	for _, c := range got.Cookies {
		if c.Name == web.TicketCookie(q) {
			return c.Value
		}
	}
	p.t.Fatalf("%s has no ticket cookie for %s", p.name, q)
	return ""
}

// j2Line is the sale's buyers by ticket: who they are (a person or an API joiner).
type j2Line struct {
	t       *testing.T
	in      *instance
	q       string
	tickets map[string]string // ticket → who
	used    map[string]bool   // token spent on an order
}

// buy has the holders of live tokens buy one unit each until n units are sold, and
// returns who bought.
func (l *j2Line) buy(n int) []string {
	l.t.Helper()
	var who []string
	testwait.For(l.t, 15*time.Second, fmt.Sprintf("%d unit(s) bought by whoever's turn it is", n), func() bool {
		for tk, name := range l.tickets {
			if len(who) == n || l.used[tk] {
				continue
			}
			var st joinResp
			call(l.t, "GET", l.in.url+"/api/queues/"+l.q+"/status", tk, nil, &st)
			if st.State != "admitted" {
				continue
			}
			res, e, _ := order(l.t, l.in, tk, st.Token, "", map[string]any{"product_id": "tee", "quantity": 1})
			if res.StatusCode != 201 {
				l.t.Fatalf("%s's order: %d %s", name, res.StatusCode, e.Error.Code)
			}
			l.used[tk] = true
			who = append(who, name)
		}
		return len(who) == n
	})
	return who
}

// TestJourneySaleDay (J2): a sale day run from the dashboard only.
//   - Olga signs in, in a browser in Seoul time, creates queue "sale" (max 1 admitted at a
//     time, paused), its product in won (₩19,000, 1 in stock, 1 per order and per ticket),
//     schedules the start an hour ahead (the time she types is Seoul's: the server stores
//     that instant) and the end an hour later, and copies the draw's commitment the
//     dashboard shows after the start is saved (it equals the public draw's); the card says
//     the draw is scheduled and counts down.
//   - Buyers get in line before the start in English (1280 px, a computer whose clock is 7
//     minutes fast: the countdown is the true time to the start), Korean and Japanese
//     (375 px), two more over the API: the pre-queue, each page in its language, with the
//     buyer's draw id (short, the full id in a <details>), a link to the published draw and
//     how the draw works.
//   - Olga moves the start to a few seconds ahead; the start draws them: each page's place is
//     its draw id's place in GET …/draw/order, and verify-draw (in-process) reproduces the
//     order from the revealed seed and finds each buyer's place. The card says the draw is
//     done, and a new start is refused next to the input. Leo joins after the start, at the
//     end of the line.
//   - Olga resumes admission; whoever's turn it is buys the one unit: sold out mid-line, the
//     waiting pages say so (places kept), a new join is refused, the card shows the badge and
//     the product at 0. She restocks one on the dashboard: the pages show the place without
//     the notice, the badge goes; the next buyer buys it, sold out again. She moves the end to a few seconds ahead: Leo's page says the
//     sale has ended.
//   - The report (from the queue's card) says what happened: 6 joined = admitted + 0
//     abandoned + 0 left + dropped at the end + 0 still waiting, 2 orders, 5 drawn, two
//     sold-out periods (the first ended by the restock), the orders chart ending at the
//     report's time; the page shows the API's numbers (the wait histogram's and orders
//     chart's too). Download CSV fetches the API's CSV with the token; printed, the report
//     has no buttons and fits an A4 width. She mistypes a queue in the report's address: the
//     page says there is no such queue.
func TestJourneySaleDay(t *testing.T) {
	t.Parallel() // journeys overlap their waits (see scripts/test.sh: -parallel)
	began := time.Now()
	lap := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	ctx, in := browserInstance(t, "journey-saleday", 180*time.Second, nil)
	j := newJourney(t, ctx)
	card := dropCard("sale")
	const q = "sale"

	// 1. Olga at her desk: the dashboard.
	olga := j.person("olga", journeyDesktop)
	seoul := time.FixedZone("KST", 9*3600)
	cdpDo(olga.browserPage, "time zone Asia/Seoul", emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Seoul"})
	lap("instance and browser")
	olga.navigate(in.url + "/admin")
	signInDashboard(olga.browserPage, adminToken)
	olga.waitJS("the live dashboard", 10*time.Second, `!document.getElementById('dashboard').hidden &&
		document.getElementById('admin-conn').dataset.state === 'live' && document.getElementById('new-product-currency').options.length > 40`)
	lap("signed in")
	j.state(olga, "dashboard")
	lap("dashboard checked")

	// The queue: created, at most one buyer admitted at a time, paused until the draw is checked.
	olga.sendKeys("new-queue-name", q)
	olga.activate(`#new-queue button[type=submit]`)
	olga.waitJS("the queue's card", 10*time.Second, card+` !== null && document.getElementById('q-sale-max_active') !== null &&
		[...document.getElementById('new-product-queue').options].some((o) => o.value === 'sale')`)
	adminUIRetype(olga.browserPage, "q-sale-max_active", "1")
	adminUIRetype(olga.browserPage, "q-sale-rate_per_second", "50")
	// Every buyer of this journey is 127.0.0.1: with max_active 1 the address's share of it
	// (max_active_share_per_ip, default 0.1) would be one place, so Olga turns the share off.
	adminUIRetype(olga.browserPage, "q-sale-max_active_share_per_ip", "0")
	lap("queue created")
	olga.click("q-sale-save")
	olga.waitJS("the queue saved, no draw yet", 10*time.Second, card+`.querySelector('[data-testid=queue-msg]').dataset.state === 'ok' &&
		`+card+`.querySelector('[data-field=draw]').dataset.value === 'none'`)
	olga.activate(`[data-testid=queue-card][data-queue="sale"] [data-testid=toggle-pause]`)
	opsDialog(olga.browserPage, "sale", true)
	testwait.For(t, 10*time.Second, "the queue paused with max_active 1", func() bool {
		paused, _ := opsQueueState(t, in, q)
		return paused
	})

	lap("queue saved and paused")
	// The product, in won, sold through the queue.
	olga.sendKeys("new-product-id", "tee")
	olga.sendKeys("new-product-name", "Sale day tee")
	olga.sendKeys("new-product-currency", "KRW") // by the keyboard (sendKeys: arrow keys, not type-ahead's clock)
	olga.do("type the price", 5*time.Second, chromedp.SetValue(chromedp.ID("new-product-price"), ""), chromedp.SendKeys(chromedp.ID("new-product-price"), "19000"))
	adminUIRetype(olga.browserPage, "new-product-stock", "1")
	adminUIRetype(olga.browserPage, "new-product-max-order", "1")
	adminUIRetype(olga.browserPage, "new-product-max-ticket", "1")
	olga.sendKeys("new-product-queue", q)
	olga.waitJS("what buyers will see", 5*time.Second, `document.querySelector('#new-product [data-testid=price-shows]').textContent.includes('₩19,000')`)
	olga.activate(`#new-product button[type=submit]`)
	olga.waitJS("the product listed under the queue", 10*time.Second, `(() => {
		const tr = document.querySelector('tr[data-product=tee]');
		return tr !== null && tr.closest('tbody').dataset.group === 'sale' && document.getElementById('p-tee-currency').value === 'KRW';
	})()`)
	olga.waitJS("the card: what the queue sells", 10*time.Second, card+`.querySelector('[data-field=products]').dataset.value === 'tee'`)
	var p struct {
		Price    int64   `json:"price"`
		Currency string  `json:"currency"`
		Stock    int64   `json:"stock"`
		Queue    *string `json:"queue"`
	}
	if call(t, "GET", in.url+"/api/products/tee", "", nil, &p); p.Price != 19000 || p.Currency != "KRW" || p.Queue == nil || *p.Queue != q || p.Stock != 1 {
		t.Fatalf("GET /api/products/tee: %+v, want 19000 KRW, stock 1, queue sale", p)
	}
	lap("queue and product made on the dashboard")

	// The schedule: the start an hour ahead (moved nearer once the buyers are in), the end
	// an hour later; the commitment shown, copied.
	starts := time.Now().Add(time.Hour).Truncate(time.Second)
	ends := starts.Add(time.Hour)
	olga.eval(fmt.Sprintf(`(() => { for (const [id, v] of [['q-sale-starts_at', %q], ['q-sale-ends_at', %q]]) {
		const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); } return ''; })()`,
		starts.In(seoul).Format("2006-01-02T15:04:05"), ends.In(seoul).Format("2006-01-02T15:04:05")))
	olga.click("q-sale-save-sale")
	olga.waitJS("the commitment shown", 10*time.Second, `(() => {
		const c = `+card+`;
		return c.querySelector('[data-testid=sale-msg]').dataset.state === 'ok' && !c.querySelector('[data-testid=commitment]').hidden &&
			/^[0-9a-f]{64}$/.test(c.querySelector('[data-testid=commitment-value]').textContent);
	})()`)
	var d ddDraw
	call(t, "GET", in.url+"/api/queues/sale/draw", "", nil, &d)
	shown := olga.eval(card + `.querySelector('[data-testid=commitment-value]').textContent`)
	if shown != d.Commitment || d.Seed != "" {
		t.Fatalf("the dashboard shows commitment %q; the public draw has %q (seed %q)", shown, d.Commitment, d.Seed)
	}
	olga.eval(`(() => { window.__clip = ''; navigator.clipboard.writeText = (s) => { window.__clip = s; return Promise.resolve(); }; return ''; })()`)
	olga.activate(`[data-testid=queue-card][data-queue="sale"] [data-testid=commitment-copy]`)
	olga.waitJS("copied", 5*time.Second, `window.__clip === `+strconv.Quote(shown))
	st := ddStats(t, in, q)
	if st.StartsAt == nil || st.EndsAt == nil {
		t.Fatalf("stats after the schedule: %v", st)
	}
	if s, _ := time.Parse(time.RFC3339Nano, *st.StartsAt); !s.Equal(starts) {
		t.Fatalf("starts_at %s, want %s (typed %s in Seoul)", *st.StartsAt, starts.UTC().Format(time.RFC3339), starts.In(seoul).Format("2006-01-02T15:04:05"))
	}
	lap("scheduled, commitment " + shown[:12] + "… copied")

	// 2. Buyers get in line before the start, in three languages.
	type buyer struct {
		p                   *journeyPerson
		lang, title, drawID string
	}
	buyers := []*buyer{
		{p: j.person("ana", journeyDesktop), lang: "en"},
		{p: j.person("minji", journeyPhone), lang: "ko"},
		{p: j.person("yui", journeyPhone), lang: "ja"},
	}
	line := &j2Line{t: t, in: in, q: q, tickets: map[string]string{}, used: map[string]bool{}}
	// Ana's computer clock is 7 minutes fast: the page counts down with the server's clock.
	cdpDo(buyers[0].p.browserPage, "a clock 7 minutes fast", page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `(() => { const real = Date.now.bind(Date); Date.now = () => real() + 7 * 60 * 1000; })();`,
	})
	for i, b := range buyers {
		b.p.navigate(in.url + "/q/sale?lang=" + b.lang)
		b.p.waitJS("the pre-queue", 10*time.Second, `(() => {
			const $ = (id) => document.getElementById(id);
			return !$('prequeue').hidden && $('waiting').hidden && /^[0-9a-f]{16,}$/.test($('draw-id-box').dataset.drawId) &&
				$('conn-state').dataset.state === 'live' && Number($('prequeue-size').dataset.value) `+map[bool]string{true: "===", false: ">="}[i == 0]+` `+strconv.Itoa(i+1)+`;
		})()`)
		lap(b.p.name + " in the pre-queue")
		if got := b.p.eval(`document.documentElement.lang`); got != b.lang {
			t.Fatalf("%s's page is in %q, want %q", b.p.name, got, b.lang)
		}
		b.title = b.p.eval(`document.getElementById('prequeue-title').textContent`)
		b.drawID = b.p.eval(`document.getElementById('draw-id-box').dataset.drawId`)
		line.tickets[j2Ticket(b.p, q)] = b.p.name
		if i == 0 {
			j2Prequeue(t, b.p, starts, b.drawID)
		}
		j.state(b.p, "prequeue ("+b.lang+")")
		lap(b.p.name + " checked")
	}
	if buyers[0].title == buyers[1].title || buyers[1].title == buyers[2].title || buyers[0].title == buyers[2].title {
		t.Errorf("the pre-queue titles are not in three languages: %q %q %q", buyers[0].title, buyers[1].title, buyers[2].title)
	}
	for i := range 2 {
		jn := dropJoinAPI(t, in, q)
		if jn.State != "prequeue" || jn.Position != nil || jn.DrawID == "" || jn.PrequeueSize == nil || *jn.PrequeueSize != int64(4+i) {
			t.Fatalf("API join %d before the start: %+v, want state prequeue, position null, a draw id, prequeue_size %d", i, jn, 4+i)
		}
		line.tickets[jn.Ticket] = fmt.Sprintf("api-%d", i+1)
	}
	lap("5 in the pre-queue (en, ko, ja and 2 over the API)")
	olga.waitJS("the card: draw scheduled, 5 in the pre-queue, counting down", 10*time.Second, `(() => {
		const c = `+card+`;
		return c.querySelector('[data-field=draw]').dataset.value === 'scheduled' && c.querySelector('[data-field=prequeue]').dataset.value === '5' &&
			Number(c.querySelector('[data-field=starts_at]').dataset.seconds) > 0;
	})()`)

	// 3. Olga moves the start to a few seconds ahead (the commitment stays); the start draws
	// them (paused: the places stay as drawn).
	starts = time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	olga.eval(fmt.Sprintf(`(() => { const e = document.getElementById('q-sale-starts_at'); e.value = %q;
		e.dispatchEvent(new Event('input', {bubbles: true})); return ''; })()`, starts.In(seoul).Format("2006-01-02T15:04:05")))
	olga.click("q-sale-save-sale")
	olga.waitJS("the start moved", 10*time.Second, card+`.querySelector('[data-testid=sale-msg]').dataset.state === 'ok'`)
	if s, _ := time.Parse(time.RFC3339Nano, strOrEmpty(ddStats(t, in, q).StartsAt)); !s.Equal(starts) {
		t.Fatalf("the moved start: %v, want %v", s, starts)
	}
	if got := olga.eval(card + `.querySelector('[data-testid=commitment-value]').textContent`); got != shown {
		t.Fatalf("moving the start changed the commitment shown: %q → %q", shown, got)
	}
	for _, b := range buyers {
		b.p.waitJS("the drawn place", time.Until(starts)+10*time.Second, `(() => {
			const $ = (id) => document.getElementById(id);
			return !$('waiting').hidden && $('waiting').dataset.mode === 'line' && $('prequeue').hidden &&
				Number($('position').dataset.position) >= 1 && !$('drawn').hidden;
		})()`)
	}
	lap("drawn")
	dj, order := dropDrawn(t, in, q)
	if dj.Participants != 5 || len(order) != 5 {
		t.Fatalf("the draw: %d participants, order %v; want 5", dj.Participants, order)
	}
	for _, b := range buyers {
		pos, _ := strconv.Atoi(b.p.eval(`document.getElementById('position').dataset.position`))
		if i := slices.Index(order, b.drawID); i < 0 || pos != i+1 {
			t.Errorf("%s's page shows place %d; the published order has its draw id %s at %d", b.p.name, pos, b.drawID, i+1)
		}
	}
	j.state(buyers[0].p, "waiting (drawn place)")
	j.state(buyers[1].p, "waiting (drawn place)")
	if code, out, errOut := runVerifyDraw("-room", in.url, "-queue", q); code != 0 || !strings.HasPrefix(out, "OK: 5 participants") || !strings.Contains(out, shown) {
		t.Fatalf("verify-draw: %d %q %q", code, out, errOut)
	}
	for tk, name := range line.tickets {
		id := strings.Split(tk, ".")[1]
		code, out, _ := runVerifyDraw("-room", in.url, "-queue", q, "-ticket-id", id)
		if code != 0 || !strings.Contains(out, " of 5\n") {
			t.Errorf("verify-draw for %s: %d %q", name, code, out)
		}
	}
	t.Logf("verify-draw: OK, 5 participants, seed matches the commitment %s…; every buyer's place found", shown[:12])

	// The card says the draw is done; a new start is refused, in a sentence next to the input.
	// Olga then puts the start back as it was (the form sends only what changed).
	olga.waitJS("the card: draw done", 10*time.Second, card+`.querySelector('[data-field=draw]').dataset.value === 'done'`)
	was := olga.eval(`document.getElementById('q-sale-starts_at').value`)
	retypeStart := func(v string) {
		olga.eval(fmt.Sprintf(`(() => { const e = document.getElementById('q-sale-starts_at'); e.value = %q;
			e.dispatchEvent(new Event('input', {bubbles: true})); return ''; })()`, v))
	}
	retypeStart(time.Now().Add(time.Hour).In(seoul).Format("2006-01-02T15:04:05"))
	olga.click("q-sale-save-sale")
	olga.waitJS("the refused start", 10*time.Second, `(() => {
		const e = document.getElementById('q-sale-starts_at');
		const slot = document.getElementById(e.getAttribute('aria-describedby') || 'none');
		return e.getAttribute('aria-invalid') === 'true' && slot !== null && !slot.hidden && slot.textContent.trim().length > 10 &&
			`+card+`.querySelector('[data-testid=sale-msg]').dataset.state === 'error';
	})()`)
	t.Logf("a new start after the draw: %q", olga.eval(`document.getElementById(document.getElementById('q-sale-starts_at').getAttribute('aria-describedby')).textContent`))
	// The browser logs the refusal (409) as a console error: expected here, so checked and
	// taken off the list checkConsole reads.
	olga.expectConsole("the refused start's 409", failedToLoad(409, "/admin/api/queues/sale"))
	retypeStart(was)

	// Leo comes after the start: the end of the line.
	leo := j.person("leo", journeyDesktop)
	leo.navigate(in.url + "/q/sale?lang=en")
	leo.waitJS("leo's place at the end", 10*time.Second, `!document.getElementById('waiting').hidden &&
		document.getElementById('position').dataset.position === '6'`)
	leoTicket := j2Ticket(leo, q)
	line.tickets[leoTicket] = "leo"
	lap("leo 6th")

	// 4. Admission: the one unit sells, sold out mid-line.
	olga.activate(`[data-testid=queue-card][data-queue="sale"] [data-testid=toggle-pause]`)
	testwait.For(t, 10*time.Second, "the queue running", func() bool {
		paused, _ := opsQueueState(t, in, q)
		return !paused
	})
	first := line.buy(1)
	testwait.For(t, 10*time.Second, "sold out", func() bool { return ddStats(t, in, q).SoldOut })
	leo.waitJS("sold out shown, the place kept", 10*time.Second, `!document.getElementById('sold-out').hidden &&
		document.getElementById('room').dataset.soldOut === 'true' && !document.getElementById('waiting').hidden`)
	if got := leo.eval(`document.getElementById('sold-out').innerText`); !strings.Contains(got, "Sold out — your place is kept in case stock comes back") {
		t.Errorf("sold-out notice %q", got)
	}
	// The place kept: the page shows the place the line holds for leo's ticket (nobody is let
	// in while sold out, so it stands still).
	var leoSt joinResp
	testwait.For(t, 10*time.Second, "leo's page and the line agree on his place", func() bool {
		leoSt = joinResp{}
		call(t, "GET", in.url+"/api/queues/sale/status", leoTicket, nil, &leoSt)
		return leoSt.State == "waiting" && leoSt.Position >= 1 &&
			leo.eval(`document.getElementById('position').dataset.position`) == strconv.FormatInt(leoSt.Position, 10)
	})
	var e errResp
	if res := call(t, "POST", in.url+"/api/queues/sale/join", "", nil, &e); res.StatusCode != 423 || e.Error.Code != "sold_out" {
		t.Fatalf("join while sold out: %d %+v, want 423 sold_out", res.StatusCode, e)
	}
	j.state(leo, "sold out")
	olga.waitJS("the card's sold-out badge and the product at 0", 10*time.Second, `!`+card+`.querySelector('[data-testid=badge-sold-out]').hidden &&
		`+card+`.querySelector('[data-field=products]').textContent.includes('Sale day tee (0 left)')`)
	lap("sold out (" + strings.Join(first, "") + " bought)")

	// Restock one on the dashboard: the next in line buys it; sold out again.
	adminUIRetype(olga.browserPage, "p-tee-stock", "1")
	olga.click("p-tee-save")
	olga.waitJS("the restock saved", 10*time.Second, `document.querySelector('tr[data-product=tee] [data-testid=product-msg]').dataset.state === 'ok'`)
	// Nobody buys before the test says so: leo's page shows his place without the notice.
	leo.waitJS("the place again after the restock", 10*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return $('sold-out').hidden && !$('waiting').hidden && Number($('position').dataset.position) >= 1 &&
			Number($('position').dataset.position) <= `+strconv.FormatInt(leoSt.Position, 10)+` && $('eta').textContent !== 'Sold out';
	})()`)
	olga.waitJS("the badge gone", 10*time.Second, card+`.querySelector('[data-testid=badge-sold-out]').hidden`)
	second := line.buy(1)
	testwait.For(t, 10*time.Second, "sold out again", func() bool { return ddStats(t, in, q).SoldOut && stockOf(t, in, "tee") == 0 })
	lap("restocked, sold again (" + strings.Join(second, "") + ")")

	// 5. The end, moved to a few seconds ahead on the dashboard.
	waitingAtEnd := saleQueueStats(t, in, q).Waiting
	end := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	olga.eval(fmt.Sprintf(`(() => { const e = document.getElementById('q-sale-ends_at'); e.value = %q;
		e.dispatchEvent(new Event('input', {bubbles: true})); return ''; })()`, end.In(seoul).Format("2006-01-02T15:04:05")))
	olga.click("q-sale-save-sale")
	olga.waitJS("the end saved", 10*time.Second, card+`.querySelector('[data-testid=sale-msg]').dataset.state === 'ok'`)
	leo.waitJS("the sale has ended", time.Until(end)+10*time.Second, `!document.getElementById('ended').hidden &&
		document.getElementById('waiting').hidden`)
	j.state(leo, "ended")
	testwait.For(t, 10*time.Second, "the line dropped", func() bool { s := saleQueueStats(t, in, q); return s.Ended && s.Waiting == 0 })
	lap(fmt.Sprintf("ended with %d waiting", waitingAtEnd))

	// 6. The report from the queue's card.
	olga.activate(`[data-testid=queue-card][data-queue="sale"] [data-testid=report-link]`)
	olga.waitJS("the report", 15*time.Second, `location.pathname === '/admin/queues/sale/report' && !document.getElementById('report-body').hidden`)
	r := readReport(t, in, q)
	admitted := 6 - waitingAtEnd
	t.Logf("report: %d joined = %d admitted + %d abandoned + %d left + %d dropped + %d waiting; %d orders, %d drawn; sold out %+v",
		r.Joined, r.Admitted, r.Abandoned, r.Left, deref(r.Dropped), deref(r.StillWaiting), r.Bought, dj.Participants, r.SoldOut)
	if r.Joined != 6 || r.Admitted != admitted || r.Abandoned != 0 || r.Left != 0 || deref(r.Dropped) != waitingAtEnd ||
		deref(r.StillWaiting) != 0 || r.Unaccounted != 0 || r.Bought != 2 || r.Units != 2 {
		t.Errorf("report %+v; want 6 joined = %d admitted + 0 + 0 + %d dropped + 0, 2 orders of 1", r, admitted, waitingAtEnd)
	}
	if len(r.SoldOut) != 2 || r.SoldOut[0].To == nil || r.SoldOut[1].To != nil || r.SoldOutAt == nil || !r.SoldOutAt.Equal(r.SoldOut[0].From) {
		t.Errorf("sold out at %v, periods %+v: want two, the first ended by the restock", r.SoldOutAt, r.SoldOut)
	}
	// The page was opened as the line dropped; the answer above is read after the drop was
	// counted, so the page is read again to show the same (on a busy machine its first read
	// could come before the end's count).
	reportAgain := func() {
		olga.navigate(in.url + "/admin/queues/sale/report")
		olga.waitJS("the report again", 15*time.Second, `!document.getElementById('report-body').hidden`)
	}
	reportAgain()
	// Every number the page shows is the API's. The page shows the report it fetched when it
	// loaded, and peak_waiting may still come with the next recorded history step: the API
	// is read after the page, and until both are the same report the page is loaded again.
	compare := func() []string {
		var bad []string
		var rep map[string]any
		call(t, "GET", in.url+"/admin/api/queues/sale/report", adminToken, nil, &rep)
		for _, k := range []string{"joined", "admitted", "bought", "units", "abandoned", "left", "expired", "peak_waiting", "peak_sse_connections"} {
			if got, want := olga.eval(`document.querySelector('[data-field="`+k+`"]').dataset.value`), strconv.FormatInt(num(rep[k]), 10); got != want {
				bad = append(bad, fmt.Sprintf("report page %s = %q, JSON %s", k, got, want))
			}
		}
		ws, _ := rep["wait_seconds"].(map[string]any)
		if got := olga.eval(`document.querySelector('[data-field="wait_count"]').dataset.value`); got != strconv.FormatInt(num(ws["count"]), 10) {
			bad = append(bad, fmt.Sprintf("report page wait count %q, JSON %v", got, ws["count"]))
		}
		buckets, _ := ws["buckets"].([]any)
		if got := olga.eval(`document.getElementById('report-wait-chart').dataset.bars`); got != strconv.Itoa(len(buckets)) {
			bad = append(bad, fmt.Sprintf("wait chart bars %q, JSON buckets %d", got, len(buckets)))
		}
		opm, _ := rep["orders_per_minute"].([]any)
		if got := olga.eval(`document.getElementById('report-orders-chart').dataset.points`); got != strconv.Itoa(len(opm)) {
			bad = append(bad, fmt.Sprintf("orders chart points %q, JSON minutes %d", got, len(opm)))
		}
		return bad
	}
	var diff []string
	testwait.For(t, 60*time.Second, "the report page to show the API's report", func() bool {
		if diff = compare(); len(diff) == 0 {
			return true
		}
		t.Logf("the page showed an older report (%s): loaded again", strings.Join(diff, "; "))
		reportAgain()
		return false
	})
	for k, want := range map[string]int64{"joined": r.Joined, "admitted": r.Admitted, "abandoned": 0, "left": 0, "drawn": 5,
		"dropped_at_end": waitingAtEnd, "still_waiting": 0, "bought": 2, "units": 2} {
		if got := olga.eval(`document.querySelector('[data-field="` + k + `"]').dataset.value`); got != strconv.FormatInt(want, 10) {
			t.Errorf("report page %s = %q, want %d", k, got, want)
		}
	}
	if olga.eval(`document.getElementById('report-identity').dataset.addsUp`) != "true" || olga.eval(`String(document.getElementById('report-unaccounted').hidden)`) != "true" {
		t.Errorf("the report page's identity: %q (adds up %s)", olga.eval(`document.getElementById('report-identity').textContent`),
			olga.eval(`document.getElementById('report-identity').dataset.addsUp`))
	}
	if n := olga.eval(`String(document.querySelectorAll('#report-soldout-list li').length)`); n != "2" {
		t.Errorf("the report page lists %s sold-out periods, want 2", n)
	}
	// The orders chart ends at the report's time: no point and no axis past it.
	if bad := olga.eval(`(() => { const s = document.getElementById('report-orders-chart'); const gen = Date.parse(` + strconv.Quote(r.GeneratedAt.Format(time.RFC3339Nano)) + `);
		const to = Number(s.dataset.plot.split(',')[1]); const late = (s.dataset.times || '').split(',').filter((x) => x && Date.parse(x) > to);
		return to > Date.now() || late.length ? 'axis to ' + new Date(to).toISOString() + ', late points ' + late.join(' ') : ''; })()`); bad != "" {
		t.Errorf("the orders chart runs past the report's time: %s", bad)
	}
	t.Logf("report page: %q", olga.eval(`document.getElementById('report-identity').textContent`))
	j.stateMatrix(olga, "report")
	lap("report")

	// Download CSV: fetched with the token, the API's header and row count.
	olga.click("report-csv")
	olga.waitJS("the CSV fetched", 10*time.Second, `document.getElementById('report-csv').dataset.state === 'done'`)
	res := call(t, "GET", in.url+"/admin/api/queues/sale/report?format=csv", adminToken, nil, nil)
	csv := readAll(res)
	if res.StatusCode != 200 {
		t.Fatalf("GET …/report?format=csv: %d %s", res.StatusCode, csv)
	}
	lines := strings.Split(strings.TrimRight(csv, "\n"), "\n")
	if h := olga.eval(`document.getElementById('report-csv').dataset.header`); strings.TrimSpace(h) != strings.TrimSpace(lines[0]) || !strings.HasPrefix(h, "minute,joined,admitted") {
		t.Errorf("CSV header on the page %q, API %q", h, lines[0])
	}
	if rows := olga.eval(`document.getElementById('report-csv').dataset.rows`); rows != strconv.Itoa(len(lines)) {
		t.Errorf("CSV rows fetched by the page %s, API %d", rows, len(lines))
	}

	// She prints it: no buttons, black on white, within an A4 page (794 px wide at 96 dpi).
	cdpDo(olga.browserPage, "print media", emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: "print"})
	if v := olga.eval(`[getComputedStyle(document.getElementById('report-print')).display, getComputedStyle(document.body).backgroundColor].join()`); v != "none,rgb(255, 255, 255)" {
		t.Errorf("print media: button display and page background %q, want none and white", v)
	}
	olga.do("A4 width", 5*time.Second, chromedp.EmulateViewport(794, 1123))
	olga.waitJS("the report within an A4 width", 5*time.Second, `window.innerWidth === 794 && document.documentElement.scrollWidth <= 794`)
	olga.resize(olga.width)
	cdpDo(olga.browserPage, "screen media", emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: ""})
	olga.scheme("light")

	// A queue name mistyped in the report's address: 404, and the page says so.
	if res := call(t, "GET", in.url+"/admin/queues/nope/report", "", nil, nil); res.StatusCode != 404 {
		t.Errorf("report page of an unknown queue: %d, want 404", res.StatusCode)
	}
	olga.navigate(in.url + "/admin/queues/nope/report")
	olga.waitJS("the unknown queue said", 5*time.Second, `!document.getElementById('report-error').hidden &&
		document.getElementById('report-error').textContent.trim() === 'No queue named nope.'`)
	// The browser logs the page's own 404 as a console error: expected here, so checked and
	// taken off the list checkConsole reads.
	olga.expectConsole("the unknown queue's 404", failedToLoad(404, "/admin/queues/nope/report"))
	logServerErrors(t, in)
}

// j2Prequeue checks an English pre-queue page whose clock runs 7 minutes fast: the
// countdown is the true time to starts, the draw id is shown short (the full one in its
// title), with the link to the published draw and how the draw works.
func j2Prequeue(t *testing.T, p *journeyPerson, starts time.Time, full string) {
	t.Helper()
	if skew := p.eval(`String(Math.round((Date.now() - (performance.timeOrigin + performance.now())) / 60000))`); skew != "7" {
		t.Fatalf("%s's clock is %s minutes off, want 7", p.name, skew)
	}
	// Within the second it shows and the time the test took to read it.
	hi := int(math.Ceil(time.Until(starts).Seconds()))
	secs, _ := strconv.Atoi(p.eval(`document.getElementById('starts-countdown').dataset.seconds`))
	lo := int(math.Ceil(time.Until(starts).Seconds()))
	if secs < lo-1 || secs > hi+1 {
		t.Fatalf("countdown shows %d s to the start, want %d–%d ± 1 (the browser's clock is 7 minutes fast)", secs, lo, hi)
	}
	if short, title := p.eval(`document.getElementById('draw-id').textContent`), p.eval(`document.getElementById('draw-id').title`); title != full ||
		len([]rune(short)) >= len(full) || !strings.HasPrefix(full, strings.TrimSuffix(short, "…")) {
		t.Fatalf("draw id shown as %q (title %q), full %q", short, title, full)
	}
	if got := p.eval(`document.getElementById('draw-verify').getAttribute('href')`); got != "/api/queues/sale/draw" {
		t.Fatalf("verification link %q", got)
	}
	if got := p.eval(`document.getElementById('draw-explain').textContent`); got != "The draw happens at the start: everyone who is here before then gets a random place" {
		t.Fatalf("draw explanation %q", got)
	}
	t.Logf("pre-queue: countdown %s (%d s, want %d–%d), draw id %s", p.eval(`document.getElementById('starts-countdown').textContent`),
		secs, lo, hi, p.eval(`document.getElementById('draw-id').textContent`))
}

func strOrEmpty(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
