// Package pagetemplate checks and renders a queue's own waiting page: HTML an operator
// supplies, with a documented set of fields (Fields) and marked slots the live client fills.
//
// What an operator's HTML may do is decided at save time (Parse), so rendering it for a
// buyer can neither run unbounded nor break the page's Content-Security-Policy:
//   - the template language is html/template's, without range, define, block or template
//     (no loops, no recursion: one render is linear in the template's size) and with only
//     the fields of Fields and the functions slot and t;
//   - the HTML carries no inline script, no event-handler attribute, no javascript: URL, no
//     inline style, no frame, object, embed or base element, and loads scripts, styles and
//     images only from this origin or an origin the operator listed (the page's CSP then
//     lists it too: CSP);
//   - it places {{.Head}} inside <head>, and {{.Room}} and {{.Scripts}} in <body>: the live
//     part of the page (the line's states, the position, the turn) and its scripts.
//
// A template that fails any of these is refused with the line and the reason (Error).
// Render bounds the output (MaxOutput) and the time (RenderTimeout); the caller falls back
// to the default page when it fails.
package pagetemplate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"regexp"
	"strconv"
	"strings"
	"text/template/parse"
	"time"
	"unicode/utf8"
)

// Bounds on one template and one render. RenderTimeout is wall time, so it is generous
// beside what a render costs (well under a millisecond: a template cannot loop): a page view
// on a busy machine must not fall back to the default page for want of a CPU. The trial
// renders of Parse (the first execution also runs html/template's escaping analysis of the
// whole template, once) have trialTimeout.
const (
	MaxSize       = 64 << 10  // bytes of template source
	MaxOutput     = 512 << 10 // bytes of rendered page
	RenderTimeout = 250 * time.Millisecond
	trialTimeout  = 2 * time.Second
)

// Fields is what a template can read. Lang and Dir are the page's language and writing
// direction ("ltr", "rtl"); Queue is the queue's name, Brand its brand name ("" when none);
// StartsAt and EndsAt the sale's start and end (RFC 3339, "" when not set); Head, Room and
// Scripts the parts every page needs (see the package comment); T the buyer messages in the
// page's language, read with {{t "key"}} or {{.T.key}}.
type Fields struct {
	Lang, Dir        string
	Queue, Brand     string
	StartsAt, EndsAt string
	Head             template.HTML
	Room             template.HTML
	Scripts          template.HTML
	T                map[string]string
}

// fieldNames are the fields a template may read, from Fields.
var fieldNames = map[string]bool{"Lang": true, "Dir": true, "Queue": true, "Brand": true,
	"StartsAt": true, "EndsAt": true, "Head": true, "Room": true, "Scripts": true, "T": true}

// Slots are the names slot accepts: elements the live client keeps filled (data-wr-slot).
var Slots = []string{"position", "ahead", "eta", "rate", "waiting", "state", "starts_in"}

// Error is a refused template: the line (1-based; 0 when it is about the whole template)
// and the reason, for the 422 answer.
type Error struct {
	Line   int
	Reason string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Reason
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
}

// ErrRender is a render that failed (its output or time bound, or an execution error).
var ErrRender = errors.New("page template render failed")

// Template is a checked template, safe for concurrent renders.
type Template struct {
	tpl    *template.Template
	source string
}

// Source returns the HTML the template was parsed from.
func (t *Template) Source() string { return t.source }

// Parse checks src for a queue whose page may load from the listed origins (each
// "https://host[:port]"), and returns the template or an *Error.
func Parse(src string, origins []string) (*Template, error) {
	if len(src) > MaxSize {
		return nil, &Error{Reason: fmt.Sprintf("the template is %d bytes; at most %d", len(src), MaxSize)}
	}
	if !utf8.ValidString(src) {
		return nil, &Error{Line: lineOf(src, firstInvalid(src)), Reason: "not valid UTF-8"}
	}
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Reason: "the template is empty"}
	}
	tpl, err := template.New("page").Option("missingkey=zero").Funcs(funcs(nil)).Parse(src)
	if err != nil {
		return nil, parseError(err)
	}
	if len(tpl.Templates()) > 1 {
		return nil, &Error{Line: lineOfDefine(src), Reason: "define and block are not allowed: one template per page"}
	}
	if err := checkTree(src, tpl.Tree); err != nil {
		return nil, err
	}
	if err := checkHTML(src, origins); err != nil {
		return nil, err
	}
	t := &Template{tpl: tpl, source: src}
	// Render it once with sample fields, so what fails only when executed (a field of T
	// used as a map, an escaping context html/template refuses) is refused on save.
	for _, dir := range []string{"ltr", "rtl"} {
		if _, err := t.render(context.Background(), Sample(dir), trialTimeout); err != nil {
			return nil, &Error{Line: execLine(err), Reason: "does not render: " + strings.TrimPrefix(err.Error(), ErrRender.Error()+": ")}
		}
	}
	return t, nil
}

// Sample returns fields of the documented types, for checking and previews.
func Sample(dir string) Fields {
	return Fields{Lang: "en", Dir: dir, Queue: "sample", Brand: "Sample shop",
		StartsAt: "2026-12-24T10:00:00Z", EndsAt: "2026-12-24T12:00:00Z",
		Head: "<!-- head -->", Room: "<div id=\"room\"></div>", Scripts: "<!-- scripts -->",
		T: map[string]string{"queue_heading": "Waiting room"}}
}

// Render executes the template with f, within MaxOutput bytes and RenderTimeout.
func (t *Template) Render(ctx context.Context, f Fields) ([]byte, error) {
	return t.render(ctx, f, RenderTimeout)
}

func (t *Template) render(ctx context.Context, f Fields, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w := &boundedWriter{ctx: ctx, timeout: timeout}
	err := t.tpl.Funcs(funcs(f.T)).Execute(w, f)
	if err == nil {
		err = w.err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRender, err)
	}
	return w.buf.Bytes(), nil
}

// funcs are the template's functions; t reads from messages.
func funcs(messages map[string]string) template.FuncMap {
	return template.FuncMap{
		"slot": slot,
		"t":    func(key string) string { return messages[key] },
	}
}

// slot renders the element the live client fills for name: it keeps the text of every
// [data-wr-slot] element of the page up to date.
func slot(name string) (template.HTML, error) {
	for _, s := range Slots {
		if s == name {
			return template.HTML(`<span class="wr-slot" data-wr-slot="` + name + `">–</span>`), nil
		}
	}
	return "", fmt.Errorf("no slot %q (slots: %s)", name, strings.Join(Slots, ", "))
}

// boundedWriter stops a render past MaxOutput bytes or its deadline (checked on every write:
// without loops, the writes come at least once per text or action of the template).
type boundedWriter struct {
	ctx     context.Context
	timeout time.Duration
	buf     bytes.Buffer
	err     error
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if err := w.ctx.Err(); err != nil {
		w.err = fmt.Errorf("over %v", w.timeout)
		return 0, w.err
	}
	if w.buf.Len()+len(p) > MaxOutput {
		w.err = fmt.Errorf("the page would be over %d bytes", MaxOutput)
		return 0, w.err
	}
	return w.buf.Write(p)
}

var lineRE = regexp.MustCompile(`^template: page:(\d+)(?::\d+)?: (.*)$`)

// parseError turns html/template's "template: page:12: unexpected …" into an *Error.
func parseError(err error) *Error {
	msg := err.Error()
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &Error{Line: n, Reason: m[2]}
	}
	return &Error{Reason: strings.TrimPrefix(msg, "template: page: ")}
}

var execLineRE = regexp.MustCompile(`page:(\d+):`)

func execLine(err error) int {
	if m := execLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func firstInvalid(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			return i
		}
	}
	return 0
}

// lineOf is the 1-based line of byte offset off in src.
func lineOf(src string, off int) int {
	if off > len(src) {
		off = len(src)
	}
	return strings.Count(src[:off], "\n") + 1
}

func lineOfDefine(src string) int {
	for _, word := range []string{"define", "block"} {
		if m := regexp.MustCompile(`\{\{-?\s*` + word + `\b`).FindStringIndex(src); m != nil {
			return lineOf(src, m[0])
		}
	}
	return 0
}

// checkTree walks the parsed template: no range, template call, break or continue; only the
// fields of Fields (and keys of T); the required parts placed once each.
func checkTree(src string, tree *parse.Tree) error {
	seen := map[string]int{}
	var walk func(n parse.Node) error
	walk = func(n parse.Node) error {
		if n == nil {
			return nil
		}
		line := func() int { return lineOf(src, int(n.Position())) }
		switch n := n.(type) {
		case *parse.ListNode:
			for _, c := range n.Nodes {
				if err := walk(c); err != nil {
					return err
				}
			}
		case *parse.TextNode, *parse.CommentNode:
		case *parse.ActionNode:
			return checkPipe(src, n.Pipe, seen)
		case *parse.IfNode:
			if err := checkPipe(src, n.Pipe, seen); err != nil {
				return err
			}
			if err := walk(n.List); err != nil {
				return err
			}
			return walk(n.ElseList)
		case *parse.WithNode:
			if err := checkPipe(src, n.Pipe, seen); err != nil {
				return err
			}
			if err := walk(n.List); err != nil {
				return err
			}
			return walk(n.ElseList)
		case *parse.RangeNode:
			return &Error{Line: line(), Reason: "range is not allowed (a page template has no loops)"}
		case *parse.TemplateNode:
			return &Error{Line: line(), Reason: "template is not allowed (a page template calls no other template)"}
		default:
			return &Error{Line: line(), Reason: fmt.Sprintf("%s is not allowed", n)}
		}
		return nil
	}
	if err := walk(tree.Root); err != nil {
		return err
	}
	for _, part := range []string{"Head", "Room", "Scripts"} {
		switch seen[part] {
		case 0:
			return &Error{Reason: fmt.Sprintf("{{.%s}} is missing: every page template places {{.Head}} in <head>, {{.Room}} and {{.Scripts}} in <body>", part)}
		case 1:
		default:
			return &Error{Reason: fmt.Sprintf("{{.%s}} is placed %d times; once only", part, seen[part])}
		}
	}
	return nil
}

// checkPipe allows fields of Fields, .T.key, the functions slot and t with constant
// arguments, string and number constants, and variables.
func checkPipe(src string, p *parse.PipeNode, seen map[string]int) error {
	if p == nil {
		return nil
	}
	for _, cmd := range p.Cmds {
		for _, arg := range cmd.Args {
			line := lineOf(src, int(arg.Position()))
			switch a := arg.(type) {
			case *parse.FieldNode:
				if !fieldNames[a.Ident[0]] || (a.Ident[0] != "T" && len(a.Ident) > 1) || len(a.Ident) > 2 {
					return &Error{Line: line, Reason: fmt.Sprintf("no field .%s (fields: .Lang .Dir .Queue .Brand .StartsAt .EndsAt .Head .Room .Scripts .T.<key>)", strings.Join(a.Ident, "."))}
				}
				if len(a.Ident) == 1 {
					seen[a.Ident[0]]++
				}
			case *parse.IdentifierNode:
				if a.Ident != "slot" && a.Ident != "t" && !builtinOK[a.Ident] {
					return &Error{Line: line, Reason: fmt.Sprintf("function %s is not allowed (slot, t, and eq ne not and or len)", a.Ident)}
				}
			case *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.DotNode, *parse.VariableNode, *parse.NilNode:
			case *parse.PipeNode:
				if err := checkPipe(src, a, seen); err != nil {
					return err
				}
			default:
				return &Error{Line: line, Reason: fmt.Sprintf("%s is not allowed", a)}
			}
		}
	}
	return nil
}

// builtinOK are text/template's built-in functions a page may use: comparisons and logic.
var builtinOK = map[string]bool{"eq": true, "ne": true, "not": true, "and": true, "or": true, "len": true}
