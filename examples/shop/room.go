package shop

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// verify checks the token with the room's public keys only: EdDSA, a published kid, the
// issuer, the shop's queue, not expired.
func (s *Shop) verify(ctx context.Context, tok string) (jwt.MapClaims, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(tok, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return s.key(ctx, kid)
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer(s.cfg.Issuer), jwt.WithAudience(s.cfg.Queue),
		jwt.WithExpirationRequired())
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// key finds kid in the cached JWKS, fetching it again (at most every 5 s) when unknown.
func (s *Shop) key(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	s.mu.Lock()
	k, ok := s.keys[kid]
	stale := time.Since(s.fetched) > 5*time.Second
	s.mu.Unlock()
	if ok {
		return k, nil
	}
	if !stale {
		return nil, errors.New("unknown key")
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.Room+"/.well-known/jwks.json", nil)
	res, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var set struct {
		Keys []struct{ Kty, Crv, Kid, X string }
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&set); err != nil {
		return nil, err
	}
	keys := map[string]ed25519.PublicKey{}
	for _, j := range set.Keys {
		x, err := base64.RawURLEncoding.DecodeString(j.X)
		if j.Kty == "OKP" && j.Crv == "Ed25519" && err == nil && len(x) == ed25519.PublicKeySize {
			keys[j.Kid] = ed25519.PublicKey(x)
		}
	}
	s.mu.Lock()
	s.keys, s.fetched = keys, time.Now()
	s.mu.Unlock()
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return nil, errors.New("unknown key")
}

type redeemed struct {
	Queue      string `json:"queue"`
	TicketHash string `json:"ticket_hash"`
	ExpiresAt  string `json:"expires_at"`
}

// redeem uses the token up at the room (single use), server to server.
func (s *Shop) redeem(ctx context.Context, tok string) (int, redeemed, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.Room+"/api/redeem", nil)
	req.Header.Set("X-Admission-Token", tok)
	res, err := s.cfg.Client.Do(req)
	if err != nil {
		return 0, redeemed{}, err
	}
	defer res.Body.Close()
	var out redeemed
	if res.StatusCode == http.StatusOK {
		if err := json.NewDecoder(io.LimitReader(res.Body, 4096)).Decode(&out); err != nil {
			return 0, out, err
		}
	}
	return res.StatusCode, out, nil
}
