package queue_test

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue"
)

func FuzzParseTicket(f *testing.F) {
	s := queue.NewSigner([]byte("fuzz-secret"))
	_, good := s.New("drop")
	for _, seed := range []string{good, "", "a.b.c", "drop..", "drop.AAAAAAAAAAAAAAAAAAAAAA.", good + "=", "../../x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tk, err := s.Parse(raw)
		if err != nil {
			return
		}
		// Anything accepted must be exactly a ticket this signer issues.
		if s.String(tk) != raw || !queue.ValidName(tk.Queue) {
			t.Fatalf("accepted %q as %+v", raw, tk)
		}
	})
}

func FuzzValidName(f *testing.F) {
	for _, seed := range []string{"demo", "", "a b", "../etc", "ü", "x_y-Z9", string(make([]byte, 65))} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !queue.ValidName(s) {
			return
		}
		if len(s) < 1 || len(s) > 64 {
			t.Fatalf("accepted %q (length %d)", s, len(s))
		}
		for _, c := range s {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				t.Fatalf("accepted %q with %q", s, c)
			}
		}
	})
}

// FuzzAllowedOrigin: an origin NormalizeOrigin accepts is in the one form a browser's Origin
// carries — ASCII, lower case, http or https, a host, a port 1–65535 without leading zeros
// and not the scheme's default — and normalising it again gives it back unchanged.
func FuzzAllowedOrigin(f *testing.F) {
	for _, seed := range []string{"https://shop.example", "https://shop.example:99999", "https://shop.example:",
		"https://shop.example:0443", "https://bücher.example", "https://XN--BCHER-KVA.example:443", "http://[::1]:8080",
		"https://[fe80::1%25eth0]", "https://127.1", "http://0x7f.0.0.1", "https://a.example/", "https://u@a.example",
		"https://a.example?", "https://a..example", "https://-a.example", "HTTPS://A.EXAMPLE:8443"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := queue.NormalizeOrigin(in)
		if err != nil {
			var ie *queue.InvalidError
			if !errors.As(err, &ie) || ie.Field != "allowed_origins" || ie.Message == "" {
				t.Fatalf("%q: %v", in, err)
			}
			return
		}
		if again, err := queue.NormalizeOrigin(n); err != nil || again != n {
			t.Fatalf("%q → %q → %q, %v", in, n, again, err)
		}
		if n != strings.ToLower(n) || strings.ContainsFunc(n, func(r rune) bool { return r >= 0x80 }) {
			t.Fatalf("%q → %q: not lower-case ASCII", in, n)
		}
		u, err := url.Parse(n)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Path != "" || u.User != nil ||
			n != u.Scheme+"://"+u.Host {
			t.Fatalf("%q → %q: not scheme://host[:port] (%v)", in, n, err)
		}
		if p := u.Port(); p != "" {
			v, err := strconv.Atoi(p)
			if err != nil || v < 1 || v > 65535 || p[0] == '0' || (u.Scheme == "https" && v == 443) || (u.Scheme == "http" && v == 80) {
				t.Fatalf("%q → %q: port %q", in, n, p)
			}
		} else if strings.HasSuffix(u.Host, ":") {
			t.Fatalf("%q → %q: empty port", in, n)
		}
	})
}
