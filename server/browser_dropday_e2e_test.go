package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/testwait"
)

// The drop-day pages in headless Chromium: a scheduled sale's pre-queue and draw, a lottery
// and the end of a sale. Sold out while people wait is TestJourneySaleDay's (journey_saleday_test.go). Screenshots go to the test's temp dir
// and are copied to dropShotsDir for a person to look at.

// dropShotsDir is where the drop-day screenshots are copied (kept after the test).
const dropShotsDir = "/tmp/wr-shots"

// dropJoinAPI joins queue name over the API and wants status 201.
func dropJoinAPI(t *testing.T, in *instance, name string) ddPlace {
	t.Helper()
	var j ddPlace
	if res := call(t, "POST", in.url+"/api/queues/"+name+"/join", "", nil, &j); res.StatusCode != 201 {
		body, _ := io.ReadAll(res.Body)
		t.Fatalf("join %s: %d %s", name, res.StatusCode, body)
	}
	return j
}

// dropDrawJSON is GET /api/queues/{queue}/draw after the start.
type dropDrawJSON struct {
	Seed         string `json:"seed"`
	Participants int64  `json:"participants"`
}

// dropDrawn waits for queue name's published draw and returns it with the drawn order of
// draw ids (GET …/draw, GET …/draw/order).
func dropDrawn(t *testing.T, in *instance, name string) (dropDrawJSON, []string) {
	t.Helper()
	var d dropDrawJSON
	testwait.For(t, 10*time.Second, "the published draw of "+name, func() bool {
		d = dropDrawJSON{}
		call(t, "GET", in.url+"/api/queues/"+name+"/draw", "", nil, &d)
		return d.Seed != ""
	})
	res := call(t, "GET", in.url+"/api/queues/"+name+"/draw/order", "", nil, nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET draw/order: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	return d, strings.Fields(string(body))
}

// dropShots writes screenshots to the test's temp dir and copies them to dropShotsDir.
type dropShots struct {
	t   *testing.T
	dir string
}

func newDropShots(t *testing.T) *dropShots {
	t.Helper()
	if err := os.MkdirAll(dropShotsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &dropShots{t: t, dir: t.TempDir()}
}

func (s *dropShots) take(p *browserPage, name string) {
	s.t.Helper()
	if screenshotsOff() {
		return
	}
	p.screenshot(s.dir, name)
	b, err := os.ReadFile(filepath.Join(s.dir, name+".png"))
	if err == nil {
		err = os.WriteFile(filepath.Join(dropShotsDir, name+".png"), b, 0o644)
	}
	if err != nil {
		s.t.Fatalf("copy screenshot %s: %v", name, err)
	}
	s.t.Logf("screenshot copied to %s", filepath.Join(dropShotsDir, name+".png"))
}

// cdpDo runs one protocol command on the page's target.
func cdpDo[P, R any](p *browserPage, what string, cmd cdp.Command[P, R], params P) {
	p.t.Helper()
	p.do(what, 5*time.Second, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cmd, params)
		return err
	}))
}

// dropAdminPage opens the dashboard (in time zone tz when not empty) and signs in.
func dropAdminPage(t *testing.T, b *browser, in *instance, tz string) *browserPage {
	t.Helper()
	adm := b.open(t, "admin")
	if tz != "" {
		cdpDo(adm, "time zone "+tz, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: tz})
	}
	adm.navigate(in.url + "/admin")
	signInDashboard(adm, adminToken)
	adm.waitJS("the live dashboard", 10*time.Second, `!document.getElementById('dashboard').hidden &&
		document.getElementById('admin-conn').dataset.state === 'live'`)
	return adm
}

// dropCard is a JS expression for the dashboard card of queue name.
func dropCard(name string) string {
	return `document.querySelector('[data-testid=queue-card][data-queue="` + name + `"]')`
}

// TestBrowserDropDayScheduled: a scheduled sale.
//   - The admin sets the start (an hour ahead) on the dashboard, in a browser in Seoul time: the
//     datetime-local value goes out as RFC 3339 with +09:00 and the server stores that
//     instant; the card shows the draw "scheduled", the pre-queue and a countdown.
//   - A buyer whose computer clock is 7 minutes fast opens the waiting page before the
//     start: the pre-queue view counts down the true seconds to the start (the offset comes
//     from the server's clock), says how the draw works, shows the buyer's draw id (short,
//     the full id in a <details>) with a link to the published draw, and the pre-queue's
//     size.
//   - The start is moved to a few seconds ahead (the API): at the start the page switches
//     to the drawn place, which is the buyer's index in the
//     published draw order; the card says the draw is done, and a new start is refused with
//     a sentence next to the input (409 draw_done).
//   - Admission runs (rate > 0): the buyer is admitted.
func TestBrowserDropDayScheduled(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ctx, in := browserInstance(t, "dropday-scheduled", 60*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 5, "paused": true})
	b := startBrowser(t, ctx)
	shots := newDropShots(t)
	card := dropCard("drop")

	// 1. The admin schedules the start from the dashboard, in Seoul time.
	adm := dropAdminPage(t, b, in, "Asia/Seoul")
	adm.waitJS("drop's sale form", 10*time.Second, `document.getElementById('q-drop-starts_at') !== null &&
		`+card+`.querySelector('[data-field=draw]').dataset.value === 'none'`)
	// The start typed on the dashboard is an hour ahead, so nothing below races it however
	// slowly the machine runs; once the pre-queue has been seen it is moved to a few seconds
	// ahead (step 4).
	starts := time.Now().Add(time.Hour).Truncate(time.Second)
	local := starts.In(time.FixedZone("KST", 9*3600)).Format("2006-01-02T15:04:05")
	if got := adm.eval(fmt.Sprintf(`(() => { const e = document.getElementById('q-drop-starts_at');
		e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); return e.value; })()`, local)); got != local {
		t.Fatalf("starts_at input holds %q, want %q", got, local)
	}
	adm.click("q-drop-save-sale")
	adm.waitJS("the start saved", 10*time.Second, card+`.querySelector('[data-testid=sale-msg]').dataset.state === 'ok'`)
	st := ddStats(t, in, "drop")
	if st.StartsAt == nil {
		t.Fatalf("stats after the dashboard saved the start: %+v", st)
	}
	if got, err := time.Parse(time.RFC3339Nano, *st.StartsAt); err != nil || !got.Equal(starts) {
		t.Fatalf("starts_at stored %q (%v), want %s (typed %s in Seoul)", *st.StartsAt, err, starts.UTC().Format(time.RFC3339), local)
	}
	t.Logf("dashboard (Asia/Seoul) typed %s, the server stored %s", local, *st.StartsAt)

	// 2. Three buyers join over the API before the start: the pre-queue.
	for i := range 3 {
		j := dropJoinAPI(t, in, "drop")
		if j.State != "prequeue" || j.Position != nil || j.DrawID == "" || j.PrequeueSize == nil || *j.PrequeueSize != int64(i+1) {
			t.Fatalf("join %d before the start: %+v, want state prequeue, position null, a draw id, prequeue_size %d", i, j, i+1)
		}
	}

	// 3. The buyer, on a computer whose clock is 7 minutes fast, opens the waiting page.
	buyer := b.open(t, "buyer")
	cdpDo(buyer, "a clock 7 minutes fast", page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `(() => { const real = Date.now.bind(Date); Date.now = () => real() + 7 * 60 * 1000; })();`,
	})
	buyer.navigate(in.url + "/q/drop")
	buyer.waitJS("the pre-queue with its countdown, draw id and size", 10*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return !$('prequeue').hidden && $('waiting').hidden && Number($('starts-countdown').dataset.seconds) > 0 &&
			/^[0-9a-f]{16,}$/.test($('draw-id-box').dataset.drawId) && $('prequeue-size').dataset.value === '4' &&
			$('conn-state').dataset.state === 'live';
	})()`)
	if skew := buyer.eval(`String(Math.round((Date.now() - (performance.timeOrigin + performance.now())) / 60000))`); skew != "7" {
		t.Fatalf("the buyer's clock is %s minutes off, want 7", skew)
	}
	// The countdown is the true time to the start, within the second it shows and the time
	// the test took to read it.
	hi := int(math.Ceil(time.Until(starts).Seconds()))
	secs, _ := strconv.Atoi(buyer.eval(`document.getElementById('starts-countdown').dataset.seconds`))
	lo := int(math.Ceil(time.Until(starts).Seconds()))
	if secs < lo-1 || secs > hi+1 {
		t.Fatalf("countdown shows %d s to the start, want %d–%d ± 1 (the browser's clock is 7 minutes fast)", secs, lo, hi)
	}
	full := buyer.eval(`document.getElementById('draw-id-box').dataset.drawId`)
	if short, title := buyer.eval(`document.getElementById('draw-id').textContent`), buyer.eval(`document.getElementById('draw-id').title`); title != full ||
		len([]rune(short)) >= len(full) || !strings.HasPrefix(full, strings.TrimSuffix(short, "…")) {
		t.Fatalf("draw id shown as %q (title %q), full %q", short, title, full)
	}
	if got := buyer.eval(`document.getElementById('draw-verify').getAttribute('href')`); got != "/api/queues/drop/draw" {
		t.Fatalf("verification link %q", got)
	}
	if got := buyer.eval(`document.getElementById('draw-explain').textContent`); got != "The draw happens at the start: everyone who is here before then gets a random place" {
		t.Fatalf("draw explanation %q", got)
	}
	t.Logf("pre-queue: countdown %s (%d s, want %d–%d), draw id %s, %s here", buyer.eval(`document.getElementById('starts-countdown').textContent`),
		secs, lo, hi, buyer.eval(`document.getElementById('draw-id').textContent`), buyer.eval(`document.getElementById('prequeue-size').textContent`))
	buyer.eval(`(() => { document.getElementById('draw-id-box').open = true; return ''; })()`)
	shots.take(buyer, "dropday-1-prequeue")
	adm.waitJS("the card: draw scheduled, 4 in the pre-queue, counting down", 10*time.Second, `(() => {
		const c = `+card+`;
		return c.querySelector('[data-field=draw]').dataset.value === 'scheduled' &&
			c.querySelector('[data-field=prequeue]').dataset.value === '4' &&
			Number(c.querySelector('[data-field=starts_at]').dataset.seconds) > 0;
	})()`)
	shots.take(adm, "dropday-0-dashboard-scheduled")

	// 4. The start, moved to a few seconds ahead: the page shows the drawn place (the queue is
	// paused: it stays).
	starts = time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"starts_at": starts.UTC().Format(time.RFC3339)})
	buyer.waitJS("the drawn place after the start", time.Until(starts)+10*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return !$('waiting').hidden && $('prequeue').hidden && $('waiting').dataset.mode === 'line' &&
			Number($('position').dataset.position) >= 1 && !$('drawn').hidden;
	})()`)
	pos, _ := strconv.Atoi(buyer.eval(`document.getElementById('position').dataset.position`))
	t.Logf("%v after the start the buyer sees %q (place %d of 4)", time.Since(starts).Round(time.Millisecond),
		buyer.eval(`document.getElementById('position').textContent`), pos)
	shots.take(buyer, "dropday-2-drawn-position")
	d, order := dropDrawn(t, in, "drop")
	if d.Participants != 4 || !slices.Contains(order, full) || slices.Index(order, full) != pos-1 {
		t.Fatalf("the published draw: %d participants, the buyer's id %s at index %d of %v; the page shows place %d",
			d.Participants, full, slices.Index(order, full), order, pos)
	}

	// The card says the draw is done; a new start is refused, in a sentence next to the input.
	adm.waitJS("the card: draw done", 10*time.Second, card+`.querySelector('[data-field=draw]').dataset.value === 'done'`)
	later := time.Now().Add(time.Hour).In(time.FixedZone("KST", 9*3600)).Format("2006-01-02T15:04:05")
	adm.eval(fmt.Sprintf(`(() => { const e = document.getElementById('q-drop-starts_at');
		e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); return ''; })()`, later))
	adm.click("q-drop-save-sale")
	adm.waitJS("the refused start", 10*time.Second, `(() => {
		const e = document.getElementById('q-drop-starts_at');
		const slot = document.getElementById(e.getAttribute('aria-describedby') || 'none');
		return e.getAttribute('aria-invalid') === 'true' && slot !== null && !slot.hidden && slot.textContent.trim().length > 10 &&
			`+card+`.querySelector('[data-testid=sale-msg]').dataset.state === 'error';
	})()`)
	t.Logf("a new start after the draw: %q", adm.eval(`document.getElementById(document.getElementById('q-drop-starts_at').getAttribute('aria-describedby')).textContent`))
	shots.take(adm, "dropday-4-dashboard-draw-done")

	// 5. Admission runs: the buyer is admitted.
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"paused": false})
	buyer.waitJS("admitted", 10*time.Second, `!document.getElementById('admitted').hidden &&
		/^\d+:\d\d$/.test(document.getElementById('countdown').textContent)`)
	shots.take(buyer, "dropday-3-admitted")

	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}

// TestBrowserDropDayLottery: a random (lottery) queue shows no place number, only "You are
// in the draw — N waiting"; at ends_at the page says the sale has ended and stops (no
// reconnect loop); a join after the end is refused for good (423 queue_ended), and the page
// says so too.
func TestBrowserDropDayLottery(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ctx, in := browserInstance(t, "dropday-lottery", 60*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/lotto", map[string]any{"rate_per_second": 1, "paused": true, "method": "random"})
	for range 3 {
		if j := dropJoinAPI(t, in, "lotto"); j.State != "waiting" || j.Position != nil {
			t.Fatalf("join of a lottery: %+v, want state waiting and position null", j)
		}
	}
	b := startBrowser(t, ctx)
	shots := newDropShots(t)
	buyer := b.open(t, "buyer")
	buyer.navigate(in.url + "/q/lotto")
	buyer.waitJS("the lottery state", 10*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		return !$('waiting').hidden && $('waiting').dataset.mode === 'lottery' && !$('lottery').hidden &&
			$('position-line').hidden && $('position').dataset.position === '' && $('lottery-line').dataset.value === '4' &&
			$('conn-state').dataset.state === 'live';
	})()`)
	if got := buyer.eval(`document.getElementById('lottery-line').textContent`); got != "You are in the draw — 4 waiting" {
		t.Fatalf("lottery line %q", got)
	}
	if txt := buyer.eval(`document.getElementById('waiting').innerText`); strings.ContainsAny(txt, "#") ||
		strings.Contains(txt, "1st") || strings.Contains(txt, "4th") {
		t.Fatalf("the lottery view shows a place: %q", txt)
	}
	shots.take(buyer, "dropday-5-lottery")

	// The end of the sale.
	mustAdmin(t, in, "PUT", "/admin/api/queues/lotto", map[string]any{"ends_at": time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)})
	buyer.waitJS("the end of the sale", 10*time.Second, `!document.getElementById('ended').hidden &&
		document.getElementById('waiting').hidden && document.getElementById('conn-state').dataset.state === 'closed'`)
	if got := buyer.eval(`document.getElementById('ended-title').textContent`); got != "The sale has ended" {
		t.Fatalf("ended title %q", got)
	}
	shots.take(buyer, "dropday-6-ended")
	var e errResp
	if res := call(t, "POST", in.url+"/api/queues/lotto/join", "", nil, &e); res.StatusCode != 423 || e.Error.Code != "queue_ended" {
		t.Fatalf("join after the end: %d %+v, want 423 queue_ended", res.StatusCode, e)
	}
	if st := ddStats(t, in, "lotto"); !st.Ended || st.Method != "random" {
		t.Fatalf("stats after the end: %+v", st)
	}
	// The page stopped: no stream and no join retried after the end. Its clock is run five
	// minutes ahead at once: any reconnect or retry it still had scheduled (the stream's
	// reconnects back off to 30 s at most) would be a request now. The control: a request the
	// test schedules a minute ahead must be the one seen.
	buyer.eval(`(() => { setTimeout(() => fetch('/healthz'), 60000); return ''; })()`)
	reqs := buyer.fastForward(5 * time.Minute)
	if len(reqs) != 1 || !strings.HasSuffix(reqs[0], "/healthz") {
		t.Fatalf("in the 5 minutes after the end the page requested %v; want only the test's own /healthz", reqs)
	}
	// The page again (a new tab of the same browser, its clock the real one): the join is
	// refused for good and the page says the sale has ended.
	again := b.openBeside(t, buyer, "buyer-again")
	again.navigate(in.url + "/q/lotto")
	again.waitJS("the join refused after the end", 10*time.Second, `!document.getElementById('join-error').hidden &&
		document.getElementById('join-error').dataset.reason === 'queue_ended' &&
		document.getElementById('join-error-title').textContent === 'The sale has ended'`)
	shots.take(again, "dropday-7-ended-join")

	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}
