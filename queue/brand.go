package queue

import (
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Branding settings of a queue's pages: a name, an accent colour, a message and a support
// link. Every value ends up in a buyer's page, so each is checked here to be what it
// claims — plain text, a hex colour, an https or same-origin link — and the pages render
// them escaped. The logo and the colour's contrast with the page are package branding's.

// Limits of the branding settings.
const (
	MaxBrandName    = 60  // characters
	MaxBrandMessage = 280 // characters
	MaxSupportURL   = 500 // bytes
)

var hexColor = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// validateBrand checks the branding fields (the colour's contrast is checked by the caller
// that knows the page's background: see branding.ContrastRatio).
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
