package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/testwait"
)

// The drop-day pages in headless Chromium: a lottery and the end of a sale. A scheduled
// sale's pre-queue and draw, and sold out while people wait, are TestJourneySaleDay's
// (journey_saleday_test.go). Screenshots go to the test's temp dir
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
