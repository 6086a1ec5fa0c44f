package static

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"
)

// A queue's message overrides (its "messages" setting): {"<lang>": {"<key>": "text"}},
// an operator's own wording of some texts of that queue's buyer pages. CheckOverrides is
// the admin API's check before the setting is stored; Overridden applies them when a page
// of the queue is rendered.

// CheckOverrides reports what is wrong with a queue's message overrides (raw: the
// setting's JSON, "" for none): a language that is not one of Languages (by its exact
// code), a key that is not a buyer message or a plural variant the language uses, an
// empty text, or placeholders other than the English text's. The error says which
// language and key, and why.
func (cat *Catalog) CheckOverrides(raw string) error {
	if raw == "" {
		return nil
	}
	var o map[string]map[string]string
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		return fmt.Errorf(`messages must be an object {"<language>": {"<key>": "text"}}`)
	}
	en := cat.tables[LangEnglish]
	for _, lang := range sortedKeys(o) {
		if !slices.Contains(cat.order, lang) {
			return fmt.Errorf("messages.%s: %q is not a language of the pages (%s)", lang, lang, cat.codes)
		}
		for _, key := range sortedKeys(o[lang]) {
			text := o[lang][key]
			base, form := SplitVariant(key)
			english, ok := en[base]
			switch {
			case !ok || !isBuyerKey(base) || base == "lang_codes":
				return fmt.Errorf("messages.%s.%s: %q is not a message of the buyer pages", lang, key, key)
			case form != "" && !ordinalKeys[base] && !slices.Contains(pluralCategories, form):
				return fmt.Errorf("messages.%s.%s: %q is no plural category", lang, key, form)
			case form != "" && !ordinalKeys[base] && (!slices.Contains(pluralKeys(), base) || !slices.Contains(PluralCategories(lang), form)):
				return fmt.Errorf("messages.%s.%s: %s is not a plural key with a %q form in %s (plural keys: %s; %s counts take %v)",
					lang, key, base, form, lang, strings.Join(pluralKeys(), ", "), lang, PluralCategories(lang))
			case form != "" && ordinalKeys[base] && !slices.Contains(OrdinalCategories(lang), form):
				return fmt.Errorf("messages.%s.%s: %s places have no ordinal form %q", lang, key, lang, form)
			case strings.TrimSpace(text) == "":
				return fmt.Errorf("messages.%s.%s: the text is empty", lang, key)
			case !slices.Equal(placeholderSet(english), placeholderSet(text)) &&
				!(form != "" && oneNumber(lang, form) && slices.Equal(slices.DeleteFunc(placeholderSet(english), func(p string) bool { return p == "n" }), placeholderSet(text))):
				return fmt.Errorf("messages.%s.%s: the text has the placeholders %v, it must have those of %q: %v",
					lang, key, placeholderSet(text), english, placeholderSet(english))
			}
		}
	}
	return nil
}

// Overridden returns t (a page's BuyerMessages in lang) with the queue's overrides for lang
// applied (raw: the queue's messages setting). A plural key overridden without its
// variants has the override's text for every count. An unreadable raw changes nothing.
func (cat *Catalog) Overridden(t map[string]string, lang, raw string) map[string]string {
	if raw == "" {
		return t
	}
	var o map[string]map[string]string
	if json.Unmarshal([]byte(raw), &o) != nil || len(o[lang]) == 0 {
		return t
	}
	mine := o[lang]
	for k := range t {
		if base, c := SplitVariant(k); c != "" {
			if _, setsBase := mine[base]; setsBase {
				if _, setsVariant := mine[k]; !setsVariant {
					delete(t, k)
				}
			}
		}
	}
	for k, v := range mine {
		t[k] = v
	}
	return t
}

var placeholderName = strings.NewReplacer("{ord}", "{n}")

// placeholderSet is the sorted set of {names} in s; {ord} counts as {n} (the pages pass both).
func placeholderSet(s string) []string {
	var out []string
	for rest := placeholderName.Replace(s); ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			break
		}
		name := rest[i+1 : i+j]
		if name != "" && strings.IndexFunc(name, func(r rune) bool {
			return !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z')
		}) < 0 && !slices.Contains(out, name) {
			out = append(out, name)
		}
		rest = rest[i+j+1:]
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// oneNumber reports whether the cardinal category form holds one whole number in lang
// (Arabic "two": 2), so that its text may say the number in words instead of {n}.
func oneNumber(lang, form string) bool {
	tag, err := language.Parse(lang)
	if err != nil {
		return false
	}
	n := 0
	for i := range 1001 {
		if formName[plural.Cardinal.MatchPlural(tag, i, 0, 0, 0, 0)] == form {
			n++
		}
	}
	return n == 1
}
