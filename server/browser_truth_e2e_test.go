package main

import (
	"context"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The buyer's page tells the truth, in headless Chromium: the
// paused state, the opt-in notification at the turn with the deadline in local time, and the
// queue's auto_redirect. A stale stream after the server froze (SIGSTOP) and its recovery are
// ben's part of TestJourneyBadMoments (journey_bad_test.go).
// Screenshots at 1280 px and 375 px go to /tmp/wr-shots/truth-*.png.

// truthQueueStats is what these tests read of a queue in GET /admin/api/stats.
type truthQueueStats struct {
	Name         string `json:"name"`
	Paused       bool   `json:"paused"`
	AutoRedirect bool   `json:"auto_redirect"`
}

func truthStats(t *testing.T, in *instance, name string) truthQueueStats {
	t.Helper()
	return statsOf[truthQueueStats](t, in, name)
}

// truthShots takes the same view at 1280 px and 375 px, then goes back to 1280 px.
func truthShots(t *testing.T, shots *dropShots, p *browserPage, name string) {
	t.Helper()
	shots.take(p, "truth-"+name+"-1280")
	p.viewport(375, 812)
	shots.take(p, "truth-"+name+"-375")
	p.viewport(1280, 900)
}

// truthRecordNotifications wraps window.Notification before the page's scripts run, so
// the test sees every notification the page creates (the permission is the real one).
func truthRecordNotifications(p *browserPage) {
	cdpDo(p, "record notifications", page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `(() => {
			const Real = window.Notification;
			if (typeof Real !== 'function') return;
			window.__notes = [];
			function Recorded(title, opts) {
				window.__notes.push({title: String(title), body: String((opts && opts.body) || '')});
				this.title = title;
			}
			Recorded.prototype.close = function () {};
			Object.defineProperty(Recorded, 'permission', {get: () => Real.permission});
			Recorded.requestPermission = (cb) => Real.requestPermission(cb);
			window.Notification = Recorded;
		})();`,
	})
}

// truthGrantNotifications grants "notifications" to origin in the page's browser context.
func truthGrantNotifications(t *testing.T, p *browserPage, origin string) {
	t.Helper()
	c := chromedp.FromContext(p.ctx)
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	if _, err := cdp.Call(ctx, c.Browser, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: cdpbrowser.PermissionSettingGranted,
		Origin: origin, BrowserContextID: c.BrowserContextID,
	}); err != nil {
		t.Fatalf("grant notifications to %s: %v", origin, err)
	}
}

// TestBrowserTruthPausedAndTurn: a buyer waits third in a paused queue: the page says
// "Admission is paused — your place is kept", the ETA says paused, "updated N s ago" ticks.
// The buyer opts in to a notification (granted in the test profile). The admin resumes: the
// paused message goes. At admission the page creates a notification and shows the deadline in
// local time.
func TestBrowserTruthPausedAndTurn(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ctx, in := browserInstance(t, "truth-paused", 90*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/truth", map[string]any{"rate_per_second": 0.2, "paused": true, "token_ttl_seconds": 300})
	for range 2 {
		dropJoinAPI(t, in, "truth")
	}
	// The full browser: the headless shell never grants notifications.
	b := startFullBrowser(t, ctx)
	shots := newDropShots(t)
	buyer := b.open(t, "buyer")
	truthGrantNotifications(t, buyer, in.url)
	truthRecordNotifications(buyer)
	buyer.navigate(in.url + "/q/truth")
	buyer.waitJS("the paused message, the place kept", 10*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return !$('waiting').hidden && $('position').dataset.position === '3' && !$('paused-note').hidden &&
			$('waiting').dataset.paused === 'true' && $('conn-state').dataset.state === 'live';
	})()`)
	if got := buyer.eval(`document.getElementById('paused-note').textContent`); got != "Admission is paused — your place is kept" {
		t.Fatalf("paused message %q", got)
	}
	if got := buyer.eval(`document.getElementById('eta').textContent`); got != "paused for now" {
		t.Fatalf("ETA while paused %q, want the paused text, not an estimate", got)
	}
	buyer.waitJS("updated N s ago ticking", 10*time.Second, `/^updated \d+ s ago$/.test(document.getElementById('updated').textContent)`)
	t.Logf("paused: %q, ETA %q, %q", buyer.eval(`document.getElementById('paused-note').textContent`),
		buyer.eval(`document.getElementById('eta').textContent`), buyer.eval(`document.getElementById('updated').textContent`))

	// The opt-in: the button, a click, and the page says it will notify.
	buyer.waitJS("the notify button", 5*time.Second, `!document.getElementById('notify-box').hidden && !document.getElementById('notify-me').hidden`)
	if got := buyer.eval(`Notification.permission`); got != "granted" {
		t.Fatalf("Notification.permission %q in the test profile, want granted", got)
	}
	buyer.click("notify-me")
	buyer.waitJS("notifications on", 5*time.Second, `document.getElementById('notify-box').dataset.state === 'on' &&
		document.getElementById('notify-me').hidden && document.activeElement === document.getElementById('notify-state')`)
	truthShots(t, shots, buyer, "paused")

	// Every title the page shows is recorded: the title flashes until the buyer has looked at
	// the page for a few seconds (every tab of the tests' shared browser has the focus), so a
	// test that reads it late could miss the flash.
	buyer.eval(`(() => {
		window.__titles = [];
		new MutationObserver(() => window.__titles.push(document.title)).observe(document.querySelector('title'), {childList: true, characterData: true, subtree: true});
		return '';
	})()`)

	// Resumed: the message goes while the buyer still waits.
	mustAdmin(t, in, "PUT", "/admin/api/queues/truth", map[string]any{"paused": false})
	buyer.waitJS("the paused message gone", 10*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return $('paused-note').hidden && $('waiting').dataset.paused === 'false' && ($('waiting').hidden || $('eta').textContent !== 'paused for now');
	})()`)
	t.Logf("resumed: ETA %q at place %s", buyer.eval(`document.getElementById('eta').textContent`), buyer.eval(`document.getElementById('position').dataset.position`))
	mustAdmin(t, in, "PUT", "/admin/api/queues/truth", map[string]any{"rate_per_second": 5})

	// The turn: a notification, the deadline in local time, the countdown.
	buyer.waitJS("admitted", 15*time.Second, `!document.getElementById('admitted').hidden &&
		/^\d+:\d\d$/.test(document.getElementById('countdown').textContent)`)
	buyer.waitJS("the notification", 5*time.Second, `Array.isArray(window.__notes) && window.__notes.length === 1`)
	title := buyer.eval(`window.__notes[0].title`)
	body := buyer.eval(`window.__notes[0].body`)
	if title != "It's your turn — truth" || !strings.HasPrefix(body, "Your turn lasts until ") {
		t.Fatalf("notification %q / %q", title, body)
	}
	deadline := buyer.eval(`document.getElementById('turn-deadline').textContent`)
	iso := buyer.eval(`document.getElementById('turn-deadline').dataset.deadline`)
	end, err := time.Parse(time.RFC3339Nano, iso)
	if err != nil || !strings.HasPrefix(deadline, "Your turn lasts until ") || end.Sub(time.Now()) < 280*time.Second || end.Sub(time.Now()) > 301*time.Second {
		t.Fatalf("deadline %q (%s, %v)", deadline, iso, err)
	}
	buyer.waitJS("the flashing title", 3*time.Second, `window.__titles.some((s) => s.startsWith('🔔'))`)
	t.Logf("admitted: notification %q / %q; %q; countdown %s", title, body, deadline, buyer.eval(`document.getElementById('countdown').textContent`))
	truthShots(t, shots, buyer, "turn")

	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}

// TestBrowserTruthAutoRedirect: the admin ticks auto_redirect on the dashboard; a buyer of
// that queue is taken to the order page by the page itself at admission, with the token in
// sessionStorage and never in the address.
func TestBrowserTruthAutoRedirect(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ctx, in := browserInstance(t, "truth-redirect", 60*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/rd", map[string]any{"rate_per_second": 5, "paused": true})
	if st := truthStats(t, in, "rd"); st.AutoRedirect {
		t.Fatalf("auto_redirect is on by default")
	}
	b := startBrowser(t, ctx)
	shots := newDropShots(t)
	adm := dropAdminPage(t, b, in, "")
	adm.waitJS("rd's card", 10*time.Second, `document.getElementById('q-rd-auto_redirect') !== null &&
		!document.getElementById('q-rd-auto_redirect').checked`)
	adm.click("q-rd-auto_redirect")
	adm.click("q-rd-save")
	adm.waitJS("saved", 10*time.Second, dropCard("rd")+`.querySelector('[data-testid=queue-msg]').dataset.state === 'ok'`)
	if st := truthStats(t, in, "rd"); !st.AutoRedirect || !st.Paused {
		t.Fatalf("stats after the dashboard ticked auto_redirect: %+v", st)
	}

	buyer := b.open(t, "buyer")
	buyer.navigate(in.url + "/q/rd")
	buyer.waitJS("waiting", 10*time.Second, `document.getElementById('position').dataset.position === '1' &&
		document.getElementById('room').dataset.autoRedirect === 'true'`)
	mustAdmin(t, in, "PUT", "/admin/api/queues/rd", map[string]any{"paused": false})
	buyer.waitJS("the order page, by itself", 15*time.Second, `location.pathname === '/q/rd/order'`)
	if href := buyer.eval(`location.href`); strings.Contains(href, "token") || strings.Contains(href, "#") {
		t.Fatalf("the token entered the address: %s", href)
	}
	if got := buyer.eval(`(JSON.parse(sessionStorage.getItem('wr_token:rd') || '{}').token || '').split('.').length + ''`); got != "3" {
		t.Fatalf("no token in sessionStorage after the redirect (%s parts)", got)
	}
	buyer.waitJS("the order page loaded", 10*time.Second, `document.readyState === 'complete' && document.getElementById('shop') !== null`)
	truthShots(t, shots, buyer, "auto-redirect-order")

	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}
