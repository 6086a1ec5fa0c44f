package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/waitroom/waitroom/internal/testwait"
)

// The two people of the roles journey, as the admin configures them (WR_ADMIN_TOKENS: the
// admin names each token and gives it a role; the audit log's actor is the name).
const (
	j5OperatorToken = "olga-operator-token-0123456789"
	j5ViewerToken   = "victor-viewer-token-0123456789"
)

// j5Eval evaluates an expression that yields a promise of a string in p's page.
func j5Eval(p *journeyPerson, expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: evaluate %s: %v\n%s", p.name, expr, err, p.diagnose())
	}
	return out
}

// j5Product is a product as GET /api/products/{id} answers.
type j5Product struct {
	Name     string  `json:"name"`
	Price    int64   `json:"price"`
	Currency string  `json:"currency"`
	Stock    int64   `json:"stock"`
	Queue    *string `json:"queue"`
}

// j5Draw is GET /api/queues/{queue}/draw.
type j5Draw struct {
	Commitment string `json:"commitment"`
	Seed       string `json:"seed"`
}

// TestJourneyRoles (J5): the admin has configured a viewer (victor) and an operator (olga)
// in WR_ADMIN_TOKENS.
//   - Victor signs into the dashboard on his phone: he is told he can only read; every
//     control that would change something is disabled (the save buttons, every input of
//     every form, pause, close, start now, the logo's removal, revoke, rotate), and every
//     changing request the dashboard can make, forced with his token, is 403 forbidden and
//     changes nothing — a save button enabled by hand too (the card shows the refusal). He
//     hands his phone to Olga, who signs out and in with her own token in the same tab:
//     every control unlocks.
//   - Olga, at her desk, creates queue seoul and a product priced ₩189,000 (KRW, whole won:
//     189000.5 is refused next to the price, nothing is created), sold through seoul; it is
//     listed under seoul at ₩189,000; she changes seoul's rate; she schedules the start and
//     sees the draw's commitment (equal to the public draw's) with a copy button and the line
//     to publish it before the start; "Start now" asks in the dialog, which names the
//     consequence (the pre-queue drawn, the seed revealed, cannot be undone) with the focus on
//     Cancel: Escape changes nothing and gives the focus back, Confirm starts the sale (the
//     seed revealed matches the commitment).
//   - Each of her changes is in the audit log view with her name.
func TestJourneyRoles(t *testing.T) {
	t.Parallel() // journeys overlap their waits (see scripts/test.sh: -parallel)
	began := time.Now()
	ctx, in := browserInstance(t, "j5-roles", 300*time.Second, map[string]string{
		"WR_ADMIN_TOKENS": "olga:operator:" + j5OperatorToken + ",victor:viewer:" + j5ViewerToken,
	})
	// What is already there: a queue with a product, an invite code and a logo.
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 5})
	mustAdmin(t, in, "PUT", "/admin/api/products/shoe", map[string]any{"name": "Trail shoe", "price": 12900, "currency": "USD", "stock": 5, "queue": "drop"})
	var inv struct {
		Invites []struct {
			Code string `json:"code"`
		} `json:"invites"`
	}
	if res := call(t, "POST", in.url+"/admin/api/queues/drop/invites", adminToken, map[string]any{"count": 1, "lane": "priority"}, &inv); res.StatusCode >= 300 || len(inv.Invites) != 1 {
		t.Fatalf("create an invite: %d", res.StatusCode)
	}
	code := inv.Invites[0].Code
	if res := call(t, "PUT", in.url+"/admin/api/queues/drop/logo", adminToken, brandingPNG(t, 60, 20), nil, "Content-Type", "image/png"); res.StatusCode >= 300 {
		t.Fatalf("upload drop's logo: %d", res.StatusCode)
	}
	j := newJourney(t, ctx)
	card := func(q string) string { return dropCard(q) }
	last := time.Now()
	lap := func(what string) {
		t.Logf("[%v] %s", time.Since(last).Round(time.Millisecond), what)
		last = time.Now()
	}
	lap("set up")
	state := func(p *journeyPerson, name string) {
		lap("before " + name)
		j.state(p, name)
		lap(name)
	}

	// 1. Victor, the viewer, on his phone.
	victor := j.person("victor", journeyPhone)
	victor.navigate(in.url + "/admin")
	victor.waitJS("the token form", 5*time.Second, `!document.getElementById('login').hidden`)
	state(victor, "sign-in")
	lap("victor signed in")
	signInDashboard(victor.browserPage, j5ViewerToken)
	victor.waitJS("the viewer's dashboard", 10*time.Second, `document.getElementById('admin-who').dataset.role === 'viewer' &&
		document.getElementById('admin-who').dataset.actor === 'victor' && !document.getElementById('viewer-note').hidden &&
		document.getElementById('admin-conn').dataset.state === 'live' && `+card("drop")+` !== null &&
		document.querySelector('tr[data-product=shoe]') !== null &&
		!`+card("drop")+`.querySelector('[data-testid=brand-logo-remove]').hidden`)
	if who := victor.eval(`document.getElementById('admin-who').textContent`); !strings.Contains(who, "victor") || !strings.Contains(who, "viewer") {
		t.Errorf("the header says %q, want the actor and role", who)
	}
	victor.activate(`[data-testid=queue-card][data-queue="drop"] [data-testid=invites-toggle]`)
	victor.waitJS("the code listed", 10*time.Second, card("drop")+`.querySelectorAll('[data-testid=invite-row]').length === 1`)
	controlsJSON := victor.eval(`(() => {
		const on = [], off = [];
		const readOnly = (e) => e.id === 'admin-logout' || e.id === 'audit-refresh' || e.id === 'products-refresh' ||
			e.matches('[data-range], [data-testid=invite-refresh], [data-testid=invite-copy], [data-testid=commitment-copy]');
		for (const e of document.querySelectorAll('#dashboard :is(input, select, textarea, button)')) {
			if (readOnly(e)) continue;
			const name = e.getAttribute('aria-label') || e.name || e.id || e.dataset.testid || e.textContent.trim();
			if (e.disabled && e.getAttribute('aria-describedby') === 'viewer-note') off.push(name); else on.push(name);
		}
		return JSON.stringify({on, off});
	})()`)
	var controls struct{ On, Off []string }
	if err := json.Unmarshal([]byte(controlsJSON), &controls); err != nil {
		t.Fatal(err)
	}
	if len(controls.On) > 0 {
		t.Fatalf("the viewer can use %d changing controls: %s", len(controls.On), strings.Join(controls.On, " | "))
	}
	for _, want := range []string{"Save settings of queue drop", "Pause admission of queue drop", "Close to new joiners of queue drop",
		"Remove the logo of queue drop", "Rotate the token signing key", "Save the sale of queue drop", "Currency — shoe", "Price — shoe"} {
		found := false
		for _, c := range controls.Off {
			found = found || strings.HasPrefix(c, want)
		}
		if !found {
			t.Errorf("no disabled control named %q among the viewer's %d", want, len(controls.Off))
		}
	}
	if len(controls.Off) < 20 {
		t.Errorf("only %d controls disabled: the check found too little", len(controls.Off))
	}
	if victor.eval(`String(`+card("drop")+`.querySelector('[data-testid=invite-revoke]').disabled)`) != "true" {
		t.Error("the viewer's revoke button is enabled")
	}
	t.Logf("viewer: %d changing controls disabled (%s …)", len(controls.Off), strings.Join(controls.Off[:6], " | "))
	state(victor, "dashboard (viewer)")
	lap("viewer's controls")

	// Every changing request the dashboard can make, forced with his token: 403 forbidden
	// (the invite code is the real one, so nothing but the role refuses it).
	for _, r := range []struct {
		method, path string
		body         any
		hdr          []string
	}{
		{"PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 99}, nil},
		{"PUT", "/admin/api/queues/drop", map[string]any{"paused": true}, nil},
		{"PUT", "/admin/api/queues/drop", map[string]any{"closed": true}, nil},
		{"PUT", "/admin/api/queues/drop", map[string]any{"starts_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, nil},
		{"PUT", "/admin/api/queues/drop", map[string]any{"brand_name": "Victor's"}, nil},
		{"PUT", "/admin/api/queues/victors", map[string]any{"rate_per_second": 1}, nil},
		{"PUT", "/admin/api/products/shoe", map[string]any{"price": 1, "currency": "KRW"}, nil},
		{"PUT", "/admin/api/products/victors", map[string]any{"name": "x", "price": 1, "currency": "USD"}, nil},
		{"DELETE", "/admin/api/queues/drop/logo", nil, nil},
		{"PUT", "/admin/api/queues/drop/logo", brandingPNG(t, 10, 10), []string{"Content-Type", "image/png"}},
		{"POST", "/admin/api/queues/drop/invites", map[string]any{"count": 1, "lane": "bypass"}, nil},
		{"DELETE", "/admin/api/queues/drop/invites/" + code, nil, nil},
		{"POST", "/admin/api/keys/rotate", nil, nil},
		{"DELETE", "/admin/api/keys/any-kid", nil, nil},
		{"PUT", "/admin/api/limits", map[string]any{"join_global_burst": 7}, nil},
	} {
		var e errResp
		if res := call(t, r.method, in.url+r.path, j5ViewerToken, r.body, &e, r.hdr...); res.StatusCode != 403 || e.Error.Code != "forbidden" {
			t.Errorf("the viewer's %s %s: %d %q, want 403 forbidden", r.method, r.path, res.StatusCode, e.Error.Code)
		}
	}
	// A save button enabled by hand: the server refuses, the card says so, nothing changes.
	victor.eval(`(() => { const b = document.getElementById('q-drop-save'); b.disabled = false; document.getElementById('q-drop-rate_per_second').disabled = false;
		document.getElementById('q-drop-rate_per_second').value = '42'; b.click(); return ''; })()`)
	victor.waitJS("the refusal in the card", 10*time.Second, card("drop")+`.querySelector('[data-testid=queue-msg]').dataset.state === 'error' &&
		`+card("drop")+`.querySelector('[data-testid=queue-msg]').textContent.includes('may only read')`)
	var p j5Product
	if call(t, "GET", in.url+"/api/products/shoe", "", nil, &p); p.Price != 12900 || p.Currency != "USD" {
		t.Fatalf("shoe after the viewer's requests: %+v", p)
	}
	if res := call(t, "GET", in.url+"/api/products/victors", "", nil, nil); res.StatusCode != 404 {
		t.Fatalf("the viewer's product exists: %d", res.StatusCode)
	}
	inv.Invites = nil
	if call(t, "GET", in.url+"/admin/api/queues/drop/invites", adminToken, nil, &inv); len(inv.Invites) != 1 || inv.Invites[0].Code != code {
		t.Fatalf("drop's invite codes after the viewer's requests: %+v, want %s alone", inv.Invites, code)
	}
	if st := brandingStats(t, in, "drop"); st.LogoURL == nil || st.BrandName != "" {
		t.Fatalf("drop's branding after the viewer's requests: %+v", st)
	}
	if paused, closed := opsQueueState(t, in, "drop"); paused || closed {
		t.Fatal("the viewer paused or closed drop")
	}
	if r := j5Rate(t, in, "drop"); r != 5 {
		t.Fatalf("drop's rate after the viewer's requests: %v, want 5", r)
	}
	// Victor hands his phone to Olga: she signs out of his session and in with her own
	// token in the same tab; the viewer's locks go with him (the save button he enabled by
	// hand aside, pause and the key rotation were still locked).
	victor.click("admin-logout")
	signInDashboard(victor.browserPage, j5OperatorToken)
	victor.waitJS("the operator's dashboard in victor's tab", 10*time.Second, `document.getElementById('admin-who').dataset.role === 'operator' &&
		document.getElementById('viewer-note').hidden && document.querySelectorAll('[data-viewer-off]').length === 0 &&
		!`+card("drop")+`.querySelector('[data-testid=toggle-pause]').disabled && !document.getElementById('q-drop-save').disabled &&
		!document.getElementById('keys-rotate').disabled`)
	lap("victor's tab unlocked for olga")

	// 2. Olga, the operator, at her desk.
	olga := j.person("olga", journeyDesktop)
	olga.navigate(in.url + "/admin")
	signInDashboard(olga.browserPage, j5OperatorToken)
	olga.waitJS("the operator's dashboard", 10*time.Second, `document.getElementById('admin-who').dataset.role === 'operator' &&
		document.getElementById('admin-who').dataset.actor === 'olga' && document.getElementById('viewer-note').hidden &&
		document.getElementById('admin-conn').dataset.state === 'live' && document.querySelector('tr[data-product=shoe]') !== null &&
		document.getElementById('new-product-currency').options.length > 40`)
	state(olga, "dashboard (operator)")
	lap("olga signed in")

	// A queue, then a product in won sold through it.
	olga.sendKeys("new-queue-name", "seoul")
	olga.activate(`#new-queue button[type=submit]`)
	olga.waitJS("seoul's card", 10*time.Second, card("seoul")+` !== null && [...document.getElementById('new-product-queue').options].some((o) => o.value === 'seoul')`)
	olga.sendKeys("new-product-id", "hanbok")
	olga.sendKeys("new-product-name", "Silk hanbok")
	olga.do("choose KRW", 5*time.Second, chromedp.Focus(chromedp.ID("new-product-currency")), chromedp.KeyEvent("KRW"))
	if cur := olga.eval(`document.getElementById('new-product-currency').value`); cur != "KRW" {
		t.Fatalf("typing KRW in the currency select chose %q", cur)
	}
	olga.do("type the price", 5*time.Second, chromedp.SetValue(chromedp.ID("new-product-price"), ""), chromedp.SendKeys(chromedp.ID("new-product-price"), "189000.5"))
	olga.sendKeys("new-product-queue", "seoul")
	olga.activate(`#new-product button[type=submit]`)
	olga.waitJS("the price refused on its field", 5*time.Second, `(() => {
		const e = document.getElementById('new-product-price');
		const slot = document.getElementById(e.getAttribute('aria-describedby') || 'none');
		return e.getAttribute('aria-invalid') === 'true' && slot !== null && !slot.hidden && slot.textContent.includes('KRW') &&
			document.activeElement === e && document.querySelector('#new-product [data-testid=form-msg]').dataset.state === 'error';
	})()`)
	t.Logf("189000.5 KRW: %q next to the price", olga.eval(`document.getElementById('new-product-price-error').textContent`))
	lap("price refused")
	if res := call(t, "GET", in.url+"/api/products/hanbok", "", nil, nil); res.StatusCode != 404 {
		t.Fatalf("hanbok exists after the refused price: %d", res.StatusCode)
	}
	olga.do("retype the price", 5*time.Second, chromedp.SetValue(chromedp.ID("new-product-price"), ""), chromedp.SendKeys(chromedp.ID("new-product-price"), "189000"))
	olga.waitJS("what buyers will see", 5*time.Second, `document.querySelector('#new-product [data-testid=price-shows]').textContent.includes('₩189,000')`)
	adminUIRetype(olga.browserPage, "new-product-stock", "30")
	olga.activate(`#new-product button[type=submit]`)
	olga.waitJS("hanbok listed under seoul", 10*time.Second, `(() => {
		const tr = document.querySelector('tr[data-product=hanbok]');
		return tr !== null && tr.closest('tbody').dataset.group === 'seoul' &&
			document.getElementById('p-hanbok-currency').value === 'KRW' && document.getElementById('p-hanbok-price').value === '189000' &&
			tr.querySelector('[data-testid=price-shows]').textContent.includes('₩189,000') &&
			document.querySelector('tr[data-product=shoe]').closest('tbody').dataset.group === 'drop';
	})()`)
	if call(t, "GET", in.url+"/api/products/hanbok", "", nil, &p); p.Price != 189000 || p.Currency != "KRW" || p.Queue == nil || *p.Queue != "seoul" || p.Stock != 30 {
		t.Fatalf("GET /api/products/hanbok: %+v, want 189000 KRW, stock 30, queue seoul", p)
	}
	t.Logf("hanbok: %d %s through %s, listed as %q", p.Price, p.Currency, *p.Queue, olga.eval(`document.querySelector('tr[data-product=hanbok] [data-testid=price-shows]').textContent`))

	// seoul's rate.
	adminUIRetype(olga.browserPage, "q-seoul-rate_per_second", "7")
	olga.click("q-seoul-save")
	olga.waitJS("seoul saved", 10*time.Second, card("seoul")+`.querySelector('[data-testid=queue-msg]').dataset.state === 'ok'`)
	testwait.For(t, 10*time.Second, "seoul's rate 7", func() bool { return j5Rate(t, in, "seoul") == 7 })
	lap("product and rate")

	// The start, an hour ahead: the commitment is shown, to publish before the start.
	starts := time.Now().Add(time.Hour).Truncate(time.Second)
	olga.eval(fmt.Sprintf(`(() => { const e = document.getElementById('q-seoul-starts_at');
		e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); return ''; })()`, starts.Local().Format("2006-01-02T15:04:05")))
	olga.click("q-seoul-save-sale")
	olga.waitJS("the commitment shown", 10*time.Second, `(() => {
		const c = `+card("seoul")+`;
		const box = c.querySelector('[data-testid=commitment]');
		return c.querySelector('[data-testid=sale-msg]').dataset.state === 'ok' && !box.hidden &&
			/^[0-9a-f]{64}$/.test(c.querySelector('[data-testid=commitment-value]').textContent) &&
			c.querySelector('[data-testid=commitment-note]').textContent.includes('before the start');
	})()`)
	var d j5Draw
	call(t, "GET", in.url+"/api/queues/seoul/draw", "", nil, &d)
	shown := olga.eval(card("seoul") + `.querySelector('[data-testid=commitment-value]').textContent`)
	if shown != d.Commitment || d.Seed != "" {
		t.Fatalf("the dashboard shows commitment %q; the public draw has %q (seed %q, want none before the start)", shown, d.Commitment, d.Seed)
	}
	olga.eval(`(() => { window.__clip = ''; navigator.clipboard.writeText = (s) => { window.__clip = s; return Promise.resolve(); }; return ''; })()`)
	olga.activate(`[data-testid=queue-card][data-queue="seoul"] [data-testid=commitment-copy]`)
	olga.waitJS("copied", 5*time.Second, `window.__clip === `+strconv.Quote(shown)+` && `+card("seoul")+`.querySelector('[data-testid=commitment-msg]').dataset.state === 'ok'`)
	t.Logf("start saved: %q; commitment %s… copied; note %q", olga.eval(card("seoul")+`.querySelector('[data-testid=sale-msg]').textContent`), shown[:12],
		olga.eval(card("seoul")+`.querySelector('[data-testid=commitment-note]').textContent`))
	state(olga, "commitment shown")
	lap("commitment")

	// Start now: the dialog names the consequence; Escape changes nothing.
	olga.waitJS("the Start now button", 10*time.Second, `(() => { const b = document.getElementById('q-seoul-clear-starts_at');
		return !b.disabled && b.textContent === 'Start now'; })()`)
	olga.do("focus Start now", 5*time.Second, chromedp.Focus(chromedp.ID("q-seoul-clear-starts_at")), chromedp.KeyEvent(kb.Enter))
	olga.waitJS("the dialog, the focus on Cancel", 5*time.Second, `document.getElementById('confirm-dialog').open &&
		document.getElementById('confirm-dialog').dataset.kind === 'start_now' && document.activeElement === document.getElementById('confirm-cancel') &&
		!document.getElementById('confirm-undo').hidden`)
	text := olga.eval(`document.getElementById('confirm-text').textContent`)
	for _, want := range []string{"queue seoul", "pre-queue", "seed is revealed", "can no longer be moved"} {
		if !strings.Contains(text, want) {
			t.Errorf("the confirmation %q does not say %q", text, want)
		}
	}
	t.Logf("start now asks: %q + %q, button %q", text, olga.eval(`document.getElementById('confirm-undo').textContent`), olga.eval(`document.getElementById('confirm-ok').textContent`))
	state(olga, "confirmation dialog open")
	lap("dialog")
	olga.do("press Escape", 5*time.Second, chromedp.KeyEvent(kb.Escape))
	olga.waitJS("the dialog closed, the focus back on Start now", 5*time.Second, `!document.getElementById('confirm-dialog').open &&
		document.activeElement === document.getElementById('q-seoul-clear-starts_at')`)
	if msg := olga.eval(card("seoul") + `.querySelector('[data-testid=sale-msg]').dataset.state`); msg != "ok" {
		t.Fatalf("after Escape the sale form says %q: a change was sent", msg)
	}
	if st := ddStats(t, in, "seoul"); st.StartsAt == nil || st.Draw != "scheduled" {
		t.Fatalf("after Escape: %+v, want the start kept and the draw scheduled", st)
	}
	// Confirm: the sale starts, the seed is revealed and matches the commitment.
	olga.click("q-seoul-clear-starts_at")
	opsDialog(olga.browserPage, "Start the sale of queue seoul now", true)
	testwait.For(t, 10*time.Second, "the draw done", func() bool {
		d = j5Draw{}
		call(t, "GET", in.url+"/api/queues/seoul/draw", "", nil, &d)
		return d.Seed != ""
	})
	seed, err := hex.DecodeString(d.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(seed); hex.EncodeToString(sum[:]) != shown {
		t.Fatalf("the revealed seed's SHA-256 is %x, the commitment shown was %s", sum, shown)
	}
	olga.waitJS("the card: draw done", 10*time.Second, card("seoul")+`.querySelector('[data-field=draw]').dataset.value === 'done' &&
		`+card("seoul")+`.querySelector('[data-testid=commitment-note]').textContent.includes('check it against')`)

	lap("started")
	// A rotation leaves a key waiting to sign: its Revoke asks first, naming the
	// consequence; Confirm removes it from the list and the JWKS.
	olga.click("keys-rotate")
	opsDialog(olga.browserPage, "Rotate the token signing key", true)
	olga.waitJS("a revocable key", 10*time.Second, `document.querySelectorAll('#keys-rows [data-testid=key-revoke]').length === 1`)
	kid := olga.eval(`document.querySelector('#keys-rows [data-testid=key-revoke]').closest('tr').querySelector('th').textContent`)
	olga.activate(`#keys-rows [data-testid=key-revoke]`)
	olga.waitJS("the revoke_key dialog", 5*time.Second, `document.getElementById('confirm-dialog').dataset.kind === 'revoke_key' && !document.getElementById('confirm-undo').hidden`)
	text = opsDialog(olga.browserPage, "Every admission token it signed is refused", true)
	for _, want := range []string{kid, "queue again", "cached key set"} {
		if !strings.Contains(text, want) {
			t.Errorf("the key's confirmation %q does not say %q", text, want)
		}
	}
	olga.waitJS("the key gone", 10*time.Second, `document.querySelectorAll('#keys-rows tr').length === 1 &&
		document.querySelector('#keys-rows [data-testid=key-revoke]') === null && document.getElementById('keys-msg').textContent === 'Key revoked.'`)
	if res := call(t, "GET", in.url+"/.well-known/jwks.json", "", nil, nil); strings.Contains(readAll(res), kid) {
		t.Fatalf("the revoked key %s is still in the JWKS", kid)
	}
	lap("key revoked")
	// 3. The audit log view: each of her changes, with her name.
	olga.waitJS("her changes in the audit log", 15*time.Second, `(() => {
		if (!window.__auditPoll || Date.now() - window.__auditPoll > 1000) { window.__auditPoll = Date.now(); document.getElementById('audit-refresh').click(); }
		const rows = [...document.querySelectorAll('#audit-rows tr[data-testid=audit-row]')].filter((r) => r.children[1].textContent === 'olga');
		const has = (a, tg, s) => rows.some((r) => r.dataset.action === a && r.dataset.target === tg && r.textContent.includes(s));
		return has('queue.create', 'queue:seoul', '') && has('product.create', 'product:hanbok', 'currency: KRW') &&
			has('queue.update', 'queue:seoul', 'rate_per_second') && has('queue.update', 'queue:seoul', 'starts_at') &&
			rows.filter((r) => r.dataset.action === 'queue.update' && r.dataset.target === 'queue:seoul' && r.textContent.includes('starts_at')).length >= 2 &&
			has('key.revoke', 'key:`+kid+`', '');
	})()`)
	rows := olga.eval(`[...document.querySelectorAll('#audit-rows tr[data-testid=audit-row]')].filter((r) => r.children[1].textContent === 'olga')
		.map((r) => r.dataset.action + ' ' + r.dataset.target + ': ' + r.children[4].textContent.replace(/\s+/g, ' ').slice(0, 90)).join('\n')`)
	lap("audit log")
	t.Logf("olga's changes in the audit log view:\n%s", rows)
	if strings.Contains(olga.eval(`document.getElementById('audit-rows').textContent`), "victor") {
		t.Error("the audit log lists a change by the viewer")
	}
	for _, pg := range []*journeyPerson{victor, olga} {
		pg.checkConsole()
	}
	logServerErrors(t, in)
	t.Logf("journey took %v", time.Since(began).Round(time.Millisecond))
}

// j5Rate is queue name's rate_per_second in GET /admin/api/stats.
func j5Rate(t *testing.T, in *instance, name string) float64 {
	t.Helper()
	var st struct {
		Queues []struct {
			Name string  `json:"name"`
			Rate float64 `json:"rate_per_second"`
		} `json:"queues"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
	for _, q := range st.Queues {
		if q.Name == name {
			return q.Rate
		}
	}
	t.Fatalf("GET /admin/api/stats: no queue %s", name)
	return 0
}
