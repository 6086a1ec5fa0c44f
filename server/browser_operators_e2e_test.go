package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/waitroom/waitroom/internal/testwait"
)

// opsSignIn opens the dashboard in a new tab and signs in with tok.
func opsSignIn(t *testing.T, b *browser, in *instance, name, tok string) *browserPage {
	t.Helper()
	p := b.open(t, name)
	p.navigate(in.url + "/admin")
	signInDashboard(p, tok)
	p.waitJS("the live dashboard", 10*time.Second, `!document.getElementById('dashboard').hidden &&
		document.getElementById('admin-conn').dataset.state === 'live'`)
	return p
}

// signInDashboard types tok into the dashboard's token form (shown) and submits it.
func signInDashboard(p *browserPage, tok string) {
	p.t.Helper()
	p.waitJS("the token form", 5*time.Second, `!document.getElementById('login').hidden`)
	p.sendKeys("admin-token", tok)
	p.click("admin-login-submit")
}

// opsClick clicks the element the CSS selector finds.
func opsClick(p *browserPage, sel string) {
	p.t.Helper()
	p.activate(sel)
}

// opsQueueState reads paused and closed of queue name from GET /admin/api/stats.
func opsQueueState(t *testing.T, in *instance, name string) (paused, closed bool) {
	t.Helper()
	var st struct {
		Queues []struct {
			Name   string `json:"name"`
			Paused bool   `json:"paused"`
			Closed bool   `json:"closed"`
		} `json:"queues"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
	for _, q := range st.Queues {
		if q.Name == name {
			return q.Paused, q.Closed
		}
	}
	t.Fatalf("GET /admin/api/stats: no queue %s", name)
	return false, false
}

// opsRateStats is a queue's rate mode and adaptive TTL in GET /admin/api/stats.
type opsRateStats struct {
	Name         string  `json:"name"`
	RateMode     string  `json:"rate_mode"`
	AutoMin      float64 `json:"auto_min"`
	AutoMax      float64 `json:"auto_max"`
	TokenTTLMin  int64   `json:"token_ttl_min_seconds"`
	HalveAt      int64   `json:"token_ttl_halve_at"`
	TTLEffective int64   `json:"token_ttl_effective_seconds"`
}

func opsRate(t *testing.T, in *instance, name string) opsRateStats {
	t.Helper()
	var st struct {
		Queues []opsRateStats `json:"queues"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
	for _, q := range st.Queues {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("GET /admin/api/stats: no queue %s", name)
	return opsRateStats{}
}

// opsDialog waits for the confirmation dialog, checks that it names what it asks about and
// answers it (Cancel or Confirm); the dialog must close.
func opsDialog(p *browserPage, mentions string, ok bool) string {
	p.t.Helper()
	p.waitJS("the confirmation dialog", 5*time.Second, `document.getElementById('confirm-dialog').open`)
	text := p.eval(`document.getElementById('confirm-text').textContent`)
	if !strings.Contains(text, mentions) {
		p.t.Fatalf("the confirmation says %q, want it to mention %q", text, mentions)
	}
	if ok {
		p.click("confirm-ok")
	} else {
		p.click("confirm-cancel")
	}
	p.waitJS("the dialog closed", 5*time.Second, `!document.getElementById('confirm-dialog').open`)
	return text
}

// TestBrowserOperatorsConfirmAndNames drives the dashboard of two queues:
//   - pausing and closing ask first in a <dialog>; Cancel changes nothing (the API still
//     says running and open, no PUT was sent), Confirm pauses; resuming asks nothing;
//   - revoking an invite code and rotating the signing key ask too; Cancel keeps the code and
//     the keys, Confirm revokes / rotates;
//   - a refused setting (auto_max below auto_min) shows the server's message next to the
//     field, marked invalid, and the stored value stays; saved right (auto between 50 and
//     80, adaptive TTL from 30 s, halving at 500), the stats say so and the card shows the
//     mode, the rate's reason and the TTL in force;
//   - every control in a queue card has an accessible name, unique on the page, naming its
//     queue ("Pause admission of queue drop"); axe-core finds no serious violation;
//   - at 375 px the page does not scroll sideways (tables stack).
func TestBrowserOperatorsConfirmAndNames(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "ops-confirm", 90*time.Second, nil)
	for _, q := range []string{"drop", "later"} {
		mustAdmin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"rate_per_second": 5})
	}
	// A product, so the products table is on the page at 375 px too.
	mustAdmin(t, in, "PUT", "/admin/api/products/trail-shoe-limited-edition", map[string]any{"name": "Trail shoe, limited edition", "price": 12900, "stock": 5, "queue": "drop"})
	var inv struct {
		Invites []struct {
			Code string `json:"code"`
		} `json:"invites"`
	}
	if res := call(t, "POST", in.url+"/admin/api/queues/drop/invites", adminToken, map[string]any{"count": 1, "lane": "priority"}, &inv); res.StatusCode != 201 && res.StatusCode != 200 || len(inv.Invites) != 1 {
		t.Fatalf("create an invite: %d %+v", res.StatusCode, inv)
	}
	code := inv.Invites[0].Code
	b := startBrowser(t, ctx)
	adm := opsSignIn(t, b, in, "admin", adminToken)
	adm.waitJS("both cards", 10*time.Second, dropCard("drop")+` !== null && `+dropCard("later")+` !== null`)
	// Every chart is named as soon as it is on the page, before its history arrives.
	if unnamed := adm.eval(`String([...document.querySelectorAll('svg[role=img]')].filter((s) => !s.getAttribute('aria-label')).length)`); unnamed != "0" {
		t.Fatalf("%s charts without a name right after the cards appeared", unnamed)
	}
	card := `[data-testid=queue-card][data-queue=drop] `

	// 1. Pause: Cancel changes nothing, Confirm pauses, Resume asks nothing.
	opsClick(adm, card+`[data-testid=toggle-pause]`)
	text := opsDialog(adm, "drop", false)
	if msg := adm.eval(dropCard("drop") + `.querySelector('[data-testid=queue-msg]').textContent`); msg != "" {
		t.Fatalf("after Cancel the card says %q: a change was sent", msg)
	}
	if paused, _ := opsQueueState(t, in, "drop"); paused {
		t.Fatal("drop is paused after Cancel")
	}
	t.Logf("pause asked %q; Cancel left drop running", text)
	opsClick(adm, card+`[data-testid=toggle-pause]`)
	opsDialog(adm, "drop", true)
	testwait.For(t, 10*time.Second, "drop paused", func() bool { p, _ := opsQueueState(t, in, "drop"); return p })
	adm.waitJS("the Resume button", 10*time.Second, dropCard("drop")+`.querySelector('[data-testid=toggle-pause]').getAttribute('aria-label') === 'Resume admission of queue drop'`)
	opsClick(adm, card+`[data-testid=toggle-pause]`)
	testwait.For(t, 10*time.Second, "drop resumed", func() bool { p, _ := opsQueueState(t, in, "drop"); return !p })
	if adm.eval(`String(document.getElementById('confirm-dialog').open)`) != "false" {
		t.Fatal("resuming asked for confirmation")
	}

	// 2. Close: Cancel keeps the queue open.
	opsClick(adm, card+`[data-testid=toggle-closed]`)
	opsDialog(adm, "drop", false)
	if _, closed := opsQueueState(t, in, "drop"); closed {
		t.Fatal("drop is closed after Cancel")
	}

	// 3. Revoke an invite code: Cancel keeps it, Confirm revokes it.
	opsClick(adm, card+`[data-testid=invites-toggle]`)
	row := fmt.Sprintf(`%s.querySelector('tr[data-code="%s"]')`, dropCard("drop"), code)
	adm.waitJS("the code's row", 10*time.Second, row+` !== null`)
	revoke := fmt.Sprintf(`%s[data-testid=invites] tr[data-code="%s"] [data-testid=invite-revoke]`, card, code)
	if name := adm.eval(row + `.querySelector('[data-testid=invite-revoke]').getAttribute('aria-label')`); !strings.Contains(name, code) || !strings.Contains(name, "queue drop") {
		t.Errorf("the revoke button is named %q, want the code and the queue", name)
	}
	opsClick(adm, revoke)
	opsDialog(adm, code, false)
	listed := func() bool {
		var l struct {
			Invites []struct {
				Code string `json:"code"`
			} `json:"invites"`
		}
		call(t, "GET", in.url+"/admin/api/queues/drop/invites", adminToken, nil, &l)
		for _, i := range l.Invites {
			if i.Code == code {
				return true
			}
		}
		return false
	}
	if !listed() {
		t.Fatal("the code is gone after Cancel")
	}
	opsClick(adm, revoke)
	opsDialog(adm, code, true)
	testwait.For(t, 10*time.Second, "the code revoked", func() bool { return !listed() })

	// 4. Rotate the signing key: Cancel keeps the keys, Confirm adds one.
	var kids map[string]bool
	keys := func() (int, int) {
		var k struct {
			Keys []struct {
				Kid string `json:"kid"`
			} `json:"keys"`
		}
		res := call(t, "GET", in.url+"/admin/api/keys", adminToken, nil, &k)
		kids = map[string]bool{}
		for _, key := range k.Keys {
			kids[key.Kid] = true
		}
		return res.StatusCode, len(k.Keys)
	}
	status, before := keys()
	was := kids
	switch status {
	case 200:
		adm.waitJS("the keys listed", 10*time.Second, fmt.Sprintf(`document.querySelectorAll('#keys-rows tr').length === %d`, before))
		adm.click("keys-rotate")
		opsDialog(adm, "signing key", false)
		if _, n := keys(); n != before {
			t.Fatalf("keys after Cancel: %d, want %d", n, before)
		}
		adm.click("keys-rotate")
		opsDialog(adm, "signing key", true)
		// A rotation adds a key (and drops keys retired long enough ago): a new kid appears.
		var now int
		testwait.For(t, 10*time.Second, "a new key", func() bool {
			_, now = keys()
			for kid := range kids {
				if !was[kid] {
					return true
				}
			}
			return false
		})
		adm.waitJS("the new key listed", 10*time.Second, fmt.Sprintf(`document.querySelectorAll('#keys-rows tr').length === %d`, now))
	case 404:
		adm.waitJS("rotation offered only with signing keys", 10*time.Second, `document.getElementById('keys-rotate').disabled &&
			document.getElementById('keys-msg').textContent !== ''`)
	default:
		t.Fatalf("GET /admin/api/keys: %d", status)
	}

	// 5. A refused setting: the server's sentence next to the field it names.
	// A person's pick fires input and change (the dashboard keeps an edited form from live
	// updates on input; with change alone a live update re-applied "fixed" on a busy machine).
	adm.eval(`(() => { const s = document.getElementById('q-drop-rate_mode'); s.value = 'auto';
		s.dispatchEvent(new Event('input', {bubbles: true})); s.dispatchEvent(new Event('change', {bubbles: true})); return ''; })()`)
	adminUIRetype(adm, "q-drop-auto_min", "50")
	adminUIRetype(adm, "q-drop-auto_max", "10")
	adm.click("q-drop-save")
	adm.waitJS("the field error on auto_max", 10*time.Second, `(() => {
		const input = document.getElementById('q-drop-auto_max');
		const slot = document.getElementById(input.getAttribute('aria-describedby') || 'none');
		return input.getAttribute('aria-invalid') === 'true' && slot !== null && !slot.hidden && slot.textContent.includes('auto_max must be');
	})()`)
	msg := adm.eval(dropCard("drop") + `.querySelector('[data-testid=queue-msg]').textContent`)
	if strings.Contains(msg, "invalid_") || strings.Contains(adm.eval(`document.getElementById('q-drop-auto_max-error').textContent`), "invalid_") {
		t.Errorf("a raw error code is shown: %q", msg)
	}
	t.Logf("refused auto_max 10 < auto_min 50: %q next to the field, %q in the card", adm.eval(`document.getElementById('q-drop-auto_max-error').textContent`), msg)
	var st opsRateStats
	if st = opsRate(t, in, "drop"); st.RateMode != "fixed" || st.AutoMin == 50 {
		t.Fatalf("after the refused save: rate_mode %q auto_min %v, want fixed and unchanged", st.RateMode, st.AutoMin)
	}

	// The same form saved right: auto mode between 50 and 80, an adaptive TTL; the card
	// shows the mode and the TTL in force from the stats.
	adminUIRetype(adm, "q-drop-auto_max", "80")
	adminUIRetype(adm, "q-drop-token_ttl_min_seconds", "30")
	adminUIRetype(adm, "q-drop-token_ttl_halve_at", "500")
	adm.click("q-drop-save")
	adm.waitJS("drop saved in auto mode", 10*time.Second, dropCard("drop")+`.querySelector('[data-testid=queue-msg]').dataset.state === 'ok'`)
	st = opsRate(t, in, "drop")
	if st.RateMode != "auto" || st.AutoMin != 50 || st.AutoMax != 80 || st.TokenTTLMin != 30 || st.HalveAt != 500 {
		t.Fatalf("GET /admin/api/stats after the save: %+v", st)
	}
	adm.waitJS("the card's rate line and TTL", 10*time.Second, fmt.Sprintf(`(() => {
		const c = %s;
		return c.querySelector('[data-testid=rate-mode]').dataset.value === 'auto' &&
			c.querySelector('[data-testid=ttl-effective]').dataset.value === '%d' &&
			c.querySelector('[data-testid=ttl-effective]').textContent.includes('adaptive');
	})()`, dropCard("drop"), st.TTLEffective))
	t.Logf("auto mode saved: card says %q, TTL now %q", adm.eval(dropCard("drop")+`.querySelector('[data-testid=rate-mode]').textContent`),
		adm.eval(dropCard("drop")+`.querySelector('[data-testid=ttl-effective]').textContent`))

	// 6. Accessible names: present, unique, naming the queue.
	names := adm.eval(`(() => {
		const seen = new Map(); const bad = [];
		for (const e of document.querySelectorAll('[data-testid=queue-card] :is(input, select, textarea, button, a[href], summary)')) {
			const n = e.getAttribute('aria-label') || '';
			const q = e.closest('[data-testid=queue-card]').dataset.queue;
			if (!n.endsWith('of queue ' + q) && !n.includes('queue ' + q)) bad.push('not naming its queue: ' + (n || e.outerHTML.slice(0, 80)));
			if (seen.has(n)) bad.push('twice: ' + n);
			seen.set(n, true);
		}
		return bad.length ? bad.join('\n') : 'ok ' + seen.size;
	})()`)
	if !strings.HasPrefix(names, "ok ") {
		t.Errorf("accessible names in the queue cards:\n%s", names)
	}
	for _, want := range []string{"Pause admission of queue later", "Save settings of queue drop", "Report of queue drop"} {
		if adm.eval(fmt.Sprintf(`String([...document.querySelectorAll('[aria-label]')].some((e) => e.getAttribute('aria-label') === %q))`, want)) != "true" {
			t.Errorf("no control named %q", want)
		}
	}
	t.Logf("queue cards' controls: %s unique names", strings.TrimPrefix(names, "ok "))
	axe, err := os.ReadFile(axePath(t))
	if err != nil {
		t.Fatal(err)
	}
	if bad := axeCheck(t, adm, string(axe), "operators dashboard"); len(bad) > 0 {
		t.Errorf("axe-core: %d serious or critical violations:\n%s", len(bad), strings.Join(bad, "\n"))
	}

	// 7. 375 px wide: nothing scrolls sideways.
	adm.do("375 px viewport", 5*time.Second, chromedp.EmulateViewport(375, 800))
	adm.waitJS("no horizontal scroll at 375 px", 5*time.Second, `window.innerWidth === 375 && document.documentElement.scrollWidth <= 375 &&
		document.querySelector('tr[data-product="trail-shoe-limited-edition"]') !== null &&
		document.querySelectorAll('#audit-rows tr').length > 0 && `+dropCard("drop")+`.querySelector('details.invites').open`)
	adm.screenshot(shotDir(t), "admin-375")
	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
}

// opsHistory is GET …/history's answer as the tests read it.
type opsHistory struct {
	Step   int64 `json:"step_seconds"`
	Points []struct {
		T       string `json:"t"`
		Waiting int64  `json:"waiting"`
	} `json:"points"`
}

// opsChart reads what a history chart of queue drop drew: its points' times and the first
// series' values.
func opsChart(p *browserPage, key string) (times, values string) {
	p.t.Helper()
	svg := dropCard("drop") + `.querySelector('[data-testid=chart-` + key + `]')`
	return p.eval(svg + `.dataset.times`), p.eval(svg + `.dataset.values`)
}

// TestBrowserOperatorsHistory: queue drop admits 3 people per second out of a line of 60
// for a few 10-s steps. The card's charts draw the history API's points on a time axis
// with ticks (x in local time, y with numbers); the page's points are those the API
// answers for the page's own query, and after a reload the same points come back (the
// history is the source); hovering a point and moving along with the arrow keys show its
// values; a step with no point breaks the line (no line drawn across a gap). Then a
// screenshot.
func TestBrowserOperatorsHistory(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "ops-history", 90*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 3, "places_per_ip": 0})
	joinUsers(t, in, "drop", 60, 16)
	var h opsHistory
	testwait.For(t, 45*time.Second, "two recorded steps of drop", func() bool {
		call(t, "GET", in.url+"/admin/api/queues/drop/history", adminToken, nil, &h)
		return len(h.Points) >= 2
	})
	t.Logf("history: %d points, step %d s", len(h.Points), h.Step)

	b := startBrowser(t, ctx)
	adm := opsSignIn(t, b, in, "admin", adminToken)
	drawn := dropCard("drop") + `.querySelector('[data-testid=chart-waiting]')`
	adm.waitJS("drop's charts", 10*time.Second, drawn+` !== null && Number(`+drawn+`.dataset.points) >= 2`)

	// The page's points are the API's answer to the page's own query (re-read until both
	// saw the same recorded steps: a step may be written between the two reads).
	same := func(p *browserPage) (string, string) {
		var times, values string
		testwait.For(t, 60*time.Second, "the page's points equal the API's", func() bool {
			q := p.eval(dropCard("drop") + `.querySelector('[data-testid=history]').dataset.query`)
			times, values = opsChart(p, "waiting")
			var api opsHistory
			call(t, "GET", in.url+"/admin/api/queues/drop/history"+q, adminToken, nil, &api)
			var ts, vs []string
			for _, pt := range api.Points {
				tm, err := time.Parse(time.RFC3339, pt.T)
				if err != nil {
					t.Fatalf("point time %q: %v", pt.T, err)
				}
				ts = append(ts, tm.UTC().Format("2006-01-02T15:04:05.000Z"))
				vs = append(vs, strconv.FormatInt(pt.Waiting, 10))
			}
			return strings.Join(ts, ",") == times && strings.Join(vs, ",") == values
		})
		return times, values
	}
	times1, values1 := same(adm)
	ticks := adm.eval(`[...` + drawn + `.querySelectorAll('.tick-x')].map((e) => e.textContent).join('|') + ' / ' + [...` + drawn + `.querySelectorAll('.tick-y')].map((e) => e.textContent).join('|')`)
	parts := strings.Split(ticks, " / ")
	if len(strings.Split(parts[0], "|")) < 2 || len(strings.Split(parts[1], "|")) < 2 || !strings.Contains(parts[0], ":") {
		t.Fatalf("axis ticks %q: want at least two local times on x and two numbers on y", ticks)
	}
	t.Logf("waiting chart: %d points, ticks %s", len(strings.Split(times1, ",")), ticks)

	// Hover the last point: the readout shows its time and value.
	times := strings.Split(times1, ",")
	values := strings.Split(values1, ",")
	last := len(times) - 1
	xy := adm.eval(fmt.Sprintf(`(() => { const s = %s; s.scrollIntoView({block: 'center'});
		const [from, to, ml, pw, w] = s.dataset.plot.split(',').map(Number); const r = s.getBoundingClientRect();
		const x = r.left + (ml + (Date.parse(%q) - from) / (to - from) * pw) * r.width / w;
		return x.toFixed(1) + ',' + (r.top + r.height / 2).toFixed(1); })()`, drawn, times[last]))
	var x, y float64
	fmt.Sscanf(xy, "%f,%f", &x, &y)
	adm.do("hover the last point", 5*time.Second, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x, y))
	adm.waitJS("the hovered point's values", 5*time.Second, drawn+`.dataset.selected === `+strconv.Quote(times[last]))
	readout := adm.eval(dropCard("drop") + `.querySelector('[data-testid=readout-waiting]').textContent`)
	if !strings.Contains(readout, "Waiting "+values[last]) {
		t.Fatalf("hover readout %q, want Waiting %s", readout, values[last])
	}
	t.Logf("hover at %s: %q", times[last], readout)
	// Keyboard: the chart takes the focus; ← moves to the previous point.
	adm.eval(`(() => { ` + drawn + `.focus(); return String(document.activeElement === ` + drawn + `); })()`)
	adm.waitJS("the focused chart shows the last point", 5*time.Second, drawn+`.dataset.selected === `+strconv.Quote(times[last]))
	adm.do("press ←", 5*time.Second, chromedp.KeyEvent(kb.ArrowLeft))
	adm.waitJS("the previous point by keyboard", 5*time.Second, drawn+`.dataset.selected === `+strconv.Quote(times[last-1]))
	t.Logf("← : %q", adm.eval(dropCard("drop")+`.querySelector('[data-testid=readout-waiting]').textContent`))

	// The range buttons: 7 days asks for 1,680-s steps (≤ 360 points), 15 min for 10-s steps;
	// each time the chart holds the API's answer to the page's query.
	rangeBtn := func(secs string) string {
		return `[data-testid=queue-card][data-queue=drop] [data-testid=history-range] [data-range="` + secs + `"]`
	}
	query := dropCard("drop") + `.querySelector('[data-testid=history]').dataset.query`
	opsClick(adm, rangeBtn("604800"))
	adm.waitJS("the 7-day query", 10*time.Second, query+`.endsWith('&step=1680') && `+
		`document.querySelector('`+rangeBtn("604800")+`').getAttribute('aria-pressed') === 'true'`)
	week, _ := same(adm)
	t.Logf("7 d: query %s, %d points", adm.eval(query), len(strings.Split(week, ",")))
	opsClick(adm, rangeBtn("900"))
	adm.waitJS("the 15-minute query", 10*time.Second, query+`.endsWith('&step=10')`)
	same(adm)
	adm.screenshot(shotDir(t), "admin-history")

	// 2. After a reload the same recorded steps are drawn with the same values (the default
	// range again: the last hour).
	adm.navigate(in.url + "/admin")
	adm.waitJS("drop's charts after the reload", 15*time.Second, drawn+` !== null && Number(`+drawn+`.dataset.points) >= 2`)
	times2, values2 := same(adm)
	got := map[string]string{}
	for i, tm := range strings.Split(times2, ",") {
		got[tm] = strings.Split(values2, ",")[i]
	}
	for i, tm := range times {
		if v, ok := got[tm]; !ok || v != values[i] {
			t.Fatalf("after the reload the point at %s is %q (present %v), before it was %q", tm, v, ok, values[i])
		}
	}
	t.Logf("after the reload: %d points, the %d from before unchanged", len(got), len(times))

	// 3. A step with no point is a gap: two runs, and a lone point drawn as a dot.
	gap := adm.eval(`(() => {
		const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
		svg.setAttribute('class', 'hchart-svg'); document.getElementById('main').append(svg);
		const t0 = Date.parse('2026-01-01T10:00:00Z'), s = 10000;
		const pts = [0, 1, 2, 6, 9].map((i) => ({t: t0 + i * s, v: i + 1}));
		window.WaitRoomCharts.lineChart(svg, {from: t0, to: t0 + 12 * s, step: s, points: pts, series: [{label: 'v', value: (p) => p.v}]});
		const r = svg.dataset.segments + ' ' + (svg.querySelector('path.series').getAttribute('d').match(/M/g) || []).length + ' ' + svg.querySelectorAll('circle.series-dot').length;
		svg.remove(); return r; })()`)
	if gap != "3 1 2" {
		t.Fatalf("points at steps 0,1,2,6,9: segments, M commands, lone dots = %q, want \"3 1 2\" (one line over 0–2, dots at 6 and 9)", gap)
	}
	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
}
