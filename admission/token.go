package admission

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/waitroom/waitroom/queue"
)

// Claims are the claims of an admission token (API.md, "The admission token").
type Claims struct {
	Issuer   string `json:"iss"`
	Subject  string `json:"sub"` // the ticket id
	Audience string `json:"aud"` // the queue that admitted it
	ID       string `json:"jti"` // the token as Redis stores it (UUID v4)
	IssuedAt int64  `json:"iat"` // admission time, Unix seconds
	Expires  int64  `json:"exp"` // token expiry, Unix seconds
}

// The jwt.Claims interface, so the library validates time and issuer.
func (c Claims) GetExpirationTime() (*jwt.NumericDate, error) {
	return jwt.NewNumericDate(time.Unix(c.Expires, 0)), nil
}
func (c Claims) GetIssuedAt() (*jwt.NumericDate, error) {
	return jwt.NewNumericDate(time.Unix(c.IssuedAt, 0)), nil
}
func (c Claims) GetNotBefore() (*jwt.NumericDate, error) { return nil, nil }
func (c Claims) GetIssuer() (string, error)              { return c.Issuer, nil }
func (c Claims) GetSubject() (string, error)             { return c.Subject, nil }
func (c Claims) GetAudience() (jwt.ClaimStrings, error)  { return jwt.ClaimStrings{c.Audience}, nil }

// Errors of Verify. Every one but ErrExpired means the token is not ours or was altered.
var (
	ErrMalformed  = errors.New("admission token malformed")
	ErrAlgorithm  = errors.New("admission token algorithm refused")
	ErrUnknownKey = errors.New("admission token signed by an unknown key")
	ErrSignature  = errors.New("admission token signature invalid")
	ErrClaims     = errors.New("admission token claims invalid")
	ErrExpired    = errors.New("admission token expired")
	ErrNoKey      = errors.New("no signing key available")
)

// MaxTokenLen bounds what Verify reads; a real token is about 330 bytes.
const MaxTokenLen = 1024

// Sign returns the token for the claims, signed with the key that signs now. The iss claim
// is the ring's. Ed25519 signatures are deterministic: every instance with the same
// current key makes the same bytes for the same claims.
func (r *KeyRing) Sign(c Claims) (string, error) {
	k, ok := r.current(time.Now())
	if !ok {
		return "", ErrNoKey
	}
	c.Issuer = r.cfg.Issuer
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"] = k.Kid
	return t.SignedString(k.private)
}

// IssueMs signs the token of one admission: ticket, queue, the stored token (jti), and
// the admission and expiry times in Unix ms. iatMs 0 (an admission stored without its time,
// by a leader without signed tokens: docs/UPGRADING.md, mixed versions) is taken as expMs
// minus the longest token lifetime: the same on every instance, and never in the future.
func (r *KeyRing) IssueMs(queueName, ticket, jti string, iatMs, expMs int64) (string, error) {
	if iatMs <= 0 {
		iatMs = expMs - queue.MaxTokenTTL.Milliseconds()
	}
	return r.Sign(Claims{Subject: ticket, Audience: queueName, ID: jti, IssuedAt: iatMs / 1000, Expires: expMs / 1000})
}

// iatSkew is how far in the future an iat may be: the admission time comes from Redis's
// clock, the check from this instance's.
const iatSkew = time.Minute

// Verify checks raw (an error wrapping queue.ErrUnavailable means the keys could not be
// re-read for an unknown kid; answer 503, not 401): compact JWS, alg EdDSA only (none, HS256 and every other algorithm
// are refused before any key is used), a kid this deployment publishes, a valid Ed25519
// signature, our issuer, and claims of the right shape; an expired token is ErrExpired.
func (r *KeyRing) Verify(ctx context.Context, raw string) (Claims, error) {
	if len(raw) == 0 || len(raw) > MaxTokenLen || !compactJWS(raw) || !canonicalSegments(raw) {
		return Claims{}, ErrMalformed
	}
	var c Claims
	var keyErr error
	_, err := jwt.ParseWithClaims(raw, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			keyErr = ErrUnknownKey
			return nil, keyErr
		}
		k, ok, err := r.lookup(ctx, kid)
		switch {
		case err != nil:
			keyErr = err // the store could not be asked: not the token's fault
			return nil, keyErr
		case !ok:
			keyErr = ErrUnknownKey
			return nil, keyErr
		}
		return k.Public, nil
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer(r.cfg.Issuer),
		jwt.WithExpirationRequired(), jwt.WithLeeway(0), jwt.WithStrictDecoding())
	switch {
	case err == nil:
	case keyErr != nil:
		return Claims{}, keyErr
	case errors.Is(err, jwt.ErrTokenExpired):
		return c, ErrExpired
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if errors.Is(err, jwt.ErrSignatureInvalid) || errors.Is(err, jwt.ErrEd25519Verification) {
			return Claims{}, ErrSignature
		}
		return Claims{}, ErrAlgorithm
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return Claims{}, ErrAlgorithm // "none" and algorithms the library does not know
	case errors.Is(err, jwt.ErrTokenMalformed):
		return Claims{}, ErrMalformed
	default:
		return Claims{}, fmt.Errorf("%w: %w", ErrClaims, err)
	}
	if c.Subject == "" || c.Audience == "" || c.ID == "" || c.Expires < c.IssuedAt ||
		time.Unix(c.IssuedAt, 0).After(time.Now().Add(iatSkew)) {
		return Claims{}, ErrClaims
	}
	return c, nil
}

// segment is the one spelling of a JWS segment: base64url without padding, and the unused
// low bits of the last character zero.
var segment = base64.RawURLEncoding.Strict()

// canonicalSegments reports whether each of raw's three segments is the one base64url
// spelling of its bytes. The lenient decoder reads up to 16 spellings of one Ed25519
// signature (the last character's 4 unused bits) and several of a header or payload, so
// anything keyed on the token string (a shop's deny-list, an auth_request cache) would see
// one admission as many tokens.
func canonicalSegments(raw string) bool {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if _, err := segment.DecodeString(p); err != nil {
			return false
		}
	}
	return true
}

// compactJWS reports whether s holds only the characters of a compact JWS (base64url and
// '.'): the base64 decoder would skip line breaks, letting one token have many spellings.
func compactJWS(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
