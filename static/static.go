// Package static holds the browser side of the waiting room: the HTML
// templates of every page, the stylesheet and the scripts, embedded into the
// binary so a single file is the whole deployment.
//
// Nothing here runs a server. The web package serves FS under /static/
// (assets/<file> at /static/<file>) and executes the page templates by name
// ("index", "queue", "order", "admin") with the data types declared in
// pages.go. Every page works under a strict Content-Security-Policy
// (script-src 'self'; style-src 'self'): no inline script, no inline style,
// configuration reaches the scripts through data-* attributes.
package static

import (
	"embed"
	"html/template"
	"io/fs"
	"strconv"
	"strings"
)

// FS holds the embedded files: assets/ (style.css and the scripts, served at
// /static/<file>) and templates/ (the page templates parsed by Templates).
//
//go:embed assets templates
var FS embed.FS

// Assets returns the assets/ folder as its own file system, ready to be served
// under /static/ (so assets/style.css is /static/style.css).
func Assets() fs.FS {
	sub, err := fs.Sub(FS, "assets")
	if err != nil {
		// fs.Sub only fails on an invalid path; "assets" is a constant.
		panic(err)
	}
	return sub
}

// Templates parses every templates/*.html file into one set. Pages are
// executed by name: "index", "queue", "order" and "admin"; they share the
// "head", "header" and "footer" parts of layout.html. The set has helper
// functions: num, which groups the digits of an integer with a comma (1234 →
// "1,234"; the pages' scripts write it again in the page's language), asset, the
// content-hashed URL of a file of assets/ (AssetURL), dir, the writing direction of
// a language (Dir: "rtl" or "ltr", for <html dir>), langs, the switcher's
// languages from T.lang_codes with their names, and numIn / decimalIn, a number as
// a language writes it (numIn "de" 1234 → "1.234", decimalIn "fr" 2.5 → "2,5", one
// decimal).
//
// Templates parses anew on each call: call it once at start-up and keep the
// result (a *template.Template is safe for concurrent ExecuteTemplate).
func Templates() (*template.Template, error) {
	return template.New("waitroom").Funcs(template.FuncMap{"num": groupDigits, "asset": AssetURL, "dir": Dir, "langs": langOptions, "numIn": numIn, "decimalIn": decimalIn}).ParseFS(FS, "templates/*.html")
}

// LangOption is one language of the footer's switcher: its code and its name in itself.
type LangOption struct{ Code, Name string }

// autonyms name the built-in languages in themselves, for the switcher without script;
// a language an operator adds is shown by its code, and lang.js names it with
// Intl.DisplayNames.
var autonyms = map[string]string{
	"en": "English", "ko": "한국어", "ja": "日本語", "ar": "العربية", "de": "Deutsch", "es": "Español",
	"fr": "Français", "he": "עברית", "hi": "हिन्दी", "id": "Bahasa Indonesia", "it": "Italiano",
	"nl": "Nederlands", "pl": "Polski", "pt-BR": "Português (Brasil)", "ru": "Русский", "th": "ไทย",
	"tr": "Türkçe", "uk": "Українська", "vi": "Tiếng Việt", "zh-Hans": "简体中文", "zh-Hant": "繁體中文",
}

// langOptions is the switcher's list from T.lang_codes (the codes, space-separated).
func langOptions(codes string) []LangOption {
	var out []LangOption
	for _, c := range strings.Fields(codes) {
		name, ok := autonyms[c]
		if !ok {
			name = c
		}
		out = append(out, LangOption{Code: c, Name: name})
	}
	return out
}

func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
