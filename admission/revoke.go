package admission

import (
	"context"
	"errors"
	"time"

	"github.com/waitroom/waitroom/trust"
)

// Errors of Revoke (and of Verify for a token signed by a revoked key).
var (
	// ErrKeyRevoked: the token's key was revoked by an operator.
	ErrKeyRevoked = errors.New("admission token signed by a revoked key")
	// ErrKeySigning: the key signs the tokens handed out now; another must sign first.
	ErrKeySigning = errors.New("the key signs now")
)

// Revoke removes key kid: gone from the JWKS and refused by Verify (ErrKeyRevoked) on this
// instance at once and on every other one at its next refresh. The key that signs now
// cannot be revoked (ErrKeySigning): rotate, and revoke it once the new key signs. A key
// that waits to sign (made by a rotation within the publish delay) may be revoked: the key
// signing now then keeps signing. An unknown kid is ErrUnknownKey. Revocation marks older
// than the longest token lifetime are forgotten (no token of theirs can still be valid).
func (r *KeyRing) Revoke(ctx context.Context, kid string) (Key, error) {
	if err := r.reload(ctx); err != nil {
		return Key{}, err
	}
	now := time.Now()
	set := r.set.Load()
	k, ok := set.byKid[kid]
	if !ok {
		return Key{}, ErrUnknownKey
	}
	if cur, ok := r.current(now); ok && cur.Kid == kid {
		return Key{}, ErrKeySigning
	}
	// The key that was to retire when this one starts signing keeps signing after it
	// (until this one's successor, if any).
	var write []trust.StoredKey
	if k.SignsFrom.After(now) {
		for _, o := range set.keys {
			if o.Kid != kid && o.Retired.Equal(k.SignsFrom) {
				write = append(write, o.stored(k.Retired))
			}
		}
	}
	var forget []string
	for old, at := range set.revoked {
		if now.Sub(time.UnixMilli(at)) > r.cfg.KeepAfterRetire {
			forget = append(forget, old)
		}
	}
	if err := r.store.RevokeSigningKey(ctx, kid, now.UnixMilli(), write, forget); err != nil {
		return Key{}, err
	}
	return *k, r.reload(ctx)
}
