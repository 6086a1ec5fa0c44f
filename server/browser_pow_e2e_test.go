package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// powRecorder runs in every document of a tab before the page's scripts and keeps each
// state the proof-of-work indicator (#pow) is shown in, so a test sees a state the page
// shows for a few milliseconds only (a 16-bit challenge is solved in tens of them).
const powRecorder = `(() => {
	if (window.__powSeen) return;
	window.__powSeen = [];
	const snap = () => {
		const el = document.getElementById('pow');
		if (!el || el.hidden) return;
		const s = {state: el.dataset.state, difficulty: el.dataset.difficulty, hashes: Number(el.dataset.hashes) || 0,
			value: document.getElementById('pow-progress').value, text: document.getElementById('pow-status').textContent};
		const last = window.__powSeen[window.__powSeen.length - 1];
		if (!last || JSON.stringify(last) !== JSON.stringify(s)) window.__powSeen.push(s);
	};
	document.addEventListener('DOMContentLoaded', () => {
		new MutationObserver(snap).observe(document.body, {subtree: true, attributes: true, childList: true, characterData: true});
		snap();
	});
})()`

type powSeen struct {
	State      string  `json:"state"`
	Difficulty string  `json:"difficulty"`
	Hashes     int64   `json:"hashes"`
	Value      float64 `json:"value"`
	Text       string  `json:"text"`
}

// recordPow installs powRecorder in the tab's future documents.
func (p *browserPage) recordPow() {
	p.t.Helper()
	p.do("install the #pow recorder", 5*time.Second, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: powRecorder})
		return err
	}))
}

func (p *browserPage) powSeen() []powSeen {
	p.t.Helper()
	var seen []powSeen
	if err := json.Unmarshal([]byte(p.eval(`JSON.stringify(window.__powSeen || [])`)), &seen); err != nil {
		p.t.Fatal(err)
	}
	return seen
}

// checkPowShown asserts that the page showed the indicator solving a challenge of
// difficulty bits (with the "tries" text and the expected count) and then solved.
func checkPowShown(t *testing.T, p *browserPage, bits int) {
	t.Helper()
	seen := p.powSeen()
	want := fmt.Sprint(bits)
	var solving, solved bool
	var most int64
	for _, s := range seen {
		if s.Difficulty != want {
			continue
		}
		switch s.State {
		case "solving":
			total := fmt.Sprintf("%d", int64(math.Pow(2, float64(bits))))
			if want := "of about " + groupThousands(total) + " tries"; !strings.Contains(s.Text, want) {
				t.Errorf("%s: progress text %q, want it to say %q", p.name, s.Text, want)
			}
			solving = true
			most = max(most, s.Hashes)
		case "solved":
			solved = s.Value == 100 && strings.Contains(s.Text, "Check done")
		}
	}
	if !solving || !solved {
		t.Fatalf("%s: the page did not show the %d-bit check solving then solved; it showed %+v", p.name, bits, seen)
	}
	t.Logf("%s: the page showed %d states of the %d-bit check (largest progress report: %d hashes): first %+v, last %+v",
		p.name, len(seen), bits, most, seen[0], seen[len(seen)-1])
}

func groupThousands(d string) string {
	out := []byte{}
	for i := range len(d) {
		if i > 0 && (len(d)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, d[i])
	}
	return string(out)
}

// TestBrowserPowJoin: the waiting page of a queue with pow_difficulty 16 in headless
// Chromium: the join is answered 428, the Worker solves the challenge while the page shows
// the check's progress, and the page then shows the position; after a live change to 18
// another user (own browser context) goes through an 18-bit check and is placed behind.
func TestBrowserPowJoin(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "pow-web", 90*time.Second, nil)
	// Rate 0: nobody is admitted, the positions stay.
	mustAdmin(t, in, "PUT", "/admin/api/queues/pw", map[string]any{"rate_per_second": 0, "places_per_ip": 0, "pow_difficulty": 16})
	b := startBrowser(t, ctx)

	placed := func(p *browserPage, pos int) {
		p.t.Helper()
		p.waitJS(fmt.Sprintf("%s's position %d", p.name, pos), 30*time.Second, fmt.Sprintf(`(() => {
			const w = document.getElementById('waiting');
			return !w.hidden && document.getElementById('position').dataset.position === '%d' &&
				document.getElementById('pow').hidden;
		})()`, pos))
	}

	alice := b.open(t, "alice")
	alice.recordPow()
	alice.navigate(in.url + "/q/pw")
	placed(alice, 1)
	checkPowShown(t, alice, 16)
	t.Logf("alice sees %q", alice.eval(`document.getElementById('position').textContent`))

	// The same tab reloaded keeps its place without another check (its ticket cookie).
	alice.navigate(in.url + "/q/pw")
	placed(alice, 1)
	if seen := alice.powSeen(); len(seen) != 0 {
		t.Fatalf("alice's reload showed the check again: %+v", seen)
	}

	mustAdmin(t, in, "PUT", "/admin/api/queues/pw", map[string]any{"pow_difficulty": 18})
	bob := b.open(t, "bob")
	bob.recordPow()
	bob.navigate(in.url + "/q/pw")
	placed(bob, 2)
	checkPowShown(t, bob, 18)

	var stats struct {
		Queues []struct {
			Name    string
			Waiting int64
		}
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &stats)
	for _, q := range stats.Queues {
		if q.Name == "pw" && q.Waiting != 2 {
			t.Fatalf("queue pw holds %d places, want 2 (alice and bob)", q.Waiting)
		}
	}

	// A client whose solutions are wrong (here its fetch spoils every nonce it sends) is
	// refused 422 pow_invalid; the page asks for a new challenge twice, then says so.
	carol := b.open(t, "carol")
	carol.do("spoil the nonces", 5*time.Second, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: spoilNonces})
		return err
	}))
	carol.recordPow()
	carol.navigate(in.url + "/q/pw")
	carol.waitJS("carol's error", 40*time.Second, `!document.getElementById('join-error').hidden &&
		document.getElementById('join-error').dataset.reason === 'pow_invalid'`)
	if title, n := carol.eval(`document.getElementById('join-error-title').textContent`), carol.eval(`String(window.__challenges)`); title != "Your browser could not finish the joining check" || n != "2" {
		t.Fatalf("carol: error title %q after %s new challenges; want the check's error after 2", title, n)
	}
	if seen := carol.powSeen(); !slices.ContainsFunc(seen, func(s powSeen) bool { return s.State == "retrying" }) {
		t.Fatalf("carol: the page never said it was retrying: %+v", seen)
	}
	alice.checkConsole()
	bob.checkConsole()
	carol.checkConsole()
}

// spoilNonces makes every proof of work the page sends wrong, and counts the page's
// requests for a new challenge.
const spoilNonces = `(() => {
	const real = window.fetch;
	window.__challenges = 0;
	window.fetch = function (url, init) {
		if (String(url).endsWith('/challenge')) window.__challenges++;
		if (String(url).endsWith('/join') && init && init.body) {
			const b = JSON.parse(init.body);
			if (b.pow) b.pow.nonce = 'spoilt-' + b.pow.nonce;
			init = Object.assign({}, init, {body: JSON.stringify(b)});
		}
		return real.call(this, url, init);
	};
})()`

// TestBrowserPowHashRate runs both engines of pow-worker.js in a Worker, as the page runs
// it, and checks that each computed hashes and said how long it took; it asserts only that
// the work was done, never a speed.
//
// In the test command the runs are short (the engines work and report: a fraction of a
// second each) and the test runs in parallel with the others. With WR_BENCH_POW_RATE=1 it is
// the benchmark of the browser's hash rate on this machine (BENCHMARKS.md; the recommended
// difficulty in docs/API.md comes from it): the long runs, serial (no other test of the
// binary runs beside it); run it by itself with -run, on a quiet machine.
func TestBrowserPowHashRate(t *testing.T) {
	bench := os.Getenv("WR_BENCH_POW_RATE") != ""
	if !bench {
		t.Parallel() // the short runs measure nothing: they only show the engines work
	}
	ctx, in := browserInstance(t, "pow-rate", 120*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/rate", map[string]any{"pow_difficulty": 16})
	var c powChallenge
	call(t, "POST", in.url+"/api/queues/rate/challenge", "", nil, &c)
	b := startBrowser(t, ctx)
	p := b.open(t, "bench")
	p.navigate(in.url + "/")

	type result struct {
		Type   string  `json:"type"`
		Hashes float64 `json:"hashes"`
		MS     float64 `json:"ms"`
	}
	measure := func(engine string, n int) result {
		// Difficulty 32: a solution within n hashes is unlikely (n / 2^32); either way the
		// worker reports how many hashes it computed in how long.
		js := fmt.Sprintf(`new Promise((resolve) => {
			const w = new Worker('/static/pow-worker.js');
			w.onmessage = (e) => {
				if (e.data.type === 'progress') return;
				w.terminate();
				resolve(JSON.stringify(e.data));
			};
			w.postMessage({challenge: %q, difficulty: 32, engine: %q, maxHashes: %d});
		})`, c.Challenge, engine, n)
		rctx, cancel := context.WithTimeout(p.ctx, 60*time.Second)
		defer cancel()
		out, err := chromedp.Run(rctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v\n%s", engine, err, p.diagnose())
		}
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil || (r.Type != "gaveup" && r.Type != "done") || r.Hashes <= 0 || r.MS <= 0 {
			t.Fatalf("%s: worker answered %s (%v)", engine, out, err)
		}
		return r
	}
	// Each run is a new Worker, as each solve on the page is. In the benchmark the short runs
	// are what a user at about 19 bits meets (the JIT warms up within them), the long ones
	// the sustained rate.
	type run struct {
		engine string
		n      int
	}
	runs := []run{{"js", 200_000}, {"subtle", 20_000}}
	if bench {
		runs = []run{{"js", 500_000}, {"js", 500_000}, {"js", 4_000_000}, {"js", 4_000_000}, {"js", 4_000_000}, {"subtle", 200_000}, {"subtle", 200_000}}
	}
	rates := map[string]float64{}
	for _, run := range runs {
		r := measure(run.engine, run.n)
		rate := r.Hashes / r.MS * 1000
		rates[run.engine] = max(rates[run.engine], rate)
		t.Logf("engine %-6s: %8.0f hashes in %.0f ms = %.0f hashes/s", run.engine, r.Hashes, r.MS, rate)
	}
	t.Logf("best: js %.0f hashes/s, subtle %.0f hashes/s (js/subtle = %.1f); challenge %q (%d characters)",
		rates["js"], rates["subtle"], rates["js"]/rates["subtle"], c.Challenge, len(c.Challenge))
	for _, frac := range []float64{1, 0.25, 0.2} {
		r := rates["js"] * frac
		d := math.Round(math.Log2(r))
		t.Logf("at %.0f%% of this rate (%.0f hashes/s): ~1 s of work is %.0f bits (2^%.0f / rate = %.2f s)", frac*100, r, d, d, math.Pow(2, d)/r)
	}
}
