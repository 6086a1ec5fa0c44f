package branding_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/branding"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

type fixture struct {
	rdb redis.UniversalClient
	q   *queue.Queue
	b   *branding.Store
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	rdb := redistest.Start(t).Client()
	// Calls may take 10 s (the default, 1 s, fails them on a machine busy with the tests
	// beside them).
	return &fixture{rdb: rdb, q: queue.New(rdb, queue.Config{OpTimeout: 10 * time.Second}, nil),
		b: branding.New(rstore.New(rdb, 10*time.Second))}
}

func (f *fixture) mkQueue(t testing.TB, name string, rate float64, maxActive int64) {
	t.Helper()
	if _, _, err := f.q.Put(context.Background(), name, queue.SettingsPatch{RatePerSecond: &rate, MaxActive: &maxActive}); err != nil {
		t.Fatal(err)
	}
}

// TestLogo: the type must match the bytes; the logo lives under the queue's hash tag; it
// is read back whole and deleted.
func TestLogo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 100)...)
	if _, err := f.b.PutLogo(ctx, "none", branding.LogoPNG, png); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("logo of no queue: %v", err)
	}
	f.mkQueue(t, "b", 1, 0)
	for _, c := range []struct {
		typ  string
		data []byte
	}{
		{branding.LogoJPEG, png},
		{branding.LogoWebP, png},
		{branding.LogoPNG, []byte{0xff, 0xd8, 0xff, 0xe0}},
		{branding.LogoPNG, nil},
		{branding.LogoPNG, append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, branding.MaxLogoBytes)...)},
		{"image/gif", []byte("GIF89a")},
	} {
		var ie *queue.InvalidError
		if _, err := f.b.PutLogo(ctx, "b", c.typ, c.data); !errors.As(err, &ie) || ie.Field != "logo" {
			t.Errorf("%s of %d bytes: %v, want invalid logo", c.typ, len(c.data), err)
		}
	}
	if got := branding.LogoTypeOf([]byte("RIFF\x00\x00\x00\x00WEBPVP8 ")); got != branding.LogoWebP {
		t.Errorf("WebP magic: %q", got)
	}
	l, err := f.b.PutLogo(ctx, "b", branding.LogoPNG, png)
	if err != nil || l.ETag == "" {
		t.Fatalf("PutLogo: %+v %v", l, err)
	}
	if n, _ := f.rdb.Exists(ctx, "wr:{q:b}:logo").Result(); n != 1 {
		t.Fatalf("the logo is not under the queue's hash tag")
	}
	got, err := f.b.Logo(ctx, "b")
	if err != nil || got.Type != branding.LogoPNG || !bytes.Equal(got.Data, png) || got.ETag != l.ETag {
		t.Fatalf("Logo: %+v %v", got, err)
	}
	if etag, _ := f.b.LogoETag(ctx, "b"); etag != l.ETag {
		t.Fatalf("LogoETag %q, want %q", etag, l.ETag)
	}
	if had, err := f.b.DeleteLogo(ctx, "b"); !had || err != nil {
		t.Fatalf("DeleteLogo: %v %v", had, err)
	}
	if _, err := f.b.Logo(ctx, "b"); !errors.Is(err, branding.ErrLogoNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if etag, err := f.b.LogoETag(ctx, "b"); etag != "" || err != nil {
		t.Fatalf("LogoETag after delete: %q %v", etag, err)
	}
}
