package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// axePath is the axe-core the test command fetched (WR_TEST_AXE, see scripts/test.sh), else
// the cache directory scripts/test.sh fills.
func axePath(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("WR_TEST_AXE")}
	if dir, err := os.UserCacheDir(); err == nil {
		cands = append(cands, filepath.Join(dir, "waitroom", "axe-core-4.10.2", "node_modules", "axe-core", "axe.min.js"))
	}
	for _, p := range cands {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.Size() > 0 {
			return p
		}
	}
	t.Fatal("no axe-core: run the tests with scripts/test.sh (it fetches axe-core from the npm registry " +
		"into a cache directory), or set WR_TEST_AXE to an axe.min.js")
	return ""
}

// axeViolation is one axe rule that failed, with the elements it failed on.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []any  `json:"target"`
		HTML    string `json:"html"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// axeCheck runs axe-core on the page as it is now. The script is the test's: it is injected
// with the DevTools protocol (Runtime.evaluate), which the page's Content-Security-Policy
// does not govern (the page itself still loads no inline script). It logs every violation
// and returns the serious and critical ones as lines.
func axeCheck(t *testing.T, p *browserPage, src, what string) []string {
	t.Helper()
	ctx := p.ctx
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](src+"\n;typeof axe === 'object'")); err != nil || !ok {
		t.Fatalf("%s: inject axe-core: %v %v\n%s", what, ok, err, p.diagnose())
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: axe.run: %v\n%s", what, err, p.diagnose())
	}
	passes, err := chromedp.Run(ctx, chromedp.Evaluate[int](`axe.run(document, {resultTypes: ['passes']}).then(r => r.passes.length)`, chromedp.EvalAwaitPromise))
	if err != nil || passes < 10 {
		t.Fatalf("%s: axe checked too little (%d rules passed, %v): is it running?", what, passes, err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		t.Fatalf("%s: axe result: %v", what, err)
	}
	var bad []string
	for _, v := range vs {
		for _, n := range v.Nodes {
			line := fmt.Sprintf("%s: [%s] %s (%s) at %v: %s — %s", what, v.Impact, v.ID, v.Help, n.Target, n.HTML, strings.ReplaceAll(n.Summary, "\n", " "))
			t.Log("axe: " + line)
			if v.Impact == "serious" || v.Impact == "critical" {
				bad = append(bad, line)
			}
		}
	}
	if len(vs) == 0 {
		t.Logf("axe: %s: no violations (%d rules passed)", what, passes)
	}
	return bad
}

// TestBrowserA11yPages: axe-core on every page at 1280 px in English, Korean and Japanese
// (the language set with ?lang=, kept by the wr_lang cookie): the index, the waiting page
// waiting (a paused, branded line, behind others) and before a scheduled start (the pre-queue), the
// order page of an admitted buyer, the admin sign-in and the live dashboard. Any violation
// of impact serious or critical fails the test, all of them listed; every violation of any
// impact is logged for the record.
func TestBrowserA11yPages(t *testing.T) {
	src, err := os.ReadFile(axePath(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, in := browserInstance(t, "a11y-1", 150*time.Second, nil)
	// The waiting queue is branded (name, colour, message, support link, logo), so the brand
	// bar is checked too; the others are not.
	mustAdmin(t, in, "PUT", "/admin/api/queues/wait", map[string]any{"rate_per_second": 1, "paused": true, "token_ttl_seconds": 300,
		"brand_name": "Acme Shoes", "brand_color": "#8a1c7c", "brand_message": "Drop at ten. One pair each.", "support_url": "/help"})
	if res := call(t, "PUT", in.url+"/admin/api/queues/wait/logo", adminToken, brandingPNG(t, 120, 40), nil, "Content-Type", "image/png"); res.StatusCode != 200 {
		t.Fatalf("upload the logo: %d", res.StatusCode)
	}
	mustAdmin(t, in, "PUT", "/admin/api/queues/soon", map[string]any{"rate_per_second": 5, "starts_at": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)})
	mustAdmin(t, in, "PUT", "/admin/api/queues/shop", map[string]any{"rate_per_second": 50, "token_ttl_seconds": 300})
	mustAdmin(t, in, "PUT", "/admin/api/products/tote", map[string]any{"name": "Tote", "price": 12900, "currency": "JPY", "stock": 50, "queue": "shop"})
	var first struct{ Position int64 }
	if res := call(t, "POST", in.url+"/api/queues/wait/join", "", nil, &first); res.StatusCode != 201 {
		t.Fatalf("filler join: %d", res.StatusCode)
	}
	b := startBrowser(t, ctx)

	var bad []string
	for _, lang := range []string{"en", "ko", "ja"} {
		p := b.open(t, "a11y-"+lang)
		check := func(page string) {
			t.Helper()
			bad = append(bad, axeCheck(t, p, string(src), lang+" "+page)...)
		}
		p.navigate(in.url + "/?lang=" + lang)
		p.waitJS("the index", 10*time.Second, `document.documentElement.lang === '`+lang+`' && document.getElementById('queues') !== null`)
		check("index")
		if lang == "en" {
			// A control: axe must see a broken page (an image without alt, an unlabelled
			// input, grey on white), else "no violations" would prove nothing.
			p.eval(`(() => { const m = document.getElementById('main');
				m.insertAdjacentHTML('beforeend', '<img src="data:,"><input type="text"><p class="wr-axe-probe">Low contrast sentence</p>');
				const probe = m.querySelector('.wr-axe-probe'); probe.style.color = '#bbb'; probe.style.background = '#fff';
				return 'ok'; })()`)
			control := strings.Join(axeCheck(t, p, string(src), "control (broken on purpose)"), "\n")
			for _, rule := range []string{"image-alt", "label", "color-contrast"} {
				if !strings.Contains(control, "] "+rule+" (") {
					t.Errorf("axe did not report %s on the broken control page", rule)
				}
			}
		}

		p.navigate(in.url + "/q/wait")
		p.waitJS("waiting", 15*time.Second, `document.documentElement.lang === '`+lang+`' && !document.getElementById('waiting').hidden &&
			Number(document.getElementById('position').dataset.position) >= 2`)
		p.waitJS("the brand bar", 5*time.Second, `document.getElementById('brand-bar') !== null && document.getElementById('brand-logo').complete`)
		check("waiting page (waiting, branded)")

		p.navigate(in.url + "/q/soon")
		p.waitJS("the pre-queue", 15*time.Second, `!document.getElementById('prequeue').hidden &&
			Number(document.getElementById('starts-countdown').dataset.seconds) > 0`)
		check("waiting page (pre-queue)")

		p.navigate(in.url + "/q/shop")
		p.waitJS("admitted", 15*time.Second, `!document.getElementById('admitted').hidden`)
		check("waiting page (admitted)")
		p.navigate(in.url + "/q/shop/order?product=tote")
		p.waitJS("the order form", 15*time.Second, `document.getElementById('token-state').dataset.state === 'valid' &&
			!document.getElementById('buy').disabled`)
		check("order page")

		p.navigate(in.url + "/admin")
		p.waitJS("the token form", 10*time.Second, `!document.getElementById('login').hidden`)
		check("admin sign-in")
		p.sendKeys("admin-token", adminToken)
		p.click("admin-login-submit")
		p.waitJS("the live dashboard", 15*time.Second, `!document.getElementById('dashboard').hidden &&
			document.getElementById('admin-conn').dataset.state === 'live' &&
			document.querySelector('[data-testid=queue-card][data-queue="shop"]') !== null`)
		check("admin dashboard")
		p.checkConsole()
		p.close()
	}
	if len(bad) > 0 {
		t.Errorf("axe-core found %d serious or critical violations:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}
