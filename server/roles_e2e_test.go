package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/orders/pgtest"
	"github.com/waitroom/waitroom/queue/redistest"
)

const (
	rolesViewerToken = "viewer-token-0123456789"
	rolesAliceToken  = "alice-token-0123456789"
	rolesBobToken    = "bob-token-0123456789ab"
)

// rolesEnv: the harness's operator token (actor admin), a viewer token (actor viewer), a
// named operator alice and a named viewer bob.
func rolesEnv(redisURL, dbURL string) map[string]string {
	return tolerantEnv(redisURL, dbURL, map[string]string{
		"WR_ADMIN_VIEWER_TOKEN": rolesViewerToken,
		"WR_ADMIN_TOKENS":       "alice:operator:" + rolesAliceToken + ", bob:viewer:" + rolesBobToken,
	})
}

// changingRoute is one PUT/POST/DELETE under /admin/api, as a request that would change
// something.
type changingRoute struct {
	method, route string // as registered in web/server.go (under /admin/api)
	path          string
	body          any
	contentType   string
}

func changingRoutes(png []byte, code, kid string) []changingRoute {
	return []changingRoute{
		{"PUT", "/queues/:queue", "/admin/api/queues/rq", `{"rate_per_second":99,"paused":true}`, ""},
		{"PUT", "/queues/:queue", "/admin/api/queues/newq", `{"rate_per_second":1}`, ""}, // would create it
		{"PUT", "/queues/:queue/logo", "/admin/api/queues/rq/logo", png, "image/png"},
		{"DELETE", "/queues/:queue/logo", "/admin/api/queues/rq/logo", nil, ""},
		{"PUT", "/queues/:queue/template", "/admin/api/queues/rq/template", pageTemplateGood, "text/html"},
		{"DELETE", "/queues/:queue/template", "/admin/api/queues/rq/template", nil, ""},
		{"POST", "/queues/:queue/template/preview", "/admin/api/queues/rq/template/preview", pageTemplateGood, "text/html"},
		{"PUT", "/products/:id", "/admin/api/products/rp", `{"stock":1,"name":"changed"}`, ""},
		{"PUT", "/products/:id", "/admin/api/products/newp", `{"stock":1}`, ""}, // would create it
		{"POST", "/queues/:queue/invites", "/admin/api/queues/rq/invites", `{"count":1,"lane":"bypass"}`, ""},
		{"DELETE", "/queues/:queue/invites/:code", "/admin/api/queues/rq/invites/" + code, nil, ""},
		{"POST", "/keys/rotate", "/admin/api/keys/rotate", nil, ""},
		{"PUT", "/limits", "/admin/api/limits", `{"join_global_burst":7}`, ""},
		// The revocations: a key that exists (a viewer is refused before it is
		// looked up) and a well-formed jti.
		{"DELETE", "/keys/:kid", "/admin/api/keys/" + kid, nil, ""},
		{"POST", "/queues/:queue/revoke", "/admin/api/queues/rq/revoke", `{"jti":"0b6f3d9e-5f4a-4c1e-9a51-7d2c8e4b1a60"}`, ""},
	}
}

// registeredChangingRoutes reads web/server.go's route table: every PUT, POST and DELETE
// of the admin group.
func registeredChangingRoutes(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("../web/server.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\s*admin\.(Put|Post|Delete|Patch)\("([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		out = append(out, strings.ToUpper(m[1])+" "+m[2])
	}
	if len(out) == 0 {
		t.Fatal("no admin routes found in web/server.go")
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// adminState is everything a changing admin route could change, read back: queue names and
// rq's settings, the products, rq's invites, the keys, the limits.
func adminState(t *testing.T, in *instance) string {
	t.Helper()
	var stats struct {
		Queues []map[string]any `json:"queues"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &stats)
	queues := map[string]any{}
	for _, q := range stats.Queues {
		for _, volatile := range []string{"waiting", "waiting_priority", "waiting_bypass", "admitted_total", "active_tokens",
			"admit_rate", "tick_lag_ms", "leader", "prequeue", "token_ttl_effective_seconds"} {
			delete(q, volatile)
		}
		queues[q["name"].(string)] = q
	}
	var products, invites, keys, limits any
	call(t, "GET", in.url+"/api/products", "", nil, &products)
	call(t, "GET", in.url+"/admin/api/queues/rq/invites", adminToken, nil, &invites)
	call(t, "GET", in.url+"/admin/api/keys", adminToken, nil, &keys)
	call(t, "GET", in.url+"/admin/api/limits", adminToken, nil, &limits)
	b, _ := json.Marshal(map[string]any{"queues": queues, "products": products, "invites": invites, "keys": keys, "limits": limits})
	return string(b)
}

type auditEntry struct {
	At     string         `json:"at"`
	Actor  string         `json:"actor"`
	Action string         `json:"action"`
	Target string         `json:"target"`
	Before map[string]any `json:"before"`
	After  map[string]any `json:"after"`
}

func auditEntries(t *testing.T, in *instance, bearer, query string) []auditEntry {
	t.Helper()
	var out struct {
		Entries []auditEntry `json:"entries"`
	}
	if res := call(t, "GET", in.url+"/admin/api/audit"+query, bearer, nil, &out); res.StatusCode != 200 {
		t.Fatalf("GET audit%s: %d", query, res.StatusCode)
	}
	return out.Entries
}

func requestWithType(t *testing.T, in *instance, r changingRoute, bearer string) (*http.Response, errResp) {
	t.Helper()
	var hdr []string
	if r.contentType != "" {
		hdr = []string{"Content-Type", r.contentType}
	}
	var e errResp
	res := call(t, r.method, in.url+r.path, bearer, r.body, &e, hdr...)
	return res, e
}

// A viewer token may read everything and change nothing: every PUT, POST and DELETE under
// /admin/api is 403 forbidden and the state read back is the same.
func TestAdminViewerRefusedEveryChange(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "roles", rolesEnv(rs.URL(), testDB(t)))
	png := brandingPNG(t, 8, 8)

	admin(t, in, "PUT", "/admin/api/queues/rq", map[string]any{"rate_per_second": 0})
	admin(t, in, "PUT", "/admin/api/products/rp", map[string]any{"queue": "rq", "stock": 5, "name": "R"})
	if res := call(t, "PUT", in.url+"/admin/api/queues/rq/logo", adminToken, png, nil, "Content-Type", "image/png"); res.StatusCode != 200 {
		t.Fatalf("logo: %d", res.StatusCode)
	}
	var inv struct {
		Invites []struct {
			Code string `json:"code"`
		} `json:"invites"`
	}
	call(t, "POST", in.url+"/admin/api/queues/rq/invites", adminToken, map[string]any{"count": 2, "lane": "bypass"}, &inv)
	if len(inv.Invites) != 2 {
		t.Fatalf("invites: %+v", inv)
	}
	var keys struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	call(t, "GET", in.url+"/admin/api/keys", adminToken, nil, &keys)
	if len(keys.Keys) == 0 {
		t.Fatalf("keys: %+v", keys)
	}
	routes := changingRoutes(png, inv.Invites[0].Code, keys.Keys[0].Kid)

	t.Run("the table covers every changing admin route", func(t *testing.T) {
		var table []string
		for _, r := range routes {
			table = append(table, r.method+" "+r.route)
		}
		sort.Strings(table)
		table = slices.Compact(table)
		if reg := registeredChangingRoutes(t); !slices.Equal(table, reg) {
			t.Fatalf("changing admin routes in web/server.go %v, in this test %v", reg, table)
		}
	})

	before := adminState(t, in)
	auditBefore := len(auditEntries(t, in, adminToken, "?limit=500"))
	for _, tok := range []struct{ name, token string }{{"viewer", rolesViewerToken}, {"bob", rolesBobToken}} {
		for _, r := range routes {
			res, e := requestWithType(t, in, r, tok.token)
			if res.StatusCode != 403 || e.Error.Code != "forbidden" || !strings.Contains(e.Error.Message, "only read") {
				t.Errorf("%s: %s %s: %d %+v, want 403 forbidden", tok.name, r.method, r.path, res.StatusCode, e)
			}
		}
	}
	if after := adminState(t, in); after != before {
		t.Fatalf("a viewer changed the state:\nbefore %s\nafter  %s", before, after)
	}
	if n := len(auditEntries(t, in, adminToken, "?limit=500")); n != auditBefore {
		t.Fatalf("audit entries %d after the viewers' attempts, %d before", n, auditBefore)
	}

	t.Run("every read is allowed", func(t *testing.T) {
		for _, path := range []string{"/admin/api/stats", "/admin/api/queues/rq/history", "/admin/api/queues/rq/report",
			"/admin/api/queues/rq/report?format=csv", "/admin/api/audit", "/admin/api/queues/rq/invites",
			"/admin/api/keys", "/admin/api/limits", "/admin/api/whoami"} {
			if res := call(t, "GET", in.url+path, rolesViewerToken, nil, nil); res.StatusCode != 200 {
				t.Errorf("viewer GET %s: %d", path, res.StatusCode)
			}
		}
		ctx, cancel := context.WithTimeout(testContext(t), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", in.url+"/admin/api/stream", nil)
		req.Header.Set("Authorization", "Bearer "+rolesBobToken)
		res, err := specClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("viewer GET /admin/api/stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
		}
	})

	t.Run("a viewer sees no usable invite code", func(t *testing.T) {
		type list struct {
			Invites []struct {
				Code, URL string
				Redacted  bool
			} `json:"invites"`
		}
		var asViewer, asOperator list
		call(t, "GET", in.url+"/admin/api/queues/rq/invites", rolesViewerToken, nil, &asViewer)
		call(t, "GET", in.url+"/admin/api/queues/rq/invites", adminToken, nil, &asOperator)
		if len(asViewer.Invites) == 0 || len(asViewer.Invites) != len(asOperator.Invites) {
			t.Fatalf("viewer sees %d invites, operator %d", len(asViewer.Invites), len(asOperator.Invites))
		}
		for i, v := range asViewer.Invites {
			full := asOperator.Invites[i]
			if !v.Redacted || v.URL != "" || v.Code != full.Code[:6]+"…" || strings.Contains(v.Code, full.Code) || full.Redacted {
				t.Errorf("viewer's invite %+v (operator's %+v): want the code's 6-character prefix, no url", v, full)
			}
		}
	})

	t.Run("whoami", func(t *testing.T) {
		for _, c := range []struct{ token, actor, role string }{
			{adminToken, "admin", "operator"}, {rolesViewerToken, "viewer", "viewer"},
			{rolesAliceToken, "alice", "operator"}, {rolesBobToken, "bob", "viewer"},
		} {
			var who struct{ Actor, Role string }
			if res := call(t, "GET", in.url+"/admin/api/whoami", c.token, nil, &who); res.StatusCode != 200 || who.Actor != c.actor || who.Role != c.role {
				t.Errorf("whoami as %s: %d %+v", c.actor, res.StatusCode, who)
			}
		}
		var e errResp
		if res := call(t, "GET", in.url+"/admin/api/whoami", "not-a-token-of-ours", nil, &e); res.StatusCode != 401 || e.Error.Code != "admin_unauthorized" {
			t.Errorf("unknown token: %d %+v", res.StatusCode, e)
		}
	})

	t.Run("an operator is not refused", func(t *testing.T) {
		res, _ := requestWithType(t, in, routes[0], rolesAliceToken)
		if res.StatusCode != 200 {
			t.Fatalf("alice PUT queue: %d", res.StatusCode)
		}
	})
}

// A named operator's changes land in the audit log with its name and the target's state
// before and after; failed changes are not recorded; no token, secret or invite code is
// ever in it.
func TestAuditLogOfOperatorChanges(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	dbURL := testDB(t)
	in := startInProcess(t, "audit", rolesEnv(rs.URL(), dbURL))
	png := brandingPNG(t, 8, 8)
	as := func(method, path string, body any, want int, hdr ...string) *http.Response {
		t.Helper()
		res := call(t, method, in.url+path, rolesAliceToken, body, nil, hdr...)
		if res.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d", method, path, res.StatusCode, want)
		}
		return res
	}
	as("PUT", "/admin/api/queues/aq", map[string]any{"rate_per_second": 3}, 201)
	as("PUT", "/admin/api/queues/aq", map[string]any{"rate_per_second": 7, "paused": true}, 200)
	as("PUT", "/admin/api/queues/aq", `{"rate_per_second":"fast"}`, 422) // not recorded
	as("PUT", "/admin/api/products/ap", map[string]any{"queue": "aq", "stock": 3, "name": "A"}, 201)
	as("PUT", "/admin/api/products/ap", map[string]any{"stock": 2}, 200)
	var inv struct {
		Invites []struct{ Code, URL string } `json:"invites"`
	}
	res := call(t, "POST", in.url+"/admin/api/queues/aq/invites", rolesAliceToken, map[string]any{"count": 3, "lane": "priority"}, &inv)
	if res.StatusCode != 201 || len(inv.Invites) != 3 {
		t.Fatalf("invites: %d %+v", res.StatusCode, inv)
	}
	as("DELETE", "/admin/api/queues/aq/invites/"+inv.Invites[0].Code, nil, 204)
	as("DELETE", "/admin/api/queues/aq/invites/"+inv.Invites[0].Code, nil, 404) // not recorded
	as("POST", "/admin/api/keys/rotate", nil, 200)
	as("PUT", "/admin/api/limits", map[string]any{"join_global_burst": 9}, 200)
	as("PUT", "/admin/api/queues/aq/logo", png, 200, "Content-Type", "image/png")
	as("DELETE", "/admin/api/queues/aq/logo", nil, 204)

	all := auditEntries(t, in, rolesViewerToken, "?limit=500") // a viewer may read the log
	var mine []auditEntry
	for _, e := range all {
		if e.Actor == "alice" {
			mine = append(mine, e)
		}
	}
	wantActions := []string{"queue.logo.delete", "queue.logo.update", "limits.update", "keys.rotate", "invite.revoke",
		"invites.create", "product.update", "product.create", "queue.update", "queue.create"}
	var got []string
	for _, e := range mine {
		got = append(got, e.Action)
	}
	if !slices.Equal(got, wantActions) {
		t.Fatalf("alice's entries, newest first: %v, want %v", got, wantActions)
	}
	e := map[string]auditEntry{}
	for _, x := range mine {
		e[x.Action] = x
	}
	check := func(cond bool, what string, x auditEntry) {
		t.Helper()
		if !cond {
			t.Errorf("%s: %+v", what, x)
		}
	}
	x := e["queue.create"]
	check(x.Target == "queue:aq" && x.Before == nil && num(x.After["rate_per_second"]) == 3, "queue.create: null → rate 3", x)
	x = e["queue.update"]
	check(x.Target == "queue:aq" && num(x.Before["rate_per_second"]) == 3 && num(x.After["rate_per_second"]) == 7 &&
		x.Before["paused"] == false && x.After["paused"] == true, "queue.update: rate 3 → 7, paused false → true", x)
	x = e["product.create"]
	check(x.Target == "product:ap" && x.Before == nil && num(x.After["stock"]) == 3 && x.After["queue"] == "aq", "product.create", x)
	x = e["product.update"]
	check(num(x.Before["stock"]) == 3 && num(x.After["stock"]) == 2, "product.update: stock 3 → 2", x)
	x = e["invites.create"]
	check(x.Target == "queue:aq" && x.Before == nil && num(x.After["count"]) == 3 && x.After["lane"] == "priority" &&
		x.After["expires_at"] != nil, "invites.create: count, lane, expiry", x)
	x = e["invite.revoke"]
	check(x.Target == "invite:aq/"+inv.Invites[0].Code[:6], "invite.revoke: the code's prefix only", x)
	x = e["keys.rotate"]
	check(x.Target == "keys" && len(x.Before["keys"].([]any))+1 == len(x.After["keys"].([]any)), "keys.rotate: one key more", x)
	x = e["limits.update"]
	check(x.Target == "limits" && num(x.Before["join_global_burst"]) != 9 && num(x.After["join_global_burst"]) == 9, "limits.update", x)
	x = e["queue.logo.update"]
	check(x.Target == "queue:aq" && x.Before["logo_url"] == nil && strings.HasPrefix(x.After["logo_url"].(string), "/q/aq/logo"), "logo update", x)
	x = e["queue.logo.delete"]
	check(x.Before["logo_url"] != nil && x.After["logo_url"] == nil, "logo delete", x)
	for _, x := range mine {
		if at, err := time.Parse(time.RFC3339, x.At); err != nil || time.Since(at) > time.Minute {
			t.Errorf("at %q", x.At)
		}
	}

	t.Run("limit and queue filter", func(t *testing.T) {
		if got := auditEntries(t, in, rolesAliceToken, "?limit=2"); len(got) != 2 || got[0].Action != "queue.logo.delete" || got[1].Action != "queue.logo.update" {
			t.Errorf("limit=2: %+v", got)
		}
		aq := auditEntries(t, in, rolesAliceToken, "?queue=aq")
		if len(aq) != 8 {
			t.Errorf("queue=aq: %d entries, want 8 (all but keys and limits)", len(aq))
		}
		for _, x := range aq {
			if x.Target == "keys" || x.Target == "limits" {
				t.Errorf("queue=aq holds %s", x.Target)
			}
		}
		if got := auditEntries(t, in, rolesAliceToken, "?queue=nosuchqueue"); len(got) != 0 {
			t.Errorf("unknown queue: %+v", got)
		}
		for _, c := range []struct{ query, code, field string }{
			{"?limit=0", "invalid_limit", "limit"}, {"?limit=501", "invalid_limit", "limit"},
			{"?limit=abc", "invalid_limit", "limit"}, {"?limit=", "invalid_limit", "limit"},
			{"?limit=1.5", "invalid_limit", "limit"}, {"?queue=bad.name", "invalid_queue", "queue"},
			{"?queue=", "invalid_queue", "queue"},
		} {
			var e struct {
				Error struct{ Code, Field string } `json:"error"`
			}
			if res := call(t, "GET", in.url+"/admin/api/audit"+c.query, rolesAliceToken, nil, &e); res.StatusCode != 422 ||
				e.Error.Code != c.code || e.Error.Field != c.field {
				t.Errorf("GET audit%s: %d %+v, want 422 %s field %s", c.query, res.StatusCode, e, c.code, c.field)
			}
		}
	})

	t.Run("no secret in any row", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(ctx, "SELECT row_to_json(a)::text FROM audit_log a")
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(texts) < len(wantActions) {
			t.Fatalf("%d rows", len(texts))
		}
		dump := strings.Join(texts, "\n")
		secrets := []string{adminToken, rolesViewerToken, rolesAliceToken, rolesBobToken, "0123456789abcdef-test-secret"}
		for _, i := range inv.Invites {
			secrets = append(secrets, i.Code, i.URL)
		}
		for _, s := range secrets {
			if strings.Contains(dump, s) {
				t.Errorf("the audit log holds a secret %q", s)
			}
		}
	})
}

// WR_ADMIN_TOKENS and WR_ADMIN_VIEWER_TOKEN: a bad entry stops the start with one line that
// names the setting and the entry's position, and never shows a token.
func TestAdminTokensConfig(t *testing.T) {
	t.Parallel()
	const tokA, tokB = "token-aaaaaaaaaaaaaaaa", "token-bbbbbbbbbbbbbbbb"
	good := map[string]string{"WR_ADMIN_TOKEN": adminToken, "WR_ADMIN_VIEWER_TOKEN": rolesViewerToken,
		"WR_ADMIN_TOKENS": "alice:operator:" + tokA + ",bob:viewer:" + tokB + ":with:colons"}
	cfg, err := loadConfig(func(k string) string { return good[k] })
	if err != nil {
		t.Fatal(err)
	}
	named := cfg.webAdminTokens()
	if len(named) != 3 || named[0].Name != "viewer" || named[0].Role != "viewer" || named[1].Name != "alice" ||
		named[1].Role != "operator" || named[2].Name != "bob" || named[2].Token != tokB+":with:colons" {
		t.Fatalf("parsed: %+v", named)
	}
	var out bytes.Buffer
	log := newTestLogger(&out)
	cfg.logFields(log.Info()).Msg("starting")
	for _, secret := range []string{tokA, tokB, rolesViewerToken, adminToken} {
		if strings.Contains(out.String(), secret) {
			t.Fatalf("start log shows %q: %s", secret, out.String())
		}
	}
	if !strings.Contains(out.String(), "alice:operator:***") {
		t.Errorf("start log does not name the tokens: %s", out.String())
	}

	for _, c := range []struct {
		name, setting, value, want string
	}{
		{"no token", "WR_ADMIN_TOKENS", "alice:operator", "entry 1"},
		{"empty entry", "WR_ADMIN_TOKENS", "alice:operator:" + tokA + ",", "entry 2"},
		{"bad name", "WR_ADMIN_TOKENS", "alice:operator:" + tokA + ",b ob:viewer:" + tokB, "entry 2"},
		{"long name", "WR_ADMIN_TOKENS", strings.Repeat("n", 33) + ":viewer:" + tokB, "entry 1"},
		{"bad role", "WR_ADMIN_TOKENS", "alice:root:" + tokA, "entry 1 (alice): the role"},
		{"short token", "WR_ADMIN_TOKENS", "alice:operator:short-token", "at least 16"},
		{"duplicate name", "WR_ADMIN_TOKENS", "alice:operator:" + tokA + ",alice:viewer:" + tokB, "entry 2 (alice)"},
		{"duplicate token", "WR_ADMIN_TOKENS", "alice:operator:" + tokA + ",bob:viewer:" + tokA, "entry 2 (bob): the same token as WR_ADMIN_TOKENS entry 1"},
		{"the admin token again", "WR_ADMIN_TOKENS", "carol:viewer:" + adminToken + "-long", ""},
		{"name admin taken", "WR_ADMIN_TOKENS", "admin:viewer:" + tokA, "taken by WR_ADMIN_TOKEN"},
		{"short viewer token", "WR_ADMIN_VIEWER_TOKEN", "viewer-short", "at least 16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"WR_ADMIN_TOKEN": adminToken + "-long", c.setting: c.value}
			_, err := loadConfig(func(k string) string { return env[k] })
			if c.want == "" { // a token equal to WR_ADMIN_TOKEN
				if err == nil || !strings.Contains(err.Error(), "the same token as WR_ADMIN_TOKEN") {
					t.Fatalf("error %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), c.setting) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %s and %q", err, c.setting, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error of more than one line: %q", err)
			}
			for _, secret := range []string{tokA, tokB, adminToken, "short-token", "viewer-short"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a token: %q", err)
				}
			}
		})
	}
	t.Run("the viewer token is the admin token", func(t *testing.T) {
		env := map[string]string{"WR_ADMIN_TOKEN": tokA, "WR_ADMIN_VIEWER_TOKEN": tokA}
		if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || strings.Contains(err.Error(), tokA) {
			t.Fatalf("error %v", err)
		}
	})
}

// With PostgreSQL down an admin change still goes through (the audit log never holds it
// up), the entry is written to the server log at error level once the retries are spent,
// and the audit list answers 503 database_unavailable until PostgreSQL is back.
func TestAuditWithPostgresDown(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	pg := pgtest.MustPrivate(t)
	in := startInProcess(t, "auditdown", rolesEnv(rs.URL(), pg.URL()))
	if res := call(t, "PUT", in.url+"/admin/api/queues/dq", rolesAliceToken, map[string]any{"rate_per_second": 2}, nil); res.StatusCode != 201 {
		t.Fatalf("create: %d", res.StatusCode)
	}
	if got := auditEntries(t, in, rolesAliceToken, ""); len(got) != 1 || got[0].Action != "queue.create" {
		t.Fatalf("entries: %+v", got)
	}
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	if res := call(t, "PUT", in.url+"/admin/api/queues/dq", rolesAliceToken, map[string]any{"rate_per_second": 4}, nil); res.StatusCode != 200 {
		t.Fatalf("a change with PostgreSQL down: %d", res.StatusCode)
	}
	var e errResp
	res := call(t, "GET", in.url+"/admin/api/audit", rolesAliceToken, nil, &e)
	if res.StatusCode != 503 || e.Error.Code != "database_unavailable" || res.Header.Get("Retry-After") == "" {
		t.Fatalf("audit with PostgreSQL down: %d %+v", res.StatusCode, e)
	}
	testwait.For(t, 30*time.Second, "the lost entry in the server log", func() bool {
		return strings.Contains(in.logs.String(), "audit entry lost")
	})
	for _, l := range strings.Split(in.logs.String(), "\n") {
		if strings.Contains(l, "audit entry lost") && (!strings.Contains(l, `"level":"error"`) ||
			!strings.Contains(l, `"actor":"alice"`) || !strings.Contains(l, `"action":"queue.update"`) ||
			!strings.Contains(l, `"rate_per_second":4`) || strings.Contains(l, rolesAliceToken)) {
			t.Errorf("lost entry line: %s", l)
		}
	}
	if err := pg.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the audit list back", func() bool {
		return call(t, "GET", in.url+"/admin/api/audit", rolesAliceToken, nil, nil).StatusCode == 200
	})
	if got := auditEntries(t, in, rolesAliceToken, ""); len(got) != 1 || got[0].Action != "queue.create" {
		t.Fatalf("entries after PostgreSQL returned: %+v", got)
	}
}
