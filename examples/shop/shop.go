// Package shop is an example shop on another site than the waiting room, for both ways of
// putting the room in front of it (README, "Put it in front of your shop"):
//
//   - the redirect flow (redirect.html): the buyer goes to the room's page with
//     ?return_to=, comes back with the signed token in the fragment (#wr_token=…), and this
//     backend verifies it offline with the room's JWKS and redeems it once (POST
//     /api/redeem) before opening its own session;
//   - the embedded widget (embed.html): the room's /static/waitroom.js on this page joins,
//     streams and orders across origins (CORS; the ticket travels as a Bearer token).
//
// The pages are static files (no build step); the handler only fills in the room's address
// and queue. The backend uses no code of the waiting room: only its public JWKS and redeem
// endpoint, as a PHP or Node backend would.
package shop

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

//go:embed static
var files embed.FS

// Config configures the example shop.
type Config struct {
	Room   string       // the waiting room's base URL, e.g. https://line.shop.example
	Queue  string       // the queue in front of the shop
	Issuer string       // the room's token issuer (WR_ISSUER; default "waitroom")
	Client *http.Client // for the JWKS and redeem calls (default: 5 s timeout)
}

// Shop is the example shop's handler.
type Shop struct {
	cfg Config

	mu       sync.Mutex
	keys     map[string]ed25519.PublicKey
	fetched  time.Time
	sessions map[string]string // session id -> ticket hash
}

// New returns the shop.
func New(cfg Config) *Shop {
	cfg.Room = strings.TrimRight(cfg.Room, "/")
	if cfg.Issuer == "" {
		cfg.Issuer = "waitroom"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 5 * time.Second}
	}
	return &Shop{cfg: cfg, sessions: map[string]string{}}
}

func (s *Shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/shop/api/admit" && r.Method == http.MethodPost:
		s.admit(w, r)
	case r.URL.Path == "/shop/api/session" && r.Method == http.MethodGet:
		s.session(w, r)
	case r.URL.Path == "/favicon.ico":
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet:
		s.page(w, r)
	default:
		http.NotFound(w, r)
	}
}

// page serves a static page with the room's address and queue filled in.
func (s *Shop) page(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	if name == "" {
		name = "index.html"
	}
	b, err := files.ReadFile("static/" + name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	b = bytes.ReplaceAll(b, []byte("__ROOM__"), []byte(s.cfg.Room))
	b = bytes.ReplaceAll(b, []byte("__QUEUE__"), []byte(s.cfg.Queue))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(b)
}

type admitted struct {
	OK         bool   `json:"ok"`
	Queue      string `json:"queue,omitempty"`
	TicketHash string `json:"ticket_hash,omitempty"`
	Error      string `json:"error,omitempty"`
}

// admit takes the token the page found in its fragment: verified offline (JWKS), then
// redeemed once at the room; only then does the shop open its own session.
func (s *Shop) admit(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&body); err != nil || body.Token == "" {
		reply(w, 400, admitted{Error: "no token"})
		return
	}
	claims, err := s.verify(r.Context(), body.Token)
	if err != nil {
		reply(w, 401, admitted{Error: "token refused: " + err.Error()})
		return
	}
	code, red, err := s.redeem(r.Context(), body.Token)
	switch {
	case err != nil:
		reply(w, 502, admitted{Error: "the waiting room could not be asked: " + err.Error()})
		return
	case code == http.StatusConflict:
		reply(w, 409, admitted{Error: "this token was used already"})
		return
	case code != http.StatusOK:
		reply(w, 401, admitted{Error: fmt.Sprintf("the waiting room refused the token (%d)", code)})
		return
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	sid := hex.EncodeToString(id[:])
	s.mu.Lock()
	s.sessions[sid] = red.TicketHash
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "shop_session", Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	reply(w, 200, admitted{OK: true, Queue: claims["aud"].(string), TicketHash: red.TicketHash})
}

func (s *Shop) session(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie("shop_session")
	s.mu.Lock()
	h, ok := "", false
	if err == nil {
		h, ok = s.sessions[c.Value]
	}
	s.mu.Unlock()
	if !ok {
		reply(w, 401, admitted{Error: "no session"})
		return
	}
	reply(w, 200, admitted{OK: true, TicketHash: h})
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

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
