// Package branding keeps each queue's logo, its own page template (page.go) and the rule that a page's accent colour stands
// out. The logo lives beside the queue's other keys (rstore's Logo key, the queue's hash
// tag) but is not about the line: nothing in package queue reads it except the overview's
// ETag, which names the logo's URL. The other branding settings (name, colour, message,
// support link) are queue settings and are checked by package queue.
package branding

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
)

// MaxLogoBytes is the largest logo (the contract's 100 KB, as 100 KiB). It is also the
// server's request body limit; every other route refuses a body over 64 KiB (web).
const MaxLogoBytes = 100 << 10

// Logo content types accepted (and served back as stored).
const (
	LogoPNG  = "image/png"
	LogoJPEG = "image/jpeg"
	LogoWebP = "image/webp"
)

// Logo is a queue's stored logo.
type Logo struct {
	Type string // one of LogoPNG, LogoJPEG, LogoWebP
	ETag string // a strong ETag ("…") of the bytes
	Data []byte
}

// ErrLogoNotFound: the queue has no logo.
var ErrLogoNotFound = errors.New("no logo")

// LogoTypeOf is the logo type whose magic bytes start data, or "".
func LogoTypeOf(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return LogoPNG
	case bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}):
		return LogoJPEG
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return LogoWebP
	}
	return ""
}

// Store keeps the queues' logos and page templates in Redis.
type Store struct {
	st    *rstore.Store
	pages pages
}

// New returns a Store on st (its client and per-call deadline).
func New(st *rstore.Store) *Store { return &Store{st: st} }

// PutLogo stores data as queue name's logo of content type typ. The queue must exist
// (queue.ErrQueueNotFound). The type must be one of the three and the bytes must start with
// its magic (a PNG sent as image/jpeg is refused: the browser is told nosniff, so the
// declared type must be the true one); a refusal is a *queue.InvalidError of field "logo",
// which the API maps like any refused setting.
func (s *Store) PutLogo(ctx context.Context, name, typ string, data []byte) (Logo, error) {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	if err := s.exists(ctx, name); err != nil {
		return Logo{}, err
	}
	switch {
	case len(data) == 0:
		return Logo{}, invalid("The logo is empty.")
	case len(data) > MaxLogoBytes:
		return Logo{}, invalid("The logo is larger than %d bytes.", MaxLogoBytes)
	case LogoTypeOf(data) != typ:
		return Logo{}, invalid("The logo's bytes are not a %s image.", typ)
	}
	sum := sha256.Sum256(data)
	l := Logo{Type: typ, ETag: `"` + hex.EncodeToString(sum[:12]) + `"`, Data: data}
	if err := s.st.Client().HSet(ctx, rstore.KeysFor(name).Logo(), "type", l.Type, "etag", l.ETag, "data", data).Err(); err != nil {
		return Logo{}, rstore.Fail("put logo "+name, err)
	}
	return l, nil
}

// exists is nil when queue name exists (its settings hash does), else
// queue.ErrQueueNotFound or the failure to ask.
func (s *Store) exists(ctx context.Context, name string) error {
	if !rstore.ValidName(name) {
		return queue.ErrQueueNotFound
	}
	n, err := s.st.Client().Exists(ctx, rstore.KeysFor(name).Cfg()).Result()
	if err != nil {
		return rstore.Fail("read queue "+name, err)
	}
	if n == 0 {
		return queue.ErrQueueNotFound
	}
	return nil
}

// Logo returns queue name's logo, or ErrLogoNotFound.
func (s *Store) Logo(ctx context.Context, name string) (Logo, error) {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	if !rstore.ValidName(name) {
		return Logo{}, ErrLogoNotFound
	}
	v, err := s.st.Client().HMGet(ctx, rstore.KeysFor(name).Logo(), "type", "etag", "data").Result()
	if err != nil && err != redis.Nil {
		return Logo{}, rstore.Fail("read logo "+name, err)
	}
	typ, _ := v[0].(string)
	etag, _ := v[1].(string)
	data, _ := v[2].(string)
	if typ == "" || data == "" {
		return Logo{}, ErrLogoNotFound
	}
	return Logo{Type: typ, ETag: etag, Data: []byte(data)}, nil
}

// LogoETag is the ETag of queue name's logo ("" when none): the pages ask it to name the
// logo's URL (?v=…) without reading the image.
func (s *Store) LogoETag(ctx context.Context, name string) (string, error) {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	if !rstore.ValidName(name) {
		return "", nil
	}
	v, err := s.st.Client().HGet(ctx, rstore.KeysFor(name).Logo(), "etag").Result()
	if err == redis.Nil {
		return "", nil
	}
	if err != nil {
		return "", rstore.Fail("read logo "+name, err)
	}
	return v, nil
}

// DeleteLogo removes queue name's logo; it reports whether there was one.
func (s *Store) DeleteLogo(ctx context.Context, name string) (bool, error) {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	if !rstore.ValidName(name) {
		return false, queue.ErrQueueNotFound
	}
	n, err := s.st.Client().Del(ctx, rstore.KeysFor(name).Logo()).Result()
	if err != nil {
		return false, rstore.Fail("delete logo "+name, err)
	}
	return n > 0, nil
}

// invalid is a refused logo, in the form the API reports for any refused setting.
func invalid(format string, args ...any) error {
	return &queue.InvalidError{Field: "logo", Message: fmt.Sprintf(format, args...)}
}
