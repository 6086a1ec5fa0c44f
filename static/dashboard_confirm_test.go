package static_test

import (
	"io/fs"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/static"
)

// irreversibleKinds are the dashboard's changes that cannot be undone or stop a live sale
// at once: each is asked in the confirmation dialog (admin.js CONFIRM_KINDS). Removing one
// from the dashboard's table, or adding one, is a decision this list records.
var irreversibleKinds = []string{
	"close",           // PUT queue closed: true — nobody new may join
	"pause",           // PUT queue paused: true — nobody is let in
	"remove_logo",     // DELETE …/logo — the file is gone
	"remove_template", // DELETE …/template — the default page at once (the audit log keeps the source)
	"revoke_invite",   // DELETE …/invites/{code} — the code stops working for good
	"revoke_key",      // DELETE /admin/api/keys/{kid} — the key and every token it signed stop working
	"rotate_key",      // POST /admin/api/keys/rotate — a new signing key
	"start_now",       // PUT queue starts_at: null while scheduled — the draw runs, the seed is revealed
}

// TestDashboardIrreversibleActionsConfirm reads admin.js: every request that changes
// something leaves through api() or sendRaw() (the logo, the page template), and both refuse a request that
// confirmKind marks unless it carries the dialog's confirmation of that kind; every
// confirmAction call names a kind of CONFIRM_KINDS, every kind has a control that asks
// it, and every request of an irreversible route passes the confirmation it got.
// (The browser test TestBrowserDashboardConfirmations checks confirmKind's answers for
// every request the page makes, and each control's dialog.)
func TestDashboardIrreversibleActionsConfirm(t *testing.T) {
	t.Parallel()
	b, err := fs.ReadFile(static.FS, "assets/admin.js")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)

	// The table of kinds.
	m := regexp.MustCompile(`(?s)const CONFIRM_KINDS = \{(.*?)\n  \};`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("admin.js has no CONFIRM_KINDS table")
	}
	var kinds []string
	for _, k := range regexp.MustCompile(`(?m)^\s*(\w+): \{ undo: (?:true|false) \}`).FindAllStringSubmatch(m[1], -1) {
		kinds = append(kinds, k[1])
	}
	sort.Strings(kinds)
	if !slices.Equal(kinds, irreversibleKinds) {
		t.Errorf("CONFIRM_KINDS = %v, want %v", kinds, irreversibleKinds)
	}

	// Every fetch is in api(), sendRaw() (the logo, the page template) or the stats stream (a GET).
	fn := regexp.MustCompile(`function (\w+)\(`)
	enclosing := func(at int) string {
		all := fn.FindAllStringSubmatchIndex(src[:at], -1)
		if len(all) == 0 {
			return ""
		}
		last := all[len(all)-1]
		return src[last[2]:last[3]]
	}
	fetches := regexp.MustCompile(`\bfetch\(`).FindAllStringIndex(src, -1)
	if len(fetches) == 0 {
		t.Fatal("no fetch( in admin.js: has the way requests are made changed?")
	}
	for _, f := range fetches {
		switch name := enclosing(f[0]); name {
		case "api", "sendRaw":
		case "startStream":
			if !strings.Contains(src[f[0]:f[0]+200], "'/admin/api/stream'") {
				t.Errorf("startStream fetches something else than the stats stream")
			}
		default:
			t.Errorf("a fetch in function %s: every change must go through api() or sendRaw(), which check confirmations", name)
		}
	}
	for _, name := range []string{"api", "sendRaw"} {
		body := functionBody(t, src, name)
		check := strings.Index(body, "confirmedFor(")
		if check < 0 || check > strings.Index(body, "fetch(") {
			t.Errorf("%s() does not check confirmedFor before its fetch", name)
		}
	}

	// confirmKind names only known kinds (and "delete", which nothing confirms: refused).
	for _, k := range regexp.MustCompile(`return '(\w+)'`).FindAllStringSubmatch(functionBody(t, src, "confirmKind"), -1) {
		if k[1] != "delete" && !slices.Contains(kinds, k[1]) {
			t.Errorf("confirmKind returns %q, which is not in CONFIRM_KINDS", k[1])
		}
	}

	// Every confirmAction call names a kind; every kind is asked somewhere.
	asked := map[string]int{}
	for _, c := range regexp.MustCompile(`confirmAction\(\s*([^,)]*)`).FindAllStringSubmatch(src, -1) {
		arg := strings.TrimSpace(c[1])
		if arg == "kind" { // the definition
			continue
		}
		k := strings.Trim(arg, "'")
		if k == arg || !slices.Contains(kinds, k) {
			t.Errorf("confirmAction(%s …): the kind must be a literal of CONFIRM_KINDS", arg)
			continue
		}
		asked[k]++
	}
	for _, k := range kinds {
		if asked[k] == 0 {
			t.Errorf("kind %s: no control asks it (confirmAction('%s', …))", k, k)
		}
	}

	// The requests of the irreversible routes pass the confirmation they got.
	for _, line := range strings.Split(src, "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "//") || strings.HasPrefix(l, "*") {
			continue
		}
		irreversible := strings.Contains(l, "api('DELETE'") || strings.Contains(l, "sendLogo('DELETE'") || strings.Contains(l, "sendRaw('DELETE'") ||
			strings.Contains(l, "'/admin/api/keys/rotate'") && strings.Contains(l, "api(")
		if irreversible && !strings.Contains(l, "conf)") && !strings.Contains(l, "conf,") {
			t.Errorf("an irreversible request without its confirmation: %s", l)
		}
	}
	t.Logf("irreversible kinds, each asked in the dialog: %v (asked at %v)", kinds, asked)
}

// functionBody is the text of `function name(` up to its closing brace at the same indent.
func functionBody(t *testing.T, src, name string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^( *)(?:async )?function ` + name + `\(`)
	loc := re.FindStringSubmatchIndex(src)
	if loc == nil {
		t.Fatalf("admin.js has no function %s", name)
	}
	indent := src[loc[2]:loc[3]]
	end := strings.Index(src[loc[1]:], "\n"+indent+"}\n")
	if end < 0 {
		t.Fatalf("function %s: no end", name)
	}
	return src[loc[1] : loc[1]+end]
}
