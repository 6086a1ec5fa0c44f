package trust

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
)

// The token-signing keys of the deployment live in one hash (rstore.SigningKeysKey) of key
// id -> StoredKey JSON. It is global (not in any queue's slot) and read by every instance
// every few seconds; the private half is sealed by the holder of the deployment secret, so
// a reader of Redis alone cannot sign tokens.

// StoredKey is one token-signing key as Redis keeps it. Sealed is the private key,
// encrypted by the admission package; this package stores it opaquely.
type StoredKey struct {
	Kid         string `json:"kid"`
	Public      []byte `json:"pub"`
	Sealed      []byte `json:"sealed"`
	CreatedMs   int64  `json:"created_ms"`
	SignsFromMs int64  `json:"signs_from_ms"`
	// RetiredMs is when the key stopped (or stops) signing: its successor's SignsFromMs;
	// 0 while it has none.
	RetiredMs int64 `json:"retired_ms,omitempty"`
}

// revokedField prefixes the field of a revoked key in the same hash: "revoked:<kid>" →
// {"revoked_ms":…}. A reader that knows no revocation skips it (it is not a key), and one
// hash keeps a key's removal and its mark in one transaction on one slot.
const revokedField = "revoked:"

type revokedMark struct {
	RevokedMs int64 `json:"revoked_ms"`
}

// SigningKeys reads every stored signing key and the revoked key ids with when they were
// revoked (Unix ms), in one HGETALL. A key that is also marked revoked is left out.
func (s *Store) SigningKeys(ctx context.Context) ([]StoredKey, map[string]int64, error) {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	m, err := s.st.Client().HGetAll(ctx, rstore.SigningKeysKey).Result()
	if err != nil {
		return nil, nil, rstore.Fail("read signing keys", err)
	}
	revoked := map[string]int64{}
	for f, v := range m {
		var r revokedMark
		if kid, ok := strings.CutPrefix(f, revokedField); ok && json.Unmarshal([]byte(v), &r) == nil {
			revoked[kid] = r.RevokedMs
		}
	}
	out := make([]StoredKey, 0, len(m))
	for kid, v := range m {
		var k StoredKey
		if err := json.Unmarshal([]byte(v), &k); err != nil || k.Kid != kid {
			continue // not ours to read; left alone
		}
		if _, gone := revoked[kid]; gone {
			continue // written back by an instance that had not read the revocation yet
		}
		out = append(out, k)
	}
	return out, revoked, nil
}

// RevokeSigningKey deletes key kid, marks it revoked at atMs, writes keys (whose
// retirement the removal changed) and deletes the marks of the kids in forget, in one
// transaction.
func (s *Store) RevokeSigningKey(ctx context.Context, kid string, atMs int64, keys []StoredKey, forget []string) error {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	mark, _ := json.Marshal(revokedMark{RevokedMs: atMs})
	pipe := s.st.Client().TxPipeline()
	if err := queueKeyWrites(ctx, pipe, keys); err != nil {
		return err
	}
	pipe.HDel(ctx, rstore.SigningKeysKey, kid)
	pipe.HSet(ctx, rstore.SigningKeysKey, revokedField+kid, mark)
	for _, f := range forget {
		pipe.HDel(ctx, rstore.SigningKeysKey, revokedField+f)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return rstore.Fail("revoke signing key", err)
	}
	return nil
}

// queueKeyWrites adds the writes of keys to a transaction.
func queueKeyWrites(ctx context.Context, pipe redis.Pipeliner, keys []StoredKey) error {
	for _, k := range keys {
		b, err := json.Marshal(k)
		if err != nil {
			return fmt.Errorf("encode signing key: %w", err)
		}
		pipe.HSet(ctx, rstore.SigningKeysKey, k.Kid, b)
	}
	return nil
}

// PutSigningKeys writes keys (new ones, or ones whose retirement changed) and deletes the
// key ids in drop, in one transaction.
func (s *Store) PutSigningKeys(ctx context.Context, keys []StoredKey, drop []string) error {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	pipe := s.st.Client().TxPipeline()
	if err := queueKeyWrites(ctx, pipe, keys); err != nil {
		return err
	}
	if len(drop) > 0 {
		pipe.HDel(ctx, rstore.SigningKeysKey, drop...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return rstore.Fail("write signing keys", err)
	}
	return nil
}

// LockFirstSigningKey takes the first-key lock (rstore.FirstSigningKeyLock, held by the
// instance that makes a deployment's first signing key) for ttl; false when another instance
// holds it.
func (s *Store) LockFirstSigningKey(ctx context.Context, ttl time.Duration) (bool, error) {
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	ok, err := s.st.Client().SetNX(ctx, rstore.FirstSigningKeyLock, "1", ttl).Result()
	if err != nil {
		return false, rstore.Fail("lock first signing key", err)
	}
	return ok, nil
}
