package queue

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// NormalizeOrigin returns the canonical form of an allowed origin — scheme "http" or
// "https", a host, an optional port, nothing else (no path, query, fragment or userinfo),
// lower case — or an error naming what is wrong. The form is the one a browser's Origin
// header carries, so a stored origin can match one:
//   - a port is 1–65535 written without leading zeros ("https://a.example:" with an empty
//     port, ":0443", ":0" and ":99999" are refused); the scheme's default port is dropped;
//   - a host is an ASCII name (labels of a-z 0-9 - _, at most 63 characters, not starting
//     or ending with -), a dotted IPv4 address, or a bracketed IPv6 address without a zone.
//     An internationalised name is stored in its ASCII form (xn--…, as browsers send it;
//     a Unicode host is converted by the IDNA lookup rules, one they refuse is an error), and
//     a name a browser would read as a number ("127.1", "0x7f.1") is refused.
func NormalizeOrigin(o string) (string, error) {
	if len(o) == 0 || len(o) > 200 || strings.TrimSpace(o) != o || strings.ContainsAny(o, "\\@% \t\r\n") {
		return "", invalid("allowed_origins", "%q is not an origin like https://shop.example.", o)
	}
	if !ascii(o) {
		// An internationalised name is stored in the ASCII form a browser's Origin carries.
		a, err := originToASCII(o)
		if err != nil {
			return "", err
		}
		o = a
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		if err == nil && u.Host != "" && !ascii(u.Host) {
			return "", nonASCIIHost(o)
		}
		return "", invalid("allowed_origins", "%q is not an origin like https://shop.example (scheme, host and port only).", o)
	}
	scheme := u.Scheme // url.Parse lower-cases it
	host, port, hasPort := splitHostPort(u.Host)
	if !ascii(host) {
		return "", nonASCIIHost(o)
	}
	host = strings.ToLower(host)
	if !validOriginHost(host) {
		return "", invalid("allowed_origins", "%q has a bad host: use a name like shop.example (xn--… for an international name), an IPv4 address or an [IPv6] address.", o)
	}
	if strings.HasPrefix(host, "[") {
		// A browser serialises an IPv6 host in its shortest form ([2001:db8::1]).
		a, _ := netip.ParseAddr(host[1 : len(host)-1])
		host = "[" + a.String() + "]"
	}
	if hasPort {
		n, ok := originPort(port)
		switch {
		case port == "":
			return "", invalid("allowed_origins", "%q has an empty port: remove the \":\" or give a port from 1 to 65535.", o)
		case !ok:
			return "", invalid("allowed_origins", "%q has a bad port: a port is a number from 1 to 65535 without leading zeros.", o)
		case (scheme == "https" && n == 443) || (scheme == "http" && n == 80):
			hasPort = false // a browser's Origin never names the scheme's default port
		}
	}
	if hasPort {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

// splitHostPort splits url.URL.Host at the port's colon (hasPort: a colon was there, even
// with nothing after it).
func splitHostPort(h string) (host, port string, hasPort bool) {
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return h, "", false
		}
		rest := h[end+1:]
		if strings.HasPrefix(rest, ":") {
			return h[:end+1], rest[1:], true
		}
		if rest != "" {
			return h, "", false // left for validOriginHost to refuse
		}
		return h, "", false
	}
	host, port, hasPort = strings.Cut(h, ":")
	return host, port, hasPort
}

// originPort reads a port: 1–65535, decimal digits, no leading zero.
func originPort(p string) (int, bool) {
	if p == "" || len(p) > 5 || p[0] == '0' || strings.Trim(p, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(p)
	return n, err == nil && n >= 1 && n <= 65535
}

// validOriginHost reports whether a lower-case host is a DNS name, a dotted IPv4 address or
// a bracketed IPv6 address (no zone), in the form a browser serialises.
func validOriginHost(h string) bool {
	if strings.HasPrefix(h, "[") {
		if !strings.HasSuffix(h, "]") {
			return false
		}
		a, err := netip.ParseAddr(h[1 : len(h)-1])
		return err == nil && a.Is6() && a.Zone() == ""
	}
	if h == "" || len(h) > 253 {
		return false
	}
	labels := strings.Split(h, ".")
	if last := labels[len(labels)-1]; numericLabel(last) {
		// The URL standard reads such a host as an IPv4 address (and rewrites it): only
		// its canonical dotted form can match.
		a, err := netip.ParseAddr(h)
		return err == nil && a.Is4() && a.String() == h
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := range len(l) {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// numericLabel reports whether the URL standard's "ends in a number" check holds for label:
// all decimal digits, or 0x followed by hex digits.
func numericLabel(l string) bool {
	if l == "" {
		return false
	}
	if strings.HasPrefix(l, "0x") {
		return strings.Trim(l[2:], "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

func ascii(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// originToASCII rewrites the host of o, an origin with non-ASCII characters, in its ASCII
// (punycode) form by the IDNA lookup rules browsers apply (UTS #46: bücher.example →
// xn--bcher-kva.example). Anything non-ASCII outside the host, or a host those rules refuse,
// is an error.
func originToASCII(o string) (string, error) {
	scheme, rest, ok := strings.Cut(o, "://")
	if !ok || !ascii(scheme) {
		return "", invalid("allowed_origins", "%q is not an origin like https://shop.example.", o)
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	hostport, tail := rest[:end], rest[end:]
	host, port, hasPort := strings.Cut(hostport, ":")
	if !ascii(tail) || !ascii(port) || strings.HasPrefix(host, "[") {
		return "", invalid("allowed_origins", "%q is not an origin like https://shop.example.", o)
	}
	a, err := idna.Lookup.ToASCII(host)
	if err != nil || a == "" || !ascii(a) {
		return "", nonASCIIHost(o)
	}
	if hasPort {
		a += ":" + port
	}
	return scheme + "://" + a + tail, nil
}

func nonASCIIHost(o string) error {
	return invalid("allowed_origins", "%q has a host that is not a valid international name: write it in the ASCII form browsers send (xn--…, e.g. https://xn--bcher-kva.example for bücher.example).", o)
}
