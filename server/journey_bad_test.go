package main

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// badFreeze is how long J6 keeps the server frozen.
const badFreeze = 20 * time.Second

// TestJourneyBadMoments is J6, the bad moments of a buyer, on one server run as a child
// process (so it can be frozen) with WR_STREAMS_PER_IP=2; every browser is on 127.0.0.1:
//   - ana is admitted with a 20-s token and opens the order page; the token lapses there
//     (during the 20-s freeze below, which begins after her order page is up);
//   - ben waits while the server is frozen for 20 s (SIGSTOP): the page says "Connection lost
//     — reconnecting…" and greys the numbers (light and dark, 1280 and 375 px), then live
//     again after SIGCONT; ana's order page has meanwhile said that her token expired;
//   - dee waits in a line that ends in a few seconds, behind an ETA that passes the end: the
//     page shows the end time and warns, then says the sale ended;
//   - with ben's and eve's streams open, fay's page is refused a third stream: it says why and
//     polls; eve leaves (the confirmation, by keyboard: Escape stays, Tab + Enter leaves) and
//     fay's polled position moves up;
//   - hal's line sells out while he waits: no rate and no ETA any more;
//   - gil reads the index with a queue in each of the six states and opens an ended one.
func TestJourneyBadMoments(t *testing.T) {
	t.Parallel() // journeys overlap their waits (see scripts/test.sh: -parallel)
	began := time.Now()
	// The deadline is a guard for a machine under load, not the budget.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := os.Stat(chromiumBin); err != nil {
		t.Fatalf("headless Chromium is required at %s: %v", chromiumBin, err)
	}
	rs := redistest.Start(t)
	in := startProcess(t, "bad", baseEnv(rs.URL(), testDB(t), map[string]string{
		"WR_HEARTBEAT": "1s", "WR_STREAMS_PER_IP": "2",
	}))
	t.Cleanup(func() { _ = in.cmd.Process.Signal(syscall.SIGCONT) }) // never leave it stopped
	j := newJourney(t, ctx)
	t.Logf("server (built and started) and browser up after %v", time.Since(began).Round(time.Millisecond))

	// (c) The token lapses on the order page: ana is let in at once (nobody ahead) with a
	// 20-s token; her order page counts it down while the rest of the journey goes on. The
	// freeze below lasts 20 s and begins after her order page is up, so the token has lapsed
	// by the time the test looks, however slowly the machine ran until then.
	mustAdmin(t, in, "PUT", "/admin/api/queues/bad", map[string]any{"rate_per_second": 5, "token_ttl_seconds": 20})
	mustAdmin(t, in, "PUT", "/admin/api/products/bad-tee", map[string]any{"name": "Tee", "price": 2500, "stock": 5, "queue": "bad"})
	ana := j.person("ana", journeyDesktop)
	ana.navigate(in.url + "/q/bad?lang=en")
	ana.waitJS("ana admitted", 15*time.Second, `!document.getElementById('admitted').hidden`)
	ana.click("go-order")
	ana.waitJS("ana's order page with her token", 10*time.Second, `location.pathname === '/q/bad/order' &&
		document.getElementById('token-state').dataset.state === 'valid'`)

	// (a) The server frozen 20 s: ben's page goes stale, then live again.
	mustAdmin(t, in, "PUT", "/admin/api/queues/frozen", map[string]any{"rate_per_second": 1, "paused": true})
	dropJoinAPI(t, in, "frozen")
	ben := j.person("ben", journeyPhone)
	ben.navigate(in.url + "/q/frozen?lang=en")
	ben.waitJS("ben live at 2nd", 15*time.Second, `document.getElementById('conn-state').dataset.state === 'live' &&
		document.getElementById('position').dataset.position === '2' && document.getElementById('updated').textContent === 'updated just now'`)
	// The page learns the ping interval from two pings (1 s apart): then it is stale after 5 s.
	ben.waitJS("ben's page knows the ping interval", 10*time.Second, `Number(document.getElementById('room').dataset.staleAfterMs) >= 5000 && Number(document.getElementById('room').dataset.staleAfterMs) < 20000 &&
		document.getElementById('room').dataset.stale !== 'true'`)
	if got := ben.eval(`document.getElementById('stale').hidden ? 'hidden' : 'shown'`); got != "hidden" {
		t.Fatalf("stale shown while the server pings")
	}
	stopped := time.Now()
	if err := in.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ben.waitJS("ben's page stale", badFreeze, `(() => {
		const $ = (id) => document.getElementById(id);
		return $('room').dataset.stale === 'true' && !$('stale').hidden && $('conn-state').dataset.state === 'stale' &&
			$('room').classList.contains('is-stale');
	})()`)
	t.Logf("stale shown %v after the freeze began", time.Since(stopped).Round(100*time.Millisecond))
	if got := ben.eval(`document.getElementById('stale').textContent`); got != "Connection lost — reconnecting…" {
		t.Fatalf("stale message %q", got)
	}
	// Stale numbers are greyed (grayscale, the muted text colour, a dashed outline) rather than
	// made transparent: half-transparent text failed contrast (axe: 2.09:1, 2.62:1).
	ben.waitJS("the numbers greyed", 2*time.Second, `(() => {
		const st = getComputedStyle(document.querySelector('#waiting .stats'));
		return st.filter === 'grayscale(1)' && st.opacity === '1';
	})()`)
	j.stateMatrix(ben, "stale")
	if rest := badFreeze - time.Since(stopped); rest > 0 {
		time.Sleep(rest) // the freeze lasts its 20 s whatever the checks took
	}
	if err := in.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	ben.waitJS("ben live again", 30*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return $('room').dataset.stale === 'false' && $('stale').hidden && !$('room').classList.contains('is-stale') &&
			$('conn-state').dataset.state === 'live' && $('position').dataset.position === '2';
	})()`)
	t.Logf("live again %v after SIGCONT (frozen %v)", time.Since(resumed).Round(100*time.Millisecond), resumed.Sub(stopped).Round(100*time.Millisecond))
	j.state(ben, "recovered")

	ana.waitJS("ana's token expired on the order page", 10*time.Second, `document.getElementById('token-state').dataset.state === 'expired'`)
	j.state(ana, "order-expired")

	// (d) The end shown before it happens: three ahead at 0.1/s (an ETA of about 30-40 s)
	// in a line that ends in 6 s.
	mustAdmin(t, in, "PUT", "/admin/api/queues/late", map[string]any{"rate_per_second": 0.1, "paused": true})
	for range 3 {
		dropJoinAPI(t, in, "late")
	}
	ends := time.Now().Add(6 * time.Second).UTC().Truncate(time.Second).Add(time.Second)
	mustAdmin(t, in, "PUT", "/admin/api/queues/late", map[string]any{"ends_at": ends.Format(time.RFC3339), "paused": false})
	dee := j.person("dee", journeyDesktop)
	dee.navigate(in.url + "/q/late?lang=en")
	dee.waitJS("dee sees the end and the warning", 5*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return $('position').dataset.position === '4' && !$('ends-line').hidden && $('ends-at').dataset.local === 'true' &&
			!$('ends-warning').hidden && $('ends-warning').getAttribute('role') === 'alert';
	})()`)
	if got, want := dee.eval(`document.getElementById('ends-at').getAttribute('datetime')`), ends.Format("2006-01-02T15:04:05.000Z07:00"); got != want {
		t.Errorf("#ends-at datetime %q, want %q", got, want)
	}
	if w := dee.eval(`document.getElementById('ends-warning').textContent`); !strings.Contains(w, "may end before your turn") {
		t.Errorf("ends warning %q", w)
	}
	j.state(dee, "ends-warning")
	dee.waitJS("dee told the sale ended", 15*time.Second, `!document.getElementById('ended').hidden &&
		document.getElementById('ends-line').hidden && document.getElementById('conn-state').dataset.state === 'closed'`)
	j.state(dee, "ended")

	// (b) The per-address stream cap: ben's and eve's streams are this address's two; fay's
	// page is refused a third, says why, and follows her place by polling.
	mustAdmin(t, in, "PUT", "/admin/api/queues/cap", map[string]any{"rate_per_second": 1, "paused": true})
	for range 2 {
		dropJoinAPI(t, in, "cap")
	}
	eve := j.person("eve", journeyPhone)
	eve.navigate(in.url + "/q/cap?lang=en")
	eve.waitJS("eve live at 3rd", 10*time.Second, `document.getElementById('conn-state').dataset.state === 'live' &&
		document.getElementById('position').dataset.position === '3'`)
	testwait.For(t, 15*time.Second, "two streams open (ben's and eve's)", func() bool { return badStreams(t, in) == 2 })
	fay := j.person("fay", journeyDesktop)
	fay.navigate(in.url + "/q/cap?lang=en")
	fay.waitJS("fay told why she polls", 15*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return !$('stream-limit').hidden && $('stream-limit').dataset.every === '1' &&
			$('conn-state').dataset.state === 'polling' && $('position').dataset.position === '4';
	})()`)
	for _, want := range []string{"Too many pages from your network", "Your place is kept", "updates come every 1 s"} {
		if got := fay.eval(`document.getElementById('stream-limit').textContent`); !strings.Contains(got, want) {
			t.Errorf("stream-limit text %q lacks %q", got, want)
		}
	}
	if got := fay.eval(`document.getElementById('conn-state').textContent`); got != "Updating every 1 s" {
		t.Errorf("connection label while polling %q", got)
	}
	j.state(fay, "stream-limit")

	// Leaving asks first, by keyboard: eve's Leave opens the dialog with "Stay in line"
	// focused; Escape keeps her place; Tab to "Leave the line" and Enter leaves.
	eve.click("leave")
	eve.waitJS("the leave dialog, Stay focused", 5*time.Second, `document.getElementById('leave-dialog').open &&
		document.activeElement === document.getElementById('leave-cancel')`)
	j.state(eve, "leave-confirm")
	eve.do("Escape", 5*time.Second, chromedp.KeyEvent(kb.Escape))
	eve.waitJS("eve still in line", 5*time.Second, `!document.getElementById('leave-dialog').open &&
		!document.getElementById('waiting').hidden && document.getElementById('position').dataset.position === '3' &&
		document.activeElement === document.getElementById('leave')`)
	eve.do("Enter on Leave", 5*time.Second, chromedp.KeyEvent(kb.Enter))
	eve.waitJS("the dialog again", 5*time.Second, `document.getElementById('leave-dialog').open`)
	eve.do("Tab, Enter", 5*time.Second, chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Enter))
	eve.waitJS("eve left", 5*time.Second, `!document.getElementById('left').hidden && document.getElementById('leave-dialog').open === false`)
	// fay's polled place moves up (eve left from ahead of her).
	fay.waitJS("fay's place moves while polling", 10*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return $('position').dataset.position === '3' && !$('stream-limit').hidden && $('conn-state').dataset.state === 'polling';
	})()`)
	j.state(fay, "polling-moved")

	// Sold out while waiting: the line lets nobody in, so the page shows no rate and no ETA
	// (it kept showing "Let in right now 0.2 per second").
	// One let in per 20 s with five ahead: hal waits ~100 s before his turn, more than a busy
	// machine takes to open his page (at 0.2/s a slow page load found him admitted).
	mustAdmin(t, in, "PUT", "/admin/api/queues/gone", map[string]any{"rate_per_second": 0.05})
	mustAdmin(t, in, "PUT", "/admin/api/products/gone-cap", map[string]any{"name": "Cap", "price": 1500, "stock": 3, "queue": "gone"})
	for range 5 {
		dropJoinAPI(t, in, "gone")
	}
	hal := j.person("hal", journeyPhone)
	hal.navigate(in.url + "/q/gone?lang=en")
	hal.waitJS("hal waits behind the five with a rate", 10*time.Second, `!document.getElementById('waiting').hidden &&
		Number(document.getElementById('position').dataset.position) >= 2 && Number(document.getElementById('position').dataset.position) <= 6 &&
		document.getElementById('rate').dataset.stopped === 'false' && document.getElementById('rate').dataset.value !== ''`)
	mustAdmin(t, in, "PUT", "/admin/api/products/gone-cap", map[string]any{"name": "Cap", "price": 1500, "stock": 0, "queue": "gone"})
	hal.waitJS("sold out: no rate, no ETA", 10*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return !$('sold-out').hidden && $('rate').dataset.stopped === 'true' && $('rate').textContent === 'Nobody right now' &&
			$('eta').textContent === 'Sold out';
	})()`)
	j.state(hal, "sold-out")

	// The index: a queue in each of the six states; only open, paused and scheduled offer a
	// join. An ended queue's page says it ended.
	want := setIndexStates(t, in, rs)
	gil := j.person("gil", journeyPhone)
	gil.navigate(in.url + "/?lang=en")
	gil.waitJS("the index's local times", 5*time.Second, `document.querySelectorAll('time.local-time[data-local=true]').length >= 3`)
	for name, state := range want {
		got := gil.eval(`(() => {
			const li = document.querySelector('[data-testid=queue-item][data-queue="` + name + `"]');
			return li ? li.dataset.state + (li.querySelector('[data-testid=queue-link]') ? '+link' : '') : 'missing';
		})()`)
		wantGot := state
		if state == "open" || state == "paused" || state == "scheduled" {
			wantGot += "+link"
		}
		if got != wantGot {
			t.Errorf("index entry %s: %q, want %q", name, got, wantGot)
		}
	}
	j.state(gil, "index")
	gil.navigate(in.url + "/q/s-ended?lang=en")
	gil.waitJS("the ended page", 5*time.Second, `document.getElementById('join-error').dataset.reason === 'queue_ended' &&
		document.getElementById('ends-at').dataset.local === 'true'`)
	j.state(gil, "ended-page")

	logServerErrors(t, in)
	t.Logf("J6 took %v (the freeze %v of it)", time.Since(began).Round(time.Millisecond), badFreeze)
}

// badStreams is the number of open streams the server reports.
func badStreams(t *testing.T, in *instance) int64 {
	t.Helper()
	var st struct {
		Total int64 `json:"sse_connections_total"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
	return st.Total
}
