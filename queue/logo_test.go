package queue_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue"
)

func strp(s string) *string { return &s }

// TestBrandContrast: the WCAG ratios of known pairs.
func TestBrandContrast(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want float64
	}{
		{"#000000", "#ffffff", 21},
		{"#ffffff", "#ffffff", 1},
		{"#ffff00", "#ffffff", 1.07},
		{"#0b57d0", "#ffffff", 6.39},
		{"#3b82f6", "#ffffff", 3.68},
		{"#1A5FB4", "#f5f6f8", 5.82},
	} {
		if got := queue.ContrastRatio(c.a, c.b); math.Abs(got-c.want) > 0.02 {
			t.Errorf("%s on %s: %.3f, want %.2f", c.a, c.b, got, c.want)
		}
	}
	for _, bad := range []string{"red", "#12345", "#1234567", "123456", "#gggggg", ""} {
		if got := queue.ContrastRatio(bad, "#ffffff"); got != 0 {
			t.Errorf("%q: %v, want 0 (not a colour)", bad, got)
		}
	}
}

// TestBrandSettings: each branding field is validated by Put (an *InvalidError naming it),
// stored, read back, and cleared by "".
func TestBrandSettings(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "b", 1, 0)
	for _, c := range []struct {
		field string
		p     queue.SettingsPatch
	}{
		{"brand_name", queue.SettingsPatch{BrandName: strp("a\nb")}},
		{"brand_name", queue.SettingsPatch{BrandName: strp(strings.Repeat("é", 61))}},
		{"brand_name", queue.SettingsPatch{BrandName: strp("bad\xffutf8")}},
		{"brand_message", queue.SettingsPatch{BrandMessage: strp(strings.Repeat("x", 281))}},
		{"brand_message", queue.SettingsPatch{BrandMessage: strp("tab\there")}},
		{"brand_color", queue.SettingsPatch{BrandColor: strp("red")}},
		{"brand_color", queue.SettingsPatch{BrandColor: strp("#12345")}},
		{"support_url", queue.SettingsPatch{SupportURL: strp("javascript:alert(1)")}},
		{"support_url", queue.SettingsPatch{SupportURL: strp("http://x")}},
		{"support_url", queue.SettingsPatch{SupportURL: strp("//evil.example")}},
		{"support_url", queue.SettingsPatch{SupportURL: strp("data:text/html,x")}},
		{"support_url", queue.SettingsPatch{SupportURL: strp("HTTPS://x.example")}},
		{"support_url", queue.SettingsPatch{SupportURL: strp("https://user@x.example")}},
		{"support_url", queue.SettingsPatch{SupportURL: strp("/a b")}},
	} {
		_, _, err := f.q.Put(ctx, "b", c.p)
		var ie *queue.InvalidError
		if !errors.As(err, &ie) || ie.Field != c.field {
			t.Errorf("%+v: %v, want invalid %s", c.p, err, c.field)
		}
	}
	msg := strings.Repeat("ü", 279) + "\n"
	st, _, err := f.q.Put(ctx, "b", queue.SettingsPatch{BrandName: strp(strings.Repeat("名", 60)), BrandColor: strp("#1A5FB4"),
		BrandMessage: &msg, SupportURL: strp("/help?x=1")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.q.Settings(ctx, "b")
	if err != nil || got.BrandColor != "#1a5fb4" || got.BrandMessage != msg || got.SupportURL != "/help?x=1" || got.BrandName != st.BrandName {
		t.Fatalf("read back %+v %v", got, err)
	}
	if _, _, err := f.q.Put(ctx, "b", queue.SettingsPatch{BrandColor: strp(""), SupportURL: strp("")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.q.Settings(ctx, "b"); got.BrandColor != "" || got.SupportURL != "" || got.BrandMessage != msg {
		t.Fatalf("after clearing: %+v", got)
	}
}

// TestLogo: the type must match the bytes; the logo lives under the queue's hash tag; it
// is read back whole and deleted.
func TestLogo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 100)...)
	if _, err := f.q.PutLogo(ctx, "none", queue.LogoPNG, png); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("logo of no queue: %v", err)
	}
	f.mkQueue(t, "b", 1, 0)
	for _, c := range []struct {
		typ  string
		data []byte
	}{
		{queue.LogoJPEG, png},
		{queue.LogoWebP, png},
		{queue.LogoPNG, []byte{0xff, 0xd8, 0xff, 0xe0}},
		{queue.LogoPNG, nil},
		{queue.LogoPNG, append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, queue.MaxLogoBytes)...)},
		{"image/gif", []byte("GIF89a")},
	} {
		var ie *queue.InvalidError
		if _, err := f.q.PutLogo(ctx, "b", c.typ, c.data); !errors.As(err, &ie) || ie.Field != "logo" {
			t.Errorf("%s of %d bytes: %v, want invalid logo", c.typ, len(c.data), err)
		}
	}
	if got := queue.LogoTypeOf([]byte("RIFF\x00\x00\x00\x00WEBPVP8 ")); got != queue.LogoWebP {
		t.Errorf("WebP magic: %q", got)
	}
	l, err := f.q.PutLogo(ctx, "b", queue.LogoPNG, png)
	if err != nil || l.ETag == "" {
		t.Fatalf("PutLogo: %+v %v", l, err)
	}
	if n, _ := f.rdb.Exists(ctx, "wr:{q:b}:logo").Result(); n != 1 {
		t.Fatalf("the logo is not under the queue's hash tag")
	}
	got, err := f.q.Logo(ctx, "b")
	if err != nil || got.Type != queue.LogoPNG || !bytes.Equal(got.Data, png) || got.ETag != l.ETag {
		t.Fatalf("Logo: %+v %v", got, err)
	}
	if etag, _ := f.q.LogoETag(ctx, "b"); etag != l.ETag {
		t.Fatalf("LogoETag %q, want %q", etag, l.ETag)
	}
	if had, err := f.q.DeleteLogo(ctx, "b"); !had || err != nil {
		t.Fatalf("DeleteLogo: %v %v", had, err)
	}
	if _, err := f.q.Logo(ctx, "b"); !errors.Is(err, queue.ErrLogoNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if etag, err := f.q.LogoETag(ctx, "b"); etag != "" || err != nil {
		t.Fatalf("LogoETag after delete: %q %v", etag, err)
	}
}
