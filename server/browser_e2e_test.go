package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// chromiumBin is Debian's chromium-headless-shell, which scripts/test.sh installs when it is
// missing: the headless shell has no browser interface to run (no top-chrome renderers, no
// extensions), and the browser tests and journeys cost about half the CPU they cost in the
// full browser (measured: three browser tests 57 → 32 CPU-seconds in all).
const chromiumBin = "/usr/bin/chromium-headless-shell"

// fullChromiumBin is Debian's full Chromium, for the tests that need what the headless shell
// lacks: its Notification.permission stays "denied" whatever the profile grants.
const fullChromiumBin = "/usr/bin/chromium"

// TestBrowserJourney drives the pages in headless Chromium, each user in a browser
// context of its own (own cookies, own sessionStorage):
//   - alice opens the waiting page of paused queue drop behind 7 API joiners, sees her
//     position, watches it fall once admission runs, is admitted and reaches the order page;
//   - bob, right behind her, is admitted too and reaches the order page while one shoe is
//     still shown in stock; alice buys it (success, order id), then bob clicks buy (sold out);
//   - the admin dashboard counts the live SSE connections: 0, then 1 and 2 as two more
//     waiting pages open, then 1 and 0 as their tabs close (WR_HEARTBEAT=1s finds them).
//
// Screenshots of every page go to $WR_SCREENSHOTS, else screenshots/ at the repo root, in a
// directory of the test's own (screenshots/TestBrowserJourney/).
func TestBrowserJourney(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromiumBin); err != nil {
		t.Fatalf("headless Chromium is required at %s (%v): run scripts/test.sh, which installs "+
			"Debian's chromium-headless-shell, or: sudo apt-get install -y chromium-headless-shell", chromiumBin, err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a guard, not a budget
	defer cancel()

	rs := redistest.Start(t)
	env := baseEnv(rs.URL(), testDB(t), withBrowserEnv(map[string]string{"WR_HEARTBEAT": "1s"}))
	in := startInProcess(t, "web-1", env)
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 2, "paused": true})
	mustAdmin(t, in, "PUT", "/admin/api/products/shoe", map[string]any{"name": "Trail shoe", "price": 12900, "stock": 1, "queue": "drop"})
	const ahead = 7
	for i := range ahead {
		var j joinResp
		if res := call(t, "POST", in.url+"/api/queues/drop/join", "", nil, &j); res.StatusCode != 201 || j.Position != int64(i+1) {
			t.Fatalf("API join %d: status %d position %d", i, res.StatusCode, j.Position)
		}
	}
	shots := shotDir(t)
	b := startBrowser(t, ctx)
	t.Logf("server and browser up after %v", time.Since(start).Round(time.Millisecond))

	// 1. Alice and Bob open the waiting page of the paused queue.
	alice := b.open(t, "alice")
	alice.navigate(in.url + "/q/drop")
	alice.waitJS("alice's position and a live stream", 10*time.Second, `(() => {
		const p = document.getElementById('position'), c = document.getElementById('conn-state');
		return !document.getElementById('waiting').hidden && Number(p.dataset.position) > 1 &&
			c.dataset.state === 'live' && document.getElementById('eta').textContent !== '–';
	})()`)
	first := alice.position()
	if first.Pos != ahead+1 {
		t.Fatalf("alice: position %d, want %d (%d API joiners ahead)", first.Pos, ahead+1, ahead)
	}
	t.Logf("alice sees %q (data-position %d), %s ahead, ETA %s", first.Text, first.Pos, first.Ahead, first.ETA)
	alice.screenshot(shots, "1-waiting")

	bob := b.open(t, "bob")
	bob.navigate(in.url + "/q/drop")
	bob.waitJS("bob's position", 10*time.Second, `document.getElementById('position').dataset.position === '`+fmt.Sprint(ahead+2)+`' &&
		document.getElementById('conn-state').dataset.state === 'live'`)

	// 2. Admission runs: alice's position falls until she is admitted. The page itself records
	// every place it shows (a MutationObserver on #position), so none is missed however
	// slowly the test reads the page.
	alice.eval(`(() => {
		const p = document.getElementById('position');
		window.__positions = [Number(p.dataset.position) || 0];
		new MutationObserver(() => {
			const v = Number(p.dataset.position) || 0;
			if (v && v !== window.__positions[window.__positions.length - 1]) window.__positions.push(v);
		}).observe(p, {attributes: true, attributeFilter: ['data-position']});
		return '';
	})()`)
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"paused": false})
	alice.waitJS("alice's place moving", 15*time.Second, `window.__positions.length >= 2 || !document.getElementById('admitted').hidden`)
	if p := alice.position(); !p.Admitted { // the line moves: ETA and progress are live now
		t.Logf("alice sees %q, %s ahead, ETA %s", p.Text, p.Ahead, p.ETA)
		alice.screenshot(shots, "1b-waiting-moving")
	}
	alice.waitJS("alice admitted", 15*time.Second, `!document.getElementById('admitted').hidden`)
	var seen []int
	if err := json.Unmarshal([]byte(alice.eval(`JSON.stringify(window.__positions)`)), &seen); err != nil {
		t.Fatal(err)
	}
	t.Logf("alice's positions while admission ran: %v, then admitted", seen)
	if seen[0] != first.Pos || !slices.IsSortedFunc(seen, func(a, b int) int { return b - a }) {
		t.Fatalf("alice's positions %v: want them falling from %d", seen, first.Pos)
	}
	if len(seen) < 3 {
		t.Fatalf("want the position to fall at least twice before admission, saw %v", seen)
	}
	alice.waitJS("alice's countdown", 5*time.Second, `/^\d+:\d\d$/.test(document.getElementById('countdown').textContent) &&
		document.activeElement === document.getElementById('go-order')`)
	alice.screenshot(shots, "2-admitted")
	bob.waitJS("bob admitted", 10*time.Second, `!document.getElementById('admitted').hidden`)

	// Both go to the order page; the token stays in sessionStorage, never in a URL.
	orderReady := `location.pathname === '/q/drop/order' && location.search === '' &&
		document.getElementById('token-state').dataset.state === 'valid' &&
		document.getElementById('product-name').textContent === 'Trail shoe' &&
		document.getElementById('stock').dataset.stock === '1' && !document.getElementById('buy').disabled`
	alice.click("go-order")
	alice.waitJS("alice's order page with the shoe in stock", 10*time.Second, orderReady)
	tok := alice.eval(`JSON.parse(sessionStorage.getItem('wr_token:drop') || '{}').token || ''`)
	if tok == "" {
		t.Fatal("alice: no admission token in sessionStorage on the order page")
	}
	bob.click("go-order")
	bob.waitJS("bob's order page with the shoe in stock", 10*time.Second, orderReady)
	bobReady := time.Now()
	// Bob's page polls the stock every 2 s: his next poll is held in his tab until he has
	// clicked buy, so his page still shows the shoe he saw however long alice's purchase
	// takes. Once one poll is held, none is in flight: the last one was answered before
	// alice bought.
	bobPolls := holdRequests(bob, `*/api/products\?queue=drop*`)
	testwait.For(t, pageWait(0), "bob's next stock poll held", func() bool { return bobPolls.count() > 0 })

	// 3. Alice buys the last shoe.
	alice.click("buy")
	alice.waitJS("alice's order success", 10*time.Second, `document.getElementById('order-result').dataset.outcome === 'success' &&
		document.getElementById('order-id').textContent.trim().length > 0`)
	orderID := alice.eval(`document.getElementById('order-id').textContent.trim()`)
	// Bob's page still shows one shoe: his stock poll is held. The check and the click run
	// in one task of the page.
	got := bob.eval(`(() => {
		const b = document.getElementById('buy'), s = document.getElementById('stock');
		if (b.disabled || s.dataset.stock !== '1') return 'not clicked: stock ' + s.dataset.stock + ', disabled ' + b.disabled;
		b.click();
		return 'clicked';
	})()`)
	if got != "clicked" {
		t.Fatalf("bob could not click buy %v after his page was ready (%s): a stock answer reached his page", time.Since(bobReady), got)
	}
	bob.waitJS("bob's sold out", 10*time.Second, `document.getElementById('order-result').dataset.outcome === 'sold_out'`)
	bobPolls.release()
	bob.waitJS("bob's stock refreshed to sold out", 10*time.Second, `document.getElementById('stock').dataset.stock === '0' &&
		document.getElementById('buy').disabled`)
	t.Logf("alice bought order %s; bob clicked buy %v after his page was ready and got %q", orderID, time.Since(bobReady).Round(time.Millisecond),
		bob.eval(`document.getElementById('order-result-text').textContent`))
	alice.waitJS("alice's token used and stock 0", 10*time.Second, `document.getElementById('token-state').dataset.state === 'used' &&
		document.getElementById('stock').dataset.stock === '0'`)
	alice.screenshot(shots, "3-order-success")
	bob.screenshot(shots, "4-sold-out")
	var prod struct{ Stock int64 }
	call(t, "GET", in.url+"/api/products/shoe", "", nil, &prod)
	if prod.Stock != 0 {
		t.Fatalf("stock after the two orders: %d, want 0", prod.Stock)
	}
	if strings.Contains(in.logs.String(), tok) {
		t.Errorf("the server log contains alice's admission token")
	}

	// The queue's only product is sold out, so drop refuses new joiners (423 sold_out);
	// a restock reopens it for the next two.
	var e errResp
	if res := call(t, "POST", in.url+"/api/queues/drop/join", "", nil, &e); res.StatusCode != 423 || e.Error.Code != "sold_out" {
		t.Fatalf("join of a sold-out queue: %d %+v", res.StatusCode, e)
	}
	mustAdmin(t, in, "PUT", "/admin/api/products/shoe", map[string]any{"stock": 5})

	// 4. The admin dashboard follows the live SSE connections. Alice's and Bob's streams
	// ended when they left their waiting pages, so the count settles at 0.
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"paused": true})
	adm := b.open(t, "admin")
	adm.navigate(in.url + "/admin")
	adm.waitJS("the token form", 5*time.Second, `!document.getElementById('login').hidden`)
	adm.sendKeys("admin-token", adminToken)
	adm.click("admin-login-submit")
	adm.waitJS("the dashboard", 10*time.Second, `!document.getElementById('dashboard').hidden &&
		document.getElementById('admin-conn').dataset.state === 'live' &&
		document.querySelector('tr[data-testid=instance-row][data-instance="web-1"]') !== null`)
	sse := func(want int, why string) {
		t.Helper()
		since := time.Now()
		adm.waitJS(fmt.Sprintf("#sse-total %d (%s)", want, why), 15*time.Second,
			fmt.Sprintf(`document.getElementById('sse-total').textContent.trim() === '%d'`, want))
		var st struct {
			Total int64 `json:"sse_connections_total"`
		}
		call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
		if st.Total != int64(want) {
			t.Fatalf("dashboard shows %d SSE connections, /admin/api/stats says %d", want, st.Total)
		}
		t.Logf("dashboard: %d SSE connections (%s) after %v", want, why, time.Since(since).Round(time.Millisecond))
	}
	sse(0, "alice and bob left their waiting pages")
	var watchers []*browserPage
	for i, name := range []string{"carol", "dave"} {
		p := b.open(t, name)
		p.navigate(in.url + "/q/drop")
		p.waitJS(name+"'s live waiting page", 10*time.Second, `!document.getElementById('waiting').hidden &&
			document.getElementById('conn-state').dataset.state === 'live'`)
		sse(i+1, name+" opened the waiting page")
		watchers = append(watchers, p)
	}
	adm.screenshot(shots, "5-admin-dashboard")
	for i, p := range watchers {
		p.close()
		sse(len(watchers)-1-i, p.name+" closed the tab")
	}
	adm.screenshot(shots, "6-admin-dashboard-after-close")

	for _, p := range b.pages {
		p.checkConsole()
	}
	t.Logf("browser journey took %v", time.Since(start).Round(time.Millisecond))
	logServerErrors(t, in)
}

// logServerErrors logs the requests the server answered with 5xx: the pages retry them,
// so the journey can pass while the server struggles.
func logServerErrors(t *testing.T, in *instance) {
	t.Helper()
	for _, line := range strings.Split(in.logs.String(), "\n") {
		var l struct {
			Status int    `json:"status"`
			Method string `json:"method"`
			Path   string `json:"path"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Status >= 500 {
			t.Logf("server answered %s %s with %d: %s", l.Method, l.Path, l.Status, line)
		}
	}
}

// mustAdmin makes an admin call that must succeed. An idempotent one (not POST) that the
// server sheds for load (503, 429: a loaded machine, a pool that could not hand out a
// connection in time) is made again, as a client does, for up to a minute.
func mustAdmin(t *testing.T, in *instance, method, path string, body any) {
	t.Helper()
	var status int
	testwait.For(t, time.Minute, fmt.Sprintf("%s %s answered other than 503 or 429", method, path), func() bool {
		status = admin(t, in, method, path, body).StatusCode
		return method == "POST" || (status != 503 && status != 429)
	})
	if status >= 300 {
		t.Fatalf("%s %s: %d", method, path, status)
	}
}

// screenshotsOff says whether WR_SCREENSHOTS=off: the pages are checked as always, but no
// screenshot is saved except a failed journey's (the test command's default: ~170 captures,
// 40–60 CPU-seconds of Chromium, are for a person to look at, not a check).
func screenshotsOff() bool { return os.Getenv("WR_SCREENSHOTS") == "off" }

// screenshotDir is $WR_SCREENSHOTS, else screenshots/ at the repo root (git-ignored); with
// WR_SCREENSHOTS=off it is screenshots/ too, for the screenshots of failures.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("WR_SCREENSHOTS")
	if dir == "" || dir == "off" {
		dir = filepath.Join("..", "screenshots")
	}
	dir, err := filepath.Abs(dir)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Fatalf("screenshot directory: %v", err)
	}
	return dir
}

// browser is one test's use of the shared headless Chromium (browser28_shared_test.go):
// every user gets a browser context of its own, and every tab ends with the test's context.
type browser struct {
	root   context.Context // the shared browser's root context: tabs are made from it
	parent context.Context // the test's context: its end closes the test's tabs
	out    *syncBuffer
	pages  []*browserPage
}

// browserInstance is the set-up of a browser test: Chromium must be there (the test command
// installs it), a deadline for the whole test, a private Redis and one instance. The
// deadline is a guard, not a budget: five times the quiet machine's bound the test names and
// at least 10 minutes, as the browser tests run in parallel, beside a CPU hog on a shared
// machine (go test's -timeout is the guard of the whole run).
func browserInstance(t *testing.T, id string, timeout time.Duration, extra map[string]string) (context.Context, *instance) {
	t.Helper()
	if _, err := os.Stat(chromiumBin); err != nil {
		t.Fatalf("headless Chromium is required at %s (%v): run scripts/test.sh, which installs "+
			"Debian's chromium-headless-shell, or: sudo apt-get install -y chromium-headless-shell", chromiumBin, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(5*timeout, 10*time.Minute))
	t.Cleanup(cancel)
	rs := redistest.Start(t)
	return ctx, startInProcess(t, id, baseEnv(rs.URL(), testDB(t), withBrowserEnv(extra)))
}

// startBrowser gives the test the shared Chromium of the test binary (started if no test
// uses it); the test's tabs close when parent ends or the test does.
func startBrowser(t *testing.T, parent context.Context) *browser {
	t.Helper()
	c := acquireChromium(t, chromiumBin)
	return &browser{root: c.root, parent: parent, out: c.out}
}

// startFullBrowser is startBrowser on the full Chromium (fullChromiumBin), shared the same
// way, for a test that needs browser features the headless shell does not have.
func startFullBrowser(t *testing.T, parent context.Context) *browser {
	t.Helper()
	if _, err := os.Stat(fullChromiumBin); err != nil {
		t.Fatalf("Chromium is required at %s (%v): run scripts/test.sh, which installs "+
			"Debian's chromium, or: sudo apt-get install -y chromium", fullChromiumBin, err)
	}
	c := acquireChromium(t, fullChromiumBin)
	return &browser{root: c.root, parent: parent, out: c.out}
}

// browserPage is one tab in its own browser context.
type browserPage struct {
	t      *testing.T
	b      *browser
	name   string
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

func (b *browser) open(t *testing.T, name string) *browserPage {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.root, chromedp.WithNewBrowserContext())
	return b.tab(t, name, ctx, cancel)
}

// openBeside opens another tab in the browser context of p: the same person (cookies,
// storage) in a second tab.
func (b *browser) openBeside(t *testing.T, p *browserPage, name string) *browserPage {
	t.Helper()
	ctx, cancel := chromedp.NewContext(p.ctx)
	return b.tab(t, name, ctx, cancel)
}

func (b *browser) tab(t *testing.T, name string, ctx context.Context, cancelTab context.CancelFunc) *browserPage {
	t.Helper()
	// The tab ends with the test's context (its deadline), as the test's own browser did.
	unhook := context.AfterFunc(b.parent, cancelTab)
	cancel := func() { unhook(); cancelTab() }
	p := &browserPage{t: t, b: b, name: name, ctx: ctx, cancel: cancel}
	t.Cleanup(p.close)
	// Every tab believes it has the focus, as the only window of a person's own browser
	// would: the tabs of tests running in parallel share one browser. The first run opens the
	// tab and must be on ctx itself (the tab's event loop lives as long as the context of that
	// run), so its bound is a timer that closes the tab.
	guard := time.AfterFunc(pageWait(0), cancelTab)
	defer guard.Stop()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
		return err
	})); err != nil {
		t.Fatalf("%s: new tab: %v\n%s", name, err, b.out.String())
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.console = append(p.console, m)
			p.mu.Unlock()
		}
	}()
	b.pages = append(b.pages, p)
	return p
}

// close closes the tab and disposes of its browser context (cookies and all).
func (p *browserPage) close() {
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
}

// pageWait is how long a step in a tab may take at most: the timeout a test names, raised to
// a minute. Every wait is an upper bound, never a verdict: with the tests in parallel on two
// cores, other packages' tests and a CPU hog beside them, a page can need tens of seconds
// for what takes milliseconds on a quiet machine (seen: a click answered after 30 s at a
// load average of 30), and a test that passes waits only as long as the page needs.
func pageWait(d time.Duration) time.Duration { return max(d, time.Minute) }

func (p *browserPage) do(what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, pageWait(timeout))
	defer cancel()
	for {
		err := chromedp.Do(ctx, steps...)
		// A click on an element the page is re-rendering at that instant (a dashboard card
		// redrawn by its live update; on a busy machine the moment is longer) finds no box
		// to click ("invalid dimensions", or Chromium's "Node does not have a layout object"
		// when scrolling it into view): nothing was clicked, so one step is tried again until
		// its deadline.
		noBox := err != nil && (errors.Is(err, chromedp.ErrInvalidDimensions) || strings.Contains(err.Error(), "does not have a layout object"))
		if noBox && len(steps) == 1 && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			p.t.Fatalf("%s: %s: %v\n%s", p.name, what, err, p.diagnose())
		}
		return
	}
}

func (p *browserPage) navigate(url string) {
	p.t.Helper()
	p.do("open "+url, 10*time.Second, chromedp.Navigate(url))
}

// click clicks the element with that id (see activate).
func (p *browserPage) click(id string) {
	p.t.Helper()
	p.activate("#" + cssEscapeID(id))
}

// cssEscapeID makes an element id a CSS selector's #id part (the ids of the pages are
// letters, digits, - and _; a leading digit is escaped).
func cssEscapeID(id string) string {
	if id != "" && id[0] >= '0' && id[0] <= '9' {
		return fmt.Sprintf(`\%x `, id[0]) + id[1:]
	}
	return id
}

// sendKeys types text into the element with that id. Into a text field the text goes in
// at the caret in one step (Input.insertText: the editing and input events of typing, without
// a key event per character — three protocol calls per character took over two seconds each
// on a loaded machine). Into a <select> it picks the option type-ahead would pick (the first
// whose label or value starts with text), by the arrow keys: type-ahead works only while the
// keys come less than a second apart, which a loaded machine does not promise; one arrow key
// per option does not depend on the clock.
func (p *browserPage) sendKeys(id, text string) {
	p.t.Helper()
	type pick struct {
		Select bool `json:"select"`
		Found  bool `json:"found"`
		Diff   int  `json:"diff"`
	}
	sel, err := evalJS[pick](p, fmt.Sprintf(`(() => {
		const e = document.getElementById(%q), want = %q;
		if (!e || e.tagName !== 'SELECT') return {select: false, found: false, diff: 0};
		const i = [...e.options].findIndex((o) => o.textContent.trim().toLowerCase().startsWith(want) || o.value.toLowerCase().startsWith(want));
		return {select: true, found: i >= 0, diff: i - e.selectedIndex};
	})()`, id, strings.ToLower(text)))
	if err == nil && sel.Select && sel.Found {
		key, n := kb.ArrowDown, sel.Diff
		if n < 0 {
			key, n = kb.ArrowUp, -n
		}
		steps := []chromedp.Action[chromedp.Void]{chromedp.Focus(chromedp.ID(id))}
		for range n {
			steps = append(steps, chromedp.KeyEvent(key))
		}
		p.do(fmt.Sprintf("pick %q in #%s by keyboard", text, id), time.Duration(2*n+5)*time.Second, steps...)
		return
	}
	// As a typing user can only once the field is shown (a form part that appears on a choice).
	p.waitJS("#"+id+" shown", 5*time.Second, fmt.Sprintf(`(() => {
		const e = document.getElementById(%q);
		return !!e && e.getClientRects().length > 0 && !e.disabled;
	})()`, id))
	p.do("type into #"+id, 5*time.Second, chromedp.Focus(chromedp.ID(id)), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: text})
		return err
	}))
}

// evalJSWithin evaluates a JavaScript expression in the page, giving up after timeout.
func evalJSWithin[T any](p *browserPage, timeout time.Duration, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// evalJS evaluates a JavaScript expression in the page (within pageWait).
func evalJS[T any](p *browserPage, expr string) (T, error) {
	return evalJSWithin[T](p, pageWait(0), expr)
}

// eval returns the string value of expr.
func (p *browserPage) eval(expr string) string {
	p.t.Helper()
	s, err := evalJS[string](p, expr)
	if err != nil {
		p.t.Fatalf("%s: evaluate %s: %v\n%s", p.name, expr, err, p.diagnose())
	}
	return s
}

// waitJS waits until the boolean expression holds (within pageWait(timeout)). Evaluation
// errors (a page that is navigating has no document for a moment) count as "not yet".
func (p *browserPage) waitJS(what string, timeout time.Duration, expr string) {
	p.t.Helper()
	timeout = pageWait(timeout)
	deadline := time.Now().Add(timeout)
	var err error
	// testwait.For's own deadline comes after this one, so the failure is the one below,
	// with the page described.
	testwait.For(p.t, timeout, p.name+": "+what, func() bool {
		var ok bool
		ok, err = evalJSWithin[bool](p, 5*time.Second, expr)
		if err == nil && ok {
			return true
		}
		if time.Now().After(deadline) || p.ctx.Err() != nil {
			p.t.Fatalf("%s: timed out after %v waiting for %s (last error: %v)\n%s", p.name, timeout, what, err, p.diagnose())
		}
		return false
	})
}

type waitingView struct {
	Pos      int    `json:"pos"`
	Text     string `json:"text"`
	Ahead    string `json:"ahead"`
	ETA      string `json:"eta"`
	Admitted bool   `json:"admitted"`
}

// position reads the waiting page (zero values while the page is not there yet).
func (p *browserPage) position() waitingView {
	v, _ := evalJSWithin[waitingView](p, 5*time.Second, `(() => {
		const $ = (id) => document.getElementById(id);
		if (!$('position')) return {pos: 0, text: '', ahead: '', eta: '', admitted: false};
		return {pos: Number($('position').dataset.position) || 0, text: $('position').textContent,
			ahead: $('ahead').textContent, eta: $('eta').textContent, admitted: !$('admitted').hidden};
	})()`)
	return v
}

// capture runs one screenshot capture with 20 s a try, and tries again until the page's wait
// (pageWait) is over: a capture that a navigation cuts short — the no-script page reloads
// itself on its Refresh header — never answers, and the next try catches the new document.
func (p *browserPage) capture(shot func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	deadline := time.Now().Add(pageWait(0))
	for {
		ctx, cancel := context.WithTimeout(p.ctx, min(20*time.Second, time.Until(deadline)))
		img, err := shot(ctx)
		cancel()
		if err == nil || p.ctx.Err() != nil || time.Until(deadline) <= 0 {
			return img, err
		}
	}
}

// screenshot writes a full-page PNG to dir/name.png. A capture that a navigation cuts short
// (the no-script page reloads itself on its Refresh header) never answers: each try has 20 s,
// and another follows until the page's wait is over.
func (p *browserPage) screenshot(dir, name string) {
	p.t.Helper()
	if screenshotsOff() {
		return
	}
	png, err := p.capture(func(ctx context.Context) ([]byte, error) {
		return chromedp.Run(ctx, chromedp.FullScreenshot(100))
	})
	if err != nil {
		p.t.Fatalf("%s: screenshot %s: %v", p.name, name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot (%s): %s", p.name, path)
}

// diagnose describes the page for a failure message: where it is, what it says, what
// its console said.
func (p *browserPage) diagnose() string {
	var sb strings.Builder
	state, err := evalJSWithin[string](p, 5*time.Second, `location.href + '\n' + document.body.innerText.slice(0, 1500)`)
	if err != nil {
		state = "(page not readable: " + err.Error() + ")"
	}
	fmt.Fprintf(&sb, "--- %s's page:\n%s\n--- %s's console:\n", p.name, state, p.name)
	p.mu.Lock()
	for _, m := range p.console {
		fmt.Fprintf(&sb, "%s (%s:%d)\n", m, m.URL, m.Line)
	}
	p.mu.Unlock()
	return sb.String()
}

// checkConsole fails the test on uncaught exceptions and CSP violations, and logs any
// other console error.
func (p *browserPage) checkConsole() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.console {
		switch {
		case m.IsException(), strings.Contains(m.Text, "Content Security Policy"):
			p.t.Errorf("%s: %s (%s:%d)", p.name, m, m.URL, m.Line)
		case m.Type == "error":
			p.t.Logf("%s: console %s (%s:%d)", p.name, m, m.URL, m.Line)
		}
	}
}
