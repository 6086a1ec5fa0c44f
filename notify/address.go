package notify

import (
	"errors"
	"net/mail"
	"strings"
)

// ErrInvalidAddress is returned for an address that is not one plain mailbox (web answers
// 422 with field email).
var ErrInvalidAddress = errors.New("invalid e-mail address")

// Limits of an address: RFC 5321's 64 octets before the @ and 254 in all (a path of 256
// with its angle brackets).
const (
	maxAddress = 254
	maxLocal   = 64
)

// CheckAddress returns the address in the form stored (the domain in lower case), or
// ErrInvalidAddress: it must be one bare mailbox as net/mail reads it (no display name, no
// group, no comment), within the length limits, its domain a dotted name of letters,
// digits and hyphens (or an internationalised one), with no control character anywhere.
func CheckAddress(s string) (string, error) {
	if s == "" || len(s) > maxAddress || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", ErrInvalidAddress
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return "", ErrInvalidAddress
	}
	at := strings.LastIndexByte(s, '@')
	local, domain := s[:at], strings.ToLower(s[at+1:])
	if at < 1 || len(local) > maxLocal || !validDomain(domain) {
		return "", ErrInvalidAddress
	}
	return local + "@" + domain, nil
}

// validDomain accepts host names with at least one dot: labels of 1–63 characters that
// neither start nor end with a hyphen. Address literals ([192.0.2.1]) are refused: a
// buyer's mailbox has a name.
func validDomain(d string) bool {
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r == '-' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f) {
				return false
			}
		}
	}
	return true
}
