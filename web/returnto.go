package web

import (
	"net/url"
	"slices"
	"strings"
)

// maxReturnTo bounds a return_to URL.
const maxReturnTo = 2048

// returnTarget checks a return_to URL (the redirect flow): an absolute http(s) URL whose
// origin — as written, byte for byte, not as some parser might read it — is one of the
// queue's allowed origins, with no userinfo, no fragment (the token goes there), no
// backslash, whitespace or control character. It returns the URL to send the buyer to.
// Anything else is refused: the page says so and never follows it.
func returnTarget(raw string, allowed []string) (string, bool) {
	if raw == "" || len(raw) > maxReturnTo {
		return "", false
	}
	for _, r := range raw {
		if r <= ' ' || r == 0x7f || r == '\\' || r >= 0x80 {
			return "", false // control, space, backslash, non-ASCII (IDN tricks): percent-encode it
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Opaque != "" || u.Fragment != "" || strings.Contains(raw, "#") {
		return "", false
	}
	origin := u.Scheme + "://" + strings.ToLower(u.Host)
	if !slices.Contains(allowed, origin) {
		return "", false
	}
	// The origin must be the literal start of the URL, followed by a path, a query or
	// nothing: no percent-encoded or otherwise disguised authority.
	if len(raw) < len(origin) || !strings.EqualFold(raw[:len(origin)], origin) {
		return "", false
	}
	if rest := raw[len(origin):]; rest != "" && rest[0] != '/' && rest[0] != '?' {
		return "", false
	}
	return raw, true
}
