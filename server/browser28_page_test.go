package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/waitroom/waitroom/internal/testwait"
)

// Page helpers of the browser tests that replace fixed sleeps with what the page says.

// browserEnv is what the browser tests and journeys add to baseEnv. They test pages, not
// how an instance sheds load, and run in parallel beside other tests and a CPU hog:
//   - WR_GRACE 10m: the places they take through the API (the people ahead of the one in the
//     browser) keep no stream open, and the default grace (60 s) dropped them when a test
//     took longer than that on a loaded machine;
//   - WR_REDIS_TIMEOUT and WR_PG_ACQUIRE_TIMEOUT 10s: their fail-fast defaults (1 s, 500 ms)
//     answered 503 to admin calls and orders at a load average of 30.
var browserEnv = map[string]string{"WR_GRACE": "10m", "WR_REDIS_TIMEOUT": "10s", "WR_PG_ACQUIRE_TIMEOUT": "10s"}

// withBrowserEnv adds browserEnv to env, where env does not set them itself.
func withBrowserEnv(env map[string]string) map[string]string {
	out := maps.Clone(browserEnv)
	maps.Copy(out, env)
	return out
}

// shotDir is the test's own screenshot directory, <screenshots>/<test>/ (screenshotDir is
// the root): tests running in parallel never write the same file.
func shotDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(screenshotDir(t), regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot directory: %v", err)
	}
	return dir
}

// viewport sets the tab's viewport and waits until the page is laid out at that width
// (reading clientWidth lays the page out), instead of sleeping "for the layout".
func (p *browserPage) viewport(width, height int64, opts ...chromedp.EmulateViewportOption) {
	p.t.Helper()
	p.do(fmt.Sprintf("%d px viewport", width), 5*time.Second, chromedp.EmulateViewport(width, height, opts...))
	p.waitJS(fmt.Sprintf("the page laid out at %d px", width), 5*time.Second,
		fmt.Sprintf(`window.innerWidth === %d && document.documentElement.clientWidth <= %d`, width, width))
}

// expectConsole waits for the console message the page must log (such as the browser's own
// "Failed to load resource" line for an answer that is an expected 404), checks it, and takes
// it off the page's console list, so that checkConsole reports only what nobody expected.
func (p *browserPage) expectConsole(what string, match func(text, url string) bool) {
	p.t.Helper()
	testwait.For(p.t, pageWait(0), p.name+"'s console: "+what, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for i, m := range p.console {
			if match(m.Text, m.URL) {
				p.console = append(p.console[:i:i], p.console[i+1:]...)
				return true
			}
		}
		return false
	})
}

// heldRequests holds the requests of one tab that match a URL pattern (the DevTools Fetch
// domain): the page has sent them and waits, nothing reaches the server, until release. A
// test uses it to keep a page's poll from answering between two steps that must see the
// same page state, instead of racing the poll's timer.
type heldRequests struct {
	p   *browserPage
	mu  sync.Mutex
	ids []fetch.RequestID
}

// holdRequests starts holding the tab's requests whose URL matches pattern (Fetch's
// wildcards: * any, ? one character, \ escapes).
func holdRequests(p *browserPage, pattern string) *heldRequests {
	p.t.Helper()
	h := &heldRequests{p: p}
	if err := chromedp.Listen(p.ctx, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			h.mu.Lock()
			h.ids = append(h.ids, e.RequestID)
			h.mu.Unlock()
		}
	}); err != nil {
		p.t.Fatalf("%s: listen for held requests: %v", p.name, err)
	}
	cdpDo(p, "hold "+pattern, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: pattern}}})
	return h
}

// count is how many requests have been held so far.
func (h *heldRequests) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ids)
}

// release lets every held request go on to the server and stops holding.
func (h *heldRequests) release() {
	h.p.t.Helper()
	h.continueHeld()
	cdpDo(h.p, "stop holding requests", fetch.Disable, cdp.Empty{})
	h.continueHeld() // one paused between the two
}

func (h *heldRequests) continueHeld() {
	p := h.p
	p.t.Helper()
	h.mu.Lock()
	ids := h.ids
	h.ids = nil
	h.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(p.ctx, pageWait(0))
		err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: id})
			return err
		}))
		cancel()
		if err != nil && p.ctx.Err() == nil {
			p.t.Logf("%s: continue held request %s: %v", p.name, id, err)
		}
	}
}

// failedToLoad matches the browser's console line for a resource answered with status.
func failedToLoad(status int, urlSuffix string) func(text, url string) bool {
	return func(text, url string) bool {
		return strings.Contains(text, "Failed to load resource") && strings.Contains(text, fmt.Sprintf("status of %d", status)) &&
			strings.HasSuffix(url, urlSuffix)
	}
}

// restartPort is a free loopback port for a server that must come back on the same address
// after it was killed (TestBrowserTruthLostPlace). It is taken below the kernel's ephemeral
// range (ip_local_port_range, 32768 by default): a port from freeport (bind to port 0) could
// be handed to another test running in parallel in the moment between the kill and the
// restart, and no bind to port 0 ever gets one from below that range.
func restartPort(t *testing.T) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				low = n
			}
		}
	}
	from := max(1024, low/2)
	for range 200 {
		port := from + rand.IntN(low-from)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			l.Close()
			return port
		}
	}
	t.Fatalf("no free port in %d–%d", from, low-1)
	return 0
}

// fastForward runs the tab's clock d ahead at once (DevTools virtual time): every timer the
// page has set within d fires now, in order, so a retry or reconnect it would make in that
// time is made now. It returns the URLs of the requests the page started meanwhile (the
// browser reports a request as it starts, before the end of the fast-forward). It replaces
// watching the page for a while to see that "nothing more" happens. Afterwards the tab's
// clock stands still (its timers never fire again): the tab is of no further use but to read.
func (p *browserPage) fastForward(d time.Duration) []string {
	p.t.Helper()
	cdpDo(p, "network events on", network.Enable, network.EnableParams{})
	var mu sync.Mutex
	var started []string
	expired := make(chan struct{}, 1)
	// One listener for both events: it sees them in the order the browser sent them.
	if err := chromedp.Listen(p.ctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			mu.Lock()
			started = append(started, e.Request.URL)
			mu.Unlock()
		case *emulation.EventVirtualTimeBudgetExpired:
			select {
			case expired <- struct{}{}:
			default:
			}
		}
	}); err != nil {
		p.t.Fatalf("%s: listen for virtual time: %v", p.name, err)
	}
	budget := float64(d.Milliseconds())
	cdpDo(p, "virtual time "+d.String()+" ahead", emulation.SetVirtualTimePolicy,
		emulation.SetVirtualTimePolicyParams{Policy: emulation.VirtualTimePolicyAdvance, Budget: &budget})
	select {
	case <-expired:
	case <-time.After(pageWait(0)):
		p.t.Fatalf("%s: the page's clock did not run %v ahead within %v\n%s", p.name, d, pageWait(0), p.diagnose())
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(started)
}

// activate clicks the element the CSS selector finds, as a keyboard user does: it waits for
// the element to be on the page and visible, focuses it and presses Enter (Space for a
// checkbox or radio button) — the same activation as a mouse click, without its weak spot on
// a loaded machine: a mouse click lands at the coordinates the element had a moment before,
// and on a dashboard that redraws every second the layout can move in that moment (a click
// that hit another element, a dialog that never opened). A disabled element is left alone,
// as a click on it does nothing; one that takes no focus gets the mouse click.
func (p *browserPage) activate(sel string) {
	p.t.Helper()
	var how string
	p.waitJS("to click "+sel, 5*time.Second, fmt.Sprintf(`(() => {
		const e = document.querySelector(%q);
		if (!e) return false;
		const r = e.getBoundingClientRect();
		return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden';
	})()`, sel))
	how = p.eval(fmt.Sprintf(`(() => {
		const e = document.querySelector(%q);
		if (e.disabled) return 'disabled';
		e.scrollIntoView({block: 'center'});
		e.focus();
		if (document.activeElement !== e) return 'mouse';
		return e.type === 'checkbox' || e.type === 'radio' ? 'space' : 'enter';
	})()`, sel))
	switch how {
	case "disabled":
	case "enter":
		p.do("press Enter on "+sel, 5*time.Second, chromedp.KeyEvent(kb.Enter))
	case "space":
		p.do("press Space on "+sel, 5*time.Second, chromedp.KeyEvent(" "))
	default:
		p.do("click "+sel, 5*time.Second, chromedp.Click(chromedp.CSS(sel)))
	}
}
