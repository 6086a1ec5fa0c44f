package queue

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/rstore"
)

// Proof of work at join. A challenge is stateless: everything the verifier needs travels
// in the string, signed with a key derived from the deployment secret, so any instance
// verifies it without a lookup. Its string form is
//
//	<queue>.<id>.<difficulty>.<expires>.<mac>
//
// queue is the queue name ([A-Za-z0-9_-]{1,64}); id is 16 random bytes in unpadded
// base64url (22 characters, 128 bits: the single-use record of the challenge in Redis);
// difficulty is the number of leading zero bits asked for, in decimal; expires is the
// expiry in Unix seconds, in decimal; mac is the first 16 bytes of
// HMAC-SHA256(HMAC-SHA256(secret, "pow"), "pow1\x00" + the text before ".<mac>"), in
// unpadded base64url. Every character is URL-safe and the whole is at most 124 characters.
//
// A solution is a nonce (1-64 characters) such that SHA-256(challenge + ":" + nonce)
// starts with at least difficulty zero bits.

// PowChallengeTTL is how long a challenge may be solved and used: two minutes, some 100
// times the expected solving time at the recommended difficulty on a mid-range phone.
const PowChallengeTTL = 2 * time.Minute

// Bounds of the proof-of-work inputs.
const (
	MaxPowNonce     = 64  // characters of a nonce
	MaxPowChallenge = 512 // characters of a challenge string (the contract's bound)
)

// PowChallenge is a fresh challenge (see NewChallenge).
type PowChallenge struct {
	Challenge  string // the signed string form the client solves
	Queue      string
	ID         string
	Difficulty int
	Expires    time.Time
}

// powKey derives the key of the challenges' MAC from the secret: a ticket's signature can
// never be replayed as a challenge's, nor the other way around.
func (s *Signer) powKey() []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte("pow"))
	return h.Sum(nil)
}

func (s *Signer) powMAC(signed string) []byte {
	h := hmac.New(sha256.New, s.powKey())
	h.Write([]byte("pow1\x00"))
	h.Write([]byte(signed))
	return h.Sum(nil)[:powMACLen]
}

const (
	powIDLen     = 16 // random bytes of a challenge id
	powMACLen    = 16 // bytes of the MAC kept (128 bits)
	powIDChars   = 22 // base64url characters of the id
	powMACChars  = 22 // base64url characters of the MAC
	powMaxDigits = 12 // digits of the expiry in Unix seconds (good until the year 33658)
)

// NewChallenge issues a challenge to join queue with a proof of work of difficulty bits
// (0..MaxPowDifficulty), valid for PowChallengeTTL from now.
func (s *Signer) NewChallenge(queue string, difficulty int, now time.Time) PowChallenge {
	difficulty = min(max(difficulty, 0), MaxPowDifficulty)
	var raw [powIDLen]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic("queue: crypto/rand failed: " + err.Error())
	}
	id := b64.EncodeToString(raw[:])
	exp := now.Add(PowChallengeTTL).Unix()
	signed := queue + "." + id + "." + strconv.Itoa(difficulty) + "." + strconv.FormatInt(exp, 10)
	return PowChallenge{
		Challenge: signed + "." + b64.EncodeToString(s.powMAC(signed)),
		Queue:     queue, ID: id, Difficulty: difficulty, Expires: time.Unix(exp, 0),
	}
}

// NewChallengeWhere is NewChallenge with an id that fits (nil: any id; see NewWhere).
func (s *Signer) NewChallengeWhere(queue string, difficulty int, now time.Time, fits func(id string) bool) PowChallenge {
	for range maxFitTries {
		c := s.NewChallenge(queue, difficulty, now)
		if fits == nil || fits(c.ID) {
			return c
		}
	}
	return s.NewChallenge(queue, difficulty, now)
}

// ParseChallenge verifies the signature of a challenge string and returns what it carries;
// it does not look at the expiry or at a solution. Malformed or forged input is
// ErrPowInvalid.
func (s *Signer) ParseChallenge(raw string) (PowChallenge, error) {
	if len(raw) == 0 || len(raw) > MaxPowChallenge || !urlSafe(raw) {
		return PowChallenge{}, powInvalid("malformed challenge")
	}
	dot := strings.LastIndexByte(raw, '.')
	if dot < 0 {
		return PowChallenge{}, powInvalid("malformed challenge")
	}
	signed, macText := raw[:dot], raw[dot+1:]
	parts := strings.Split(signed, ".")
	if len(parts) != 4 || !ValidName(parts[0]) || len(parts[1]) != powIDChars || len(macText) != powMACChars {
		return PowChallenge{}, powInvalid("malformed challenge")
	}
	if id, err := b64.DecodeString(parts[1]); err != nil || len(id) != powIDLen {
		return PowChallenge{}, powInvalid("malformed challenge id")
	}
	diff, ok := decimal(parts[2], 2)
	if !ok || diff > MaxPowDifficulty {
		return PowChallenge{}, powInvalid("malformed difficulty")
	}
	exp, ok := decimal(parts[3], powMaxDigits)
	if !ok {
		return PowChallenge{}, powInvalid("malformed expiry")
	}
	mac, err := b64.DecodeString(macText)
	if err != nil || !hmac.Equal(mac, s.powMAC(signed)) {
		return PowChallenge{}, powInvalid("bad signature")
	}
	return PowChallenge{Challenge: raw, Queue: parts[0], ID: parts[1], Difficulty: int(diff), Expires: time.Unix(exp, 0)}, nil
}

// VerifyPow checks a solution to join queue: the challenge is genuine, for this queue and
// not expired at now, and SHA-256(challenge ":" nonce) starts with the challenge's
// difficulty in zero bits. It returns the proof to pass to JoinWith (which enforces single
// use and the queue's live difficulty). Any failure is ErrPowInvalid, with the reason in
// the message.
func (s *Signer) VerifyPow(queue, challenge, nonce string, now time.Time) (PowProof, error) {
	if n := utf8.RuneCountInString(nonce); n == 0 || n > MaxPowNonce || !utf8.ValidString(nonce) {
		return PowProof{}, powInvalid("nonce must be 1-64 characters")
	}
	c, err := s.ParseChallenge(challenge)
	if err != nil {
		return PowProof{}, err
	}
	switch {
	case c.Queue != queue:
		return PowProof{}, powInvalid("challenge of another queue")
	case !now.Before(c.Expires):
		return PowProof{}, powInvalid("challenge expired")
	case !PowSolves(challenge, nonce, c.Difficulty):
		return PowProof{}, powInvalid("not enough leading zero bits")
	}
	return PowProof{ID: c.ID, Difficulty: c.Difficulty, Expires: c.Expires}, nil
}

// PowSolves reports whether SHA-256(challenge ":" nonce) starts with at least difficulty
// zero bits.
func PowSolves(challenge, nonce string, difficulty int) bool {
	var buf [MaxPowChallenge + 1 + 4*MaxPowNonce]byte // stays on the stack
	msg := append(append(append(buf[:0], challenge...), ':'), nonce...)
	sum := sha256.Sum256(msg)
	return LeadingZeroBits(sum[:]) >= difficulty
}

// LeadingZeroBits counts the zero bits at the start of b (most significant bit of b[0]
// first).
func LeadingZeroBits(b []byte) int {
	n := 0
	for _, c := range b {
		if c != 0 {
			return n + bits.LeadingZeros8(c)
		}
		n += 8
	}
	return n
}

// decimal parses a canonical non-negative decimal of 1..maxDigits digits (no sign, no
// leading zero), so that one value has one spelling.
func decimal(s string, maxDigits int) (int64, bool) {
	if len(s) == 0 || len(s) > maxDigits || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + int64(s[i]-'0')
	}
	return v, true
}

func powInvalid(reason string) error { return fmt.Errorf("%w: %s", ErrPowInvalid, reason) }

// PowDifficulty returns the live pow_difficulty of queue name (0 = off) with one Redis
// command, or ErrQueueNotFound.
func (q *Queue) PowDifficulty(ctx context.Context, name string) (int, error) {
	if !ValidName(name) {
		return 0, ErrQueueNotFound
	}
	ctx, cancel := q.bound(ctx)
	defer cancel()
	// "rate" is written when a queue is created, so its absence means no such queue;
	// a queue stored without pow_difficulty (by an older release) has it off.
	v, err := q.rdb.HMGet(ctx, rstore.KeysFor(name).Cfg(), "rate", "pow_difficulty").Result()
	if err != nil && err != redis.Nil {
		return 0, fail("pow difficulty "+name, err)
	}
	if len(v) != 2 || v[0] == nil {
		return 0, ErrQueueNotFound
	}
	d := int(toInt(v[1]))
	return min(max(d, 0), MaxPowDifficulty), nil
}
