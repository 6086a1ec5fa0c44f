// Package admission makes admission tokens verifiable by anyone: it signs them as compact
// JWS (JWT, alg EdDSA, Ed25519) with keys shared by every instance through Redis (the
// KeyStore, trust's signing-key storage), publishes the public keys (JWKS), verifies tokens,
// and holds the guard logic shared by the Fiber guard, the net/http guard and the gateway
// endpoint. It does not import Fiber.
package admission

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/trust"
)

// KeyStore keeps the signing keys where every instance reads them (implemented by
// *trust.Store: a Redis hash).
type KeyStore interface {
	// SigningKeys reads the keys and the revoked key ids (with when, Unix ms).
	SigningKeys(ctx context.Context) ([]trust.StoredKey, map[string]int64, error)
	PutSigningKeys(ctx context.Context, keys []trust.StoredKey, drop []string) error
	// RevokeSigningKey deletes kid and marks it revoked at atMs, writes keys and forgets
	// the marks of the kids in forget, in one transaction.
	RevokeSigningKey(ctx context.Context, kid string, atMs int64, keys []trust.StoredKey, forget []string) error
	// LockFirstSigningKey reports whether this caller may make a deployment's first key
	// (a lock held for ttl).
	LockFirstSigningKey(ctx context.Context, ttl time.Duration) (bool, error)
}

// Config tunes a KeyRing. Zero fields take the documented defaults.
type Config struct {
	// Secret is the deployment secret (WR_SECRET): it seals the private keys in the store.
	Secret []byte
	// Issuer is the iss claim (default "waitroom").
	Issuer string
	// PublishDelay is how long a new key is published before it signs (default 60 s):
	// longer than Refresh and than the JWKS cache lifetime, so every instance and every
	// verifier that honours the cache header knows the key before the first token it signs.
	PublishDelay time.Duration
	// Refresh is how often the keys are re-read from the store (default 30 s).
	Refresh time.Duration
	// KeepAfterRetire is how long a key stays published after it stopped signing (default
	// 24 h + 1 min: the longest token lifetime, so no token outlives its key).
	KeepAfterRetire time.Duration
	Log             zerolog.Logger
}

func (c Config) withDefaults() Config {
	if c.Issuer == "" {
		c.Issuer = "waitroom"
	}
	if c.PublishDelay <= 0 {
		c.PublishDelay = 60 * time.Second
	}
	if c.Refresh <= 0 {
		c.Refresh = 30 * time.Second
	}
	if c.KeepAfterRetire <= 0 {
		c.KeepAfterRetire = queue.MaxTokenTTL + time.Minute
	}
	return c
}

// Key is one signing key as the KeyRing holds it.
type Key struct {
	Kid       string
	Public    ed25519.PublicKey
	private   ed25519.PrivateKey // nil when it could not be unsealed (another secret)
	sealed    []byte             // the private key as stored, rewritten when the key retires
	Created   time.Time
	SignsFrom time.Time
	Retired   time.Time // zero while it has no successor
}

// keySet is one immutable view of the keys, swapped atomically on refresh.
type keySet struct {
	keys    []Key // newest SignsFrom first
	byKid   map[string]*Key
	revoked map[string]int64 // revoked kid -> when (Unix ms)
	jwks    []byte
}

// KeyRing signs and verifies admission tokens with the deployment's keys.
type KeyRing struct {
	store KeyStore
	cfg   Config
	seal  cipher.AEAD

	set       atomic.Pointer[keySet]
	mu        sync.Mutex // serialises reloads
	lastForce atomic.Int64
}

// NewKeyRing returns a KeyRing on store. Call Load (or Run) before signing.
func NewKeyRing(store KeyStore, cfg Config) (*KeyRing, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Secret) < 16 {
		return nil, errors.New("admission: the secret must be at least 16 bytes")
	}
	m := hmac.New(sha256.New, cfg.Secret)
	m.Write([]byte("waitroom signing-key seal v1"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	r := &KeyRing{store: store, cfg: cfg, seal: aead}
	r.set.Store(&keySet{byKid: map[string]*Key{}, jwks: []byte(`{"keys":[]}`)})
	return r, nil
}

// Issuer is the iss claim this ring signs and requires.
func (r *KeyRing) Issuer() string { return r.cfg.Issuer }

// Load reads the keys; when none can sign, it makes the first one (signing at once: no
// token exists yet that a verifier could miss).
func (r *KeyRing) Load(ctx context.Context) error {
	if err := r.reload(ctx); err != nil {
		return err
	}
	if _, ok := r.current(time.Now()); ok {
		return nil
	}
	// A new deployment: one instance makes the first key, the others wait for it (two
	// instances starting at once would otherwise make two keys that both sign).
	for range firstKeyWaits {
		won, err := r.store.LockFirstSigningKey(ctx, firstKeyLock)
		if err != nil {
			return err
		}
		if won {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(firstKeyLock / firstKeyWaits):
		}
		if err := r.reload(ctx); err != nil {
			return err
		}
		if _, ok := r.current(time.Now()); ok {
			return nil
		}
	}
	now := time.Now()
	if _, err := r.add(ctx, now, now); err != nil {
		return err
	}
	return r.reload(ctx)
}

// How long the instance that makes the first key holds the others back, and in how many
// steps they look for its key.
const (
	firstKeyLock  = 3 * time.Second
	firstKeyWaits = 10
)

// Run refreshes the keys every Refresh until ctx ends (one store read each time).
func (r *KeyRing) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := r.reload(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn().Err(err).Msg("admission: refresh signing keys")
		}
	}
}

// Rotate makes a new key: published at once, signing after PublishDelay; the keys that
// sign until then retire at that moment and stay published for KeepAfterRetire. Keys
// past that are deleted.
func (r *KeyRing) Rotate(ctx context.Context) (Key, error) {
	if err := r.reload(ctx); err != nil {
		return Key{}, err
	}
	now := time.Now()
	k, err := r.add(ctx, now, now.Add(r.cfg.PublishDelay))
	if err != nil {
		return Key{}, err
	}
	return k, r.reload(ctx)
}

// add stores a new key signing from signsFrom, retires the keys without a successor at
// that moment and drops keys retired long enough ago.
func (r *KeyRing) add(ctx context.Context, now, signsFrom time.Time) (Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, err
	}
	nonce := make([]byte, r.seal.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return Key{}, err
	}
	kid := Thumbprint(pub)
	sealed := r.seal.Seal(nonce, nonce, priv.Seed(), []byte(kid))
	write := []trust.StoredKey{{Kid: kid, Public: pub, Sealed: sealed, CreatedMs: now.UnixMilli(), SignsFromMs: signsFrom.UnixMilli()}}
	var drop []string
	for _, k := range r.set.Load().keys {
		switch {
		case !k.Retired.IsZero() && now.After(k.Retired.Add(r.cfg.KeepAfterRetire)):
			drop = append(drop, k.Kid)
		case k.Retired.IsZero() || k.Retired.After(signsFrom):
			write = append(write, k.stored(signsFrom))
		}
	}
	if err := r.store.PutSigningKeys(ctx, write, drop); err != nil {
		return Key{}, err
	}
	return Key{Kid: kid, Public: pub, private: priv, sealed: sealed, Created: now, SignsFrom: signsFrom}, nil
}

// stored is k as the store keeps it, retiring at retired.
func (k Key) stored(retired time.Time) trust.StoredKey {
	s := trust.StoredKey{Kid: k.Kid, Public: k.Public, CreatedMs: k.Created.UnixMilli(),
		SignsFromMs: k.SignsFrom.UnixMilli(), Sealed: k.sealed}
	if !retired.IsZero() {
		s.RetiredMs = retired.UnixMilli() // zero: no successor
	}
	return s
}

func (r *KeyRing) reload(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	stored, revoked, err := r.store.SigningKeys(ctx)
	if err != nil {
		return err
	}
	set := &keySet{byKid: make(map[string]*Key, len(stored)), revoked: revoked}
	for _, s := range stored {
		if len(s.Public) != ed25519.PublicKeySize || s.Kid != Thumbprint(s.Public) {
			r.cfg.Log.Warn().Str("kid", s.Kid).Msg("admission: a stored signing key is malformed; ignored")
			continue
		}
		k := Key{Kid: s.Kid, Public: s.Public, Created: time.UnixMilli(s.CreatedMs),
			SignsFrom: time.UnixMilli(s.SignsFromMs), sealed: s.Sealed}
		if s.RetiredMs > 0 {
			k.Retired = time.UnixMilli(s.RetiredMs)
		}
		if len(s.Sealed) > r.seal.NonceSize() {
			n := r.seal.NonceSize()
			seed, err := r.seal.Open(nil, s.Sealed[:n], s.Sealed[n:], []byte(s.Kid))
			if err == nil && len(seed) == ed25519.SeedSize {
				if priv := ed25519.NewKeyFromSeed(seed); priv.Public().(ed25519.PublicKey).Equal(k.Public) {
					k.private = priv
				}
			}
		}
		if k.private == nil {
			r.cfg.Log.Warn().Str("kid", s.Kid).Msg("admission: cannot unseal a signing key (another WR_SECRET?); it only verifies here")
		}
		set.keys = append(set.keys, k)
	}
	slices.SortFunc(set.keys, func(a, b Key) int {
		if c := b.SignsFrom.Compare(a.SignsFrom); c != 0 {
			return c
		}
		return compareStrings(b.Kid, a.Kid)
	})
	for i := range set.keys {
		set.byKid[set.keys[i].Kid] = &set.keys[i]
	}
	set.jwks = renderJWKS(set.keys)
	r.set.Store(set)
	return nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// current is the key that signs at now: the newest whose SignsFrom has come and that this
// instance can use (every instance picks the same one, so the same claims give the same
// token bytes everywhere).
func (r *KeyRing) current(now time.Time) (*Key, bool) {
	set := r.set.Load()
	for i := range set.keys {
		k := &set.keys[i]
		if !k.SignsFrom.After(now) && k.private != nil {
			return k, true
		}
	}
	return nil, false
}

// lookup finds kid, re-reading the store (at most once a second) when it is unknown: a
// key another instance has just made. An error is the store's (Redis unreachable), or
// ErrKeyRevoked for a key known to be revoked.
func (r *KeyRing) lookup(ctx context.Context, kid string) (*Key, bool, error) {
	set := r.set.Load()
	if k, ok := set.byKid[kid]; ok {
		return k, true, nil
	}
	if _, ok := set.revoked[kid]; ok {
		return nil, false, ErrKeyRevoked
	}
	now := time.Now().UnixMilli()
	last := r.lastForce.Load()
	if now-last < 1000 || !r.lastForce.CompareAndSwap(last, now) {
		return nil, false, nil
	}
	if err := r.reload(ctx); err != nil {
		r.lastForce.Store(0) // let the next request try again
		return nil, false, err
	}
	set = r.set.Load()
	if _, ok := set.revoked[kid]; ok {
		return nil, false, ErrKeyRevoked
	}
	k, ok := set.byKid[kid]
	return k, ok, nil
}

// Keys lists the keys, newest first.
func (r *KeyRing) Keys() []Key { return slices.Clone(r.set.Load().keys) }

// Signing is the kid that signs now ("" when none can).
func (r *KeyRing) Signing() string {
	if k, ok := r.current(time.Now()); ok {
		return k.Kid
	}
	return ""
}

// JWKS is the public key set as JSON ({"keys":[…]}).
func (r *KeyRing) JWKS() []byte { return r.set.Load().jwks }

type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	X   string `json:"x"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

func renderJWKS(keys []Key) []byte {
	out := struct {
		Keys []jwk `json:"keys"`
	}{Keys: make([]jwk, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, jwk{Kty: "OKP", Crv: "Ed25519", Kid: k.Kid,
			X: base64.RawURLEncoding.EncodeToString(k.Public), Alg: "EdDSA", Use: "sig"})
	}
	b, _ := json.Marshal(out)
	return b
}

// Thumbprint is the RFC 7638 JWK thumbprint of an Ed25519 public key (base64url SHA-256
// of its canonical JWK), used as its kid.
func Thumbprint(pub ed25519.PublicKey) string {
	canon := fmt.Sprintf(`{"crv":"Ed25519","kty":"OKP","x":"%s"}`, base64.RawURLEncoding.EncodeToString(pub))
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// EncodeKey is the base64url form of a public key (the JWK "x").
func EncodeKey(pub ed25519.PublicKey) string { return base64.RawURLEncoding.EncodeToString(pub) }
