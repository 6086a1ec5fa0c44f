package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The journey suite (TestJourney*): each journey is one test that drives real Chromium
// through the pages the way a person would. The harness below is shared by every journey:
//
//	j := newJourney(t, ctx)            // one Chromium for the journey, axe-core loaded
//	buyer := j.person("ana", journeyPhone) // a browser context of its own, 375 px wide
//	buyer.navigate(in.url + "/q/line")
//	buyer.waitJS(...)                  // the page's own data attributes tell its state
//	j.state(buyer, "waiting")          // axe-core at this state, a screenshot
//	j.stateMatrix(buyer, "stale")      // the same in light and dark at 1280 and 375 px
//
// Findings of impact serious or critical fail the journey at its end, all of them listed;
// every finding is logged. A failed journey saves a screenshot of every open page
// (<screenshots>/journeys/<test>/failed-<person>.png) besides the ones of each state.

// The two widths every journey covers: people are opened at one of them (a desktop buyer and
// a phone buyer), and stateMatrix checks a state at both.
const (
	journeyDesktop = 1280
	journeyPhone   = 375
)

type journey struct {
	t        *testing.T
	b        *browser
	axe      string
	dir      string
	people   []*journeyPerson
	findings []string
	states   int
}

// journeyPerson is one person's tab: a browser page with its width.
type journeyPerson struct {
	*browserPage
	width int64
	// scriptsOff: the page runs no scripts (noScripts, journey_nojs_test.go); axe-core is
	// run with them on for its check, as its own timers need them.
	scriptsOff bool
}

// newJourney starts Chromium for the journey (ctx bounds the whole journey) and reads the
// pinned axe-core the test command fetched.
func newJourney(t *testing.T, ctx context.Context) *journey {
	t.Helper()
	src, err := os.ReadFile(axePath(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(screenshotDir(t), "journeys", regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "_"))
	// With the screenshots off (the test command) the last saved ones stay; only a failure's
	// page is written.
	if !screenshotsOff() {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	j := &journey{t: t, b: startBrowser(t, ctx), axe: string(src), dir: dir}
	t.Cleanup(j.finish)
	return j
}

// person opens a tab in a browser context of its own (own cookies and storage) at width
// journeyDesktop or journeyPhone.
func (j *journey) person(name string, width int64) *journeyPerson {
	j.t.Helper()
	p := &journeyPerson{browserPage: j.b.open(j.t, name), width: width}
	j.t.Cleanup(func() { j.leave(p) }) // runs before the tab closes (cleanups run last-in first-out)
	p.resize(width)
	j.people = append(j.people, p)
	return p
}

func (p *journeyPerson) resize(width int64) {
	p.t.Helper()
	h := int64(900)
	opts := []chromedp.EmulateViewportOption{}
	if width <= journeyPhone {
		h = 812
		opts = append(opts, chromedp.EmulateScale(2), chromedp.EmulateMobile)
	}
	p.do(fmt.Sprintf("viewport %d px", width), 5*time.Second, chromedp.EmulateViewport(width, h, opts...))
}

// scheme sets prefers-color-scheme ("light" or "dark").
func (p *journeyPerson) scheme(s string) {
	p.t.Helper()
	cdpDo(p.browserPage, "color scheme "+s, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s}},
	})
}

// state records that the person's page is in the named state: axe-core runs on it as it is
// (its width, light scheme) and a screenshot of the viewport is saved as <NN>-<person>-<state>-<how>.jpg.
func (j *journey) state(p *journeyPerson, name string) {
	j.t.Helper()
	j.check(p, name, fmt.Sprintf("%d px", p.width))
}

// stateMatrix is state in light and dark at 1280 and 375 px; the page returns to its own
// width and the light scheme afterwards.
func (j *journey) stateMatrix(p *journeyPerson, name string) {
	j.t.Helper()
	for _, w := range []int64{journeyDesktop, journeyPhone} {
		p.resize(w)
		for _, s := range []string{"light", "dark"} {
			p.scheme(s)
			j.check(p, name, fmt.Sprintf("%d px %s", w, s))
		}
	}
	p.scheme("light")
	p.resize(p.width)
}

func (j *journey) check(p *journeyPerson, name, how string) {
	j.t.Helper()
	j.states++
	what := fmt.Sprintf("%s: %s (%s)", p.name, name, how)
	if p.scriptsOff {
		// The document was parsed without scripts (its <noscript> is markup, its own scripts
		// never ran); turning them on now runs none of them, only axe-core's timers.
		p.setScripts(true)
		defer p.setScripts(false)
	}
	j.findings = append(j.findings, axeCheck(j.t, p.browserPage, j.axe, what)...)
	file := fmt.Sprintf("%02d-%s-%s-%s", j.states, p.name, name, strings.NewReplacer(" ", "", "px", "").Replace(how))
	j.snap(p, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(file, "_")+".jpg")
}

// snap saves what the person sees (the viewport, JPEG): cheap enough for every state, where
// a full-page PNG of a long dashboard took seconds.
func (j *journey) snap(p *journeyPerson, file string) {
	j.t.Helper()
	if screenshotsOff() {
		return
	}
	quality := int64(70)
	img, err := p.capture(func(ctx context.Context) ([]byte, error) {
		var img []byte
		err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			res, err := cdp.Call(ctx, t, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatJpeg, Quality: &quality})
			img = res.Data
			return err
		}))
		return img, err
	})
	if err != nil {
		j.t.Fatalf("%s: screenshot %s: %v", p.name, file, err)
	}
	if err := os.WriteFile(filepath.Join(j.dir, file), img, 0o644); err != nil {
		j.t.Fatal(err)
	}
}

// leave saves a screenshot of the person's page when the journey failed, and fails it on
// console exceptions and CSP violations.
func (j *journey) leave(p *journeyPerson) {
	t := j.t
	if p.cancel == nil {
		return
	}
	if t.Failed() {
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(90)); err == nil {
			path := filepath.Join(j.dir, "failed-"+p.name+".png")
			if os.WriteFile(path, png, 0o644) == nil {
				t.Logf("failure screenshot (%s): %s", p.name, path)
			}
		}
		cancel()
	}
	p.checkConsole()
}

// finish fails the journey on serious or critical axe findings.
func (j *journey) finish() {
	t := j.t
	if len(j.findings) > 0 {
		t.Errorf("axe-core: %d serious or critical findings over %d states:\n%s", len(j.findings), j.states, strings.Join(j.findings, "\n"))
	} else {
		t.Logf("axe-core: no serious or critical findings over %d checked states", j.states)
	}
}
