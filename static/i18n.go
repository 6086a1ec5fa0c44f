package static

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/text/language"
)

// Built-in languages. English is the fallback; every other table, built in or
// read from an operator's directory (LoadMessagesDir), has the English keys. These
// three have every area; the other built-in languages (i18n/buyer/<code>.json) have
// the buyer pages only, and the dashboard and the report show them in English.
const (
	LangEnglish  = "en"
	LangKorean   = "ko"
	LangJapanese = "ja"
)

// Catalog is a set of message tables: the built-in ones (Builtin), plus what
// LoadMessagesDir read from an operator's directory. It does not change once made, so
// one value is safe for concurrent use; the server makes it at start and hands it to
// whatever renders pages.
type Catalog struct {
	tables map[string]map[string]string
	buyer  map[string]map[string]string // each table without the dashboard's and report's keys
	order  []string                     // preference on a tie: en, ko, ja, then the others by code
	codes  string                       // the codes in order, space-separated (T.lang_codes)
	// matcher matches Accept-Language tags to the languages of order that x/text knows;
	// matched maps its index to theirs in order.
	matcher language.Matcher
	matched []int
}

// builtin is the catalogue of the built-in tables, made once; nothing changes it.
var builtin = newCatalog(builtinTables())

// Builtin returns the catalogue of the built-in tables.
func Builtin() *Catalog { return builtin }

// catalogueFS holds the built-in message files: i18n/<area>/<lang>.json, each one JSON
// object {"key": "text"}. The areas are "buyer" (every page a buyer sees: the layout, the
// index, the waiting and order pages, and their scripts) and "dashboard" (the dashboard and
// the report); a key lives in one area. Translators edit these files, no Go involved
// (docs/TRANSLATING.md).
//
//go:embed i18n
var catalogueFS embed.FS

// MessageFiles returns the built-in message files, i18n/<area>/<lang>.json, for the
// translators' check (static's tests, docs/TRANSLATING.md).
func MessageFiles() fs.FS { return catalogueFS }

// dashboardArea is the area whose keys are not buyer messages.
const dashboardArea = "dashboard"

// keyArea is the area of every key of the English files, read once.
var keyArea map[string]string

func builtinTables() map[string]map[string]string {
	tables, areas, err := readCatalogue(catalogueFS)
	if err != nil {
		panic("static: the built-in message files: " + err.Error())
	}
	if keyArea == nil {
		keyArea = areas
	}
	return tables
}

// readCatalogue reads i18n/<area>/<lang>.json from fsys: the tables by language and the
// area of each English key. A key in two areas, or a file that is not a JSON object of
// strings, is an error.
func readCatalogue(fsys fs.FS) (map[string]map[string]string, map[string]string, error) {
	names, err := fs.Glob(fsys, "i18n/*/*.json")
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(names)
	tables := map[string]map[string]string{}
	areas := map[string]string{}
	seen := map[string]string{} // lang + "\x00" + key → area
	for _, name := range names {
		parts := strings.Split(name, "/")
		area, lang := parts[1], strings.TrimSuffix(parts[2], ".json")
		if !codeRE.MatchString(lang) {
			return nil, nil, fmt.Errorf("%s: %q is not a language code in canonical form (ar, pt-BR, zh-Hant)", name, lang)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, nil, err
		}
		var file map[string]string
		if err := json.Unmarshal(b, &file); err != nil {
			return nil, nil, fmt.Errorf("%s: want a JSON object of strings {\"key\": \"text\"}: %w", name, err)
		}
		table := tables[lang]
		if table == nil {
			table = map[string]string{}
			tables[lang] = table
		}
		for k, v := range file {
			if other, dup := seen[lang+"\x00"+k]; dup {
				return nil, nil, fmt.Errorf("%s: key %q is in area %q too (a key lives in one area)", name, k, other)
			}
			seen[lang+"\x00"+k] = area
			table[k] = v
			if lang == LangEnglish {
				areas[k] = area
			}
		}
	}
	if len(tables[LangEnglish]) == 0 {
		return nil, nil, fmt.Errorf("no English messages (i18n/*/en.json)")
	}
	return tables, areas, nil
}

func newCatalog(tables map[string]map[string]string) *Catalog {
	c := &Catalog{tables: tables, buyer: map[string]map[string]string{}, order: []string{LangEnglish, LangKorean, LangJapanese}}
	for code, table := range tables {
		b := make(map[string]string, len(table))
		for k, v := range table {
			if isBuyerKey(k) {
				b[k] = v
			}
		}
		c.buyer[code] = b
	}
	var extra []string
	for code := range tables {
		if !slices.Contains(c.order, code) {
			extra = append(extra, code)
		}
	}
	sort.Strings(extra)
	c.order = append(c.order, extra...)
	c.codes = strings.Join(c.order, " ")
	var tags []language.Tag
	for i, code := range c.order {
		if t, err := language.Parse(code); err == nil {
			tags = append(tags, t)
			c.matched = append(c.matched, i)
		}
	}
	c.matcher = language.NewMatcher(tags)
	return c
}

// Languages returns the codes of every language the pages can be shown in:
// en, ko, ja, then the other built-in ones and those added from a messages
// directory, by code. A code is a BCP 47 tag in its canonical form: a language
// ("ar"), with a script ("zh-Hans") or a region ("pt-BR") where one language has
// two written forms.
func (cat *Catalog) Languages() []string { return slices.Clone(cat.order) }

// Supported reports whether code (a ?lang= value or the wr_lang cookie) names a
// language of Languages, and returns that language's code. Case and "_" for "-"
// do not matter ("PT_br" is "pt-BR"); a tag that is not one of the codes is
// matched by x/text like an Accept-Language entry but more strictly — only a
// close variant counts (ja-JP → ja, fr-CA → fr, zh-TW → zh-Hant, pt-PT → pt-BR,
// iw → he), never a merely related language.
func (cat *Catalog) Supported(code string) (string, bool) {
	code = strings.TrimSpace(code)
	if code == "" || len(code) > langMaxEntry {
		return "", false
	}
	code = strings.ReplaceAll(code, "_", "-")
	for _, c := range cat.order {
		if strings.EqualFold(c, code) {
			return c, true
		}
	}
	tag, err := language.Parse(code)
	if err != nil {
		return "", false
	}
	if got, i, conf := cat.matcher.Match(tag); conf >= language.High {
		if b1, _ := got.Base(); b1 == base(tag) { // not a related language (be for ru)
			return cat.order[cat.matched[i]], true
		}
	}
	return "", false
}

func base(t language.Tag) language.Base {
	b, _ := t.Base()
	return b
}

// rtlScripts are the scripts written right to left that a language of the pages may use.
var rtlScripts = map[string]bool{"Arab": true, "Hebr": true, "Syrc": true, "Thaa": true, "Nkoo": true, "Adlm": true, "Rohg": true, "Mand": true, "Samr": true}

// Dir returns the writing direction of lang for <html dir>: "rtl" for a language
// written right to left (ar, he, fa, ur, … — by the script x/text gives the tag),
// else "ltr".
func Dir(lang string) string {
	tag, err := language.Parse(lang)
	if err != nil {
		return "ltr"
	}
	if script, _ := tag.Script(); rtlScripts[script.String()] {
		return "rtl"
	}
	return "ltr"
}

// Bounds on the work Lang does for one header: browsers send a handful of short
// entries, and a header may be kilobytes of anything.
const (
	langMaxEntries = 32 // entries past these are not read
	langMaxEntry   = 64 // bytes; a longer entry is skipped unparsed
)

// Lang picks the page language from an Accept-Language header: the language of
// Languages the caller wants most (by q-value, then by order of listing, then
// en, ko, ja, others), else "en". Each entry is parsed by x/text/language and
// matched to a language of Languages by its Matcher, so that a region or script
// (ko-KR, ja-JP), an alias (iw for he) or a close variant finds the language; an
// entry that is malformed (its tag, its q, a q above 1, a parameter other than q)
// is skipped, the others still count. A language missing from the header takes the
// q-value of "*" if there is one; q=0 means "not acceptable". English is the
// answer whenever no other language is wanted more. Only the first langMaxEntries
// entries are read.
func (cat *Catalog) Lang(acceptLanguage string) string {
	var prefs [32]pref // by index in cat.order; a catalogue with more languages allocates
	p := prefs[:0]
	if len(cat.order) > len(prefs) {
		p = make([]pref, 0, len(cat.order))
	}
	for range cat.order {
		p = append(p, pref{q: -1, at: -1})
	}
	wild := pref{q: -1}
	rest := acceptLanguage
	for i := 0; i < langMaxEntries && rest != ""; i++ {
		var entry string
		entry, rest, _ = strings.Cut(rest, ",")
		lang, q, ok := cat.langRange(entry)
		switch {
		case !ok:
		case lang < 0:
			wild = better(wild, pref{q: q, at: i})
		default:
			p[lang] = better(p[lang], pref{q: q, at: i})
		}
	}
	get := func(i int) pref {
		if p[i].at >= 0 {
			return p[i]
		}
		return wild
	}
	best, bp := 0, get(0) // English
	for i := 1; i < len(cat.order); i++ {
		q := get(i)
		if q.q <= 0 {
			continue
		}
		if q.q > bp.q || (q.q == bp.q && q.at < bp.at) {
			best, bp = i, q
		}
	}
	return cat.order[best]
}

// langRange reads one entry of an Accept-Language header, e.g. "ko-KR;q=0.8": the
// index in cat.order of the language it matches (-1 for "*") and its q-value. ok is
// false for an entry to skip: empty, malformed, or a language the catalogue does not
// have.
func (cat *Catalog) langRange(entry string) (lang int, q float64, ok bool) {
	entry = strings.TrimSpace(entry)
	if entry == "" || len(entry) > langMaxEntry {
		return 0, 0, false
	}
	tags, qs, err := language.ParseAcceptLanguage(entry)
	if err != nil {
		return 0, 0, false
	}
	rng, _, _ := strings.Cut(entry, ";")
	rng = strings.TrimSpace(rng)
	if len(tags) == 0 {
		// ParseAcceptLanguage drops an entry of q=0; what it excludes is its range.
		if rng != "*" {
			if tags, _, err = language.ParseAcceptLanguage(rng); err != nil || len(tags) == 0 {
				return 0, 0, false
			}
		}
	} else {
		q = float64(qs[0])
		if q > 1 {
			return 0, 0, false
		}
	}
	if rng == "*" {
		return -1, q, true
	}
	_, i, conf := cat.matcher.Match(tags[0])
	if conf == language.No {
		return 0, 0, false
	}
	return cat.matched[i], q, true
}

// pref is how much a language is wanted: its q-value and where in the header
// it was first listed (earlier wins a tie; -1: not listed).
type pref struct {
	q  float64
	at int
}

func better(cur, p pref) pref {
	if p.q > cur.q {
		return p
	}
	return cur
}

// Messages returns every UI string of the pages and scripts in lang (one of
// Languages; anything else gives English). Keys are snake_case so templates
// can write {{.T.key}}; the scripts read the same map from the page.
// Placeholders in braces ({n}, {ord}, …) are filled in by the scripts. One
// key is not a message: lang_codes, the codes of Languages space-separated,
// for the language switcher. The map is a fresh copy the caller may keep or
// change.
func (cat *Catalog) Messages(lang string) map[string]string {
	return cat.copyOf(cat.tables, lang)
}

// copyOf is a fresh copy of the table of lang in tables over the English one (a key lang
// lacks, such as every dashboard key of a buyer-only language, is in English), with
// lang_codes added. A plural key lang has is taken with lang's variants only, never
// English ones.
func (cat *Catalog) copyOf(tables map[string]map[string]string, lang string) map[string]string {
	en := tables[LangEnglish]
	table := tables[lang]
	out := make(map[string]string, len(en)+1)
	for k, v := range en {
		if base, c := SplitVariant(k); c != "" && lang != LangEnglish {
			if _, ok := table[base]; ok {
				continue
			}
		}
		out[k] = v
	}
	for k, v := range table {
		out[k] = v
	}
	out["lang_codes"] = cat.codes
	return out
}

// DashboardLang is the language the dashboard and the report are shown in when lang is
// chosen: lang if it has the dashboard's messages (en, ko, ja, or an operator's file
// with them), else English — the other languages are for buyers.
func (cat *Catalog) DashboardLang(lang string) string {
	if _, ok := cat.tables[lang]["admin_title"]; ok {
		return lang
	}
	return LangEnglish
}

// BuyerMessages is Messages without the dashboard's and the report's keys: what the
// buyer pages (the index, the waiting page, the order page) and their scripts use. The
// pages embed their table whole (#wr-messages), so a buyer's page does not carry the
// dashboard's words.
func (cat *Catalog) BuyerMessages(lang string) map[string]string {
	return cat.copyOf(cat.buyer, lang)
}

// isBuyerKey tells the buyer messages from the others by the area file a key is written
// in (i18n/buyer or i18n/dashboard), so the split cannot drift. The static tests check
// that every key a buyer template or script uses is a buyer key.
func isBuyerKey(k string) bool {
	if keyArea == nil {
		builtinTables()
	}
	area, ok := keyArea[k]
	return !ok || area != dashboardArea
}

// buyerKeyList returns the buyer keys of the built-in English table, sorted.
func buyerKeyList() []string {
	var out []string
	for k := range builtinTables()[LangEnglish] {
		if isBuyerKey(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// codeRE is the name of a message file without ".json": a BCP 47 tag in its
// canonical case — a language subtag (ISO 639, lower case), then optionally a
// script (ISO 15924, "Hans") and a region (ISO 3166, "BR", or UN M.49, "419").
var codeRE = regexp.MustCompile(`^[a-z]{2,3}(-[A-Z][a-z]{3})?(-[A-Z]{2}|-[0-9]{3})?$`)

// LoadMessagesDir reads an operator's message files from dir (WR_MESSAGES_DIR)
// and returns the catalogue of the built-in tables with them applied; dir "" gives
// the built-in catalogue. Each file is named by its language code (en.json, ar.json,
// pt-BR.json, or a new one such as sv.json) and holds one JSON object
// {"key": "text", …} with keys of the English table. A file for a built-in
// language overrides those keys; a file for a new language adds the language,
// with the English text for every key it lacks (the dashboard and the report stay in
// English unless the file has their keys). Unknown keys are ignored.
// Other files (no .json, a name that is not a code) are skipped. The returned
// notes say what was loaded, what is missing and what was ignored, one line
// each, for the log. An unreadable directory or file, or a file that is not a
// JSON object of strings, is an error (and no catalogue). A file may write the plural
// variants of a plural key ("stock_left.few"); one that writes a plural key without
// variants has that text for every count.
func LoadMessagesDir(dir string) (cat *Catalog, notes []string, err error) {
	if dir == "" {
		return Builtin(), nil, nil
	}
	tables := builtinTables()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("messages directory: %w", err)
	}
	sort.Strings(names)
	en := tables[LangEnglish]
	for _, name := range names {
		code := strings.TrimSuffix(filepath.Base(name), ".json")
		if !codeRE.MatchString(code) {
			notes = append(notes, fmt.Sprintf("%s: skipped, not a language code (en.json, sv.json, pt-BR.json, zh-Hant.json, …)", name))
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, nil, err
		}
		var file map[string]string
		if err := json.Unmarshal(b, &file); err != nil {
			return nil, nil, fmt.Errorf("%s: want a JSON object of strings {\"key\": \"text\"}: %w", name, err)
		}
		table, builtin := tables[code]
		if !builtin {
			table = map[string]string{} // the pages fill each key it lacks from English
		}
		var unknown, missing, used []string
		for k, v := range file {
			if _, ok := en[k]; !ok && !knownVariant(en, k) {
				unknown = append(unknown, k)
				continue
			}
			table[k] = v
			used = append(used, k)
		}
		// A plural key the file writes is taken with the file's variants only: the
		// table's other variants (English, or the built-in text) would not match it.
		for k := range table {
			if base, c := SplitVariant(k); c != "" {
				if _, setsBase := file[base]; setsBase {
					if _, setsVariant := file[k]; !setsVariant {
						delete(table, k)
					}
				}
			}
		}
		if !builtin {
			for k := range en {
				if _, c := SplitVariant(k); c != "" || !isBuyerKey(k) {
					continue // a variant (the base key serves every count), or the dashboard's (in English unless the file has them)
				}
				if _, ok := file[k]; !ok {
					missing = append(missing, k)
				}
			}
		}
		tables[code] = table
		sort.Strings(unknown)
		sort.Strings(missing)
		kind := "overrides"
		if !builtin {
			kind = "new language"
		}
		notes = append(notes, fmt.Sprintf("%s: %s %s, %d keys", name, kind, code, len(used)))
		if _, err := language.Parse(code); err != nil {
			notes = append(notes, fmt.Sprintf("%s: %s is not a known language code: chosen with ?lang=%s or the switcher, never from Accept-Language", name, code, code))
		}
		if len(missing) > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d buyer keys missing, shown in English: %s", name, len(missing), strings.Join(missing, ", ")))
		}
		if len(unknown) > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d unknown keys ignored: %s", name, len(unknown), strings.Join(unknown, ", ")))
		}
	}
	return newCatalog(tables), notes, nil
}

// knownVariant reports whether k is a plural variant of a key of en ("stock_left.few").
func knownVariant(en map[string]string, k string) bool {
	base, c := SplitVariant(k)
	_, ok := en[base]
	return c != "" && ok
}
