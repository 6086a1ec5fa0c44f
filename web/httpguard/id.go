package httpguard

import (
	"crypto/rand"
	"encoding/hex"
)

// newID is a random request key for a request without an Idempotency-Key.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
