package main

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
)

// noScripts turns JavaScript off in the person's tab for every document it loads from now
// on (DevTools' Emulation.setScriptExecutionDisabled: the page's scripts do not run and
// <noscript> is parsed as markup, as with scripts off in the browser's settings; the
// test's own evaluations still run, but page timers do not fire).
func (p *journeyPerson) noScripts() {
	p.t.Helper()
	p.scriptsOff = true
	p.setScripts(false)
}

// setScripts turns the tab's script execution on or off.
func (p *journeyPerson) setScripts(on bool) {
	p.t.Helper()
	cdpDo(p.browserPage, fmt.Sprintf("scripts on: %v", on), emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !on})
}

// TestJourneyNoScript (the waiting room without JavaScript): Ana's browser runs no scripts.
// The waiting page hides its live part and offers a join form; she joins by it and lands
// on the server-rendered place page: her number (3: two people wait ahead of her), the
// people ahead and the ETA, and a refresh within the bounds (5 s at least, under the
// presence grace of 30 s; the page reloads by its answer's Refresh header). Someone ahead leaves; the page refreshes by itself and shows 2.
// She outlives the grace: each refresh is a sign of life. The line moves: a refresh shows
// her turn with the link to the order page, which says that buying needs scripts; with
// scripts turned on, the same page finds her token through the ticket cookie and she buys. A queue
// with proof of work says that it needs scripts and offers no form. Min joins behind her on a
// phone, in Korean. axe runs at every state; screenshots at 1280 px (join, position, turn,
// order, proof of work) and Min's at 375 px.
func TestJourneyNoScript(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "journey-nojs", 120*time.Second, map[string]string{"WR_GRACE": "30s"})
	// One admitted buyer holds the line's only active place (max_active 1): the people who
	// join after wait until the cap is lifted.
	admittedUsers(t, in, "line", 1)
	mustAdmin(t, in, "PUT", "/admin/api/queues/line", map[string]any{"max_active": 1, "rate_per_second": 50, "token_ttl_seconds": 300})
	mustAdmin(t, in, "PUT", "/admin/api/queues/hard", map[string]any{"pow_difficulty": 12})
	mustAdmin(t, in, "PUT", "/admin/api/products/scarf", map[string]any{"name": "Wool scarf", "price": 3900, "currency": "EUR", "stock": 10, "queue": "line"})
	ahead := joinUsers(t, in, "line", 2, 2)
	// The person ahead who leaves in step 3 keeps a stream open until then: on a busy machine
	// the steps before it can outlast the grace (30 s), and a place with no sign of life is
	// dropped before it could be given up (seen: "leave: 404"). The other one gives none.
	if s, res := openStream(t, in.url+"/api/queues/line/stream", ahead[0], ""); s == nil {
		t.Fatalf("the stream of the person ahead: %v", res)
	}

	j := newJourney(t, ctx)
	ana := j.person("ana", journeyDesktop)
	ana.noScripts()
	dir := shotDir(t)

	// 1. The waiting page: the live part hidden, the no-script join shown.
	ana.navigate(in.url + "/q/line?lang=en")
	ana.waitJS("the no-script join shown, the live part hidden", 10*time.Second, `(() => {
		const join = document.getElementById('nojs-join-form'), room = document.getElementById('room');
		return !!join && join.getClientRects().length > 0 && room.getClientRects().length === 0 &&
			document.getElementById('conn-state').dataset.state === 'connecting';
	})()`)
	j.state(ana, "join")
	ana.screenshot(dir, "nojs-join-1280")

	// 2. She joins by the form: the server-rendered place, number 3, two ahead, an ETA.
	ana.activate("#nojs-join-form button")
	ana.waitJS("the place page", 15*time.Second, `location.pathname === '/q/line/place' &&
		document.getElementById('place').dataset.state === 'waiting' &&
		document.querySelector('#place-position .position').dataset.position === '3' &&
		document.getElementById('place-ahead').textContent === '2' &&
		document.getElementById('place-eta').textContent.trim() !== ''`)
	refresh, err := strconv.Atoi(ana.eval(`document.getElementById('place').dataset.refresh`))
	if err != nil || refresh < 5 || refresh >= 30 {
		t.Fatalf("refresh %q s: want at least 5 and below the grace of 30 s", ana.eval(`document.getElementById('place').dataset.refresh`))
	}
	t.Logf("the place page: %s (refresh %d s)", ana.eval(`document.getElementById('place-waiting').innerText.replace(/\s+/g, ' ')`), refresh)
	j.state(ana, "position")
	ana.screenshot(dir, "nojs-position-1280")

	// Min, on a phone in Korean, joins behind her the same way: the page in Korean, her
	// number after Ana's.
	minji := j.person("min", journeyPhone)
	minji.noScripts()
	minji.navigate(in.url + "/q/line?lang=ko")
	minji.activate("#nojs-join-form button")
	minji.waitJS("Min's place page in Korean", 15*time.Second, `location.pathname === '/q/line/place' && document.documentElement.lang === 'ko' &&
		document.getElementById('place').dataset.state === 'waiting' &&
		Number(document.querySelector('#place-position .position').dataset.position) > 1 &&
		document.getElementById('place-position').textContent.includes('내 대기 번호')`)
	j.state(minji, "position-ko")
	minji.screenshot(dir, "nojs-position-ko-375")

	// 3. Someone ahead leaves: the page refreshes by itself and shows a smaller number (2, or
	// 1 when the other person ahead, who gives no sign of life, was dropped meanwhile).
	first := ana.eval(`String(performance.timeOrigin)`)
	if res := call(t, "DELETE", in.url+"/api/queues/line/ticket", ahead[0], nil, nil); res.StatusCode != 204 {
		t.Fatalf("leave: %d", res.StatusCode)
	}
	ana.waitJS("a smaller number after a refresh", time.Duration(3*refresh)*time.Second, fmt.Sprintf(`String(performance.timeOrigin) !== %q &&
		document.getElementById('place').dataset.state === 'waiting' &&
		Number(document.querySelector('#place-position .position').dataset.position) < 3`, first))

	// 4. Past the grace: still in line (each refresh was a sign of life), while the person
	// ahead, who gave none, was dropped — she is first.
	ana.waitJS("first in line after the other place was abandoned", 90*time.Second, `document.getElementById('place').dataset.state === 'waiting' &&
		document.querySelector('#place-position .position').dataset.position === '1'`)
	j.state(ana, "first")

	// 5. The line moves: a refresh shows the turn and the link to the order page.
	mustAdmin(t, in, "PUT", "/admin/api/queues/line", map[string]any{"max_active": 0})
	ana.waitJS("the turn", time.Duration(3*refresh)*time.Second, `document.getElementById('place').dataset.state === 'admitted' &&
		document.getElementById('place-go-order').getAttribute('href') === '/q/line/order' &&
		document.querySelector('#place-until time').getAttribute('datetime') !== ''`)
	j.state(ana, "turn")
	ana.screenshot(dir, "nojs-turn-1280")

	// 6. The order page says that buying needs scripts; no buy form is shown.
	ana.click("place-go-order")
	ana.waitJS("the order page's need-scripts notice", 15*time.Second, `location.pathname === '/q/line/order' &&
		document.getElementById('nojs-order').getClientRects().length > 0 &&
		(document.getElementById('buy-form') === null || document.getElementById('buy-form').getClientRects().length === 0)`)
	j.state(ana, "order")
	ana.screenshot(dir, "nojs-order-1280")

	// 7. The turn is usable: she turns scripts on and reloads; the order page gets the token
	// through the ticket cookie (/status) and she buys.
	ana.scriptsOff = false
	ana.setScripts(true)
	ana.navigate(in.url + "/q/line/order")
	ana.waitJS("the token found, the buy button on", 15*time.Second, `document.getElementById('token-state').dataset.state === 'valid' &&
		!document.getElementById('buy').disabled`)
	ana.click("buy")
	ana.waitJS("the receipt", 15*time.Second, `!document.getElementById('receipt').hidden`)
	ana.scriptsOff = true
	ana.setScripts(false)

	// 8. Scripts off again: a queue with proof of work: it needs scripts, and there is no form to join.
	ana.navigate(in.url + "/q/hard?lang=en")
	ana.waitJS("the proof-of-work notice", 10*time.Second, `(() => {
		const box = document.getElementById('nojs-join');
		return !!box && box.dataset.pow === 'true' && box.getClientRects().length > 0 &&
			document.getElementById('nojs-join-form') === null;
	})()`)
	j.state(ana, "pow")
	ana.screenshot(dir, "nojs-pow-1280")
}
