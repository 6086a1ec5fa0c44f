package main

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue/redistest"
)

// Branding of a queue's pages through the API: every branding field is
// checked (422 naming the field), the logo is taken only as the image type it claims and
// served back from the room's origin with nosniff, and the message reaches the waiting page
// escaped. Every request and answer is checked against docs/openapi.yaml by the harness.

// brandingErr is the error shape with the field a 422 names.
type brandingErr struct {
	Error struct {
		Code    string `json:"code"`
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"error"`
}

// brandingQueue is what these tests read of a queue's settings answer and stats.
type brandingQueue struct {
	Name         string  `json:"name"`
	BrandName    string  `json:"brand_name"`
	BrandColor   string  `json:"brand_color"`
	BrandMessage string  `json:"brand_message"`
	SupportURL   string  `json:"support_url"`
	LogoURL      *string `json:"logo_url"`
}

func brandingInstance(t *testing.T) *instance {
	t.Helper()
	rs := redistest.Start(t)
	return startInProcess(t, "brand-1", tolerantEnv(rs.URL(), testDB(t), nil))
}

// brandingPNG is a w×h PNG of one colour.
func brandingPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{0x1a, 0x5f, 0xb4, 0xff})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func brandingStats(t *testing.T, in *instance, name string) brandingQueue {
	t.Helper()
	return statsOf[brandingQueue](t, in, name)
}

// TestBrandingRefused: each bad branding value is a 422 naming its field, and changes nothing.
func TestBrandingRefused(t *testing.T) {
	t.Parallel()
	in := brandingInstance(t)
	mustAdmin(t, in, "PUT", "/admin/api/queues/b", map[string]any{"brand_name": "Acme", "brand_color": "#1a5fb4"})
	for _, c := range []struct {
		field string
		value any
	}{
		{"brand_color", "#ffff00"}, // white text on yellow: 1.07:1
		{"brand_color", "#3b82f6"}, // 3.68:1 on white: a common blue that is too light
		{"brand_color", "red"},
		{"brand_color", "#12345"},
		{"brand_color", "#1234567"},
		{"brand_color", 12},
		{"brand_message", strings.Repeat("m", 281)},
		{"brand_message", "a\x00b"},
		{"brand_name", "Acme\nShop"},
		{"brand_name", strings.Repeat("n", 61)},
		{"support_url", "javascript:alert(1)"},
		{"support_url", "http://x"},
		{"support_url", "//evil.example"},
		{"support_url", "data:text/html,x"},
		{"support_url", "https://shop.example/help me"},
		{"support_url", "/\\evil.example"},
		{"support_url", "https://"},
		{"support_url", " https://shop.example"},
	} {
		var e brandingErr
		res := call(t, "PUT", in.url+"/admin/api/queues/b", adminToken, map[string]any{c.field: c.value}, &e)
		if res.StatusCode != 422 || e.Error.Field != c.field {
			t.Errorf("%s %q: %d field %q (%s), want 422 naming %s", c.field, c.value, res.StatusCode, e.Error.Field, e.Error.Message, c.field)
		}
	}
	if st := brandingStats(t, in, "b"); st.BrandName != "Acme" || st.BrandColor != "#1a5fb4" {
		t.Fatalf("a refused change changed the branding: %+v", st)
	}
}

// TestBrandingSettings: the values are stored, shown in the answer and the stats, and
// cleared by "" and by null; the colour is stored lower case; a message may hold line breaks.
func TestBrandingSettings(t *testing.T) {
	t.Parallel()
	in := brandingInstance(t)
	var q brandingQueue
	res := call(t, "PUT", in.url+"/admin/api/queues/b", adminToken, map[string]any{
		"brand_name": "Acme Shoes ★", "brand_color": "#1A5FB4", "brand_message": "Drop at ten.\nOne pair each.",
		"support_url": "https://help.acme.example/drop?x=1",
	}, &q)
	if res.StatusCode != 201 || q.BrandName != "Acme Shoes ★" || q.BrandColor != "#1a5fb4" ||
		q.BrandMessage != "Drop at ten.\nOne pair each." || q.SupportURL != "https://help.acme.example/drop?x=1" || q.LogoURL != nil {
		t.Fatalf("PUT: %d %+v", res.StatusCode, q)
	}
	if st := brandingStats(t, in, "b"); st != q {
		t.Fatalf("stats %+v, answer %+v", st, q)
	}
	res = call(t, "PUT", in.url+"/admin/api/queues/b", adminToken, map[string]any{"support_url": "/help", "brand_name": ""}, &q)
	if res.StatusCode != 200 || q.SupportURL != "/help" || q.BrandName != "" || q.BrandColor != "#1a5fb4" {
		t.Fatalf("same-origin path, name cleared: %d %+v", res.StatusCode, q)
	}
	res = call(t, "PUT", in.url+"/admin/api/queues/b", adminToken, map[string]any{"brand_color": nil, "brand_message": nil, "support_url": nil}, &q)
	if res.StatusCode != 200 || q.BrandColor != "" || q.BrandMessage != "" || q.SupportURL != "" {
		t.Fatalf("null clears: %d %+v", res.StatusCode, q)
	}
	// Without a colour the stylesheet is empty (and still CSS).
	res = call(t, "GET", in.url+"/q/b/brand.css", "", nil, nil)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/css") {
		t.Fatalf("brand.css without a colour: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	mustAdmin(t, in, "PUT", "/admin/api/queues/b", map[string]any{"brand_color": "#0b57d0"})
	res = call(t, "GET", in.url+"/q/b/brand.css?v=0b57d0", "", nil, nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(body), "--brand: #0b57d0;") || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("brand.css: %d %q %q", res.StatusCode, res.Header, body)
	}
}

// TestBrandingLogo: a logo too big (413), of a type not taken (415), whose bytes are not
// the type sent (422 field logo); a good logo round trip: upload, served with its type,
// nosniff and an ETag (304 on If-None-Match), named in the settings; deleted → 404.
func TestBrandingLogo(t *testing.T) {
	t.Parallel()
	in := brandingInstance(t)
	mustAdmin(t, in, "PUT", "/admin/api/queues/b", map[string]any{"rate_per_second": 1})
	logo := "/admin/api/queues/b/logo"
	pngBytes := brandingPNG(t, 64, 32)
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, image.NewRGBA(image.Rect(0, 0, 8, 8)), nil); err != nil {
		t.Fatal(err)
	}
	big := append(append([]byte(nil), pngBytes...), bytes.Repeat([]byte{0}, 100<<10+1)...)

	for _, c := range []struct {
		what, ctype string
		body        []byte
		status      int
		code, field string
	}{
		{"too big", "image/png", big, 413, "body_too_large", ""},
		{"a GIF", "image/gif", []byte("GIF89a\x01\x00\x01\x00"), 415, "unsupported_media_type", ""},
		{"SVG", "image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), 415, "unsupported_media_type", ""},
		{"no type", "", pngBytes, 415, "unsupported_media_type", ""},
		{"a PNG sent as JPEG", "image/jpeg", pngBytes, 422, "invalid_logo", "logo"},
		{"a JPEG sent as PNG", "image/png", jpg.Bytes(), 422, "invalid_logo", "logo"},
		{"HTML sent as PNG", "image/png", []byte("<html><script>alert(1)</script></html>"), 422, "invalid_logo", "logo"},
		{"empty", "image/png", []byte{}, 422, "invalid_logo", "logo"},
	} {
		var e brandingErr
		res := call(t, "PUT", in.url+logo, adminToken, c.body, &e, "Content-Type", c.ctype)
		if res.StatusCode != c.status || e.Error.Code != c.code || e.Error.Field != c.field {
			t.Errorf("%s: %d %q field %q (%s), want %d %s %q", c.what, res.StatusCode, e.Error.Code, e.Error.Field, e.Error.Message, c.status, c.code, c.field)
		}
	}
	if res := call(t, "GET", in.url+"/q/b/logo", "", nil, nil); res.StatusCode != 404 {
		t.Fatalf("a refused logo was stored: %d", res.StatusCode)
	}
	// 100 KiB is the logo's limit only: a logo of exactly 100 KiB (102,400 bytes) is taken,
	// one byte more is 413 with the limit named; a 65 KiB JSON body elsewhere is still 413.
	var eBig brandingErr
	res := call(t, "PUT", in.url+logo, adminToken, logoOfSize(t, pngBytes, 100<<10+1), &eBig, "Content-Type", "image/png")
	// Fiber's body limit (100 KiB) refuses this one before putLogo runs; the answer names the
	// logo's limit all the same (it said "64 KiB").
	if res.StatusCode != 413 || eBig.Error.Code != "body_too_large" || eBig.Error.Message != "The logo is larger than 100 KiB (102,400 bytes)." {
		t.Fatalf("a logo of 100 KiB + 1: %d %+v", res.StatusCode, eBig.Error)
	}
	if res := call(t, "PUT", in.url+logo, adminToken, logoOfSize(t, pngBytes, 100<<10), nil, "Content-Type", "image/png"); res.StatusCode != 200 {
		t.Fatalf("a logo of exactly 100 KiB: %d", res.StatusCode)
	}
	if res := call(t, "DELETE", in.url+logo, adminToken, nil, nil); res.StatusCode != 204 {
		t.Fatalf("delete the 100 KiB logo: %d", res.StatusCode)
	}
	var e413 brandingErr
	fat := `{"brand_message":"` + strings.Repeat("x", 65<<10) + `"}`
	if res := call(t, "PUT", in.url+"/admin/api/queues/b", adminToken, fat, &e413); res.StatusCode != 413 || e413.Error.Code != "body_too_large" {
		t.Fatalf("a 65 KiB settings body: %d %q", res.StatusCode, e413.Error.Code)
	}
	var e brandingErr
	if res := call(t, "PUT", in.url+"/admin/api/queues/nope/logo", adminToken, pngBytes, &e, "Content-Type", "image/png"); res.StatusCode != 404 || e.Error.Code != "queue_not_found" {
		t.Fatalf("logo of no queue: %d %q", res.StatusCode, e.Error.Code)
	}

	// The round trip.
	var put struct {
		LogoURL string `json:"logo_url"`
		Type    string `json:"type"`
		Bytes   int    `json:"bytes"`
	}
	res = call(t, "PUT", in.url+logo, adminToken, pngBytes, &put, "Content-Type", "image/png")
	if res.StatusCode != 200 || put.Type != "image/png" || put.Bytes != len(pngBytes) || !strings.HasPrefix(put.LogoURL, "/q/b/logo?v=") {
		t.Fatalf("upload: %d %+v", res.StatusCode, put)
	}
	if st := brandingStats(t, in, "b"); st.LogoURL == nil || *st.LogoURL != put.LogoURL {
		t.Fatalf("stats logo_url %v, want %s", st.LogoURL, put.LogoURL)
	}
	res = call(t, "GET", in.url+put.LogoURL, "", nil, nil)
	got, _ := io.ReadAll(res.Body)
	etag := res.Header.Get("ETag")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/png" || res.Header.Get("X-Content-Type-Options") != "nosniff" ||
		!bytes.Equal(got, pngBytes) || etag == "" || !strings.Contains(res.Header.Get("Cache-Control"), "max-age") {
		t.Fatalf("GET logo: %d %v (%d bytes)", res.StatusCode, res.Header, len(got))
	}
	if res := call(t, "GET", in.url+"/q/b/logo", "", nil, nil, "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match %s: %d, want 304", etag, res.StatusCode)
	}
	// The waiting page shows it.
	res = call(t, "GET", in.url+"/q/b", "", nil, nil)
	page, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(page), `id="brand-logo"`) || !strings.Contains(string(page), strings.ReplaceAll(put.LogoURL, "?", "?")) {
		t.Fatalf("the waiting page has no logo:\n%s", page)
	}
	if res := call(t, "DELETE", in.url+logo, adminToken, nil, nil); res.StatusCode != 204 {
		t.Fatalf("DELETE logo: %d", res.StatusCode)
	}
	if res := call(t, "GET", in.url+"/q/b/logo", "", nil, &e); res.StatusCode != 404 || e.Error.Code != "logo_not_found" {
		t.Fatalf("GET a deleted logo: %d %q", res.StatusCode, e.Error.Code)
	}
	if res := call(t, "DELETE", in.url+logo, adminToken, nil, &e); res.StatusCode != 404 || e.Error.Code != "logo_not_found" {
		t.Fatalf("DELETE again: %d %q", res.StatusCode, e.Error.Code)
	}
	if st := brandingStats(t, in, "b"); st.LogoURL != nil {
		t.Fatalf("stats logo_url %v after the delete", *st.LogoURL)
	}
}

// TestBrandingEscaped: a message, a name and a link holding markup reach the waiting page and
// the order page as text: escaped, never as a tag.
func TestBrandingEscaped(t *testing.T) {
	t.Parallel()
	in := brandingInstance(t)
	mustAdmin(t, in, "PUT", "/admin/api/queues/b", map[string]any{
		"brand_message": `<script>alert(1)</script>`, "brand_name": `"><img src=x onerror=alert(1)>`,
		"support_url": "/help?q=a&b=c", "brand_color": "#1a5fb4",
	})
	for _, path := range []string{"/q/b", "/q/b/order"} {
		res := call(t, "GET", in.url+path, "", nil, nil)
		body, _ := io.ReadAll(res.Body)
		page := string(body)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.Contains(page, "<script>alert(1)") {
			t.Errorf("%s: the message is not escaped", path)
		}
		if strings.Contains(page, "<img src=x") || !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("%s: the name is not escaped", path)
		}
		if !strings.Contains(page, `href="/q/b/brand.css?v=1a5fb4"`) || !strings.Contains(page, "branded") {
			t.Errorf("%s: no brand stylesheet", path)
		}
		if strings.Contains(page, "style=") {
			t.Errorf("%s: an inline style (the CSP forbids them)", path)
		}
	}
}

// logoOfSize is png padded with zero bytes to exactly n bytes (still a PNG by its signature).
func logoOfSize(t *testing.T, png []byte, n int) []byte {
	t.Helper()
	if len(png) > n {
		t.Fatalf("the PNG alone is %d bytes, over %d", len(png), n)
	}
	return append(append([]byte(nil), png...), bytes.Repeat([]byte{0}, n-len(png))...)
}

// TestBrandingMessages: a queue's own wording of its buyer pages (the setting messages,
// {"<language>": {"<key>": "text"}}): each wrong override is a 422 naming the field and
// saying which language and key and why, and changes nothing; a good one is stored, shown in
// the answer and the stats, and used by that queue's waiting and order pages in that
// language only (another queue and another language keep the built-in text); a plural key
// overridden without variants is the same for every count; null clears.
func TestBrandingMessages(t *testing.T) {
	t.Parallel()
	in := brandingInstance(t)
	mustAdmin(t, in, "PUT", "/admin/api/queues/b", map[string]any{"messages": map[string]any{"en": map[string]string{"queue_heading": "The Sneaker Drop"}}})
	mustAdmin(t, in, "PUT", "/admin/api/queues/other", map[string]any{"rate_per_second": 1})
	for _, c := range []struct {
		value any
		says  string
	}{
		{map[string]any{"xx": map[string]string{"queue_heading": "?"}}, `messages.xx: "xx" is not a language`},
		{map[string]any{"en": map[string]string{"admin_title": "?"}}, `messages.en.admin_title: "admin_title" is not a message of the buyer pages`},
		{map[string]any{"en": map[string]string{"no_such_key": "?"}}, "is not a message of the buyer pages"},
		{map[string]any{"en": map[string]string{"stock_left": "{count} left"}}, "messages.en.stock_left: the text has the placeholders [count]"},
		{map[string]any{"ja": map[string]string{"stock_left.one": "残り{n}"}}, `messages.ja.stock_left.one: stock_left is not a plural key with a "one" form in ja`},
		{map[string]any{"en": map[string]string{"leave": " "}}, "messages.en.leave: the text is empty"},
		{map[string]any{"en": map[string]string{"leave": "Leave \u202eenil"}}, "bidirectional controls"},
		{map[string]any{"en": map[string]string{"leave": strings.Repeat("x", 601)}}, "at most 600 characters"},
		{map[string]any{"en": "Leave"}, "must be an object"},
		{[]string{"en"}, "must be an object"},
	} {
		var e brandingErr
		res := call(t, "PUT", in.url+"/admin/api/queues/b", adminToken, map[string]any{"messages": c.value}, &e)
		if res.StatusCode != 422 || e.Error.Field != "messages" || !strings.Contains(e.Error.Message, c.says) {
			t.Errorf("messages %v: %d field %q %q, want 422 naming messages and saying %q", c.value, res.StatusCode, e.Error.Field, e.Error.Message, c.says)
		}
	}
	var q struct {
		Messages map[string]map[string]string `json:"messages"`
	}
	good := map[string]map[string]string{
		"en": {"queue_heading": "The Sneaker Drop", "order_heading": "Buy your pair", "stock_left": "{n} pairs left"},
		"ar": {"queue_heading": "إطلاق الأحذية", "stock_left.two": "تبقّى زوجان"},
	}
	if res := call(t, "PUT", in.url+"/admin/api/queues/b", adminToken, map[string]any{"messages": good}, &q); res.StatusCode != 200 || q.Messages["ar"]["stock_left.two"] != "تبقّى زوجان" || len(q.Messages) != 2 {
		t.Fatalf("PUT good messages: %d %+v", res.StatusCode, q.Messages)
	}
	if st := statsOf[struct {
		Messages map[string]map[string]string `json:"messages"`
	}](t, in, "b"); st.Messages["en"]["order_heading"] != "Buy your pair" {
		t.Errorf("stats: %+v", st.Messages)
	}
	page := func(path string) string {
		t.Helper()
		res := call(t, "GET", in.url+path, "", nil, nil)
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	en, ar := page("/q/b?lang=en"), page("/q/b?lang=ar")
	if !strings.Contains(en, "<h1>The Sneaker Drop ") || !strings.Contains(en, `"stock_left":"{n} pairs left"`) || strings.Contains(en, `"stock_left.one"`) {
		t.Errorf("the waiting page in English lacks the overrides, or keeps stock_left.one: %.300s", en)
	}
	if !strings.Contains(ar, "<h1>إطلاق الأحذية ") || !strings.Contains(ar, `"stock_left.two":"تبقّى زوجان"`) || !strings.Contains(ar, `"stock_left.few"`) {
		t.Errorf("the waiting page in Arabic lacks its overrides or its other plural forms")
	}
	if ko := page("/q/b?lang=ko"); strings.Contains(ko, "Sneaker") {
		t.Error("the Korean page took the English overrides")
	}
	if order := page("/q/b/order?lang=en"); !strings.Contains(order, "Buy your pair") {
		t.Error("the order page lacks the override")
	}
	if other := page("/q/other?lang=en"); strings.Contains(other, "Sneaker") {
		t.Error("another queue's page took the overrides")
	}
	q.Messages = nil // json would merge the answer into the map
	if res := call(t, "PUT", in.url+"/admin/api/queues/b", adminToken, map[string]any{"messages": nil}, &q); res.StatusCode != 200 || q.Messages == nil || len(q.Messages) != 0 {
		t.Fatalf("null clears: %d %+v", res.StatusCode, q.Messages)
	}
	if strings.Contains(page("/q/b?lang=en"), "Sneaker") {
		t.Error("a cleared override is still shown")
	}
}
