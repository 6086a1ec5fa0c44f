package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The browser tests and the journeys share one headless Chromium per test binary instead of
// starting one each (per binary: Debian's chromium-headless-shell for nearly all of them,
// the full chromium for the tests that need what only it has): every person still gets a browser context of its own (own cookies,
// storage, cache and renderer process — Chromium never shares a renderer between browser
// contexts), and the tests run in parallel on that one browser process.
//
// The browser is reference-counted: the first test that needs it starts it, the last one
// to finish stops it (and its user data directory goes), so nothing outlives the tests —
// pgtest.Main ends the binary in os.Exit, which no deferred stop would survive. Between
// two tests that do not overlap (the serial ones) it is started again; a browser that died
// (lost its pipe) is replaced for the tests that come after.

// chromiumStartWait bounds the start of the shared Chromium (a few seconds on a quiet
// machine; a loaded one can need many more).
const chromiumStartWait = 60 * time.Second

// sharedChromium is one running Chromium and how many tests use it.
type sharedChromium struct {
	root  context.Context // the chromedp context that started the browser: tabs are its children
	stop  func()          // closes the browser and waits for the process to exit
	out   *syncBuffer     // the browser's combined output, for failure messages
	users int
}

var (
	chromiumMu  sync.Mutex
	chromiumNow = map[string]*sharedChromium{} // by binary
)

// acquireChromium returns the shared Chromium of binary bin, started if no test uses one,
// and releases it when t ends.
func acquireChromium(t *testing.T, bin string) *sharedChromium {
	t.Helper()
	chromiumMu.Lock()
	defer chromiumMu.Unlock()
	if c := chromiumNow[bin]; c != nil && c.root.Err() != nil {
		// It died (a crash ends its root context): its tests release it; new ones get another.
		delete(chromiumNow, bin)
	}
	if chromiumNow[bin] == nil {
		c, err := startChromium(bin)
		if err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		chromiumNow[bin] = c
	}
	c := chromiumNow[bin]
	c.users++
	t.Cleanup(func() { releaseChromium(bin, c) })
	return c
}

// releaseChromium stops c once no test uses it any more.
func releaseChromium(bin string, c *sharedChromium) {
	chromiumMu.Lock()
	defer chromiumMu.Unlock()
	c.users--
	if c.users > 0 {
		return
	}
	if chromiumNow[bin] == c {
		delete(chromiumNow, bin)
	}
	c.stop()
}

// startChromium starts Chromium with a fresh profile and only the flags below (no chromedp
// defaults: they would leave some network features on).
func startChromium(bin string) (*sharedChromium, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "waitroom-chromium-")
	if err != nil {
		return nil, err
	}
	out := &syncBuffer{}
	// The browser lives as long as its users, not as the test that started it: its contexts
	// come from Background, and each tab follows its own test's deadline (browser.open).
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(dir),
		chromedp.CombinedOutput(out),
	)
	root, cancelRoot := chromedp.NewContext(allocCtx)
	stop := func() {
		// A graceful close first (bounded), then the allocator kills what is left and waits.
		ctx, cancel := context.WithTimeout(root, 10*time.Second)
		_ = chromedp.Cancel(ctx)
		cancel()
		cancelRoot()
		cancelAlloc()
		_ = os.RemoveAll(dir)
	}
	// The first run starts the process; it must run on root itself (the process is bound to
	// the context of that run), so the bound is a timer that stops the allocator.
	guard := time.AfterFunc(chromiumStartWait, cancelAlloc)
	err = chromedp.Do(root)
	guard.Stop()
	if err != nil {
		stop()
		return nil, fmt.Errorf("%w\n%s", err, out.String())
	}
	return &sharedChromium{root: root, stop: stop, out: out}, nil
}
