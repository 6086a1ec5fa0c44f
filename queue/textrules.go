package queue

import "fmt"

// Rules of settings' values beyond their ranges: text a page shows must not reorder itself,
// and a number is stored in one spelling.

// bidiControl is the first bidirectional embedding, override or isolate control in s
// (U+202A–U+202E, U+2066–U+2069), ok false when there is none. These make text display in
// another order than it is stored ("pay at \u202eetis.live" shows as "pay at evil.site"),
// which a buyer cannot see through; the marks U+200E, U+200F and U+061C only set the
// direction of neutral characters next to them and stay allowed for right-to-left text.
func bidiControl(s string) (rune, bool) {
	for _, r := range s {
		if (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') {
			return r, true
		}
	}
	return 0, false
}

// Validate refuses, with an *InvalidError naming the field, what the patch sets that a rule
// forbids in new values: bidi controls in the branding texts a page shows. It judges the
// patch only (Put calls it), so a stored value the rule refuses (written by an older
// release) does not block a change of another setting; Settings.Validate checks ranges of
// the whole result. The messages' JSON is checked as stored: web writes it with
// json.Marshal, which leaves these controls as themselves.
func (p SettingsPatch) Validate() error {
	for _, f := range []struct {
		field string
		v     *string
	}{{"brand_name", p.BrandName}, {"brand_message", p.BrandMessage}, {"messages", p.Messages}} {
		if f.v == nil {
			continue
		}
		if r, ok := bidiControl(*f.v); ok {
			return invalid(f.field, "%s must not hold bidirectional controls (here %s): embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) can make text show in another order than it is written. The marks U+200E, U+200F and U+061C are allowed.",
				f.field, fmt.Sprintf("U+%04X", r))
		}
	}
	return nil
}

// positiveZero is f with -0 stored as 0 (JSON allows -0; it means 0, and one value has one
// spelling in Redis and in answers).
func positiveZero(f float64) float64 {
	if f == 0 {
		return 0
	}
	return f
}
