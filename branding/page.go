package branding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/pagetemplate"
	"github.com/waitroom/waitroom/queue"
)

// Page is a queue's own waiting page: the operator's template, checked, with the origins
// it may load from, its version (1 for the first one saved, +1 per save) and an ETag of
// the source and origins.
type Page struct {
	Template *pagetemplate.Template
	Origins  []string
	Version  int64
	ETag     string
}

// ErrPageNotFound: the queue shows the default page.
var ErrPageNotFound = errors.New("no page template")

// pages caches parsed templates by queue and ETag, so a page view costs one small read.
type pages struct {
	mu sync.Mutex
	m  map[string]Page // by queue name
}

// PutPage checks src (pagetemplate.Parse with origins, after pagetemplate.CheckOrigins) and
// stores it as queue name's page. A refused template is a *pagetemplate.Error; a missing
// queue queue.ErrQueueNotFound.
func (s *Store) PutPage(ctx context.Context, name, src string, origins []string) (Page, error) {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	if err := s.exists(ctx, name); err != nil {
		return Page{}, err
	}
	if err := pagetemplate.CheckOrigins(origins); err != nil {
		return Page{}, err
	}
	tpl, err := pagetemplate.Parse(src, origins)
	if err != nil {
		return Page{}, err
	}
	etag := pageETag(src, origins)
	k := rstore.KeysFor(name).Page()
	pipe := s.st.Client().TxPipeline()
	pipe.HSet(ctx, k, "source", src, "origins", strings.Join(origins, " "), "etag", etag)
	ver := pipe.HIncrBy(ctx, k, "version", 1)
	if _, err := pipe.Exec(ctx); err != nil {
		return Page{}, rstore.Fail("put page "+name, err)
	}
	p := Page{Template: tpl, Origins: origins, Version: ver.Val(), ETag: etag}
	s.cache(name, p)
	return p, nil
}

// Page returns queue name's page, or ErrPageNotFound. The source is read only when its ETag
// is not the one parsed last (one HGET otherwise).
func (s *Store) Page(ctx context.Context, name string) (Page, error) {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	if !rstore.ValidName(name) {
		return Page{}, ErrPageNotFound
	}
	k := rstore.KeysFor(name).Page()
	etag, err := s.st.Client().HGet(ctx, k, "etag").Result()
	if err == redis.Nil {
		s.cache(name, Page{})
		return Page{}, ErrPageNotFound
	}
	if err != nil {
		return Page{}, rstore.Fail("read page "+name, err)
	}
	if p, ok := s.cached(name); ok && p.ETag == etag {
		return p, nil
	}
	v, err := s.st.Client().HMGet(ctx, k, "source", "origins", "version", "etag").Result()
	if err != nil {
		return Page{}, rstore.Fail("read page "+name, err)
	}
	src, _ := v[0].(string)
	orig, _ := v[1].(string)
	ver, _ := v[2].(string)
	etag, _ = v[3].(string)
	if src == "" {
		return Page{}, ErrPageNotFound
	}
	origins := strings.Fields(orig)
	// Checked when saved; parsed again here because the cache is per process (and a rule
	// tightened by a later release refuses it here: the default page is shown).
	tpl, err := pagetemplate.Parse(src, origins)
	if err != nil {
		return Page{}, err
	}
	p := Page{Template: tpl, Origins: origins, ETag: etag}
	p.Version, _ = strconv.ParseInt(ver, 10, 64)
	s.cache(name, p)
	return p, nil
}

// DeletePage removes queue name's page (the default page is shown); it reports whether
// there was one.
func (s *Store) DeletePage(ctx context.Context, name string) (bool, error) {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	if !rstore.ValidName(name) {
		return false, queue.ErrQueueNotFound
	}
	n, err := s.st.Client().Del(ctx, rstore.KeysFor(name).Page()).Result()
	if err != nil {
		return false, rstore.Fail("delete page "+name, err)
	}
	s.cache(name, Page{})
	return n > 0, nil
}

func (s *Store) cache(name string, p Page) {
	s.pages.mu.Lock()
	defer s.pages.mu.Unlock()
	if s.pages.m == nil {
		s.pages.m = map[string]Page{}
	}
	if p.Template == nil {
		delete(s.pages.m, name)
		return
	}
	s.pages.m[name] = p
}

func (s *Store) cached(name string) (Page, bool) {
	s.pages.mu.Lock()
	defer s.pages.mu.Unlock()
	p, ok := s.pages.m[name]
	return p, ok
}

func pageETag(src string, origins []string) string {
	sum := sha256.Sum256([]byte(strings.Join(origins, " ") + "\x00" + src))
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}
