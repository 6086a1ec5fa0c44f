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

// navigatedAway reports whether err is DevTools saying the page's document went away under an
// evaluation (a navigation: the execution context was destroyed or the target navigated).
func navigatedAway(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "navigated or closed") || strings.Contains(err.Error(), "context was destroyed"))
}

// axeCheck runs axe-core on the page as it is now. The script is the test's: it is injected
// with the DevTools protocol (Runtime.evaluate), which the page's Content-Security-Policy
// does not govern (the page itself still loads no inline script). It logs every violation
// and returns the serious and critical ones as lines.
func axeCheck(t *testing.T, p *browserPage, src, what string) []string {
	t.Helper()
	ctx := p.ctx
	// A page that reloads itself (the no-script page's Refresh, every 5 s) can start its next
	// document while axe-core runs on this one ("Inspected target navigated or closed",
	// beside a CPU hog): the check is made again on the new document, until the page's wait
	// (pageWait) is over.
	deadline := time.Now().Add(pageWait(0))
	var raw string
	for {
		// Injected once per document (a navigation starts a new one).
		if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof axe === 'object'`)); !ok {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](src+"\n;typeof axe === 'object'"))
			if (err != nil || !ok) && !(navigatedAway(err) && time.Now().Before(deadline)) {
				t.Fatalf("%s: inject axe-core: %v %v\n%s", what, ok, err, p.diagnose())
			}
			if err != nil || !ok {
				continue
			}
		}
		// One run: the violations with their elements, and how many rules passed (the
		// passes are listed without their elements: resultTypes).
		var err error
		raw, err = chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ['violations']}).then(r =>
		JSON.stringify({violations: r.violations, passes: r.passes.length}))`, chromedp.EvalAwaitPromise))
		if err == nil {
			break
		}
		if !navigatedAway(err) || time.Now().After(deadline) {
			t.Fatalf("%s: axe.run: %v\n%s", what, err, p.diagnose())
		}
		t.Logf("%s: the page navigated during axe.run (%v): again on the new document", what, err)
	}
	var res struct {
		Violations []axeViolation `json:"violations"`
		Passes     int            `json:"passes"`
	}
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatalf("%s: axe result: %v", what, err)
	}
	vs, passes := res.Violations, res.Passes
	if passes < 10 {
		t.Fatalf("%s: axe checked too little (%d rules passed): is it running?", what, passes)
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
