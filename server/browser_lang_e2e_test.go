package main

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/static"
)

// TestBrowserLangSwitch: in headless Chromium a buyer waits in line (second place, behind
// a buyer who joined through the API) on a page in English (Accept-Language en), picks 日本語
// in the footer's switcher and presses the button: the page reloads in Japanese
// (<html lang="ja">, Japanese heading and numbers), the wr_lang cookie is set (SameSite=Lax,
// about a year), ?lang= is gone from the address, and the buyer is still second. A reload
// keeps Japanese and the place; the index and order pages follow the cookie although the
// browser still asks for English. Screenshots: /tmp/wr-shots/lang-ja-1280.png and -375.png.
func TestBrowserLangSwitch(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "lang-1", 60*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/lq", map[string]any{"rate_per_second": 1, "paused": true, "token_ttl_seconds": 300})
	var first struct{ Position int64 }
	if res := call(t, "POST", in.url+"/api/queues/lq/join", "", nil, &first); res.StatusCode != 201 || first.Position != 1 {
		t.Fatalf("filler join: %d, position %d", res.StatusCode, first.Position)
	}
	if err := os.MkdirAll(receiptShots, 0o755); err != nil {
		t.Fatal(err)
	}
	b := startBrowser(t, ctx)
	p := b.open(t, "buyer")
	cdpDo(p, "network on", network.Enable, network.EnableParams{})
	cdpDo(p, "Accept-Language en", network.SetExtraHTTPHeaders,
		network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "en-US,en;q=0.9"}})
	p.navigate(in.url + "/q/lq")
	p.waitJS("second in line, in English", 15*time.Second, `document.documentElement.lang === 'en' &&
		document.getElementById('position').dataset.position === '2' && document.getElementById('lang-select').value === 'en'`)

	// The switcher: a labelled select with every language named in itself, and a button.
	if got := p.eval(`Array.from(document.getElementById('lang-select').options).map(o => o.value + ':' + o.textContent).join(' ')`); !strings.HasPrefix(got, "en:English ko:한국어 ja:日本語 ar:العربية ") ||
		!strings.Contains(got, " pt-BR:Português (Brasil) ") || !strings.HasSuffix(got, " zh-Hans:简体中文 zh-Hant:繁體中文") || strings.Count(got, ":") != len(static.Builtin().Languages()) {
		t.Errorf("switcher options: %q", got)
	}
	p.do("pick 日本語", 5*time.Second, chromedp.SetValue(chromedp.ID("lang-select"), "ja"))
	p.click("lang-apply")
	ja := static.Builtin().Messages("ja")
	want := func(what string) {
		t.Helper()
		p.waitJS(what, 15*time.Second, `document.documentElement.lang === 'ja' && document.body.dataset.lang === 'ja' &&
			document.getElementById('lang-select').value === 'ja' &&
			document.querySelector('h1').textContent.trim().startsWith('`+ja["queue_heading"]+`') &&
			document.getElementById('position').dataset.position === '2' &&
			document.getElementById('ahead').textContent === '1人' &&
			!location.search.includes('lang=')`)
	}
	want("the page in Japanese, still second")

	var got network.GetCookiesResult
	p.do("read cookies", 5*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		var err error
		got, err = cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{})
		return err
	}))
	var lang *network.Cookie
	for _, c := range got.Cookies {
		if c.Name == "wr_lang" {
			lang = c
		}
	}
	switch {
	case lang == nil:
		t.Fatal("no wr_lang cookie after the switch")
	case lang.Value != "ja" || lang.SameSite != network.CookieSameSiteLax || lang.Path != "/":
		t.Errorf("wr_lang cookie: %+v", lang)
	default:
		if left := time.Until(time.Unix(int64(lang.Expires), 0)); left < 364*24*time.Hour || left > 366*24*time.Hour {
			t.Errorf("wr_lang expires in %v, want about a year", left)
		}
	}

	p.do("reload", 10*time.Second, chromedp.Reload())
	want("Japanese and the same place after a reload")
	t.Logf("waiting page in Japanese: %q", p.eval(`document.getElementById('position').closest('p, div').textContent.replace(/\s+/g, ' ').trim()`))

	for _, w := range []int64{1280, 375} {
		p.do(fmt.Sprintf("viewport %d", w), 5*time.Second, chromedp.EmulateViewport(w, 900))
		p.waitJS("layout", 2*time.Second, fmt.Sprintf(`window.innerWidth === %d`, w))
		if w == 375 {
			if over := p.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); over != "0" {
				t.Errorf("ja at 375 px: the page is %s px wider than the screen", over)
			}
		}
		p.screenshot(receiptShots, fmt.Sprintf("lang-ja-%d", w))
	}
	if _, err := os.Stat(filepath.Join(receiptShots, "lang-ja-375.png")); err != nil && !screenshotsOff() {
		t.Error(err)
	}
	p.do("viewport 1280", 5*time.Second, chromedp.EmulateViewport(1280, 900))

	// The other pages follow the cookie, not Accept-Language.
	p.navigate(in.url + "/")
	p.waitJS("the index in Japanese", 10*time.Second, `document.documentElement.lang === 'ja' &&
		document.querySelector('h1').textContent === '`+ja["index_heading"]+`' && document.getElementById('lang-select').value === 'ja'`)
	p.navigate(in.url + "/q/lq/order")
	p.waitJS("the order page in Japanese", 10*time.Second, `document.documentElement.lang === 'ja' &&
		document.querySelector('h1').textContent.trim() === '`+ja["order_heading"]+`' && document.getElementById('lang-select').value === 'ja'`)
	// And back to English with the switcher; the place is still the same.
	p.navigate(in.url + "/q/lq")
	want("Japanese again on the waiting page")
	p.do("pick English", 5*time.Second, chromedp.SetValue(chromedp.ID("lang-select"), "en"))
	p.click("lang-apply")
	p.waitJS("English, still second", 15*time.Second, `document.documentElement.lang === 'en' &&
		document.getElementById('position').dataset.position === '2' && document.getElementById('position').textContent === '2nd'`)

	// Right to left: Arabic and Hebrew mirror the page (the brand at the right, the text
	// aligned right), numbers in the language's digits, the place still second; no
	// horizontal scrolling at 375 px. Screenshots /tmp/wr-shots/lang-{ar,he}-{1280,375}.png.
	for _, lang := range []string{"ar", "he"} {
		m := static.Builtin().Messages(lang)
		p.navigate(in.url + "/q/lq?lang=" + lang)
		p.waitJS(lang+", right to left, still second", 15*time.Second, `document.documentElement.lang === '`+lang+`' &&
			document.documentElement.dir === 'rtl' && getComputedStyle(document.body).direction === 'rtl' &&
			document.querySelector('h1').textContent.trim().startsWith('`+m["queue_heading"]+`') &&
			document.getElementById('position').dataset.position === '2' &&
			document.getElementById('position').textContent === new Intl.NumberFormat('`+lang+`').format(2) &&
			document.getElementById('ahead').textContent === new Intl.NumberFormat('`+lang+`').format(1)`)
		for _, w := range []int64{1280, 375} {
			p.do(fmt.Sprintf("viewport %d", w), 5*time.Second, chromedp.EmulateViewport(w, 900))
			p.waitJS("layout", 2*time.Second, fmt.Sprintf(`window.innerWidth === %d`, w))
			if got := p.eval(`(() => { const b = document.querySelector('.brand').getBoundingClientRect();
				const s = getComputedStyle(document.querySelector('#main p, #main h1'));
				return String(b.left > innerWidth / 2 && (s.textAlign === 'start' || s.textAlign === 'right')); })()`); got != "true" {
				t.Errorf("%s at %d px: the page is not mirrored (brand at %s)", lang, w, p.eval(`JSON.stringify(document.querySelector('.brand').getBoundingClientRect())`))
			}
			if over := p.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); over != "0" {
				t.Errorf("%s at %d px: the page is %s px wider than the screen", lang, w, over)
			}
			p.viewportShot(receiptShots, fmt.Sprintf("lang-%s-%d", lang, w))
		}
		p.do("viewport 1280", 5*time.Second, chromedp.EmulateViewport(1280, 900))
		t.Logf("waiting page in %s: %q", lang, p.eval(`document.getElementById('position').closest('p, div').textContent.replace(/\s+/g, ' ').trim()`))
	}
	// The index and the order page in Arabic (then by the cookie): mirrored too, and as
	// narrow as the screen. Screenshots /tmp/wr-shots/lang-ar-{index,order}-375.png.
	p.do("viewport 375", 5*time.Second, chromedp.EmulateViewport(375, 900))
	for _, pg := range []struct{ path, name string }{{"/?lang=ar", "index"}, {"/q/lq/order", "order"}} {
		p.navigate(in.url + pg.path)
		p.waitJS("the "+pg.name+" page in Arabic", 10*time.Second, `document.documentElement.lang === 'ar' && document.documentElement.dir === 'rtl' &&
			getComputedStyle(document.querySelector('h1')).direction === 'rtl'`)
		if over := p.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); over != "0" {
			t.Errorf("the %s page in Arabic at 375 px is %s px wider than the screen", pg.name, over)
		}
		p.viewportShot(receiptShots, "lang-ar-"+pg.name+"-375")
	}
	p.do("viewport 1280", 5*time.Second, chromedp.EmulateViewport(1280, 900))
	// The dashboard has no Arabic: it is in English, left to right, for the same cookie.
	p.navigate(in.url + "/admin")
	p.waitJS("the dashboard in English", 10*time.Second, `document.documentElement.lang === 'en' && document.documentElement.dir === 'ltr'`)
	p.checkConsole()
}

// TestBrowserLangMessagesDir: WR_MESSAGES_DIR adds Swedish (sv.json with two keys: the rest
// in English, the log names the missing keys), overrides one Japanese key (ja.json) and one
// key of the built-in French (fr.json: the other keys stay the built-in French) and ignores
// an unknown key (logged). ?lang=sv shows Swedish and sets the cookie; the switcher in
// Chromium offers "svenska" next to the built-in languages.
func TestBrowserLangMessagesDir(t *testing.T) {
	t.Parallel() // the loaded tables are this instance's (web.Config.Messages)
	dir := t.TempDir()
	for name, body := range map[string]string{
		"sv.json": `{"index_heading": "Öppna köer", "lang_label": "Språk"}`,
		"fr.json": `{"index_heading": "Files ouvertes"}`,
		"ja.json": `{"index_heading": "現在のセール", "no_such_key": "?"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, in := browserInstance(t, "lang-dir", 45*time.Second, map[string]string{"WR_MESSAGES_DIR": dir})
	get := func(url string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := specClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res, string(body)
	}
	res, body := get(in.url + "/?lang=sv")
	if !strings.Contains(body, `<html lang="sv" dir="ltr">`) || !strings.Contains(body, "Öppna köer") || !strings.Contains(body, static.Builtin().Messages("en")["index_intro"]) {
		t.Errorf("?lang=sv: %.400s", body)
	}
	if _, body := get(in.url + "/?lang=fr"); !strings.Contains(body, "Files ouvertes") || !strings.Contains(body, template.HTMLEscapeString(static.Builtin().Messages("fr")["index_intro"])) {
		t.Errorf("?lang=fr: the override with the built-in French around it: %.600s", body)
	}
	if sc := res.Header.Get("Set-Cookie"); !strings.Contains(sc, "wr_lang=sv") || !strings.Contains(strings.ToLower(sc), "samesite=lax") || !strings.Contains(sc, "max-age=31536000") {
		t.Errorf("Set-Cookie %q", sc)
	}
	if v := res.Header.Get("Vary"); !strings.Contains(v, "Accept-Language") || !strings.Contains(v, "Cookie") {
		t.Errorf("Vary %q", v)
	}
	if _, body := get(in.url+"/", "Accept-Language", "sv-SE,sv;q=0.9,en;q=0.5"); !strings.Contains(body, `<html lang="sv"`) {
		t.Error("Accept-Language sv does not pick the added Swedish")
	}
	if _, body := get(in.url+"/", "Cookie", "wr_lang=ja", "Accept-Language", "sv"); !strings.Contains(body, "現在のセール") || !strings.Contains(body, static.Builtin().Messages("ja")["index_intro"]) {
		t.Error("the cookie must win over Accept-Language, with the ja override")
	}
	if _, body := get(in.url+"/?lang=xx", "Accept-Language", "ko"); !strings.Contains(body, `<html lang="ko"`) {
		t.Error("an unknown ?lang= must be ignored")
	}
	// The buyer pages embed the buyer messages only; the dashboard and the report all of them.
	block := regexp.MustCompile(`(?s)<script type="application/json" id="wr-messages">(.*?)</script>`)
	for path, staff := range map[string]bool{"/": false, "/q/lq": false, "/q/lq/order": false, "/admin": true, "/admin/queues/lq/report": true} {
		_, body := get(in.url+path, "Accept-Language", "ko")
		m := block.FindStringSubmatch(body)
		if m == nil {
			t.Errorf("%s: no #wr-messages", path)
			continue
		}
		if has := strings.Contains(m[1], `"admin_title"`); has != staff {
			t.Errorf("%s: the dashboard's messages in #wr-messages: %v, want %v (%d bytes)", path, has, staff, len(m[1]))
		}
		t.Logf("%s: #wr-messages %d bytes (ko)", path, len(m[1]))
	}
	logs := in.logs.String()
	for _, want := range []string{"sv.json: new language sv, 2 keys", "fr.json: overrides fr, 1 keys", "keys missing, shown in English", "unknown keys ignored: no_such_key"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q", want)
		}
	}

	b := startBrowser(t, ctx)
	p := b.open(t, "buyer-sv")
	p.navigate(in.url + "/?lang=sv")
	p.waitJS("Swedish with svenska in the switcher", 10*time.Second, `document.documentElement.lang === 'sv' &&
		document.getElementById('lang-select').value === 'sv' &&
		document.querySelector('label[for=lang-select]').textContent === 'Språk'`)
	t.Logf("switcher: %s", p.eval(`Array.from(document.getElementById('lang-select').options).map(o => o.value + ':' + o.textContent).join(' ')`))
	if got := p.eval(`document.querySelector('#lang-select option[value=sv]').textContent.toLowerCase()`); got != "svenska" {
		t.Errorf("sv is named %q in the switcher", got)
	}
	p.checkConsole()
}

// viewportShot saves what the viewport shows, made as tall as the page. For right-to-left
// pages: Chromium's capture beyond the viewport (FullScreenshot) draws them shifted
// sideways, a page that has no horizontal overflow at all.
func (p *browserPage) viewportShot(dir, name string) {
	p.t.Helper()
	if screenshotsOff() {
		return
	}
	w, h := p.eval(`String(innerWidth)`), p.eval(`String(Math.max(document.documentElement.scrollHeight, innerHeight))`)
	var width, height int64
	fmt.Sscan(w, &width)
	fmt.Sscan(h, &height)
	p.do("viewport as tall as the page", 5*time.Second, chromedp.EmulateViewport(width, height))
	ctx, cancel := context.WithTimeout(p.ctx, pageWait(0))
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("%s: screenshot %s: %v", p.name, name, err)
	}
	p.do("viewport back", 5*time.Second, chromedp.EmulateViewport(width, 900))
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot (%s): %s", p.name, path)
}
