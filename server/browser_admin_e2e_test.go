package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBrowserAdminEditsSaleSettings drives the admin dashboard in headless Chromium:
//   - product shoe, not on sale, is put on sale through queue drop (picked in the row's
//     queue select) with max_per_order 2, and drop's places_per_ip is set to 7 in its
//     queue card; GET /api/products/shoe and GET /admin/api/stats read the values back;
//   - max_per_order 0 is refused (422, error.field max_per_order): the dashboard marks that
//     input aria-invalid, shows the server's message next to it (its aria-describedby) and
//     names the field in the row's status; the stored value stays 2; typing clears the mark;
//   - the "Add a product" form creates product cap sold through queue later, its price typed
//     in dollars (12.50 in the currency the form starts with, USD like every product) and
//     stored in cents (1250).
//
// The screenshot goes to $WR_SCREENSHOTS, else screenshots/ at the repo root, in the test's own directory.
func TestBrowserAdminEditsSaleSettings(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "admin-ui", 60*time.Second, nil)
	for _, q := range []string{"drop", "later"} {
		mustAdmin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"paused": true})
	}
	mustAdmin(t, in, "PUT", "/admin/api/products/shoe", map[string]any{"name": "Trail shoe", "price": 12900, "stock": 5})
	if p := adminUIProduct(t, in, "shoe"); p.Queue != nil || p.MaxPerOrder != 4 || p.MaxPerTicket != 4 {
		t.Fatalf("new product shoe: queue %v, max_per_order %d, max_per_ticket %d; want null, 4, 4",
			p.Queue, p.MaxPerOrder, p.MaxPerTicket)
	}
	if got := adminUIPlacesPerIP(t, in, "drop"); got != 100 {
		t.Fatalf("drop's places_per_ip before: %d, want the default 100", got)
	}

	b := startBrowser(t, ctx)
	adm := b.open(t, "admin")
	adm.navigate(in.url + "/admin")
	adm.waitJS("the token form", 5*time.Second, `!document.getElementById('login').hidden`)
	adm.sendKeys("admin-token", adminToken)
	adm.click("admin-login-submit")
	// The row shows the stored settings, and its queue select lists the known queues.
	adm.waitJS("shoe's row and drop's card", 10*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		const sel = $('p-shoe-queue');
		return !$('dashboard').hidden && $('admin-conn').dataset.state === 'live' &&
			sel !== null && sel.value === '' && [...sel.options].map((o) => o.value).join() === ',drop,later' &&
			$('p-shoe-max_per_order').value === '4' && $('p-shoe-max_per_ticket').value === '4' &&
			$('q-drop-places_per_ip') !== null && $('q-drop-places_per_ip').value === '100';
	})()`)

	// 1. Put shoe on sale through drop, at most 2 per order.
	adm.sendKeys("p-shoe-queue", "drop") // type-ahead picks the option, as a keyboard user would
	if v := adm.eval(`document.getElementById('p-shoe-queue').value`); v != "drop" {
		t.Fatalf("queue select after typing drop: %q", v)
	}
	adminUIRetype(adm, "p-shoe-max_per_order", "2")
	adm.click("p-shoe-save")
	adm.waitJS("shoe saved", 10*time.Second, adminUIRowMsg("ok"))
	p := adminUIProduct(t, in, "shoe")
	if p.Queue == nil || *p.Queue != "drop" || p.MaxPerOrder != 2 || p.MaxPerTicket != 4 {
		t.Fatalf("GET /api/products/shoe after the save: queue %v, max_per_order %d, max_per_ticket %d; want drop, 2, 4",
			p.Queue, p.MaxPerOrder, p.MaxPerTicket)
	}
	t.Logf("dashboard saved shoe: queue %s, max_per_order %d, max_per_ticket %d", *p.Queue, p.MaxPerOrder, p.MaxPerTicket)

	// 2. drop's places per address.
	adminUIRetype(adm, "q-drop-places_per_ip", "7")
	adm.click("q-drop-save")
	adm.waitJS("drop saved", 10*time.Second, `(() => {
		const card = document.querySelector('[data-testid=queue-card][data-queue=drop]');
		return card.querySelector('[data-testid=queue-msg]').dataset.state === 'ok' &&
			card.querySelector('[data-field=places_per_ip]').textContent.trim() === '7';
	})()`)
	if got := adminUIPlacesPerIP(t, in, "drop"); got != 7 {
		t.Fatalf("GET /admin/api/stats: drop's places_per_ip %d, want 7", got)
	}
	if got := adminUIPlacesPerIP(t, in, "later"); got != 100 {
		t.Fatalf("GET /admin/api/stats: later's places_per_ip %d, want 100 (unchanged)", got)
	}
	t.Log("dashboard saved drop's places_per_ip 7")

	// 3. max_per_order 0: the server's 422 names the field, the dashboard marks it.
	adminUIRetype(adm, "p-shoe-max_per_order", "0")
	adm.click("p-shoe-save")
	adm.waitJS("the field error on max_per_order", 10*time.Second, adminUIRowMsg("error")+` && (() => {
		const input = document.getElementById('p-shoe-max_per_order');
		const slot = document.getElementById(input.getAttribute('aria-describedby') || 'none');
		return input.getAttribute('aria-invalid') === 'true' && slot !== null && !slot.hidden &&
			slot.closest('td') === input.closest('td') && document.activeElement === input &&
			slot.textContent.includes('max_per_order must be between 1 and 1000');
	})()`)
	status := adm.eval(`document.querySelector('tr[data-product=shoe] [data-testid=product-msg]').textContent`)
	fieldErr := adm.eval(`document.getElementById('p-shoe-max_per_order-error').textContent`)
	t.Logf("refused max_per_order 0: next to the field %q, row status %q", fieldErr, status)
	if others := adm.eval(`String(document.querySelectorAll('[aria-invalid=true]').length)`); others != "1" {
		t.Errorf("%s controls marked invalid, want only max_per_order", others)
	}
	adm.screenshot(shotDir(t), "7-admin-field-error")
	if p := adminUIProduct(t, in, "shoe"); p.MaxPerOrder != 2 {
		t.Fatalf("max_per_order after the refused save: %d, want 2", p.MaxPerOrder)
	}
	// Typing a new value takes the mark off.
	adminUIRetype(adm, "p-shoe-max_per_order", "3")
	adm.waitJS("the mark cleared", 5*time.Second, `(() => {
		const input = document.getElementById('p-shoe-max_per_order');
		return !input.hasAttribute('aria-invalid') && document.getElementById('p-shoe-max_per_order-error').hidden;
	})()`)

	// 4. A new product, sold through later.
	adm.sendKeys("new-product-id", "cap")
	adm.sendKeys("new-product-name", "Cap")
	// The price in major units of the currency the form starts with (every product is USD).
	if cur := adm.eval(`document.getElementById('new-product-currency').value`); cur != "USD" {
		t.Fatalf("the new product's currency starts as %q, want USD (the one every product has)", cur)
	}
	adm.sendKeys("new-product-price", "12.50")
	adm.sendKeys("new-product-queue", "later")
	adminUIRetype(adm, "new-product-max-ticket", "6")
	adm.activate(`#new-product button[type=submit]`)
	adm.waitJS("cap's row", 10*time.Second, `(() => {
		const sel = document.getElementById('p-cap-queue');
		return document.querySelector('#new-product [data-testid=form-msg]').dataset.state === 'ok' &&
			sel !== null && sel.value === 'later' && document.getElementById('p-cap-max_per_ticket').value === '6';
	})()`)
	if p := adminUIProduct(t, in, "cap"); p.Queue == nil || *p.Queue != "later" || p.MaxPerOrder != 4 || p.MaxPerTicket != 6 || p.Price != 1250 || p.Currency != "USD" {
		t.Fatalf("GET /api/products/cap: queue %v, max_per_order %d, max_per_ticket %d, price %d %s; want later, 4, 6, 1250 USD",
			p.Queue, p.MaxPerOrder, p.MaxPerTicket, p.Price, p.Currency)
	}

	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
}

// TestBrowserAdminShowsStreamBudget starts an instance with a stream budget of 2
// (WR_MAX_STREAMS=2) and follows its row in the dashboard's Instances table:
//   - with no stream open the row shows streams "0 / 2" and no Full badge, and connections
//     against the budget derived from the open-file limit;
//   - with 2 streams open through the API it shows "2 / 2", "100% used" and the Full badge
//     (text in the row header, not colour only);
//   - a third stream is shed: 200, text/event-stream, a body that starts with "retry: "
//     (2–10 s, jittered) and ends; joins answer 503 instance_full and /readyz 503 "full";
//   - once a stream closes the row shows "1 / 2" and the badge goes.
func TestBrowserAdminShowsStreamBudget(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "budget", 60*time.Second, map[string]string{"WR_MAX_STREAMS": "2", "WR_HEARTBEAT": "1s"})
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"paused": true})
	// Three places first: at the budget the instance refuses joins too.
	var tickets []string
	for i := range 3 {
		var j joinResp
		if res := call(t, "POST", in.url+"/api/queues/drop/join", "", nil, &j); res.StatusCode != 201 {
			t.Fatalf("join %d: %d", i, res.StatusCode)
		}
		tickets = append(tickets, j.Ticket)
	}
	streamURL := in.url + "/api/queues/drop/stream"

	b := startBrowser(t, ctx)
	adm := b.open(t, "admin")
	adm.navigate(in.url + "/admin")
	adm.waitJS("the token form", 5*time.Second, `!document.getElementById('login').hidden`)
	adm.sendKeys("admin-token", adminToken)
	adm.click("admin-login-submit")
	adm.waitJS("streams 0 / 2, not full", 10*time.Second, adminUIBudgetRow("0 / 2", false)+` && (() => {
		const v = document.querySelector('tr[data-instance=budget] [data-testid=instance-conns-value]').textContent;
		return /^\d[\d,]* \/ \d[\d,]*$/.test(v) && !v.endsWith(' / 0');
	})()`)
	t.Logf("no stream open: streams %q, connections %q", adminUIRowCell(adm, "instance-streams"), adminUIRowCell(adm, "instance-conns"))

	// 1. Two streams fill the budget: the row says so in text and with the badge.
	var open []*sseStream
	for i, tk := range tickets[:2] {
		s := mustStream(t, streamURL, tk)
		if _, ok := s.next(t, 5*time.Second, "position"); !ok {
			t.Fatalf("stream %d: no position event", i+1)
		}
		open = append(open, s)
	}
	adm.waitJS("streams 2 / 2 and the Full badge", 10*time.Second, adminUIBudgetRow("2 / 2", true)+` && (() => {
		const tr = document.querySelector('tr[data-instance=budget]');
		return tr.classList.contains('is-full') && tr.querySelector('th[scope=row]').textContent.includes('Full') &&
			tr.querySelector('[data-testid=instance-streams]').textContent.includes('100% used') &&
			tr.querySelector('[data-testid=instance-streams] meter').value === 2;
	})()`)
	t.Logf("2 streams open: streams %q, connections %q, row header %q", adminUIRowCell(adm, "instance-streams"),
		adminUIRowCell(adm, "instance-conns"), adm.eval(`document.querySelector('tr[data-instance=budget] th').textContent`))
	adm.screenshot(shotDir(t), "8-admin-stream-budget")

	// 2. The API agrees: a third stream is shed with a retry and ends.
	rctx, rcancel := context.WithTimeout(testContext(t), 5*time.Second)
	defer rcancel()
	req, _ := http.NewRequestWithContext(rctx, "GET", streamURL, nil)
	req.Header.Set("Authorization", "Bearer "+tickets[2])
	req.Header.Set("Accept", "text/event-stream")
	started := time.Now()
	res, err := specClient.Do(req)
	if err != nil {
		t.Fatalf("third stream: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("third stream: the body did not end: %v (read %q)", err, body)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") || !strings.HasPrefix(string(body), "retry: ") {
		t.Fatalf("third stream: %d %q %q; want 200, text/event-stream and a body starting with \"retry: \"",
			res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	retry, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(strings.TrimPrefix(string(body), "retry: "), "\n", 2)[0]))
	if err != nil || retry < 2000 || retry > 10000 {
		t.Fatalf("third stream: retry %q, want 2000–10000 ms", body)
	}
	t.Logf("third stream shed in %v: 200 %s, body %q", time.Since(started).Round(time.Millisecond), res.Header.Get("Content-Type"), body)
	var e errResp
	if res := call(t, "POST", in.url+"/api/queues/drop/join", "", nil, &e); res.StatusCode != 503 || e.Error.Code != "instance_full" {
		t.Fatalf("join at the budget: %d %q, want 503 instance_full", res.StatusCode, e.Error.Code)
	}
	var ready struct {
		Status string `json:"status"`
	}
	if res := call(t, "GET", in.url+"/readyz", "", nil, &ready); res.StatusCode != 503 || ready.Status != "full" {
		t.Fatalf("/readyz at the budget: %d %q, want 503 full", res.StatusCode, ready.Status)
	}
	if got := adminUIRowCell(adm, "instance-streams-value"); got != "2 / 2" {
		t.Fatalf("after the shed stream the dashboard shows streams %q, want 2 / 2", got)
	}

	// 3. A stream closes: below the budget again, the badge goes.
	open[0].close()
	adm.waitJS("streams 1 / 2, not full", 10*time.Second, adminUIBudgetRow("1 / 2", false))
	t.Logf("one stream closed: streams %q", adminUIRowCell(adm, "instance-streams"))

	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
}

// adminUIBudgetRow is a JS condition: instance budget's row shows streams as want, with
// the Full badge or without it.
func adminUIBudgetRow(want string, full bool) string {
	return fmt.Sprintf(`(() => {
		const tr = document.querySelector('tr[data-testid=instance-row][data-instance=budget]');
		if (!tr || document.getElementById('admin-conn').dataset.state !== 'live') return false;
		const v = tr.querySelector('[data-testid=instance-streams-value]');
		const badge = tr.querySelector('[data-testid=instance-full]');
		return v !== null && v.textContent === %q && (badge !== null && badge.textContent === 'Full') === %t;
	})()`, want, full)
}

// adminUIRowCell is the text of the cell (or part) with the test id in instance budget's row.
func adminUIRowCell(p *browserPage, testid string) string {
	p.t.Helper()
	return p.eval(fmt.Sprintf(`document.querySelector('tr[data-instance=budget] [data-testid=%s]').textContent`, testid))
}

type adminUIProductView struct {
	Queue        *string `json:"queue"`
	MaxPerOrder  int64   `json:"max_per_order"`
	MaxPerTicket int64   `json:"max_per_ticket"`
	Price        int64   `json:"price"`
	Currency     string  `json:"currency"`
}

func adminUIProduct(t *testing.T, in *instance, id string) adminUIProductView {
	t.Helper()
	var p adminUIProductView
	if res := call(t, "GET", in.url+"/api/products/"+id, "", nil, &p); res.StatusCode != 200 {
		t.Fatalf("GET /api/products/%s: %d", id, res.StatusCode)
	}
	return p
}

func adminUIPlacesPerIP(t *testing.T, in *instance, queue string) int64 {
	t.Helper()
	var st struct {
		Queues []struct {
			Name        string `json:"name"`
			PlacesPerIP *int64 `json:"places_per_ip"`
		} `json:"queues"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
	for _, q := range st.Queues {
		if q.Name == queue {
			if q.PlacesPerIP == nil {
				t.Fatalf("GET /admin/api/stats: queue %s has no places_per_ip", queue)
			}
			return *q.PlacesPerIP
		}
	}
	t.Fatalf("GET /admin/api/stats: no queue %s", queue)
	return 0
}

// adminUIRowMsg is a JS condition: shoe's row status is in the given state.
func adminUIRowMsg(state string) string {
	return `document.querySelector('tr[data-product=shoe] [data-testid=product-msg]').dataset.state === ` + strconv.Quote(state)
}

// adminUIRetype replaces what the input #id holds by typing text over its selected contents.
func adminUIRetype(p *browserPage, id, text string) {
	p.t.Helper()
	p.eval(fmt.Sprintf(`(() => { const e = document.getElementById(%q); e.focus(); e.select(); return ''; })()`, id))
	p.sendKeys(id, text)
	if v := p.eval(fmt.Sprintf(`document.getElementById(%q).value`, id)); v != text {
		p.t.Fatalf("%s: #%s holds %q after typing %q", p.name, id, v, text)
	}
}
