package static

import "golang.org/x/text/language"

// BackPage is the data of the "back" template, the page of an e-mail reminder's link
// /q/{queue}/back/{code}. Live: the link is unspent; its button POSTs to Action. Spent: a
// POST found it used or expired. Queue is "" when the queue or the feature is unknown.
type BackPage struct {
	Lang   string
	T      map[string]string
	Queue  string
	Live   bool
	Spent  bool
	Action string
}

// Dir is the writing direction of the page's language for <html dir>: "rtl" when x/text
// gives the language a script written right to left, else "ltr".
func (p BackPage) Dir() string {
	tag, err := language.Parse(p.Lang)
	if err != nil {
		return "ltr"
	}
	switch script, _ := tag.Script(); script.String() {
	case "Arab", "Hebr", "Syrc", "Thaa", "Nkoo", "Adlm", "Rohg", "Mand", "Samr":
		return "rtl"
	}
	return "ltr"
}
