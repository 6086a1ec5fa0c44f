package web

import (
	"net/netip"

	"github.com/gofiber/fiber/v2"
)

// clientKey is the address a per-client limit counts by: an IPv4 address as it is, an
// IPv6 address as its /64 (one subscriber usually holds a whole /64, so counting single
// IPv6 addresses would let one client be thousands). An unparsable address is used as is.
func clientKey(c *fiber.Ctx) string { return addrKey(c.IP()) }

func addrKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
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
