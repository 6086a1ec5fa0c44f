package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue"
)

func strp(s string) *string { return &s }

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
