package web

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// Client addresses. Every per-address limit, the stream cap per address and the request log
// read the client's address through clientIP; nothing calls Fiber's c.IP(), which (with a
// proxy header) believes the leftmost X-Forwarded-For entry — the one any client writes.
//
// Behind proxies the address is found by walking the forwarded header from the right
// (API.md, "Forwarded addresses"): the connecting peer must be trusted for the header to be
// read at all; each entry from the right is the address that connected to the hop on its
// right; the first one that is not a trusted proxy is the client. An appending proxy (nginx
// $proxy_add_x_forwarded_for, most load balancers) and an overwriting one give the same
// answer; entries a client forged sit left of its own and are never reached.

// proxyTrust is the parsed WR_PROXY_HEADER and WR_TRUSTED_PROXIES.
type proxyTrust struct {
	header string         // the forwarded header; "" = the peer is the client
	nets   []netip.Prefix // trusted proxies; empty = every peer, and no header entry
}

// newProxyTrust parses the trusted proxies: addresses (IPv4 or IPv6) and CIDRs.
func newProxyTrust(header string, trusted []string) (proxyTrust, error) {
	p := proxyTrust{header: header}
	for _, t := range trusted {
		t = strings.TrimSpace(t)
		if pr, err := netip.ParsePrefix(t); err == nil {
			p.nets = append(p.nets, netip.PrefixFrom(pr.Addr().Unmap(), unmappedBits(pr)).Masked())
			continue
		}
		a, err := netip.ParseAddr(t)
		if err != nil || a.Zone() != "" {
			return proxyTrust{}, fmt.Errorf("trusted proxy %q is not an IP address or CIDR", t)
		}
		a = a.Unmap()
		p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
	}
	return p, nil
}

// unmappedBits is a prefix's length once an IPv4-mapped address (::ffff:a.b.c.d/120) is
// written as IPv4 (a.b.c.d/24).
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return max(p.Bits()-96, 0)
	}
	return p.Bits()
}

// trusts reports whether a is a trusted proxy. With no list, no address is (only the peer
// is believed, by peerTrusted).
func (p proxyTrust) trusts(a netip.Addr) bool {
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// peerTrusted reports whether the peer's forwarded header is read: it is a trusted proxy,
// or no list is configured (every peer is believed; only safe when clients cannot reach
// the instances directly).
func (p proxyTrust) peerTrusted(peer netip.Addr) bool {
	return len(p.nets) == 0 || p.trusts(peer)
}

// client is the client's address given the peer and the forwarded header's field lines in
// the order received (several lines are one comma-separated list). The walk goes from the
// right and stops at the first entry that is not a trusted proxy: that entry is the
// client. A malformed entry (not an address) stops the walk too: then the client is the
// last hop reached (a trusted proxy, or the peer) — a client that writes garbage cannot
// choose an address, only join its proxy's. When every entry is a trusted proxy, the
// leftmost one is the client (the request began at a proxy).
func (p proxyTrust) client(peer netip.Addr, lines []string) netip.Addr {
	peer = peer.Unmap()
	if p.header == "" || !p.peerTrusted(peer) {
		return peer
	}
	hop := peer
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for rest != "" {
			entry := rest
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				entry, rest = rest[j+1:], rest[:j]
			} else {
				rest = ""
			}
			entry = strings.Trim(entry, " \t")
			if entry == "" {
				continue // an empty list element is no element (RFC 9110 §5.6.1)
			}
			a, ok := parseHop(entry)
			if !ok {
				return hop
			}
			if !p.trusts(a) {
				return a
			}
			hop = a
		}
	}
	return hop
}

// parseHop reads one forwarded entry: an IPv4 or IPv6 address, optionally with a port
// (1.2.3.4:80, [2001:db8::1]:443) or in brackets, as some proxies write it. Zones and
// anything else are malformed.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), a.Zone() == ""
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), ap.Addr().Zone() == ""
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() && a.Zone() == "" {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// localClient holds the request's client address (set by clientAddress).
const localClient = "wr_client"

// clientAddress finds the request's client address once, first thing, for every later use.
func (s *Server) clientAddress(c *fiber.Ctx) error {
	var lines []string
	if s.proxies.header != "" {
		for _, v := range c.Request().Header.PeekAll(s.proxies.header) {
			lines = append(lines, string(v))
		}
	}
	c.Locals(localClient, s.proxies.client(peerAddr(c), lines).String())
	return c.Next()
}

// peerAddr is the address of the connection's other end.
func peerAddr(c *fiber.Ctx) netip.Addr {
	a, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	return a.Unmap()
}

// clientIP is the request's client address (clientAddress); the peer's when unset.
func clientIP(c *fiber.Ctx) string {
	if ip, ok := c.Locals(localClient).(string); ok {
		return ip
	}
	return peerAddr(c).String()
}

// clientKey is the address a per-client limit counts by: an IPv4 address as it is, an
// IPv6 address as its /64 (one subscriber usually holds a whole /64, so counting single
// IPv6 addresses would let one client be thousands). An unparsable address is used as is.
func clientKey(c *fiber.Ctx) string { return addrKey(clientIP(c)) }

func addrKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	if a.Is4() {
		return ip // as it came (ParseAddr takes only the canonical dotted form): no copy
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, err := a.Prefix(64)
	if err != nil {
		return ip
	}
	return p.String()
}
