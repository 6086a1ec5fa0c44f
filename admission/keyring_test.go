package admission_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/trust"
)

const secret = "0123456789abcdef-test-secret"

func newRing(t testing.TB, ks admission.KeyStore, cfg admission.Config) *admission.KeyRing {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = []byte(secret)
	}
	r, err := admission.NewKeyRing(ks, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// store is a signing-key store on a private Redis.
func store(t testing.TB) *trust.Store {
	return keyStore(redistest.Start(t).Client())
}

// keyStore is the signing-key store on rdb, with the default per-call deadline.
func keyStore(rdb redis.UniversalClient) *trust.Store {
	return trust.New(rstore.New(rdb, 0))
}

func claims(exp time.Time) admission.Claims {
	return admission.Claims{Subject: "ticket-1", Audience: "drop", ID: "0b6f2a4e-8c1d-4f5e-9a7b-3c2d1e0f4a5b",
		IssuedAt: time.Now().Unix(), Expires: exp.Unix()}
}

func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	ks := store(t)
	a := newRing(t, ks, admission.Config{})
	b := newRing(t, ks, admission.Config{}) // a second instance: same keys from Redis
	if a.Signing() == "" || a.Signing() != b.Signing() {
		t.Fatalf("instances sign with %q and %q", a.Signing(), b.Signing())
	}
	c := claims(time.Now().Add(time.Minute))
	ta, err := a.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := b.Sign(c)
	if ta != tb {
		t.Fatalf("the same claims signed on two instances differ:\n%s\n%s", ta, tb)
	}
	got, err := b.Verify(context.Background(), ta)
	if err != nil {
		t.Fatal(err)
	}
	c.Issuer = "waitroom"
	if got != c {
		t.Fatalf("claims %+v, want %+v", got, c)
	}
	// The header: EdDSA with the kid; the payload has exactly the contract's claims.
	parts := strings.Split(ta, ".")
	var hdr, body map[string]any
	decode(t, parts[0], &hdr)
	decode(t, parts[1], &body)
	if hdr["alg"] != "EdDSA" || hdr["kid"] != a.Signing() || hdr["typ"] != "JWT" {
		t.Fatalf("header %v", hdr)
	}
	for _, k := range []string{"iss", "sub", "aud", "jti", "iat", "exp"} {
		if _, ok := body[k]; !ok {
			t.Fatalf("claim %s missing: %v", k, body)
		}
	}
	if len(body) != 6 {
		t.Fatalf("unexpected claims: %v", body)
	}
	// The JWKS alone verifies it (what any backend does offline).
	var set struct {
		Keys []struct{ Kty, Crv, Kid, X, Alg, Use string }
	}
	if err := json.Unmarshal(a.JWKS(), &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks %s: %v", a.JWKS(), err)
	}
	k := set.Keys[0]
	pub, _ := base64.RawURLEncoding.DecodeString(k.X)
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" || k.Use != "sig" || k.Kid != hdr["kid"] ||
		!ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatalf("the JWKS key does not verify the token: %+v", k)
	}
}

func decode(t *testing.T, seg string, out any) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	ks := store(t)
	r := newRing(t, ks, admission.Config{})
	ctx := context.Background()
	good, _ := r.Sign(claims(time.Now().Add(time.Minute)))
	parts := strings.Split(good, ".")
	var set struct{ Keys []struct{ X string } }
	_ = json.Unmarshal(r.JWKS(), &set)
	pub, _ := base64.RawURLEncoding.DecodeString(set.Keys[0].X)

	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(time.Now().Add(time.Minute)))
	hs.Header["kid"] = r.Signing()
	hsTok, _ := hs.SignedString(pub) // HS256 with the public key as the secret
	hsRaw := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(time.Now().Add(time.Minute)))
	hsRaw.Header["kid"] = r.Signing()
	hsRawTok, _ := hsRaw.SignedString([]byte(set.Keys[0].X))
	none := jwt.NewWithClaims(jwt.SigningMethodNone, claims(time.Now().Add(time.Minute)))
	none.Header["kid"] = r.Signing()
	noneTok, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	expired, _ := r.Sign(claims(time.Now().Add(-time.Second)))
	other := newRing(t, store(t), admission.Config{}) // another deployment's key
	foreign, _ := other.Sign(claims(time.Now().Add(time.Minute)))
	otherIss := newRing(t, ks, admission.Config{Issuer: "someone-else"})
	wrongIss, _ := otherIss.Sign(claims(time.Now().Add(time.Minute)))
	noKid := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims(time.Now().Add(time.Minute)))
	_, priv, _ := ed25519.GenerateKey(nil)
	noKidTok, _ := noKid.SignedString(priv)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"waitroom","sub":"ticket-2","aud":"drop","jti":"x","iat":1,"exp":9999999999}`)) + "." + parts[2]

	cases := []struct {
		name, tok string
		want      error
	}{
		{"empty", "", admission.ErrMalformed},
		{"garbage", "not-a-token", admission.ErrMalformed},
		{"two parts", parts[0] + "." + parts[1], admission.ErrMalformed},
		{"huge", strings.Repeat("a", 5000), admission.ErrMalformed},
		{"bad base64", parts[0] + ".!!!." + parts[2], admission.ErrMalformed},
		{"alg none", noneTok, admission.ErrAlgorithm},
		{"HS256 with the public key", hsTok, admission.ErrAlgorithm},
		{"HS256 with the JWK x", hsRawTok, admission.ErrAlgorithm},
		{"expired", expired, admission.ErrExpired},
		{"unknown kid", foreign, admission.ErrUnknownKey},
		{"no kid", noKidTok, admission.ErrUnknownKey},
		{"wrong issuer", wrongIss, admission.ErrClaims},
		{"tampered claims", tampered, admission.ErrSignature},
		{"tampered signature", parts[0] + "." + parts[1] + "." + flip(parts[2]), admission.ErrSignature},
	}
	for _, c := range cases {
		if _, err := r.Verify(ctx, c.tok); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := r.Verify(ctx, good); err != nil {
		t.Fatalf("good token: %v", err)
	}
}

func flip(s string) string {
	b := []byte(s)
	if b[3] == 'A' {
		b[3] = 'B'
	} else {
		b[3] = 'A'
	}
	return string(b)
}

// TestRotation: a new key is published at once, signs after the publish delay; tokens of
// the old key keep verifying everywhere; another instance learns the new key by itself.
func TestRotation(t *testing.T) {
	t.Parallel()
	ks := store(t)
	ctx := context.Background()
	a := newRing(t, ks, admission.Config{PublishDelay: 300 * time.Millisecond})
	b := newRing(t, ks, admission.Config{PublishDelay: 300 * time.Millisecond})
	old := a.Signing()
	before, _ := a.Sign(claims(time.Now().Add(time.Minute)))
	k, err := a.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if k.Kid == old || a.Signing() != old {
		t.Fatalf("rotation: new %s, signing %s (old %s): the new key must not sign before the delay", k.Kid, a.Signing(), old)
	}
	if !strings.Contains(string(a.JWKS()), k.Kid) {
		t.Fatal("the new key is not published at once")
	}
	testwait.For(t, 30*time.Second, "the new key to sign after the delay", func() bool { return a.Signing() == k.Kid })
	after, _ := a.Sign(claims(time.Now().Add(time.Minute)))
	// b has not refreshed: the unknown kid makes it re-read the keys.
	for name, tok := range map[string]string{"old key": before, "new key": after} {
		if _, err := b.Verify(ctx, tok); err != nil {
			t.Fatalf("%s on the other instance: %v", name, err)
		}
	}
	keys := a.Keys()
	if len(keys) != 2 || keys[1].Kid != old || keys[1].Retired.IsZero() || !keys[1].Retired.Equal(keys[0].SignsFrom) {
		t.Fatalf("keys after rotation: %+v", keys)
	}
	// A key retired longer ago than KeepAfterRetire is dropped at the next rotation.
	c := newRing(t, ks, admission.Config{PublishDelay: time.Millisecond, KeepAfterRetire: time.Millisecond})
	time.Sleep(5 * time.Millisecond)
	if _, err := c.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := c.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range c.Keys() {
		if k.Kid == old {
			t.Fatal("a key retired long ago is still published")
		}
	}
}

// TestAnotherSecretOnlyVerifies: an instance with another WR_SECRET cannot unseal the keys;
// it verifies with them but makes its own key to sign (a misconfiguration it logs).
func TestAnotherSecretOnlyVerifies(t *testing.T) {
	t.Parallel()
	ks := store(t)
	a := newRing(t, ks, admission.Config{})
	b := newRing(t, ks, admission.Config{Secret: []byte("another-secret-0123456789")})
	tok, _ := a.Sign(claims(time.Now().Add(time.Minute)))
	if _, err := b.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if b.Signing() == a.Signing() {
		t.Fatal("an instance signs with a key it cannot have unsealed")
	}
}

func FuzzVerify(f *testing.F) {
	ks := store(f)
	r := newRing(f, ks, admission.Config{})
	good, _ := r.Sign(claims(time.Now().Add(time.Hour)))
	f.Add(good)
	f.Add("e30.e30.")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add(strings.Repeat(".", 3))
	f.Fuzz(func(t *testing.T, s string) {
		c, err := r.Verify(context.Background(), s)
		if err == nil && s != good {
			// Only a token this ring signed verifies: the fuzzer cannot forge Ed25519.
			if again, _ := r.Sign(c); again != s {
				t.Fatalf("verified a token it did not sign: %q", s)
			}
		}
	})
}

// TestIssuedAtSkewAndLegacy: iat comes from Redis's clock, so a little in the future is
// accepted; far in the future is refused; a token admitted before signed tokens (no stored
// admission time) verifies whatever its lifetime.
func TestIssuedAtSkewAndLegacy(t *testing.T) {
	t.Parallel()
	r := newRing(t, store(t), admission.Config{})
	ctx := context.Background()
	c := claims(time.Now().Add(time.Minute))
	c.IssuedAt = time.Now().Add(30 * time.Second).Unix()
	tok, _ := r.Sign(c)
	if _, err := r.Verify(ctx, tok); err != nil {
		t.Fatalf("iat 30 s ahead (clock skew): %v", err)
	}
	c.IssuedAt = time.Now().Add(5 * time.Minute).Unix()
	c.Expires = time.Now().Add(10 * time.Minute).Unix()
	tok, _ = r.Sign(c)
	if _, err := r.Verify(ctx, tok); !errors.Is(err, admission.ErrClaims) {
		t.Fatalf("iat 5 min ahead: %v", err)
	}
	exp := time.Now().Add(30 * time.Minute) // a queue with a 30 min token lifetime
	legacy, err := r.IssueMs("drop", "ticket-1", "0b6f2a4e-8c1d-4f5e-9a7b-3c2d1e0f4a5b", 0, exp.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Verify(ctx, legacy)
	if err != nil || got.IssuedAt != exp.Add(-queue.MaxTokenTTL).Unix() {
		t.Fatalf("legacy token: %+v %v", got, err)
	}
}

// TestFirstKeyMadeOnce: instances starting together on a new deployment sign with one key.
func TestFirstKeyMadeOnce(t *testing.T) {
	t.Parallel()
	ks := store(t)
	rings := make([]*admission.KeyRing, 4)
	errs := make(chan error, len(rings))
	for i := range rings {
		r, err := admission.NewKeyRing(ks, admission.Config{Secret: []byte(secret)})
		if err != nil {
			t.Fatal(err)
		}
		rings[i] = r
		go func() { errs <- r.Load(context.Background()) }()
	}
	for range rings {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rings[1:] {
		if r.Signing() != rings[0].Signing() || len(r.Keys()) != 1 {
			t.Fatalf("instances sign with %s and %s (%d keys)", rings[0].Signing(), r.Signing(), len(r.Keys()))
		}
	}
}

// TestUnknownKidWithRedisDown: a token whose key this instance does not know, while the
// keys cannot be re-read, is the store's failure (503), not the token's (401).
func TestUnknownKidWithRedisDown(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t, redistest.Single()) // stopped below
	ks := trust.New(rstore.New(rs.Client(), 300*time.Millisecond))
	r := newRing(t, ks, admission.Config{})
	other := newRing(t, store(t), admission.Config{})
	foreign, _ := other.Sign(claims(time.Now().Add(time.Minute)))
	rs.Stop()
	if _, err := r.Verify(context.Background(), foreign); !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("unknown kid, Redis down: %v", err)
	}
}

// TestOneSpelling: a line break inside a segment (which the base64 decoder would skip) makes
// another spelling of a valid token: refused.
func TestOneSpelling(t *testing.T) {
	t.Parallel()
	r := newRing(t, store(t), admission.Config{})
	tok, _ := r.Sign(claims(time.Now().Add(time.Minute)))
	i := strings.LastIndexByte(tok, '.') + 5
	for _, bad := range []string{tok[:i] + "\n" + tok[i:], tok[:i] + "\r\n" + tok[i:], tok + "\n", " " + tok} {
		if _, err := r.Verify(context.Background(), bad); !errors.Is(err, admission.ErrMalformed) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
