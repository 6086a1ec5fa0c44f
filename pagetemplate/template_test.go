package pagetemplate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/pagetemplate"
)

const good = `<!doctype html>
<html lang="{{.Lang}}" dir="{{.Dir}}">
<head>{{.Head}}<title>{{.Brand}} · {{.Queue}}</title>
<link rel="stylesheet" href="https://cdn.shop.example/shop.css"></head>
<body class="shop">
  <h1>{{if .Brand}}{{.Brand}}{{else}}{{.Queue}}{{end}}</h1>
  <p>{{t "queue_heading"}} — {{.T.queue_heading}}: {{slot "position"}} ({{slot "eta"}})</p>
  {{.Room}}
  <img src="/q/{{.Queue}}/logo" alt="">
  {{.Scripts}}
</body></html>`

var origins = []string{"https://cdn.shop.example"}

func TestParseAndRender(t *testing.T) {
	tpl, err := pagetemplate.Parse(good, origins)
	if err != nil {
		t.Fatal(err)
	}
	f := pagetemplate.Sample("rtl")
	f.Brand = `Shop <b>&</b>`
	f.Room = `<div id="room">live</div>`
	out, err := tpl.Render(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	page := string(out)
	for _, want := range []string{
		`dir="rtl"`,
		`<div id="room">live</div>`,     // the live part as it is
		`Shop &lt;b&gt;&amp;&lt;/b&gt;`, // the operator's fields escaped
		`data-wr-slot="position"`, `data-wr-slot="eta"`,
		`Waiting room — Waiting room:`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, page)
		}
	}
	if tpl.Source() != good {
		t.Error("Source is not what was parsed")
	}
}

// TestRefused: each case is refused with its line and a reason that names the problem.
func TestRefused(t *testing.T) {
	base := func(body string) string {
		return "<!doctype html>\n<html><head>{{.Head}}</head>\n<body>\n" + body + "\n{{.Room}}{{.Scripts}}</body></html>"
	}
	cases := []struct {
		name, src string
		line      int
		reason    string
	}{
		{"syntax", base("{{if .Queue}}open"), 0, "unexpected EOF"},
		{"unknown field", base("{{.Secret}}"), 4, "no field .Secret"},
		{"unknown function", base(`{{printf "%s" .Queue}}`), 4, "function printf is not allowed"},
		{"range", base(`{{range 100000000}}x{{end}}`), 4, "range is not allowed"},
		{"define", base(`{{define "x"}}y{{end}}`), 4, "define and block are not allowed"},
		{"unknown slot", base(`{{slot "secret"}}`), 0, `no slot "secret"`},
		{"inline script", base(`<script>alert(1)</script>`), 4, "inline script"},
		{"remote script", base(`<script src="https://evil.example/x.js"></script>`), 4, "https://evil.example is not this origin or a listed one"},
		{"handler", base(`<button onclick="x()">b</button>`), 4, "event-handler"},
		{"javascript url", base(`<a href="javascript:alert(1)">a</a>`), 4, "javascript: URLs"},
		{"inline style", base(`<p style="color:red">p</p>`), 4, "inline style"},
		{"style element", base(`<style>p{}</style>`), 4, "inline style"},
		{"iframe", base(`<iframe src="/"></iframe>`), 4, "frames are not allowed"},
		{"meta refresh", base(`<meta http-equiv="refresh" content="1">`), 4, "meta http-equiv"},
		{"form elsewhere", base(`<form action="https://cdn.shop.example/x"></form>`), 4, "forms post to this origin only"},
		{"no room", "<html><head>{{.Head}}</head><body>{{.Scripts}}</body></html>", 0, "{{.Room}} is missing"},
		{"two heads", base("{{.Head}}"), 0, "{{.Head}} is placed 2 times"},
		{"too big", base(strings.Repeat("x", pagetemplate.MaxSize)), 0, "at most"},
		{"not utf-8", base("\xff"), 4, "UTF-8"},
		{"empty", " \n", 0, "empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := pagetemplate.Parse(c.src, origins)
			var e *pagetemplate.Error
			if !errors.As(err, &e) {
				t.Fatalf("err %v, want an *Error", err)
			}
			if !strings.Contains(e.Reason, c.reason) {
				t.Errorf("reason %q, want it to say %q", e.Reason, c.reason)
			}
			if c.line != 0 && e.Line != c.line {
				t.Errorf("line %d, want %d (%s)", e.Line, c.line, e.Reason)
			}
		})
	}
}

// TestRenderBounds: a page over MaxOutput fails to render (the caller then shows the
// default page) — here through fields larger than any real page, since a template alone
// cannot loop.
func TestRenderBounds(t *testing.T) {
	tpl, err := pagetemplate.Parse(good, origins)
	if err != nil {
		t.Fatal(err)
	}
	f := pagetemplate.Sample("ltr")
	f.Queue = strings.Repeat("q", pagetemplate.MaxOutput)
	if _, err := tpl.Render(context.Background(), f); !errors.Is(err, pagetemplate.ErrRender) {
		t.Errorf("render of a page over the bound: err %v, want ErrRender", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tpl.Render(ctx, pagetemplate.Sample("ltr")); !errors.Is(err, pagetemplate.ErrRender) {
		t.Errorf("render past its deadline: err %v, want ErrRender", err)
	}
}

func TestOriginsAndCSP(t *testing.T) {
	if err := pagetemplate.CheckOrigins([]string{"https://cdn.shop.example", "http://localhost:8080"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"http://cdn.example", "https://cdn.example/path", "cdn.example", "https://a.example 'unsafe-inline'", "https://u:p@a.example"} {
		if pagetemplate.CheckOrigins([]string{bad}) == nil {
			t.Errorf("origin %q accepted", bad)
		}
	}
	csp := pagetemplate.CSP(origins)
	if !strings.Contains(csp, "script-src 'self' https://cdn.shop.example;") || !strings.Contains(csp, "style-src 'self' https://cdn.shop.example;") {
		t.Errorf("csp %q does not list the origin", csp)
	}
	if strings.Contains(pagetemplate.CSP(nil), "unsafe") {
		t.Error("the CSP allows unsafe-*")
	}
}
