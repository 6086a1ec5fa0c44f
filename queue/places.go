package queue

import "math"

// Places per client address (join.lua). A place of an address counts from its join until
// it leaves, is abandoned or dropped, or its admission token is used or expires: an
// admitted place keeps counting while its token lives, for every method (passthrough
// included). Where max_active is set, one address also holds at most a share of it, so
// one address cannot take a passthrough queue or a drop's first batch.
//
// The default share is a tenth (DefaultMaxActiveSharePerIP): at least ten addresses are
// needed to fill max_active, and at max_active 1,000 it allows what the default
// places_per_ip (100) allows, so only queues with a small max_active are tightened.
// Addresses many buyers share (an office, a carrier's NAT) raise the queue's
// max_active_share_per_ip (up to 1) or set it to 0 (places_per_ip alone); places_per_ip 0
// turns every per-address count off.

// AddressCap is the most live places one client address may hold in the queue, as the
// join script computes it: places_per_ip, and where max_active > 0 and the share is above
// 0 at most max(1, floor(max_active × share)); 0 = no cap (places_per_ip 0).
func (s Settings) AddressCap() int64 {
	c := s.PlacesPerIP
	if c <= 0 {
		return 0
	}
	if s.MaxActive > 0 && s.MaxActiveSharePerIP > 0 {
		c = min(c, max(1, int64(math.Floor(float64(s.MaxActive)*s.MaxActiveSharePerIP+1e-9))))
	}
	return c
}
