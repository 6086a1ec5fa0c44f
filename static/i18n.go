package static

import (
	"strconv"
	"strings"
)

// Supported languages. English is the fallback.
const (
	LangEnglish = "en"
	LangKorean  = "ko"
)

// Lang picks the page language from an Accept-Language header: "ko" when the
// caller prefers Korean over English (by q-value, then by order of listing),
// else "en". A language missing from the header takes the q-value of "*" if
// there is one; q=0 means "not acceptable".
func Lang(acceptLanguage string) string {
	ko, en := pref{q: -1}, pref{q: -1}
	wild := pref{q: -1}
	for i, part := range strings.Split(acceptLanguage, ",") {
		tag, q, ok := parseRange(part)
		if !ok {
			continue
		}
		p := pref{q: q, at: i}
		switch {
		case tag == "*":
			wild = better(wild, p)
		case primary(tag) == "ko":
			ko = better(ko, p)
		case primary(tag) == "en":
			en = better(en, p)
		}
	}
	if ko.q < 0 {
		ko = wild
	}
	if en.q < 0 {
		en = wild
	}
	if ko.q <= 0 {
		return LangEnglish
	}
	if ko.q > en.q || (ko.q == en.q && ko.at < en.at) {
		return LangKorean
	}
	return LangEnglish
}

// pref is how much a language is wanted: its q-value and where in the header
// it was first listed (earlier wins a tie).
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

func primary(tag string) string {
	if i := strings.IndexAny(tag, "-_"); i >= 0 {
		return tag[:i]
	}
	return tag
}

// parseRange reads one language-range of the header, e.g. "ko-KR;q=0.8".
func parseRange(part string) (tag string, q float64, ok bool) {
	fields := strings.Split(part, ";")
	tag = strings.ToLower(strings.TrimSpace(fields[0]))
	if tag == "" {
		return "", 0, false
	}
	q = 1
	for _, param := range fields[1:] {
		name, value, found := strings.Cut(strings.TrimSpace(param), "=")
		if !found || !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || v < 0 || v > 1 {
			return "", 0, false
		}
		q = v
	}
	return tag, q, true
}

// Messages returns every UI string of the pages and scripts in lang ("en" or
// "ko"; anything else gives English). Keys are snake_case so templates can
// write {{.T.key}}; the scripts read the same map from the page. Placeholders
// in braces ({n}, {ord}, …) are filled in by the scripts. The map is a fresh
// copy the caller may keep or change.
func Messages(lang string) map[string]string {
	i := 0
	if lang == LangKorean {
		i = 1
	}
	out := make(map[string]string, len(messages))
	for k, v := range messages {
		out[k] = v[i]
	}
	return out
}
