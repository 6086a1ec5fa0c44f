package static

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
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
