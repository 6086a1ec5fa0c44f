package web

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAddrKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"203.0.113.7", "203.0.113.7"},
		{"::ffff:203.0.113.7", "203.0.113.7"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"not an address", "not an address"},
	} {
		if got := addrKey(tc.in); got != tc.want {
			t.Errorf("addrKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func mustTrust(t testing.TB, header string, trusted ...string) proxyTrust {
	t.Helper()
	p, err := newProxyTrust(header, trusted)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The client is the rightmost forwarded hop that is not a trusted proxy.
func TestClientAddress(t *testing.T) {
	t.Parallel()
	xff := "X-Forwarded-For"
	chain := mustTrust(t, xff, "10.0.0.0/8", "2001:db8:ffff::/48")
	for _, tc := range []struct {
		name  string
		trust proxyTrust
		peer  string
		lines []string
		want  string
	}{
		{"appending proxy chain, forged leftmost", chain, "10.0.0.1", []string{"203.0.113.66, 198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"many forged entries", chain, "10.0.0.1", []string{"1.1.1.1, 2.2.2.2, 3.3.3.3, 198.51.100.7"}, "198.51.100.7"},
		{"forged entry that names a trusted proxy", chain, "10.0.0.1", []string{"10.9.9.9, 198.51.100.7"}, "198.51.100.7"},
		{"overwriting proxy (one entry)", chain, "10.0.0.1", []string{"198.51.100.7"}, "198.51.100.7"},
		{"several field lines are one list", chain, "10.0.0.1", []string{"203.0.113.66", "198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"forged line after the client's", chain, "10.0.0.1", []string{"198.51.100.7", "203.0.113.66"}, "203.0.113.66"},
		{"untrusted peer: header ignored", chain, "192.0.2.1", []string{"198.51.100.7"}, "192.0.2.1"},
		{"no header", chain, "10.0.0.1", nil, "10.0.0.1"},
		{"empty header", chain, "10.0.0.1", []string{""}, "10.0.0.1"},
		{"all hops trusted: the leftmost", chain, "10.0.0.1", []string{"10.0.0.3, 10.0.0.2"}, "10.0.0.3"},
		{"garbage at the client's place: the last trusted hop", chain, "10.0.0.1", []string{"unknown, 10.0.0.2"}, "10.0.0.2"},
		{"garbage next to the peer: the peer", chain, "10.0.0.1", []string{"198.51.100.7, garbage"}, "10.0.0.1"},
		{"garbage left of the client is never read", chain, "10.0.0.1", []string{"<script>, 198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"empty elements are skipped", chain, "10.0.0.1", []string{" , 198.51.100.7 ,, \t,"}, "198.51.100.7"},
		{"IPv6 client behind an IPv6 proxy", chain, "2001:db8:ffff::1", []string{"2001:db8:1:2::9, 2001:db8:ffff::2"}, "2001:db8:1:2::9"},
		{"IPv4-mapped entries are IPv4", chain, "::ffff:10.0.0.1", []string{"::ffff:198.51.100.7, ::ffff:10.0.0.2"}, "198.51.100.7"},
		{"ports and brackets", chain, "10.0.0.1", []string{"[2001:db8::7]:443, 198.51.100.7:5555, 10.0.0.2:80"}, "198.51.100.7"},
		{"bracketed IPv6", chain, "10.0.0.1", []string{"[2001:db8::7]"}, "2001:db8::7"},
		{"zones are malformed", chain, "10.0.0.1", []string{"fe80::1%eth0"}, "10.0.0.1"},
		{"no list: every peer, rightmost entry only", mustTrust(t, xff), "192.0.2.1", []string{"203.0.113.66, 198.51.100.7"}, "198.51.100.7"},
		{"no list: garbage rightmost → peer", mustTrust(t, xff), "192.0.2.1", []string{"198.51.100.7, x"}, "192.0.2.1"},
		{"no header configured: the peer", mustTrust(t, "", "10.0.0.0/8"), "10.0.0.1", []string{"198.51.100.7"}, "10.0.0.1"},
		{"a single trusted address", mustTrust(t, xff, "10.0.0.1"), "10.0.0.1", []string{"198.51.100.7, 10.0.0.2"}, "10.0.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.trust.client(netip.MustParseAddr(tc.peer), tc.lines)
			if got.String() != tc.want {
				t.Fatalf("client(%s, %q) = %s, want %s", tc.peer, tc.lines, got, tc.want)
			}
		})
	}
}

func TestProxyTrustParse(t *testing.T) {
	t.Parallel()
	p := mustTrust(t, "X-Forwarded-For", " 10.0.0.7/8 ", "::ffff:192.168.0.0/112", "2001:db8::1")
	for addr, want := range map[string]bool{"10.200.0.1": true, "11.0.0.1": false, "192.168.3.4": true,
		"192.169.0.1": false, "2001:db8::1": true, "2001:db8::2": false} {
		if got := p.trusts(netip.MustParseAddr(addr)); got != want {
			t.Errorf("trusts(%s) = %v, want %v", addr, got, want)
		}
	}
	for _, bad := range []string{"", "10.0.0.0/33", "fe80::1%eth0", "example.com", "*"} {
		if _, err := newProxyTrust("X-Forwarded-For", []string{bad}); err == nil || !strings.Contains(err.Error(), "trusted proxy") {
			t.Errorf("%q: error %v, want a clear refusal", bad, err)
		}
	}
}

// FuzzForwardedFor: whatever the header says, the client is the peer or one of the
// header's entries, never a panic; and whatever a client writes left of its own address,
// behind an appending chain of trusted proxies it is still its own address.
func FuzzForwardedFor(f *testing.F) {
	for _, s := range []string{"", "198.51.100.7", "1.2.3.4, 5.6.7.8", "unknown", ",,,", "[::1]:80, 10.0.0.2",
		"fe80::1%eth0", "::ffff:1.2.3.4", " \t,1.2.3.4", "10.0.0.2, 10.0.0.3", "1.2.3.4:99999", "[2001:db8::1"} {
		f.Add(s)
	}
	chain := mustTrust(f, "X-Forwarded-For", "10.0.0.0/8")
	peer := netip.MustParseAddr("10.0.0.1")
	f.Fuzz(func(t *testing.T, header string) {
		got := chain.client(peer, []string{header})
		if !got.IsValid() {
			t.Fatalf("invalid client for %q", header)
		}
		if got != peer {
			found := false
			for _, e := range strings.Split(header, ",") {
				if a, ok := parseHop(strings.Trim(e, " \t")); ok && a == got {
					found = true
				}
			}
			if !found {
				t.Fatalf("client %s is neither the peer nor an entry of %q", got, header)
			}
		}
		// The client's own address, appended by the trusted chain, wins over anything forged.
		want := netip.MustParseAddr("198.51.100.7")
		for _, lines := range [][]string{{header + ", 198.51.100.7, 10.0.0.2"}, {header, "198.51.100.7, 10.0.0.2"}} {
			if got := chain.client(peer, lines); got != want {
				t.Fatalf("forged %q: client %s, want %s", header, got, want)
			}
		}
	})
}

// Every use of the client address goes through clientIP: Fiber's c.IP() and c.IPs() read
// the proxy header from the left (or, without one here, give the peer behind a proxy).
func TestNoFiberClientAddress(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "//")
			if strings.Contains(code, ".IP()") || strings.Contains(code, ".IPs()") {
				t.Errorf("%s:%d calls Fiber's client address; use clientIP or clientKey: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
