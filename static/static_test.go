package static_test

import (
	"bytes"
	"html/template"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/static"
	"github.com/waitroom/waitroom/web"
)

func TestLang(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header string
		want   string
	}{
		{"", "en"},
		{"ko", "ko"},
		{"ko-KR", "ko"},
		{"KO-kr", "ko"},
		{"en-US,en;q=0.9", "en"},
		{"ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7", "ko"},
		{"en-US,en;q=0.9,ko;q=0.8", "en"},
		{"en;q=0.5, ko;q=0.8", "ko"},
		{"en;q=0.8, ko;q=0.5", "en"},
		{"ja, ko;q=0.8, en;q=0.5", "ja"},
		{"ja-JP,ja;q=0.9,en-US;q=0.8,en;q=0.7", "ja"},
		{"en-US,en;q=0.9,ja;q=0.8", "en"},
		{"ko;q=0.8, ja;q=0.8", "ko"}, // a tie goes to the one listed first
		{"ja;q=0.8, ko;q=0.8", "ja"},
		{"sv, ja;q=0.5", "ja"},
		{"sv, en;q=0.9, ko;q=0.8", "en"},
		{"sv, ko;q=0.5", "ko"},
		{"ko, en", "ko"},
		{"en, ko", "en"},
		{"ko;q=0", "en"},
		{"ko;q=0, *", "en"},
		{"*", "en"},
		{"*, en;q=0.1", "ko"}, // "*" covers Korean and Japanese at q=1, English is explicitly 0.1; then en, ko, ja
		{"ko;q=0.5, *;q=0.8", "en"},
		{"ko;q=abc", "en"}, // a malformed q drops that entry
		{"ko;q=1.5", "en"},
		{"ko ; q = 0.9 , en ; q = 0.3", "ko"},
		{" , ;, ko", "ko"},
		{"zh-CN,zh;q=0.9", "zh-Hans"},
		{"zh-SG", "zh-Hans"},
		{"zh-TW, en;q=0.5", "zh-Hant"},
		{"zh-HK", "zh-Hant"},
		{"zh", "zh-Hans"},
		{"pt-BR", "pt-BR"},
		{"pt-PT, en;q=0.8", "pt-BR"}, // the closest we have
		{"pt", "pt-BR"},
		{"iw", "he"}, // the old code of Hebrew
		{"he-IL,he;q=0.9,en;q=0.5", "he"},
		{"ar-EG, en;q=0.5", "ar"},
		{"de-CH, fr;q=0.9", "de"},
		{"es-419", "es"},
		{"uk-UA, ru;q=0.9", "uk"},
		{"sv, ar;q=0.1", "ar"},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			if got := static.Builtin().Lang(tt.header); got != tt.want {
				t.Errorf("Lang(%q) = %q, want %q", tt.header, got, tt.want)
			}
		})
	}
}

var placeholderRE = regexp.MustCompile(`\{(\w+)\}`)

// placeholders returns the sorted {names} in s; {ord} counts as {n} because
// the scripts always pass both (English shows an ordinal, Korean a count).
func placeholders(s string) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		name := m[1]
		if name == "ord" {
			name = "n"
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// sameEverywhere are the keys whose text is the same in every language: names and codes.
var sameEverywhere = map[string]bool{
	"brand":            true, // WaitRoom
	"admin_product_id": true, // ID
	"admin_scope_ip":   true, // IP
	"lang_codes":       true, // en ko ja: not a message
}

var letterRE = regexp.MustCompile(`\pL`)

// sameInEveryLanguage: a listed name or code, or a text without a letter outside its
// {placeholders} ("{msg} ({code})", "{n}", "–").
func sameInEveryLanguage(key, english string) bool {
	return sameEverywhere[key] || !letterRE.MatchString(placeholderRE.ReplaceAllString(english, ""))
}

// TestTheFirstTablesAreTranslated: the dashboard's branding keys are in Korean and
// Japanese on the tables the pages get (the files are checked one by one in
// TestMessagesEveryLanguage).
func TestTheFirstTablesAreTranslated(t *testing.T) {
	t.Parallel()
	en, ko, ja := static.Builtin().Messages("en"), static.Builtin().Messages("ko"), static.Builtin().Messages("ja")
	for _, k := range []string{"admin_branding", "admin_brand_name", "admin_logo_remove", "admin_save_branding"} {
		if ko[k] == "" || ja[k] == "" || ko[k] == en[k] || ja[k] == en[k] {
			t.Errorf("%s: en %q ko %q ja %q", k, en[k], ko[k], ja[k])
		}
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	en, ko := static.Builtin().Messages("en"), static.Builtin().Messages("ko")
	if len(en) == 0 || len(ko) == 0 {
		t.Fatalf("got %d English and %d Korean messages", len(en), len(ko))
	}
	if got := static.Builtin().Messages("sv"); got["brand"] != en["brand"] || got["joining"] != en["joining"] {
		t.Error("an unknown language should give English")
	}
	// Korean may leave a few fragments empty where word order needs none.
	mayBeEmpty := map[string]bool{"pos_after": true}
	for k, e := range en {
		if _, variant := static.SplitVariant(k); variant != "" {
			continue // Korean counts have one form: no variants
		}
		kv, ok := ko[k]
		if !ok {
			t.Errorf("%s: no Korean", k)
			continue
		}
		if e == "" {
			t.Errorf("%s: empty English", k)
		}
		if kv == "" && !mayBeEmpty[k] {
			t.Errorf("%s: empty Korean", k)
		}
		if pe, pk := placeholders(e), placeholders(kv); !slices.Equal(pe, pk) {
			t.Errorf("%s: placeholders differ: en %v, ko %v", k, pe, pk)
		}
	}
	en["brand"] = "changed"
	if static.Builtin().Messages("en")["brand"] == "changed" {
		t.Error("Messages must return a copy")
	}
}

// pages are the named templates with sample data of the documented types.
// The buyer pages get the buyer messages only (as web's lang does), so a buyer template
// that uses another key fails here (missingkey=error).
func pages(lang string) map[string]any {
	T, all := static.Builtin().BuyerMessages(lang), static.Builtin().Messages(lang)
	return map[string]any{
		"index": static.IndexPage{Lang: lang, T: T, Queues: []static.QueueInfo{
			{Name: "demo", Waiting: 1234, RatePerSecond: 5},
			{Name: "paused-one", Waiting: 3, RatePerSecond: 0.5, Paused: true},
			{Name: "gone", Closed: true},
		}},
		"queue":   static.QueuePage{Lang: lang, T: T, Queue: "demo", Exists: true, Email: true},
		"order":   static.OrderPage{Lang: lang, T: T, Queue: "demo", ProductID: "demo"},
		"back":    static.BackPage{Lang: lang, T: T, Queue: "demo", Live: true, Action: "/q/demo/back/x"},
		"admin":   static.AdminPage{Lang: lang, T: all, Settings: web.SettingsForm(all)},
		"report":  static.ReportPage{Lang: lang, T: all, Queue: "demo", Exists: true},
		"nothing": static.QueuePage{Lang: lang, T: T, Queue: "nope"},
		"closed":  static.QueuePage{Lang: lang, T: T, Queue: "demo", Exists: true, Closed: true},
		"pow":     static.QueuePage{Lang: lang, T: T, Queue: "demo", Exists: true, Pow: true},
		"place": static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceWaiting, Refresh: 5,
			Position: "3", Ahead: "2", ETA: "1", Waiting: "9", RefreshNote: "n", Paused: true},
		"place admitted": static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceAdmitted, Refresh: 30,
			Until: "12:00:00 UTC", MinutesLeft: "5"},
		"place prequeue":   static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlacePrequeue, Refresh: 30, StartsAt: "x"},
		"place lottery":    static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceLottery, Refresh: 30, SoldOut: true},
		"place gone":       static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceGone, CanJoin: true, Invite: "AB"},
		"place none":       static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceNone, CanJoin: true},
		"place expired":    static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceExpired, CanJoin: true},
		"place used":       static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceUsed},
		"place left":       static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceLeft, CanJoin: true},
		"place pow":        static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlacePow},
		"place cross site": static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceCrossSite},
		"place busy":       static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceBusy, Refresh: 2, RefreshNote: "n"},
		"place down":       static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceDown, Refresh: 2, RefreshNote: "n"},
		"place refused":    static.PlacePage{Lang: lang, T: T, Queue: "demo", State: static.PlaceRefused, Reason: "queue_closed"},
	}
}

// templateName maps the extra sample cases onto the template they execute.
func templateName(page string) string {
	if page == "nothing" || page == "closed" || page == "pow" {
		return "queue"
	}
	if strings.HasPrefix(page, "place") {
		return "place"
	}
	return page
}

func render(t *testing.T, tmpl *template.Template, page string, data any) string {
	t.Helper()
	// missingkey=error turns an unknown {{.T.key}} into a failure here
	// (at run time an unknown key would print nothing).
	strict := template.Must(tmpl.Clone()).Option("missingkey=error")
	var buf bytes.Buffer
	if err := strict.ExecuteTemplate(&buf, templateName(page), data); err != nil {
		t.Fatalf("execute %s: %v", page, err)
	}
	return buf.String()
}

var idRE = regexp.MustCompile(`\sid="([^"]+)"`)

func ids(html string) []string {
	var out []string
	for _, m := range idRE.FindAllStringSubmatch(html, -1) {
		out = append(out, m[1])
	}
	return out
}

// The ids the browser test and the scripts rely on (see README.md).
var requiredIDs = map[string][]string{
	"index": {"main", "queues", "wr-messages"},
	"queue": {"room", "conn-state", "joining", "waiting", "position", "ahead", "eta", "waiting-count", "rate",
		"progress", "leave", "admitted", "countdown", "go-order", "expired", "rejoin", "left", "join-again",
		// Without scripts: the <noscript> join form.
		"nojs-join", "nojs-join-form",
		"join-error", "notice", "announce", "announce-urgent",
		// Drop day: the pre-queue, the draw id, the lottery, sold out, the end.
		"prequeue", "starts-countdown", "starts-at", "prequeue-size", "draw-id-box", "draw-id", "draw-id-full",
		"draw-verify", "prequeue-leave", "lottery", "lottery-line", "sold-out", "ended", "drawn"},
	"order": {"shop", "token-state", "token-left", "no-token", "product", "product-name", "price", "stock",
		"buy-form", "qty", "buy", "order-result", "order-result-text", "order-id", "back-to-line", "nojs-order"},
	"admin": {"login", "admin-login", "admin-token", "dashboard", "admin-conn", "admin-error", "admin-logout",
		"sse-total", "waiting-total", "admitted-rate", "active-tokens", "tick-lag", "rl-user", "rl-ip", "rl-global",
		"chart-sse", "chart-waiting", "chart-admitted", "chart-active", "chart-lag", "chart-rejected",
		"instances", "queues", "products", "new-queue", "new-product", "tpl-queue", "tpl-product",
		"new-product-queue", "new-product-max-order", "new-product-max-ticket"},
	"report":           {"report", "report-error", "report-body", "report-csv", "report-print", "report-wait-chart", "report-orders-chart"},
	"pow":              {"room", "nojs-join"},
	"place":            {"place", "place-waiting", "place-position", "place-ahead", "place-eta", "place-refresh", "place-paused", "place-leave"},
	"place admitted":   {"place", "place-admitted", "place-go-order", "place-until"},
	"place gone":       {"place", "place-gone", "place-join"},
	"place none":       {"place", "place-none", "place-join"},
	"place expired":    {"place-expired", "place-join"},
	"place used":       {"place-used"},
	"place left":       {"place-left", "place-join"},
	"place pow":        {"place-pow"},
	"place cross site": {"place-cross-site"},
	"place busy":       {"place-busy"},
	"place down":       {"place-down"},
	"place refused":    {"place-refused"},
	"nothing":          {"unavailable"},
	"closed":           {"unavailable"},
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	tmpl, err := static.Templates()
	if err != nil {
		t.Fatal(err)
	}
	codes := strings.Join(static.Builtin().Languages(), " ")
	for _, lang := range []string{"en", "ko", "ja", "ar", "he", "zh-Hant"} {
		for page, data := range pages(lang) {
			t.Run(lang+"/"+page, func(t *testing.T) {
				out := render(t, tmpl, page, data)
				dir := map[bool]string{true: "rtl", false: "ltr"}[lang == "ar" || lang == "he"]
				if !strings.Contains(out, `<html lang="`+lang+`" dir="`+dir+`">`) {
					t.Errorf("missing <html lang=%q dir=%q>", lang, dir)
				}
				if !strings.Contains(out, `<option value="`+lang+`" lang="`+lang+`" dir="`+dir+`" selected>`) ||
					!strings.Contains(out, `<select id="lang-select" name="lang" data-codes="`+codes+`">`) ||
					!strings.Contains(out, `<label for="lang-select">`+static.Builtin().Messages(lang)["lang_label"]+`</label>`) {
					t.Error("no language switcher with the page's language selected")
				}
				if !strings.Contains(out, `name="viewport"`) || !strings.Contains(out, `href="`+static.AssetURL("style.css")+`"`) {
					t.Error("missing viewport or stylesheet")
				}
				got := ids(out)
				seen := map[string]bool{}
				for _, id := range got {
					if seen[id] {
						t.Errorf("duplicate id %q", id)
					}
					seen[id] = true
				}
				for _, id := range requiredIDs[page] {
					if !seen[id] {
						t.Errorf("missing #%s", id)
					}
				}
				if page == "nothing" || page == "closed" {
					if strings.Contains(out, `id="room"`) {
						t.Error("an unknown or closed queue must not render the joining room")
					}
				}
			})
		}
	}
}

// The messages block must be JSON the scripts can parse.
func TestMessagesBlockIsJSON(t *testing.T) {
	t.Parallel()
	tmpl, err := static.Templates()
	if err != nil {
		t.Fatal(err)
	}
	out := render(t, tmpl, "queue", pages("ko")["queue"])
	re := regexp.MustCompile(`(?s)<script type="application/json" id="wr-messages">(.*?)</script>`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no #wr-messages block")
	}
	if !strings.HasPrefix(m[1], "{") || !strings.Contains(m[1], `"joining":"순번을 받는 중…"`) {
		t.Errorf("messages block is not the JSON object: %.200s", m[1])
	}
}

func readAll(t *testing.T, glob string) map[string]string {
	t.Helper()
	names, err := fs.Glob(static.FS, glob)
	if err != nil || len(names) == 0 {
		t.Fatalf("glob %s: %v %v", glob, names, err)
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := fs.ReadFile(static.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

func TestEveryKeyUsedExists(t *testing.T) {
	t.Parallel()
	check := func(file, key string) {
		for _, lang := range static.Builtin().Languages() {
			if _, ok := static.Builtin().Messages(lang)[key]; !ok {
				t.Errorf("%s uses %q: no %s", file, key, lang)
			}
		}
	}
	tplKey := regexp.MustCompile(`\.T\.(\w+)`)
	for name, src := range readAll(t, "templates/*.html") {
		for _, m := range tplKey.FindAllStringSubmatch(src, -1) {
			check(name, m[1])
		}
	}
	// The dashboard's data-i18n elements (admin.js localizes them) and {{index .T "key"}}.
	attrKey := regexp.MustCompile(`data-i18n="(\w+)"|index \.T "(\w+)"`)
	for name, src := range readAll(t, "templates/*.html") {
		for _, m := range attrKey.FindAllStringSubmatch(src, -1) {
			check(name, m[1]+m[2])
		}
	}
	// t('key') and the dashboard's tx('key', 'English fallback').
	jsKey := regexp.MustCompile(`\bt[xn]?\(\s*'(\w+)'\s*[,)]`)
	for name, src := range readAll(t, "assets/*.js") {
		for _, m := range jsKey.FindAllStringSubmatch(src, -1) {
			check(name, m[1])
		}
	}
	// Keys built at run time: t('conn_' + state).
	for _, state := range []string{"connecting", "live", "reconnecting", "closed"} {
		check("conn_ state", "conn_"+state)
	}
	for _, draw := range []string{"none", "scheduled", "drawing", "done"} {
		check("admin_draw_ state", "admin_draw_"+draw)
	}
	for _, method := range []string{"random", "passthrough", "reject"} {
		check("admin_badge_ method", "admin_badge_"+method)
	}
}

// The scripts look elements up by id; each id must be on the page that loads
// the script.
func TestScriptsFindTheirElements(t *testing.T) {
	t.Parallel()
	tmpl, err := static.Templates()
	if err != nil {
		t.Fatal(err)
	}
	js := readAll(t, "assets/*.js")
	lookup := regexp.MustCompile(`(?:\$|getElementById)\('([\w-]+)'\)`)
	for script, page := range map[string]string{"queue.js": "queue", "order.js": "order", "admin.js": "admin", "waitroom.js": "queue", "report.js": "report"} {
		out := render(t, tmpl, page, pages("en")[page])
		have := map[string]bool{}
		for _, id := range ids(out) {
			have[id] = true
		}
		for _, m := range lookup.FindAllStringSubmatch(js["assets/"+script], -1) {
			if !have[m[1]] {
				t.Errorf("%s looks up #%s, which the %s page does not have", script, m[1], page)
			}
		}
	}
}

// The pages run under script-src 'self' and style-src 'self': no inline
// script, style or event handler, and every referenced asset exists and is named by its
// content-hashed URL ({{asset "queue.js"}}).
func TestTemplatesFitTheCSP(t *testing.T) {
	t.Parallel()
	inlineHandler := regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	scriptTag := regexp.MustCompile(`(?i)<script\b([^>]*)>`)
	assetRef := regexp.MustCompile(`/static/([\w.-]+)|\{\{asset "([\w.-]+)"\}\}`)
	for name, src := range readAll(t, "templates/*.html") {
		if inlineHandler.MatchString(src) {
			t.Errorf("%s: inline event handler", name)
		}
		if strings.Contains(src, " style=") || strings.Contains(src, "<style") {
			t.Errorf("%s: inline style", name)
		}
		if strings.Contains(src, "javascript:") {
			t.Errorf("%s: javascript: URL", name)
		}
		for _, m := range scriptTag.FindAllStringSubmatch(src, -1) {
			attrs := m[1]
			if !strings.Contains(attrs, `src="{{asset "`) && !strings.Contains(attrs, `type="application/json"`) {
				t.Errorf("%s: inline script <script%s>", name, attrs)
			}
		}
		for _, m := range assetRef.FindAllStringSubmatch(src, -1) {
			if m[1] != "" {
				t.Errorf("%s refers to /static/%s by its plain name: use {{asset %q}} (content-hashed)", name, m[1], m[1])
			}
			if _, err := fs.Stat(static.Assets(), m[2]); m[2] != "" && err != nil {
				t.Errorf("%s refers to asset %s, which is not in assets/", name, m[2])
			}
		}
	}
}

// The admin editors carry the hardening settings (a product's queue and per-buyer caps, a
// queue's places_per_ip), each control with a slot for the server's 422 message next to it.
func TestAdminEditsHardeningSettings(t *testing.T) {
	t.Parallel()
	tmpl, err := static.Templates()
	if err != nil {
		t.Fatal(err)
	}
	out := render(t, tmpl, "admin", pages("en")["admin"])
	section := func(id string) string {
		re := regexp.MustCompile(`(?s)<template id="` + id + `">(.*?)</template>`)
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no <template id=%q>", id)
		}
		return m[1]
	}
	for tpl, names := range map[string][]string{
		"tpl-product": {"name", "price", "stock", "queue", "max_per_order", "max_per_ticket"},
		"tpl-queue":   {"rate_per_second", "max_active", "token_ttl_seconds", "places_per_ip"},
	} {
		src := section(tpl)
		for _, name := range names {
			if !regexp.MustCompile(`<(input|select) name="` + name + `"`).MatchString(src) {
				t.Errorf("%s: no control named %s", tpl, name)
			}
			if !strings.Contains(src, `data-error-for="`+name+`"`) {
				t.Errorf("%s: no error slot for %s", tpl, name)
			}
		}
	}
	if !strings.Contains(section("tpl-product"), `<option value="">Not on sale</option>`) {
		t.Error(`tpl-product: the queue select lacks the "Not on sale" option`)
	}
	for _, want := range []string{`name="max_per_order" type="number" min="1" max="1000"`, `name="places_per_ip" type="number" min="0" max="1000000"`} {
		if !strings.Contains(out, want) {
			t.Errorf("admin page lacks %s", want)
		}
	}
}

// TestIndexGroupsDigits: the index writes its counts and rates as the page's language
// does, as the scripts' Intl.NumberFormat would.
func TestIndexGroupsDigits(t *testing.T) {
	t.Parallel()
	tmpl, err := static.Templates()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		lang string
		n    int64
		want string
	}{{"en", 0, ">0<"}, {"en", 999, ">999<"}, {"en", 1000, ">1,000<"}, {"en", 1234567, ">1,234,567<"}, {"en", -1234, ">-1,234<"},
		{"de", 1234567, ">1.234.567<"}, {"hi", 1234567, ">12,34,567<"}, {"ar", 1234, ">1,234<"}, {"ko", 1234, ">1,234<"}} {
		var buf bytes.Buffer
		data := static.IndexPage{Lang: tt.lang, T: static.Builtin().BuyerMessages(tt.lang), Queues: []static.QueueInfo{{Name: "q", Waiting: tt.n, RatePerSecond: 2.5}}}
		if err := tmpl.ExecuteTemplate(&buf, "index", data); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), tt.want) {
			t.Errorf("%s: waiting %d: output lacks %q", tt.lang, tt.n, tt.want)
		}
		if rate := map[bool]string{true: ">2,5<", false: ">2.5<"}[tt.lang == "de"]; !strings.Contains(buf.String(), rate) {
			t.Errorf("%s: the rate is not %s", tt.lang, rate)
		}
	}
}

// The drop-day states of the waiting page and the dashboard's sale form: the sentences the
// buyer reads, the verification link, and the sale controls with their error slots.
func TestDropDay(t *testing.T) {
	t.Parallel()
	tmpl, err := static.Templates()
	if err != nil {
		t.Fatal(err)
	}
	en := static.Builtin().Messages("en")
	for key, want := range map[string]string{
		"pre_draw_explain":   "The draw happens at the start: everyone who is here before then gets a random place",
		"lottery":            "You are in the draw — {n} waiting",
		"sold_out_body":      "Sold out — your place is kept in case stock comes back",
		"ended_title":        "The sale has ended",
		"err_not_open_title": "The sale is not open",
	} {
		if en[key] != want {
			t.Errorf("%s = %q, want %q", key, en[key], want)
		}
	}
	q := render(t, tmpl, "queue", pages("en")["queue"])
	for _, want := range []string{
		`<a id="draw-verify" href="/api/queues/demo/draw">`,
		`<section id="sold-out" class="card warning" hidden role="status"`,
		`<strong id="starts-countdown" dir="ltr" class="countdown countdown-big" role="timer" data-seconds="">`,
		`<details id="draw-id-box"`,
	} {
		if !strings.Contains(q, want) {
			t.Errorf("queue page lacks %s", want)
		}
	}
	out := render(t, tmpl, "admin", pages("ko")["admin"])
	m := regexp.MustCompile(`(?s)<form class="queue-form sale-form" data-testid="sale-form"[^>]*>(.*?)</form>`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("tpl-queue has no sale form")
	}
	form := m[1]
	for _, want := range []string{
		`<input name="starts_at" type="datetime-local" step="1"`, `<input name="ends_at" type="datetime-local" step="1"`,
		`data-clear="starts_at"`, `data-clear="ends_at"`, `<select name="method"`,
		`<option value="fifo">`, `<option value="random">`, `<option value="passthrough">`, `<option value="reject">`,
		`data-error-for="starts_at"`, `data-error-for="ends_at"`, `data-error-for="method"`,
	} {
		if !strings.Contains(form, want) {
			t.Errorf("sale form lacks %s", want)
		}
	}
	for _, f := range []string{"starts_at", "ends_at", "prequeue", "draw", "products", "badge-sold-out", "badge-ended", "badge-method"} {
		if !strings.Contains(out, `data-field="`+f+`"`) {
			t.Errorf("queue card lacks [data-field=%s]", f)
		}
	}
}

// TestQueueAutoRedirect: the queue's auto_redirect reaches the page as data-auto-redirect,
// and the page has the truth elements (paused, updated, stale, lost place, notify, deadline).
func TestQueueAutoRedirect(t *testing.T) {
	t.Parallel()
	tmpl, err := static.Templates()
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		out := render(t, tmpl, "queue", static.QueuePage{Lang: "en", T: static.Builtin().Messages("en"), Queue: "demo", Exists: true, AutoRedirect: on})
		if got := strings.Contains(out, `data-auto-redirect="true"`); got != on {
			t.Errorf("AutoRedirect %v: data-auto-redirect present %v", on, got)
		}
		for _, id := range []string{"paused-note", "updated", "stale", "lost-place", "notify-me", "notify-state", "turn-deadline"} {
			if !strings.Contains(out, `id="`+id+`"`) {
				t.Errorf("the waiting page has no #%s", id)
			}
		}
	}
}

// TestLoadMessagesDir: an operator's directory overrides built-in keys (of a language
// with every area, ja, and of a buyer-only one, ru), adds a language (English for each
// missing key, listed in the notes), ignores and reports unknown keys, and "" gives the
// built-in tables.
func TestLoadMessagesDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ja.json", `{"index_heading": "開いている列", "no_such_key": "x"}`)
	write("sv.json", `{"index_heading": "Öppna köer", "joining": "Hämtar din plats i kön…", "stock_left": "{n} kvar"}`)
	// A built-in buyer language: its file overrides, and a plural key written without
	// its variants has that text for every count.
	write("ru.json", `{"index_heading": "Открытые очереди", "stock_left": "Осталось: {n}"}`)
	write("README.txt", "not a message file")
	write("Not-A-Code.json", `{}`)
	cat, notes, err := static.LoadMessagesDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(notes, "\n")
	t.Logf("notes:\n%s", all)
	builtin := static.Builtin().Languages()
	if got := cat.Languages(); len(got) != len(builtin)+1 || !slices.Contains(got, "sv") || !slices.Equal(got[:3], []string{"en", "ko", "ja"}) {
		t.Errorf("Languages() = %v", got)
	}
	if cat.DashboardLang("sv") != "en" || cat.DashboardLang("ru") != "en" || cat.DashboardLang("ja") != "ja" {
		t.Errorf("the dashboard in sv, ru, ja: %s %s %s", cat.DashboardLang("sv"), cat.DashboardLang("ru"), cat.DashboardLang("ja"))
	}
	ja, fr, en := cat.Messages("ja"), cat.Messages("sv"), cat.Messages("en")
	if ja["index_heading"] != "開いている列" || ja["joining"] != "順番を取得しています…" {
		t.Errorf("ja override: %q %q", ja["index_heading"], ja["joining"])
	}
	if _, ok := ja["no_such_key"]; ok {
		t.Error("an unknown key was taken")
	}
	if fr["index_heading"] != "Öppna köer" || fr["leave"] != en["leave"] {
		t.Errorf("sv: %q %q", fr["index_heading"], fr["leave"])
	}
	if en["lang_codes"] != strings.Join(cat.Languages(), " ") {
		t.Errorf("lang_codes = %q", en["lang_codes"])
	}
	for _, want := range []string{"ja.json: 1 unknown keys ignored: no_such_key", "sv.json: new language sv, 3 keys", "buyer keys missing, shown in English: ", "Not-A-Code.json: skipped", "ru.json: overrides ru, 2 keys"} {
		if !strings.Contains(all, want) {
			t.Errorf("notes lack %q", want)
		}
	}
	if strings.Contains(all, "stock_left.one") {
		t.Error("a plural variant is listed as a missing key: the base key serves every count")
	}
	if got := cat.Lang("sv-SE, en;q=0.5"); got != "sv" {
		t.Errorf("Lang(sv-SE) = %q after loading sv", got)
	}
	if l, ok := cat.Supported("SV-fi"); !ok || l != "sv" {
		t.Errorf("Supported(SV-fi) = %q %v", l, ok)
	}
	// The operator's plural text is used for every count, never the built-in or English
	// variants it would contradict.
	for _, n := range []int{1, 3, 5, 21} {
		if got := cat.Count("ru", "stock_left", n); got != "Осталось: "+static.FormatNumber("ru", n) {
			t.Errorf("ru stock_left %d: %q", n, got)
		}
		if got := cat.Count("sv", "stock_left", n); got != static.FormatNumber("sv", n)+" kvar" {
			t.Errorf("sv stock_left %d: %q", n, got)
		}
	}
	if ru := cat.Messages("ru"); ru["index_heading"] != "Открытые очереди" || ru["joining"] != static.Builtin().Messages("ru")["joining"] || ru["stock_left.few"] != "" {
		t.Errorf("ru override: %q %q, stock_left.few %q", ru["index_heading"], ru["joining"], ru["stock_left.few"])
	}
	write("ko.json", `{"joining": 5}`)
	if _, _, err := static.LoadMessagesDir(dir); err == nil {
		t.Error("a value that is not a string must be an error")
	}
	if _, _, err := static.LoadMessagesDir(filepath.Join(dir, "nope")); err == nil {
		t.Error("a missing directory must be an error")
	}
	if cat, _, err := static.LoadMessagesDir(""); err != nil || !slices.Equal(cat.Languages(), builtin) || cat.Lang("sv") != "en" {
		t.Errorf("reset: %v %v", err, cat.Languages())
	}
}

// Every asset has a content-hashed URL that resolves back to it; another release's hash does
// not resolve, and plain names are not taken for hashed ones.
func TestAssetURLsCarryTheContentHash(t *testing.T) {
	t.Parallel()
	entries, err := fs.ReadDir(static.Assets(), ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		u := static.AssetURL(e.Name())
		hashed := strings.TrimPrefix(u, "/static/")
		if hashed == e.Name() || !static.LooksHashed(hashed) {
			t.Errorf("%s: URL %s carries no hash", e.Name(), u)
		}
		if plain, ok := static.HashedAsset(hashed); !ok || plain != e.Name() {
			t.Errorf("%s: %s resolves to %q %v", e.Name(), hashed, plain, ok)
		}
		if static.LooksHashed(e.Name()) {
			t.Errorf("%s: a plain name looks hashed", e.Name())
		}
	}
	if _, ok := static.HashedAsset("queue.0123456789.js"); ok {
		t.Error("a hash of another release resolved")
	}
}

// staffFiles are the templates and scripts of the dashboard and its report; every other
// template and script (the index, the waiting and order pages, the layout, queue.js,
// order.js, waitroom.js, lang.js, and any new one) belongs to the buyer pages, which get
// Catalog.BuyerMessages only.
var staffFiles = map[string]bool{"templates/admin.html": true, "templates/report.html": true,
	"assets/admin.js": true, "assets/report.js": true, "assets/charts.js": true}

func buyerFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, glob := range []string{"templates/*.html", "assets/*.js"} {
		names, err := fs.Glob(static.FS, glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if !staffFiles[n] {
				out = append(out, n)
			}
		}
	}
	for _, must := range []string{"templates/queue.html", "templates/order.html", "templates/index.html", "assets/queue.js", "assets/order.js", "assets/waitroom.js"} {
		if !slices.Contains(out, must) {
			t.Fatalf("no %s among the buyer files", must)
		}
	}
	return out
}

// TestBuyerPagesCarryBuyerMessages: every key a buyer template or script uses — {{.T.key}},
// {{index .T "key"}}, t('key'), and every key of a prefix built at run time
// (t('conn_' + state)) — is a buyer message, and a buyer page's #wr-messages block holds
// no dashboard or report message. The split is by where a key is written
// (Catalog.BuyerMessages), so a key added for the dashboard never reaches a buyer's page
// and a buyer page that starts using a dashboard key fails here.
func TestBuyerPagesCarryBuyerMessages(t *testing.T) {
	t.Parallel()
	all, buyer := static.Builtin().Messages("en"), static.Builtin().BuyerMessages("en")
	tplKey := regexp.MustCompile(`\.T\.(\w+)|index \.T "(\w+)"`)
	jsKey := regexp.MustCompile(`\btn?\(\s*'(\w+)'\s*[,)]`)
	jsPrefix := regexp.MustCompile(`\bt\(\s*'(\w+)'\s*\+`)
	literal := regexp.MustCompile(`'([a-z][a-z0-9_]*)'`)
	used := 0
	need := func(file, key string) {
		used++
		if _, ok := all[key]; !ok {
			t.Errorf("%s uses %q, which is no message", file, key)
		} else if _, ok := buyer[key]; !ok {
			t.Errorf("%s uses %q, which is not a buyer message (a dashboard or report key: admin_…, report_…, messages_dashboard.go, messages_report.go)", file, key)
		}
	}
	for _, f := range buyerFiles(t) {
		b, err := fs.ReadFile(static.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		for _, m := range tplKey.FindAllStringSubmatch(src, -1) {
			need(f, m[1]+m[2])
		}
		for _, m := range jsKey.FindAllStringSubmatch(src, -1) {
			need(f, m[1])
		}
		for _, m := range jsPrefix.FindAllStringSubmatch(src, -1) {
			n := 0
			for k := range all {
				if strings.HasPrefix(k, m[1]) {
					need(f, k)
					n++
				}
			}
			if n == 0 {
				t.Errorf("%s builds keys %s…, and there is none", f, m[1])
			}
		}
		// Any other quoted word that names a message (a key passed around before t()).
		for _, m := range literal.FindAllStringSubmatch(src, -1) {
			if _, ok := all[m[1]]; ok {
				need(f, m[1])
			}
		}
	}
	if used < 100 {
		t.Fatalf("found only %d key uses in the buyer files: has the way keys are written changed?", used)
	}
	for k := range buyer {
		if strings.HasPrefix(k, "admin_") || strings.HasPrefix(k, "report_") {
			t.Errorf("%s: a buyer message", k)
		}
	}

	// The block a buyer page embeds, before (every message) and now (buyer messages).
	tmpl, err := static.Templates()
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)<script type="application/json" id="wr-messages">(.*?)</script>`)
	size := func(page string, data any) int {
		m := block.FindStringSubmatch(render(t, tmpl, page, data))
		if m == nil {
			t.Fatalf("%s: no #wr-messages", page)
		}
		if page != "admin" && (strings.Contains(m[1], `"admin_`) || strings.Contains(m[1], `"report_`)) {
			t.Errorf("%s: the messages block holds dashboard or report keys", page)
		}
		return len(m[1])
	}
	for _, lang := range []string{"en", "ko", "ja"} {
		q := size("queue", pages(lang)["queue"])
		whole := size("admin", static.AdminPage{Lang: lang, T: static.Builtin().Messages(lang)})
		t.Logf("%s: #wr-messages on a buyer page %d bytes (every message: %d bytes)", lang, q, whole)
		if q >= whole*2/3 {
			t.Errorf("%s: the buyer block (%d bytes) is not much smaller than the whole table (%d bytes)", lang, q, whole)
		}
	}
}

// TestDashboardFallbacksAreTheEnglishText: a dashboard element marked data-i18n holds
// {{.T.key}} or the key's English text, and tx('key', 'fallback') falls back to the
// English text — the words before admin.js localizes never differ from the table's.
func TestDashboardFallbacksAreTheEnglishText(t *testing.T) {
	t.Parallel()
	en := static.Builtin().Messages("en")
	el := regexp.MustCompile(`data-i18n="(\w+)"[^>]*>([^<]*)<`)
	for name, src := range readAll(t, "templates/*.html") {
		for _, m := range el.FindAllStringSubmatch(src, -1) {
			if m[2] != "{{.T."+m[1]+"}}" && m[2] != en[m[1]] {
				t.Errorf("%s: data-i18n=%q holds %q: want {{.T.%s}} (or the English %q)", name, m[1], m[2], m[1], en[m[1]])
			}
		}
	}
	tx := regexp.MustCompile(`\btx\(\s*'(\w+)',\s*'((?:[^'\\]|\\.)*)'`)
	for name, src := range readAll(t, "assets/*.js") {
		for _, m := range tx.FindAllStringSubmatch(src, -1) {
			if m[2] != en[m[1]] {
				t.Errorf("%s: tx(%q) falls back to %q, the English text is %q", name, m[1], m[2], en[m[1]])
			}
		}
	}
}
