package static_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"

	"github.com/waitroom/waitroom/static"
)

// TestLangTrickyHeaders: q=0 excludes a language even from "*", a malformed entry drops
// only itself, and tags with scripts, extensions or underscores find their language.
func TestLangTrickyHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, header, want string
	}{
		{"English excluded, the wildcard takes the rest", "en;q=0, *", "ko"},
		{"English excluded, nothing else wanted", "en;q=0", "en"},
		{"everything excluded", "en;q=0, ko;q=0, ja;q=0", "en"},
		{"wildcard excluded", "*;q=0, ja", "ja"},
		{"excluded wildcard leaves listed ones", "*;q=0, ko;q=0.3", "ko"},
		{"q=0.0 and q=0.000", "ko;q=0.0, ja;q=0.000", "en"},
		{"the best q of a language counts", "ko-KR;q=0, ko;q=0.9, ja;q=0.5", "ko"},
		{"negative q is not acceptable", "ko;q=-1, ja;q=0.1", "ja"},
		{"malformed q, the next entry counts", "ko;q=abc, ja;q=0.5", "ja"},
		{"two q parameters", "ko;q=0.5;q=0.9, ja;q=0.1", "ja"},
		{"a parameter other than q", "ko;level=1, ja;q=0.2", "ja"},
		{"q above 1", "ko;q=2, ja;q=0.1", "ja"},
		{"empty entries and semicolons", ",,;;, ;q=1, ja;q=0.4", "ja"},
		{"not a tag", "-ko, ko-, 한국어, ja;q=0.1", "ja"},
		{"q without a leading zero", "ko;q=.9, ja;q=0.8", "ko"},
		{"spaces around everything", "  ja ;  q = 0.9 ,\tko ; q=0.8 ", "ja"},
		{"script and region", "ko-Kore-KR", "ko"},
		{"Unicode extension", "ja-JP-u-ca-japanese, en;q=0.5", "ja"},
		{"underscore and mixed case", "KO_kr", "ko"},
		{"a region of English first", "en-GB, ko;q=0.9", "en"},
		{"private use only", "x-klingon, ja;q=0.1", "ja"},
		{"Latin-script Japanese is not the Japanese pages", "ja-Latn, ko;q=0.1", "ko"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := static.Builtin().Lang(tt.header); got != tt.want {
				t.Errorf("Lang(%q) = %q, want %q", tt.header, got, tt.want)
			}
		})
	}
}

// TestLangBoundsTheWork: only the first 32 entries are read and an entry past 64 bytes
// is skipped unparsed, so a header of thousands of entries, or one of thousands of
// subtags, costs what 32 short entries cost. Not parallel: AllocsPerRun refuses it.
func TestLangBoundsTheWork(t *testing.T) {
	cat := static.Builtin()
	junk := func(n int) string { return strings.Repeat("xx-YY;q=0.1, ", n) }
	if got := cat.Lang(junk(31) + "ko"); got != "ko" {
		t.Errorf("the 32nd entry: %q, want ko", got)
	}
	if got := cat.Lang(junk(32) + "ko"); got != "en" {
		t.Errorf("the 33rd entry: %q, want en (not read)", got)
	}
	long := strings.Repeat("a-", 3000) + "b" // x/text refuses a list of more than 1000 '-'
	if got := cat.Lang(long + ", ko;q=0.5"); got != "ko" {
		t.Errorf("a long entry before ko: %q, want ko", got)
	}
	thirtyTwo := junk(32)
	huge := junk(10000)
	manyCommas := strings.Repeat(",", 100000) + "ko"
	base := testing.AllocsPerRun(20, func() { cat.Lang(thirtyTwo) })
	for name, h := range map[string]string{"10,000 entries": huge, "a 6 KB entry": long, "100,000 commas": manyCommas} {
		if n := testing.AllocsPerRun(20, func() { cat.Lang(h) }); n > base {
			t.Errorf("%s: %v allocations, more than the %v of 32 entries", name, n, base)
		}
	}
	if got := cat.Lang(manyCommas); got != "en" {
		t.Errorf("ko after 100,000 commas: %q, want en (not read)", got)
	}
}

// TestLangMatchesLoadedLanguages: a language from a messages directory is matched by
// x/text like a built-in one (a region, an alias, a close variant), and a code x/text
// does not know is reported and never picked from Accept-Language.
func TestLangMatchesLoadedLanguages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, code := range []string{"he", "nb", "pt-PT", "zz"} {
		if err := os.WriteFile(filepath.Join(dir, code+".json"), []byte(`{"index_heading": "`+code+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cat, notes, err := static.LoadMessagesDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ header, want string }{
		{"iw", "he"}, // the old code of Hebrew
		{"he-IL, en;q=0.5", "he"},
		{"no", "nb"},                 // Norwegian for Bokmål
		{"nn, en;q=0.1", "nb"},       // Nynorsk reads Bokmål before English
		{"pt-PT, en;q=0.9", "pt-PT"}, // an operator's Portugal Portuguese beside the built-in pt-BR
		{"pt-BR, en;q=0.9", "pt-BR"},
		{"zz, ko;q=0.1", "ko"},
		{"zz", "en"},
	}
	for _, tt := range tests {
		if got := cat.Lang(tt.header); got != tt.want {
			t.Errorf("Lang(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
	if l, ok := cat.Supported("zz"); !ok || l != "zz" {
		t.Errorf("Supported(zz) = %q %v: an unknown code is still chosen with ?lang=", l, ok)
	}
	if all := strings.Join(notes, "\n"); !strings.Contains(all, "zz is not a known language code") {
		t.Errorf("no note for zz in:\n%s", all)
	}
}

// buyerLanguages are the languages of the buyer pages; the dashboard and the report are in
// dashboardLanguages only (docs/TRANSLATING.md).
var (
	buyerLanguages = []string{"en", "ko", "ja", "ar", "de", "es", "fr", "he", "hi", "id", "it", "nl", "pl",
		"pt-BR", "ru", "th", "tr", "uk", "vi", "zh-Hans", "zh-Hant"}
	dashboardLanguages = []string{"en", "ko", "ja"}
)

// mayBeEmpty are the keys a language may leave empty where its word order needs no word.
var mayBeEmpty = map[string]bool{"pos_after": true, "pos_before": true}

// TestMessagesEveryLanguage is the translators' check (docs/TRANSLATING.md), on the
// message files themselves: each i18n/<area>/<lang>.json is a JSON object of strings;
// the dashboard area is in en, ko and ja, every other (buyer) area in every buyer
// language; each file has every key of its area's English file, none empty, with the
// same {placeholders}, no key English lacks, and the plural variants the language's CLDR
// rules give whole numbers ("stock_left.few" in Russian) — each failure names the file,
// the key and what is wrong.
func TestMessagesEveryLanguage(t *testing.T) {
	t.Parallel()
	fsys := static.MessageFiles()
	areas, err := fs.ReadDir(fsys, "i18n")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, a := range areas {
		area := a.Name()
		want := buyerLanguages
		if area == "dashboard" {
			want = dashboardLanguages
		}
		en := readMessageFile(t, fsys, area, "en")
		names, _ := fs.Glob(fsys, "i18n/"+area+"/*.json")
		var got []string
		for _, n := range names {
			got = append(got, strings.TrimSuffix(path.Base(n), ".json"))
		}
		for _, lang := range want {
			if !slices.Contains(got, lang) {
				t.Errorf("i18n/%s/%s.json: missing (the %s area is in %v)", area, lang, area, want)
			}
		}
		for _, lang := range got {
			if !slices.Contains(want, lang) {
				t.Errorf("i18n/%s/%s.json: %s is not a language of this area (%v): add it to the list in lang_test.go and docs/TRANSLATING.md", area, lang, lang, want)
			}
			for _, p := range messageProblems(area, lang, en, readMessageFile(t, fsys, area, lang)) {
				t.Error(p)
			}
			files++
		}
	}
	if files < len(buyerLanguages)+len(dashboardLanguages) {
		t.Fatalf("checked %d files", files)
	}
	if got := static.Builtin().Languages(); !slices.Equal(got[:3], dashboardLanguages) || len(got) != len(buyerLanguages) {
		t.Errorf("Languages() = %v, want en ko ja then the rest of %v", got, buyerLanguages)
	}
	if got := static.Builtin().Messages("en")["lang_codes"]; got != strings.Join(static.Builtin().Languages(), " ") {
		t.Errorf("lang_codes = %q", got)
	}
}

// readMessageFile reads i18n/<area>/<lang>.json as a JSON object of strings; anything
// else fails the test, naming the file and the key.
func readMessageFile(t *testing.T, fsys fs.FS, area, lang string) map[string]string {
	t.Helper()
	name := "i18n/" + area + "/" + lang + ".json"
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("%s: not a JSON object: %v", name, err)
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			t.Errorf("%s: key %q: the value is %T, want a string", name, k, v)
			continue
		}
		out[k] = s
	}
	return out
}

// messageProblems is what is wrong with file, the messages of lang in area, against the
// area's English file en: one line per problem, "i18n/<area>/<lang>.json: key "k": …".
func messageProblems(area, lang string, en, file map[string]string) []string {
	name := "i18n/" + area + "/" + lang + ".json"
	var out []string
	bad := func(key, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: key %q: ", name, key)+fmt.Sprintf(format, args...))
	}
	keys := slices.Sorted(maps.Keys(en))
	for _, k := range keys {
		if _, cat := static.SplitVariant(k); cat != "" {
			continue // the variants a language needs are checked below
		}
		v, ok := file[k]
		switch {
		case !ok:
			bad(k, "missing (English: %q)", en[k])
		case strings.TrimSpace(v) == "" && !mayBeEmpty[k]:
			bad(k, "empty")
		case !slices.Equal(placeholders(en[k]), placeholders(v)):
			bad(k, "placeholders %v, English has %v", placeholders(v), placeholders(en[k]))
		case lang != "en" && v == en[k] && len(strings.Fields(en[k])) >= 3 && !sameInEveryLanguage(k, en[k]):
			bad(k, "still the English text %q", v)
		}
	}
	plural := static.PluralKeys()
	for _, base := range plural {
		if _, ok := en[base]; !ok {
			continue // another area's key
		}
		for _, cat := range static.PluralCategories(lang) {
			k := base + "." + cat
			v, ok := file[k]
			switch {
			case !ok:
				bad(k, "missing: %s counts take the CLDR category %q (%v), so the plural key %s needs this variant", lang, cat, static.PluralCategories(lang), base)
			case strings.TrimSpace(v) == "":
				bad(k, "empty")
			case !slices.Equal(placeholders(en[base]), placeholders(v)) &&
				!(onlyNumber(lang, cat) >= 0 && slices.Equal(slices.DeleteFunc(placeholders(en[base]), func(p string) bool { return p == "n" }), placeholders(v))):
				bad(k, "placeholders %v, English has %v (only a category of one number, such as Arabic \"two\", may leave {n} out)", placeholders(v), placeholders(en[base]))
			}
		}
	}
	if lang == "en" {
		for _, base := range plural {
			if _, ok := en[base]; ok && en[base+".one"] == "" {
				bad(base+".one", "missing: a plural key has its English variant")
			}
		}
		for _, cat := range static.OrdinalCategories("en") {
			if en["pos_number"] != "" && en["pos_number."+cat] == "" {
				bad("pos_number."+cat, "missing: English places are written with the ordinal rules (1st, 2nd, 3rd)")
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(file)) {
		base, cat := static.SplitVariant(k)
		_, known := en[k]
		switch {
		case known && cat == "":
		case cat != "" && static.IsOrdinalKey(base) && en[base] != "":
			if !slices.Contains(static.OrdinalCategories(lang), cat) {
				bad(k, "%s places have no ordinal category %q (only %v): remove it", lang, cat, static.OrdinalCategories(lang))
			} else if !slices.Equal(placeholders(en[base]), placeholders(file[k])) {
				bad(k, "placeholders %v, English has %v", placeholders(file[k]), placeholders(en[base]))
			}
		case cat != "" && slices.Contains(plural, base) && en[base] != "":
			if !slices.Contains(static.PluralCategories(lang), cat) {
				bad(k, "%s counts have no CLDR category %q (only %v): remove it", lang, cat, static.PluralCategories(lang))
			}
		case cat != "":
			bad(k, "a plural variant of %q, which is no plural key of this area (those are the keys with a variant in en.json)", base)
		default:
			bad(k, "not a key of this area (i18n/%s/en.json has no %q)", area, k)
		}
	}
	return out
}

// TestMessageCheckNamesTheProblem: the check above reports a missing key, a changed
// placeholder, an empty text, a missing plural variant and an unknown key each with the
// file and the key.
func TestMessageCheckNamesTheProblem(t *testing.T) {
	t.Parallel()
	en := map[string]string{"stock_left": "{n} left", "stock_left.one": "{n} left", "joining": "Getting your place in line…", "leave": "Leave"}
	ru := map[string]string{"stock_left": "Осталось {n}", "stock_left.one": "Остался {n}", "stock_left.few": "", "stock_left.two": "{n}", "joining": "{x}", "nope": "?", "leave.one": "?"}
	got := strings.Join(messageProblems("buyer", "ru", en, ru), "\n")
	for _, want := range []string{
		`i18n/buyer/ru.json: key "leave": missing`,
		`i18n/buyer/ru.json: key "joining": placeholders [x], English has []`,
		`i18n/buyer/ru.json: key "stock_left.few": empty`,
		`i18n/buyer/ru.json: key "stock_left.many": missing: ru counts take the CLDR category "many"`,
		`i18n/buyer/ru.json: key "nope": not a key of this area`,
		`i18n/buyer/ru.json: key "leave.one": a plural variant of "leave", which is no plural key`,
		`i18n/buyer/ru.json: key "stock_left.two": ru counts have no CLDR category "two"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the problems lack %q:\n%s", want, got)
		}
	}
}

// onlyNumber is the one whole number of CLDR category cat in lang (Arabic "two": 2), or
// -1 when the category holds several (Russian "one": 1, 21, 31, …): a variant for one
// number may say it in words instead of {n}.
func onlyNumber(lang, cat string) int {
	tag := language.MustParse(lang)
	forms := map[string]plural.Form{"zero": plural.Zero, "one": plural.One, "two": plural.Two, "few": plural.Few, "many": plural.Many}
	found := -1
	for n := range 1001 {
		if plural.Cardinal.MatchPlural(tag, n, 0, 0, 0, 0) == forms[cat] {
			if found >= 0 {
				return -1
			}
			found = n
		}
	}
	return found
}

// TestLangTags: ?lang= and the cookie take a tag in any case, with "_" or "-", and a close
// variant of a language finds it; a related language does not; the writing direction
// follows the script.
func TestLangTags(t *testing.T) {
	t.Parallel()
	cat := static.Builtin()
	for in, want := range map[string]string{
		"zh-Hant": "zh-Hant", "ZH_hant": "zh-Hant", "zh-TW": "zh-Hant", "zh-HK": "zh-Hant", "zh-CN": "zh-Hans",
		"zh-SG": "zh-Hans", "zh": "zh-Hans", "pt-br": "pt-BR", "pt": "pt-BR", "pt-PT": "pt-BR", "iw": "he",
		"he-IL": "he", "ar-SA": "ar", "ko-KR": "ko", "FR-ca": "fr", "en-GB": "en",
		"be": "", "sv": "", "xx": "", "": "", "zh-Hant-TW-x-" + strings.Repeat("a", 80): "",
	} {
		got, ok := cat.Supported(in)
		if got != want || ok != (want != "") {
			t.Errorf("Supported(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	for lang, want := range map[string]string{"ar": "rtl", "he": "rtl", "fa": "rtl", "ur": "rtl", "en": "ltr", "zh-Hant": "ltr", "ja": "ltr", "zz": "ltr"} {
		if got := static.Dir(lang); got != want {
			t.Errorf("Dir(%q) = %q, want %q", lang, got, want)
		}
	}
}

// TestPluralAndOrdinal: Go picks the same variant as the pages' scripts (CLDR rules of
// each language) and writes the count in the language's digits.
func TestPluralAndOrdinal(t *testing.T) {
	t.Parallel()
	cat := static.Builtin()
	ar := cat.Messages("ar")
	tests := []struct {
		lang, key string
		n         int
		want      string
	}{
		{"en", "stock_left", 1, "1 left"},
		{"en", "announce_lottery", 1, "You are in the draw. 1 person is waiting."},
		{"en", "announce_lottery", 1234, "You are in the draw. 1,234 people are waiting."},
		{"ar", "stock_left", 1, ar["stock_left.one"]},
		{"ar", "stock_left", 2, ar["stock_left.two"]},
		{"ar", "stock_left", 3, strings.ReplaceAll(ar["stock_left.few"], "{n}", "3")},
		{"ar", "stock_left", 11, strings.ReplaceAll(ar["stock_left.many"], "{n}", "11")},
		{"ar", "stock_left", 100, strings.ReplaceAll(ar["stock_left"], "{n}", "100")},
		{"ru", "announce_lottery", 21, strings.ReplaceAll(cat.Messages("ru")["announce_lottery.one"], "{n}", "21")},
		{"ru", "announce_lottery", 3, strings.ReplaceAll(cat.Messages("ru")["announce_lottery.few"], "{n}", "3")},
		{"ru", "announce_lottery", 5, strings.ReplaceAll(cat.Messages("ru")["announce_lottery.many"], "{n}", "5")},
		{"ja", "stock_left", 1, strings.ReplaceAll(cat.Messages("ja")["stock_left"], "{n}", "1")},
		{"de", "stock_left", 1234, strings.ReplaceAll(cat.Messages("de")["stock_left"], "{n}", "1.234")},
		{"sv", "stock_left", 1, "1 left"},                                                     // not a language of the catalogue: English
		{"ar", "stock_left", 1234, strings.ReplaceAll(ar["stock_left.many"], "{n}", "1,234")}, // Latin digits, as Intl.NumberFormat("ar")
	}
	for _, tt := range tests {
		if got := cat.Count(tt.lang, tt.key, tt.n); got != tt.want {
			t.Errorf("Count(%s, %s, %d) = %q, want %q", tt.lang, tt.key, tt.n, got, tt.want)
		}
	}
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 22: "22nd", 23: "23rd", 111: "111th", 1001: "1,001st"} {
		if got := cat.Ordinal("en", n); got != want {
			t.Errorf("Ordinal(en, %d) = %q, want %q", n, got, want)
		}
	}
	if got := cat.Ordinal("ko", 23); got != "23번" {
		t.Errorf("Ordinal(ko, 23) = %q", got)
	}
	if got := cat.Ordinal("tr", 23); got != "23." {
		t.Errorf("Ordinal(tr, 23) = %q", got)
	}
	if got := static.PluralCategories("ar"); !slices.Equal(got, []string{"zero", "one", "two", "few", "many"}) {
		t.Errorf("PluralCategories(ar) = %v", got)
	}
	if got := static.PluralKeys(); !slices.Equal(got, []string{"announce_lottery", "eta_minutes", "eta_seconds", "lottery", "stock_left"}) {
		t.Errorf("PluralKeys() = %v", got)
	}
}

// TestQueueOverrides: a queue's overrides of buyer texts are checked against the catalogue
// (language, buyer key, plural form, placeholders, empty) and applied to that language's
// table only; a plural key overridden without variants drops the built-in variants.
func TestQueueOverrides(t *testing.T) {
	t.Parallel()
	cat := static.Builtin()
	for raw, want := range map[string]string{
		``: "",
		`{"en": {"queue_heading": "Drop"}, "ar": {"stock_left.two": "تبقّى زوجان", "stock_left.few": "{n} أزواج"}}`: "",
		`{"pt-BR": {"pos_number": "{n}º"}}`:     "",
		`{"en": {"pos_number.two": "{n}nd!"}}`:  "",
		`{"sv": {"leave": "Lämna"}}`:            `messages.sv: "sv" is not a language`,
		`{"en": {"admin_title": "x"}}`:          `messages.en.admin_title: "admin_title" is not a message of the buyer pages`,
		`{"en": {"lang_codes": "x"}}`:           "is not a message of the buyer pages",
		`{"en": {"leave.one": "x"}}`:            "leave is not a plural key",
		`{"en": {"stock_left.lots": "x"}}`:      "is not a message of the buyer pages",
		`{"ru": {"stock_left.two": "{n}"}}`:     `stock_left is not a plural key with a "two" form in ru`,
		`{"ru": {"stock_left.one": "Остался"}}`: "the text has the placeholders []",
		`{"ko": {"pos_number.one": "{n}"}}`:     `ko places have no ordinal form "one"`,
		`{"en": {"order_error": "Failed"}}`:     "the text has the placeholders [], it must have those of",
		`{"en": {"leave": ""}}`:                 "the text is empty",
		`["en"]`:                                "must be an object",
	} {
		err := cat.CheckOverrides(raw)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", raw, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
	raw := `{"ru": {"stock_left": "Осталось: {n}"}, "en": {"leave": "Go"}}`
	ru := cat.Overridden(cat.BuyerMessages("ru"), "ru", raw)
	if ru["stock_left"] != "Осталось: {n}" || ru["stock_left.few"] != "" || ru["leave"] != cat.Messages("ru")["leave"] {
		t.Errorf("ru: %q few %q leave %q", ru["stock_left"], ru["stock_left.few"], ru["leave"])
	}
	if en := cat.Overridden(cat.BuyerMessages("en"), "en", raw); en["leave"] != "Go" || en["stock_left.one"] == "" {
		t.Errorf("en: %q, stock_left.one %q", en["leave"], en["stock_left.one"])
	}
	if ja := cat.Overridden(cat.BuyerMessages("ja"), "ja", `not json`); ja["leave"] != cat.Messages("ja")["leave"] {
		t.Error("an unreadable setting changed the page")
	}
}
