package static

import (
	"strings"

	"golang.org/x/text/language"
)

// Choosing the language of a page: ?lang= and the cookie (Supported), Accept-Language
// (Lang), and the writing direction of the choice (Dir).

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
