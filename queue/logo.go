package queue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/rstore"
)

// Branding of a queue's pages: a name, a logo, an accent colour, a message and a support
// link. Every value ends up in a buyer's page, so each is checked here to be what it
// claims — plain text, a hex colour, an https or same-origin link, an image whose bytes
// are the type it is served as — and the pages render them escaped.

// Limits of the branding settings.
const (
	MaxBrandName    = 60  // characters
	MaxBrandMessage = 280 // characters
	MaxSupportURL   = 500 // bytes
	// MaxLogoBytes is the largest logo (the contract's 100 KB, as 100 KiB). It is also the
	// server's request body limit; every other route refuses a body over 64 KiB (web).
	MaxLogoBytes = 100 << 10
	// MinContrast is WCAG 2's AA ratio for normal text.
	MinContrast = 4.5
)

// Logo content types accepted (and served back as stored).
const (
	LogoPNG  = "image/png"
	LogoJPEG = "image/jpeg"
	LogoWebP = "image/webp"
)

var hexColor = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// validateBrand checks the branding fields (the colour's contrast is checked by the caller
// that knows the page's background: see ContrastRatio).
func (s Settings) validateBrand() error {
	if err := plainText(s.BrandName, MaxBrandName, false); err != "" {
		return invalid("brand_name", "brand_name must be plain text of at most %d characters (%s).", MaxBrandName, err)
	}
	if err := plainText(s.BrandMessage, MaxBrandMessage, true); err != "" {
		return invalid("brand_message", "brand_message must be plain text of at most %d characters (%s).", MaxBrandMessage, err)
	}
	if s.BrandColor != "" && !hexColor.MatchString(s.BrandColor) {
		return invalid("brand_color", "brand_color must be a colour like #1a5fb4 (# and six hex digits).")
	}
	if !ValidSupportURL(s.SupportURL) {
		return invalid("support_url", "support_url must be an https:// address or a path on this site starting with a single /.")
	}
	return nil
}

// plainText says what is wrong with s as branding text ("" when nothing): valid UTF-8,
// at most max characters, no control characters (a message may hold line breaks).
func plainText(s string, max int, lines bool) string {
	if !utf8.ValidString(s) {
		return "not UTF-8"
	}
	if utf8.RuneCountInString(s) > max {
		return "too long"
	}
	for _, r := range s {
		if (unicode.IsControl(r) || r == '\u2028' || r == '\u2029') && !(lines && r == '\n') {
			return "no control characters"
		}
	}
	return ""
}

// ValidSupportURL reports whether u may be a support link: "" (none), an absolute https URL
// with a host, or a path on the room's own origin ("/help", not "//host" or "/\host").
// Anything a browser could run or send elsewhere without TLS — javascript:, data:, http:,
// protocol-relative — is refused, and so are spaces and control characters.
func ValidSupportURL(u string) bool {
	if u == "" {
		return true
	}
	if len(u) > MaxSupportURL || strings.ContainsAny(u, "\\\"'<>`") {
		return false
	}
	for _, r := range u {
		if r <= ' ' || r == 0x7f || unicode.IsControl(r) || unicode.IsSpace(r) {
			return false
		}
	}
	if strings.HasPrefix(u, "/") {
		return !strings.HasPrefix(u, "//")
	}
	p, err := url.Parse(u)
	return err == nil && p.Scheme == "https" && strings.HasPrefix(u, "https://") && p.Host != "" && p.User == nil && p.Opaque == ""
}

// ContrastRatio is the WCAG 2 contrast ratio of two #rrggbb colours (1 to 21), or 0 when
// either is not one.
func ContrastRatio(a, b string) float64 {
	la, ok1 := luminance(a)
	lb, ok2 := luminance(b)
	if !ok1 || !ok2 {
		return 0
	}
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// luminance is the WCAG relative luminance of a #rrggbb colour.
func luminance(c string) (float64, bool) {
	if !hexColor.MatchString(c) {
		return 0, false
	}
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		v, _ := strconv.ParseUint(c[1+2*i:3+2*i], 16, 8)
		s := float64(v) / 255
		if s <= 0.04045 {
			s /= 12.92
		} else {
			s = math.Pow((s+0.055)/1.055, 2.4)
		}
		l += w * s
	}
	return l, true
}

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

// PutLogo stores data as queue name's logo of content type typ. The type must be one of
// the three and the bytes must start with its magic (a PNG sent as image/jpeg is refused:
// the browser is told nosniff, so the declared type must be the true one).
func (q *Queue) PutLogo(ctx context.Context, name, typ string, data []byte) (Logo, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if _, err := q.Settings(ctx, name); err != nil {
		return Logo{}, err
	}
	switch {
	case len(data) == 0:
		return Logo{}, invalid("logo", "The logo is empty.")
	case len(data) > MaxLogoBytes:
		return Logo{}, invalid("logo", "The logo is larger than %d bytes.", MaxLogoBytes)
	case LogoTypeOf(data) != typ:
		return Logo{}, invalid("logo", "The logo's bytes are not a %s image.", typ)
	}
	sum := sha256.Sum256(data)
	l := Logo{Type: typ, ETag: `"` + hex.EncodeToString(sum[:12]) + `"`, Data: data}
	if err := q.rdb.HSet(ctx, rstore.KeysFor(name).Logo(), "type", l.Type, "etag", l.ETag, "data", data).Err(); err != nil {
		return Logo{}, fail("put logo "+name, err)
	}
	return l, nil
}

// Logo returns queue name's logo, or ErrLogoNotFound.
func (q *Queue) Logo(ctx context.Context, name string) (Logo, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if !ValidName(name) {
		return Logo{}, ErrLogoNotFound
	}
	v, err := q.rdb.HMGet(ctx, rstore.KeysFor(name).Logo(), "type", "etag", "data").Result()
	if err != nil && err != redis.Nil {
		return Logo{}, fail("read logo "+name, err)
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
func (q *Queue) LogoETag(ctx context.Context, name string) (string, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if !ValidName(name) {
		return "", nil
	}
	v, err := q.rdb.HGet(ctx, rstore.KeysFor(name).Logo(), "etag").Result()
	if err == redis.Nil {
		return "", nil
	}
	if err != nil {
		return "", fail("read logo "+name, err)
	}
	return v, nil
}

// DeleteLogo removes queue name's logo; it reports whether there was one.
func (q *Queue) DeleteLogo(ctx context.Context, name string) (bool, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if !ValidName(name) {
		return false, ErrQueueNotFound
	}
	n, err := q.rdb.Del(ctx, rstore.KeysFor(name).Logo()).Result()
	if err != nil {
		return false, fail("delete logo "+name, err)
	}
	return n > 0, nil
}
