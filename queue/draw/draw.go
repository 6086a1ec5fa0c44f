// Package draw is the auditable fair draw of a scheduled queue's pre-queue: pure functions
// that turn a secret seed and the frozen participant list into a uniformly random order
// that anyone can recompute once the seed is revealed.
//
// The algorithm, "waitroom-draw-v1", precisely enough to reimplement it elsewhere. All
// hashes are SHA-256; "hex" is lowercase hexadecimal; "raw" is the bytes a hex string
// decodes to; ‖ is concatenation.
//
//  1. Draw id. Each participant is known publicly by draw id = hex(SHA-256(ticket id)),
//     where the ticket id is the random middle part of the ticket string
//     "<queue>.<id>.<signature>", hashed as the ASCII text it is (22 characters). 64 hex
//     characters; it identifies the participant without revealing the ticket.
//  2. Seed and commitment. Before the start the server picks seed = 32 random bytes
//     (published as 64 hex characters only after the draw) and publishes
//     commitment = hex(SHA-256(raw seed)).
//  3. Participants hash. At the start the participant list is frozen and
//     participants_hash = hex(SHA-256(id₁ "\n" id₂ "\n" … idₙ "\n")), the draw ids (as hex
//     text) sorted ascending by byte value, each followed by one line feed. An empty list
//     hashes the empty string.
//  4. Key. key = SHA-256(raw seed ‖ raw participants_hash): 64 bytes in, 32 bytes out.
//  5. Order. Each participant gets sort value = SHA-256(key ‖ raw draw id) (64 bytes in);
//     the drawn order is the participants sorted ascending by sort value, compared as
//     32-byte unsigned big-endian numbers (plain byte order). Equal sort values, which
//     SHA-256 makes practically impossible, are ordered by raw draw id. Place 1 is
//     admitted first.
//
// Why it is fair: the order is a function of the seed and of the list; the seed is fixed
// (by the commitment) before the list is known, and the list enters through its hash, so
// the operator cannot pick a seed for a list it has already seen, and join order plays no
// part. docs/DRAW.md spells out what this proves and what it does not.
package draw

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
)

// Algorithm names the scheme above; GET /api/queues/{queue}/draw publishes it so that a
// verifier refuses a draw made by a scheme it does not implement.
const Algorithm = "waitroom-draw-v1"

// ID returns the public draw id of the participant holding the ticket with id ticketID
// (the random middle part of the ticket string): hex SHA-256 of its text. The hash is
// one-way, so publishing draw ids never reveals a ticket.
func ID(ticketID string) string {
	h := sha256.Sum256([]byte(ticketID))
	return hex.EncodeToString(h[:])
}

// NewSeed returns a fresh secret seed: 32 bytes from crypto/rand, as 64 hex characters.
func NewSeed() string {
	var b [32]byte
	// crypto/rand.Read never fails on supported platforms (it panics itself if the
	// system's generator breaks), so there is no error to hand on.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Commitment returns the commitment to seedHex, published before the start: hex SHA-256
// of the 32 raw seed bytes (not of its hex text).
func Commitment(seedHex string) (string, error) {
	seed, err := decode32("seed", seedHex)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(seed[:])
	return hex.EncodeToString(h[:]), nil
}

// ParticipantsHash returns the hash of a participant list: hex SHA-256 of the draw ids
// sorted ascending by byte value, each followed by "\n". Sorting makes it a hash of the
// set, the same whatever order people joined in. ids is not modified, and not validated:
// Verify and Key check the hex they are given.
func ParticipantsHash(ids []string) string {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	h := sha256.New()
	var line []byte
	for _, id := range sorted {
		line = append(append(line[:0], id...), '\n')
		h.Write(line)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Key returns SHA-256(raw seed ‖ raw participants hash), the 32-byte key every sort value
// derives from. Binding the list's hash into the key is what makes the order depend on
// who takes part, not only on the seed.
func Key(seedHex, participantsHashHex string) ([32]byte, error) {
	seed, err := decode32("seed", seedHex)
	if err != nil {
		return [32]byte{}, err
	}
	ph, err := decode32("participants hash", participantsHashHex)
	if err != nil {
		return [32]byte{}, err
	}
	var in [64]byte
	copy(in[:32], seed[:])
	copy(in[32:], ph[:])
	return sha256.Sum256(in[:]), nil
}

// Order returns ids in drawn order (see the package documentation): place 1 first. It
// checks that every id is a draw id (64 lowercase hex characters); ids is not modified.
func Order(seedHex, participantsHashHex string, ids []string) ([]string, error) {
	key, err := Key(seedHex, participantsHashHex)
	if err != nil {
		return nil, err
	}
	raw, err := decodeIDs(ids)
	if err != nil {
		return nil, err
	}
	perm := order(key, raw)
	out := make([]string, len(perm))
	for k, i := range perm {
		out[k] = ids[i]
	}
	return out, nil
}

// OrderIndex is Order for callers that keep their own records beside the draw ids: it
// returns perm, with perm[k] the index in ids of the participant drawn at place k+1. ids
// must be draw ids as ID returns them; anything else is a programming error and panics
// (Order is the checking variant for untrusted input).
func OrderIndex(key [32]byte, ids []string) []int {
	raw, err := decodeIDs(ids)
	if err != nil {
		panic("draw.OrderIndex: " + err.Error())
	}
	return order(key, raw)
}

// order sorts the participants by sort value. Every sort value is computed once up front
// (hashing in the comparator would hash each id log n times); the comparator mostly reads
// an 8-byte prefix held next to the index, so sorting moves small entries.
func order(key [32]byte, raw [][32]byte) []int {
	type entry struct {
		prefix uint64 // the first 8 bytes of the sort value, big-endian
		i      int
	}
	vals := make([][32]byte, len(raw))
	entries := make([]entry, len(raw))
	var in [64]byte
	copy(in[:32], key[:])
	for i := range raw {
		copy(in[32:], raw[i][:])
		vals[i] = sha256.Sum256(in[:])
		entries[i] = entry{binary.BigEndian.Uint64(vals[i][:8]), i}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		if c := bytes.Compare(vals[a.i][:], vals[b.i][:]); c != 0 {
			return c
		}
		if c := bytes.Compare(raw[a.i][:], raw[b.i][:]); c != 0 {
			return c
		}
		// The same id twice (Verify refuses that): keep the result deterministic.
		return cmp.Compare(a.i, b.i)
	})
	perm := make([]int, len(entries))
	for k, e := range entries {
		perm[k] = e.i
	}
	return perm
}

// Verify checks a published draw: that seedHex is the seed commitmentHex committed to,
// that participantsHashHex is the hash of exactly the ids in order (so order is the full
// list, nobody missing or added), and that order is the order the seed and that hash give.
// It returns an error describing the first check that fails (malformed hex and an id
// listed twice included), nil when the draw is honest by all three.
func Verify(seedHex, commitmentHex, participantsHashHex string, order []string) error {
	if _, err := decode32("seed", seedHex); err != nil {
		return err
	}
	if _, err := decode32("commitment", commitmentHex); err != nil {
		return err
	}
	if _, err := decode32("participants hash", participantsHashHex); err != nil {
		return err
	}
	raw, err := decodeIDs(order)
	if err != nil {
		return err
	}
	first := make(map[[32]byte]int, len(raw))
	for i, id := range raw {
		if j, dup := first[id]; dup {
			return fmt.Errorf("draw id %s is listed twice, at places %d and %d", order[i], j+1, i+1)
		}
		first[id] = i
	}
	if c, _ := Commitment(seedHex); c != commitmentHex {
		return fmt.Errorf("the seed does not match the commitment: SHA-256 of the seed is %s, the commitment is %s", c, commitmentHex)
	}
	if ph := ParticipantsHash(order); ph != participantsHashHex {
		return fmt.Errorf("the listed draw ids are not the frozen participant list: %d ids hash to %s, the published participants hash is %s (an id was added, removed or changed)",
			len(order), ph, participantsHashHex)
	}
	want, err := Order(seedHex, participantsHashHex, order)
	if err != nil {
		return err
	}
	for k := range want {
		if order[k] != want[k] {
			return fmt.Errorf("place %d holds draw id %s, but the seed and participants hash put %s there", k+1, order[k], want[k])
		}
	}
	return nil
}

// decodeIDs decodes draw ids, naming the place (1-based) of the first malformed one.
func decodeIDs(ids []string) ([][32]byte, error) {
	raw := make([][32]byte, len(ids))
	for i, id := range ids {
		b, err := parse32(id)
		if err != nil {
			return nil, fmt.Errorf("draw id at place %d: %w", i+1, err)
		}
		raw[i] = b
	}
	return raw, nil
}

// decode32 is parse32 with the value's name (what) in the error.
func decode32(what, s string) ([32]byte, error) {
	b, err := parse32(s)
	if err != nil {
		return b, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

// parse32 decodes s, which must be exactly 64 lowercase hex characters. One spelling per
// value: the participants hash hashes the ids' hex text, so an id respelled in upper case
// would otherwise be the same participant with a different hash.
func parse32(s string) ([32]byte, error) {
	var b [32]byte
	if len(s) != 64 {
		return b, fmt.Errorf("want 64 lowercase hex characters, got %d characters", len(s))
	}
	for i := range b {
		hi, lo := unhex[s[2*i]], unhex[s[2*i+1]]
		if hi|lo > 15 {
			bad := 2 * i
			if hi <= 15 {
				bad++
			}
			return b, fmt.Errorf("want 64 lowercase hex characters, character %d is %q", bad+1, s[bad])
		}
		b[i] = hi<<4 | lo
	}
	return b, nil
}

// unhex maps a lowercase hex digit to its value and every other byte to 0xff (a table:
// Verify decodes every id of lists of hundreds of thousands).
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
	}
	return t
}()
