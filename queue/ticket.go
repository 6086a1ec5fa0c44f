package queue

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// Ticket identifies one waiting user in one queue. Its string form is
// "<queue>.<id>.<signature>": a random id and an HMAC-SHA256 signature made with the
// deployment's secret, so any instance can verify it without a lookup.
type Ticket struct {
	Queue string
	ID    string
}

// Signer issues and verifies tickets.
type Signer struct{ key []byte }

// NewSigner returns a Signer using secret (shared by every instance of a deployment).
func NewSigner(secret []byte) *Signer { return &Signer{key: append([]byte(nil), secret...)} }

// b64 is strict: a signature or id whose last character carries non-zero padding bits is a
// different string for the same bytes, and only the canonical form is accepted.
var b64 = base64.RawURLEncoding.Strict()

// New issues a fresh ticket for queue and returns it with its signed string form.
func (s *Signer) New(queue string) (Ticket, string) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic("queue: crypto/rand failed: " + err.Error())
	}
	t := Ticket{Queue: queue, ID: b64.EncodeToString(raw[:])}
	return t, s.String(t)
}

// maxFitTries bounds NewWhere's and NewChallengeWhere's draws (a fitting id is one in n,
// n ≤ 16 shards: 512 draws all missing happens with probability below 1e-14).
const maxFitTries = 512

// NewWhere is New with an id that fits (nil: any id): a sharded pre-queue's tickets are
// minted in the shard their join must land in (prequeue.go).
func (s *Signer) NewWhere(queue string, fits func(id string) bool) (Ticket, string) {
	for range maxFitTries {
		t, raw := s.New(queue)
		if fits == nil || fits(t.ID) {
			return t, raw
		}
	}
	return s.New(queue)
}

// String returns the signed string form of t.
func (s *Signer) String(t Ticket) string {
	return t.Queue + "." + t.ID + "." + b64.EncodeToString(s.mac(t.Queue, t.ID))
}

func (s *Signer) mac(queue, id string) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte("ticket\x00" + queue + "\x00" + id))
	return h.Sum(nil)
}

// Parse verifies raw and returns the ticket it carries. Any malformed or forged input
// returns ErrTicketInvalid; the signature is compared in constant time.
func (s *Signer) Parse(raw string) (Ticket, error) {
	if len(raw) == 0 || len(raw) > 200 || !urlSafe(raw) {
		return Ticket{}, ErrTicketInvalid
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 || !ValidName(parts[0]) || len(parts[1]) != 22 {
		return Ticket{}, ErrTicketInvalid
	}
	id, err := b64.DecodeString(parts[1])
	if err != nil || len(id) != 16 {
		return Ticket{}, ErrTicketInvalid
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, s.mac(parts[0], parts[1])) {
		return Ticket{}, ErrTicketInvalid
	}
	return Ticket{Queue: parts[0], ID: parts[1]}, nil
}

// urlSafe reports whether s holds only A-Z a-z 0-9 - _ and '.': the characters of a ticket's
// canonical form. (The base64 decoder skips line breaks, so without this check a ticket with
// a line break inside would be read as the same ticket.)
func urlSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
