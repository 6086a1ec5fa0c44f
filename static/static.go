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
// "head", "header" and "footer" parts of layout.html. The set has two helper
// functions: num, which groups the digits of an integer (1234 → "1,234";
// English and Korean both group by thousands with a comma), and asset, the
// content-hashed URL of a file of assets/ (AssetURL).
//
// Templates parses anew on each call: call it once at start-up and keep the
// result (a *template.Template is safe for concurrent ExecuteTemplate).
func Templates() (*template.Template, error) {
	return template.New("waitroom").Funcs(template.FuncMap{"num": groupDigits, "asset": AssetURL}).ParseFS(FS, "templates/*.html")
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
