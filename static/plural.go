package static

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/number"
)

// A plural message is a base key, the text for the "other" category, plus variant keys
// named by a CLDR plural category: "stock_left" ("{n} left"), "stock_left.one",
// "stock_left.few", … A language writes the variants its rules give integer counts
// (PluralCategories); the browser picks one with Intl.PluralRules(lang).select(n), Go
// with Plural. A key is a plural key when the English file has a variant of it. The
// ordinal keys (ordinalKeys) choose by the ordinal rules instead ("1st", "2nd", "3rd",
// "4th"), and their variants are optional. Translators edit the JSON only
// (docs/TRANSLATING.md).

// pluralCategories are the variant suffixes, in the order CLDR lists them.
var pluralCategories = []string{"zero", "one", "two", "few", "many"}

// formName is the CLDR category of a plural.Form; "other" is the base key.
var formName = map[plural.Form]string{plural.Zero: "zero", plural.One: "one", plural.Two: "two", plural.Few: "few", plural.Many: "many"}

// ordinalKeys are the messages chosen by ordinal rules: the place in line ("{n}th").
var ordinalKeys = map[string]bool{"pos_number": true}

// IsOrdinalKey reports whether key picks its variants by the ordinal rules.
func IsOrdinalKey(key string) bool { return ordinalKeys[key] }

// SplitVariant splits "stock_left.few" into "stock_left" and "few"; a key without a
// known category suffix comes back whole, with "".
func SplitVariant(key string) (base, category string) {
	base, cat, ok := strings.Cut(key, ".")
	if !ok || !slices.Contains(pluralCategories, cat) {
		return key, ""
	}
	return base, cat
}

// PluralKeys returns the plural keys (the English file has a variant of them), sorted;
// ordinal keys are not among them.
func PluralKeys() []string { return slices.Clone(pluralKeys()) }

var pluralKeys = sync.OnceValue(func() []string {
	var out []string
	for k := range builtin.tables[LangEnglish] {
		if base, cat := SplitVariant(k); cat != "" && !ordinalKeys[base] && !slices.Contains(out, base) {
			out = append(out, base)
		}
	}
	slices.Sort(out)
	return out
})

// PluralCategories returns the categories other than "other" that CLDR's cardinal rules
// for lang (x/text, CLDR 32) give whole numbers: what a plural key of lang needs as
// variants. ar: zero one two few many; ru, uk, pl: one few many; en, fr, es: one; ja,
// ko, zh: none.
func PluralCategories(lang string) []string {
	return categories(plural.Cardinal, lang)
}

// OrdinalCategories is PluralCategories by the ordinal rules (en: one two few).
func OrdinalCategories(lang string) []string {
	return categories(plural.Ordinal, lang)
}

func categories(rules *plural.Rules, lang string) []string {
	tag, err := language.Parse(lang)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	for n := range 1001 { // every rule of CLDR is decided by n below 1000 (n % 100, n % 1000)
		if name, ok := formName[rules.MatchPlural(tag, n, 0, 0, 0, 0)]; ok {
			seen[name] = true
		}
	}
	var out []string
	for _, c := range pluralCategories {
		if seen[c] {
			out = append(out, c)
		}
	}
	return out
}

// form is the category name of n in lang by rules, "" for "other".
func form(rules *plural.Rules, lang string, n int) string {
	tag, err := language.Parse(lang)
	if err != nil {
		return ""
	}
	if n < 0 {
		n = -n
	}
	return formName[rules.MatchPlural(tag, n, 0, 0, 0, 0)]
}

// Plural returns the text of key in lang for the count n: the variant of n's category
// when lang's table has it, else the base key — the same choice the pages' scripts make
// with Intl.PluralRules. Placeholders are left as they are (Count fills {n}). An ordinal
// key chooses by the ordinal rules. Lang falls back to English like Messages.
func (cat *Catalog) Plural(lang, key string, n int) string {
	table, ok := cat.tables[lang]
	if !ok {
		lang, table = LangEnglish, cat.tables[LangEnglish]
	}
	rules := plural.Cardinal
	if ordinalKeys[key] {
		rules = plural.Ordinal
	}
	if f := form(rules, lang, n); f != "" {
		if s, ok := table[key+"."+f]; ok {
			return s
		}
	}
	if s, ok := table[key]; ok {
		return s
	}
	return cat.tables[LangEnglish][key]
}

// Count returns Plural with {n} (and {ord}) filled in: n written with lang's digits
// and grouping ("1,234", "1.234", "١٬٢٣٤"). For server-rendered text; the scripts do
// the same with Intl.NumberFormat.
func (cat *Catalog) Count(lang, key string, n int) string {
	s := FormatNumber(lang, n)
	return strings.NewReplacer("{n}", s, "{ord}", s).Replace(cat.Plural(lang, key, n))
}

// Ordinal returns the place n in lang as the pages show it (pos_number: "23rd",
// "23번", "23.").
func (cat *Catalog) Ordinal(lang string, n int) string {
	return cat.Count(lang, "pos_number", n)
}

// FormatNumber writes n as lang writes whole numbers, with x/text's CLDR data; an
// unknown code gets plain digits.
func FormatNumber(lang string, n int) string {
	tag, ok := numberTag(lang)
	if !ok {
		return strconv.Itoa(n)
	}
	return message.NewPrinter(tag).Sprint(number.Decimal(n))
}

// numberTag is the tag numbers of lang are written by. Arabic takes the Latin digits, as
// current CLDR (and so the browsers' Intl.NumberFormat("ar")) does; x/text's older data
// would write Arabic-Indic ones, and the server's numbers would differ from the scripts'.
func numberTag(lang string) (language.Tag, bool) {
	tag, err := language.Parse(lang)
	if err != nil {
		return tag, false
	}
	if b, _ := tag.Base(); b.String() == "ar" {
		if t, err := tag.SetTypeForKey("nu", "latn"); err == nil {
			tag = t
		}
	}
	return tag, true
}

func numIn(lang string, n int64) string { return FormatNumber(lang, int(n)) }

// decimalIn writes x with one decimal as lang does ("2.5", "2,5").
func decimalIn(lang string, x float64) string {
	tag, ok := numberTag(lang)
	if !ok {
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return message.NewPrinter(tag).Sprint(number.Decimal(x, number.Scale(1)))
}
