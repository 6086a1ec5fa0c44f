package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue/redistest"
)

// pageTemplateGood is a queue's own page that passes every check: the three parts, a
// slot, a field, and a stylesheet from a listed origin.
const pageTemplateGood = `<!doctype html>
<html lang="{{.Lang}}" dir="{{.Dir}}">
<head>{{.Head}}<title>{{.Brand}} {{.Queue}}</title>
<link rel="stylesheet" href="https://cdn.shop.example/shop.css"></head>
<body><h1 class="shop-title">{{if .Brand}}{{.Brand}}{{else}}{{.Queue}}{{end}}</h1>
<p class="shop-pos">{{t "pos_before"}} {{slot "position"}}</p>
{{.Room}}
{{.Scripts}}</body></html>
`

// TestPageTemplateAPI: a queue's own page through the admin API — refused with the line and
// the reason (nothing stored), saved as versions, read back with its origins, each save and
// the removal in the audit log with the source, and removed back to the default page.
func TestPageTemplateAPI(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "tpl-1", tolerantEnv(rs.URL(), testDB(t), nil))
	mustAdmin(t, in, "PUT", "/admin/api/queues/tq", map[string]any{"rate_per_second": 1})
	path := in.url + "/admin/api/queues/tq/template"
	const origins = "X-Template-Origins"

	type tplErr struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
			Line    int    `json:"line"`
		} `json:"error"`
	}
	for _, c := range []struct {
		what, body, ctype, origins string
		status                     int
		code                       string
		line                       int
		says                       string
	}{
		{"inline script", strings.Replace(pageTemplateGood, "{{.Room}}", "{{.Room}}<script>alert(1)</script>", 1), "text/html", "https://cdn.shop.example", 422, "invalid_template", 7, "inline script"},
		{"origin not listed", pageTemplateGood, "text/html", "", 422, "invalid_template", 4, "https://cdn.shop.example is not this origin"},
		{"no room", strings.Replace(pageTemplateGood, "{{.Room}}", "", 1), "text/html", "https://cdn.shop.example", 422, "invalid_template", 0, "{{.Room}} is missing"},
		{"unknown field", strings.Replace(pageTemplateGood, "{{else}}{{.Queue}}", "{{else}}{{.Token}}", 1), "text/html", "https://cdn.shop.example", 422, "invalid_template", 5, "no field .Token"},
		{"bad origin", pageTemplateGood, "text/html", "http://cdn.shop.example", 422, "invalid_template", 0, "https only"},
		{"as JSON", pageTemplateGood, "application/json", "", 415, "unsupported_media_type", 0, "text/html"},
		{"too big", pageTemplateGood + strings.Repeat(" ", 64<<10), "text/html", "", 413, "body_too_large", 0, ""},
	} {
		var e tplErr
		res := call(t, "PUT", path, adminToken, c.body, &e, "Content-Type", c.ctype, origins, c.origins)
		if res.StatusCode != c.status || e.Error.Code != c.code || e.Error.Line != c.line || !strings.Contains(e.Error.Message, c.says) {
			t.Errorf("%s: %d %+v, want %d %s line %d saying %q", c.what, res.StatusCode, e.Error, c.status, c.code, c.line, c.says)
		}
		if c.status == 422 && e.Error.Field != "template" {
			t.Errorf("%s: field %q, want template", c.what, e.Error.Field)
		}
	}
	if res := call(t, "GET", path, adminToken, nil, nil); res.StatusCode != 404 {
		t.Fatalf("a refused template was stored: GET %d", res.StatusCode)
	}

	var saved struct {
		Version int      `json:"version"`
		ETag    string   `json:"etag"`
		Origins []string `json:"origins"`
		Bytes   int      `json:"bytes"`
	}
	for v := 1; v <= 2; v++ {
		body := pageTemplateGood
		if v == 2 {
			body = strings.Replace(body, "shop-title", "shop-title v2", 1)
		}
		if res := call(t, "PUT", path+"?origins=https://cdn.shop.example", adminToken, body, &saved, "Content-Type", "text/html; charset=utf-8"); res.StatusCode != 200 {
			t.Fatalf("save v%d: %d", v, res.StatusCode)
		}
		if saved.Version != v || saved.Bytes != len(body) || len(saved.Origins) != 1 || saved.ETag == "" {
			t.Fatalf("save v%d: %+v", v, saved)
		}
	}
	res := call(t, "GET", path, adminToken, nil, nil)
	got := readAll(res)
	if res.StatusCode != 200 || !strings.Contains(got, "shop-title v2") || res.Header.Get(origins) != "https://cdn.shop.example" || res.Header.Get("X-Template-Version") != "2" {
		t.Fatalf("GET: %d %q %v", res.StatusCode, got, res.Header)
	}
	if res := call(t, "DELETE", path, adminToken, nil, nil); res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", res.StatusCode)
	}
	for _, m := range []string{"GET", "DELETE"} {
		var e tplErr
		if res := call(t, m, path, adminToken, nil, &e); res.StatusCode != 404 || e.Error.Code != "template_not_found" {
			t.Errorf("%s after the removal: %d %+v", m, res.StatusCode, e.Error)
		}
	}
	var e tplErr
	if res := call(t, "GET", in.url+"/admin/api/queues/nope/template", adminToken, nil, &e); res.StatusCode != 404 || e.Error.Code != "queue_not_found" {
		t.Errorf("unknown queue: %d %+v", res.StatusCode, e.Error)
	}

	// The audit log: two saves (each with its source) and the removal.
	var actions []string
	var v1, v2 auditEntry
	for _, e := range auditEntries(t, in, adminToken, "?limit=50") {
		if strings.HasPrefix(e.Action, "queue.template.") {
			actions = append(actions, e.Action)
			if e.Action == "queue.template.update" && v2.Action == "" {
				v2 = e
			} else if e.Action == "queue.template.update" {
				v1 = e
			}
		}
	}
	if strings.Join(actions, ",") != "queue.template.delete,queue.template.update,queue.template.update" {
		t.Fatalf("audit actions %v", actions)
	}
	if src, _ := v2.After["source"].(string); !strings.Contains(src, "shop-title v2") {
		t.Errorf("the second save's entry lacks its source: %v", v2.After)
	}
	if src, _ := v1.After["source"].(string); src != pageTemplateGood || v1.Before["template"] != nil {
		t.Errorf("the first save's entry: before %v after %v", v1.Before, v1.After)
	}
}
