package redistest

import "strings"

// Slots is the number of Redis Cluster hash slots.
const Slots = 16384

// Slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of the key modulo 16384, or
// of its hash tag — the part between the first "{" and the next "}" after it, when that
// part is not empty (https://redis.io/docs/reference/cluster-spec/#hash-tags).
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum of Redis
// Cluster's key hashing.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
