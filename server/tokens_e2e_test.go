package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/trust"
)

// tokenClaims decodes the claims of a signed admission token without verifying it (the
// tests that need verification use the JWKS or the guards).
func tokenClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", tok)
	}
	return decodeSeg(t, parts[1])
}

// decodeSeg decodes one base64url JSON segment of a JWS.
func decodeSeg(t *testing.T, seg string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// jtiOf is the token id Redis stores for a signed admission token.
func jtiOf(t *testing.T, tok string) string {
	t.Helper()
	s, _ := tokenClaims(t, tok)["jti"].(string)
	return s
}

// ring is a KeyRing on the test deployment's Redis and secret: the tests sign tokens the
// server would never make (expired, other claims) with the deployment's own key.
func ring(t *testing.T, redisURL string) *admission.KeyRing {
	t.Helper()
	rdb := redistest.ClientURL(t, redisURL) // a plain or a cluster URL
	// A generous Redis budget: this reader is no part of what is tested (see tolerantEnv).
	k, err := admission.NewKeyRing(trust.New(rstore.New(rdb, 10*time.Second)), admission.Config{Secret: []byte(baseEnv("", "", nil)["WR_SECRET"])})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return k
}

// verifyCall asks GET /api/verify as a gateway does, passing the buyer's headers.
func verifyCall(t *testing.T, in *instance, ticket, token, queueName string) (int, string) {
	t.Helper()
	hdr := []string{"X-Admission-Token", token}
	if queueName != "" {
		hdr = append(hdr, "X-Waitroom-Queue", queueName)
	}
	var e errResp
	res := call(t, "GET", in.url+"/api/verify", ticket, nil, &e, hdr...)
	return res.StatusCode, e.Error.Code
}

// TestSignedTokensEndToEnd: the token handed out by join/status/stream on two instances is
// the same JWS; the JWKS alone verifies it; the order guard, /api/verify and /api/redeem
// accept it exactly as the contract says and refuse every forgery with the documented code.
func TestSignedTokensEndToEnd(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	db := testDB(t)
	env := tolerantEnv(rs.URL(), db, nil)
	ab := startInProcessAll(t, env, "ta", "tb")
	a, b := ab[0], ab[1]
	admin(t, a, "PUT", "/admin/api/products/jws-shoe", map[string]any{"name": "Shoe", "price": 100, "stock": 50, "queue": "jws"})
	tickets, tokens := admittedUsers(t, a, "jws", 6)
	buy := map[string]any{"product_id": "jws-shoe", "quantity": 1}

	// The same bytes from status on the other instance and from a stream there.
	var st joinResp
	call(t, "GET", b.url+"/api/queues/jws/status", tickets[0], nil, &st)
	s := mustStream(t, b.url+"/api/queues/jws/stream", tickets[0])
	ev, ok := s.next(t, 30*time.Second, "admitted")
	s.close()
	if !ok || st.Token != tokens[0] || ev.Data["token"] != tokens[0] {
		t.Fatalf("one admission, three tokens:\nstatus A %s\nstatus B %s\nstream B %v", tokens[0], st.Token, ev.Data["token"])
	}
	c := tokenClaims(t, tokens[0])
	tk := strings.Split(tickets[0], ".")[1]
	if c["iss"] != "waitroom" || c["sub"] != tk || c["aud"] != "jws" || len(jtiOf(t, tokens[0])) != 36 ||
		num(c["exp"])-num(c["iat"]) != 300 {
		t.Fatalf("claims %v", c)
	}

	// Offline: only the JWKS (what a PHP or Node backend does).
	var set struct {
		Keys []struct{ Kid, X string }
	}
	res := call(t, "GET", b.url+"/.well-known/jwks.json", "", nil, &set)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || len(set.Keys) != 1 {
		t.Fatalf("jwks: %d %s %+v", res.StatusCode, res.Header.Get("Content-Type"), set)
	}
	parts := strings.Split(tokens[0], ".")
	pub, _ := base64.RawURLEncoding.DecodeString(set.Keys[0].X)
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	if !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatal("the JWKS key does not verify the token")
	}

	// /api/verify: 204 for the right ticket (and queue), never consuming.
	for range 2 {
		if code, e := verifyCall(t, b, tickets[0], tokens[0], "jws"); code != 204 {
			t.Fatalf("verify: %d %s", code, e)
		}
	}
	if code, e := verifyCall(t, b, tickets[0], tokens[0], "other"); code != 403 || e != "token_wrong_queue" {
		t.Fatalf("verify for another queue: %d %s", code, e)
	}
	if code, e := verifyCall(t, b, tickets[1], tokens[0], ""); code != 403 || e != "token_not_yours" {
		t.Fatalf("verify with another ticket: %d %s", code, e)
	}
	if code, e := verifyCall(t, b, tickets[0], "", ""); code != 401 || e != "token_missing" {
		t.Fatalf("verify without a token: %d %s", code, e)
	}
	if res, e, _ := order(t, b, tickets[0], tokens[0], "", buy); res.StatusCode != 201 {
		t.Fatalf("order after verify: %d %s", res.StatusCode, e.Error.Code)
	}
	if code, e := verifyCall(t, a, tickets[0], tokens[0], ""); code != 401 || e != "token_invalid" {
		t.Fatalf("verify after use: %d %s", code, e)
	}

	// Forgeries and wrong tokens at the order guard.
	k := ring(t, rs.URL())
	jti := jtiOf(t, tokens[1])
	now := time.Now()
	sign := func(cl admission.Claims) string {
		tok, err := k.Sign(cl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	expired := sign(admission.Claims{Subject: strings.Split(tickets[1], ".")[1], Audience: "jws", ID: jti,
		IssuedAt: now.Add(-10 * time.Minute).Unix(), Expires: now.Add(-time.Minute).Unix()})
	wrongAud := sign(admission.Claims{Subject: strings.Split(tickets[1], ".")[1], Audience: "elsewhere", ID: jti,
		IssuedAt: now.Unix(), Expires: now.Add(time.Minute).Unix()})
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + strings.Split(tokens[1], ".")[1] + "."
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(tokenClaims(t, tokens[1])))
	hs.Header["kid"] = set.Keys[0].Kid
	hsTok, _ := hs.SignedString(pub)
	hsX, _ := hs.SignedString([]byte(set.Keys[0].X))
	hdr := tokenHeader(t, tokens[1])
	hdr["kid"] = "no-such-key"
	unknownKid := encodeSeg(t, hdr) + "." + strings.Join(strings.Split(tokens[1], ".")[1:], ".")
	cases := []struct {
		name, token string
		status      int
		code        string
	}{
		{"malformed", "a.b.c", 401, "token_invalid"},
		{"alg none", none, 401, "token_invalid"},
		{"HS256 with the public key", hsTok, 401, "token_invalid"},
		{"HS256 with the JWK x", hsX, 401, "token_invalid"},
		{"unknown kid", unknownKid, 401, "token_invalid"},
		{"expired", expired, 401, "token_expired"},
		{"wrong aud", wrongAud, 403, "token_wrong_queue"},
	}
	for _, cs := range cases {
		if res, e, _ := order(t, a, tickets[1], cs.token, "", buy); res.StatusCode != cs.status || e.Error.Code != cs.code {
			t.Errorf("order with %s: %d %s, want %d %s", cs.name, res.StatusCode, e.Error.Code, cs.status, cs.code)
		}
		if code, e := verifyCall(t, b, tickets[1], cs.token, ""); code != cs.status || e != cs.code {
			t.Errorf("verify with %s: %d %s, want %d %s", cs.name, code, e, cs.status, cs.code)
		}
	}
	// None of them used the real token up.
	if res, e, _ := order(t, a, tickets[1], tokens[1], "", buy); res.StatusCode != 201 {
		t.Fatalf("the real token after the forgeries: %d %s", res.StatusCode, e.Error.Code)
	}

	// The bare UUID of a token issued before the upgrade is still accepted by the guard.
	if res, e, _ := order(t, a, tickets[2], jtiOf(t, tokens[2]), "", buy); res.StatusCode != 201 {
		t.Fatalf("bare token: %d %s", res.StatusCode, e.Error.Code)
	}

	// /api/redeem: once, then 409; no ticket needed.
	var r struct {
		Queue      string `json:"queue"`
		TicketHash string `json:"ticket_hash"`
		ExpiresAt  string `json:"expires_at"`
	}
	res = call(t, "POST", b.url+"/api/redeem", "", nil, &r, "X-Admission-Token", tokens[3])
	sum := sha256.Sum256([]byte(strings.Split(tickets[3], ".")[1]))
	if res.StatusCode != 200 || r.Queue != "jws" || r.TicketHash != hex.EncodeToString(sum[:]) || r.ExpiresAt == "" {
		t.Fatalf("redeem: %d %+v", res.StatusCode, r)
	}
	var e errResp
	if res := call(t, "POST", a.url+"/api/redeem", "", nil, &e, "X-Admission-Token", tokens[3]); res.StatusCode != 409 || e.Error.Code != "token_used" {
		t.Fatalf("second redeem: %d %s", res.StatusCode, e.Error.Code)
	}
	if res, e, _ := order(t, a, tickets[3], tokens[3], "", buy); res.StatusCode != 401 {
		t.Fatalf("order with a redeemed token: %d %s", res.StatusCode, e.Error.Code)
	}
	for name, tok := range map[string]string{"expired": expired, "forged": hsTok, "missing": ""} {
		var e errResp
		res := call(t, "POST", a.url+"/api/redeem", "", nil, &e, "X-Admission-Token", tok)
		if res.StatusCode != 401 {
			t.Errorf("redeem %s: %d %s", name, res.StatusCode, e.Error.Code)
		}
	}
}

func tokenHeader(t *testing.T, tok string) map[string]any {
	t.Helper()
	return decodeSeg(t, strings.Split(tok, ".")[0])
}

func encodeSeg(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestKeyRotationDuringASale: while users are admitted and buy on two instances, a key
// rotation on one of them refuses no valid token: tokens of the old key keep working,
// the new key signs after the publish delay, and both instances serve it in the JWKS.
func TestKeyRotationDuringASale(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	env := tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_KEY_PUBLISH_DELAY": "1s", "WR_KEY_REFRESH": "200ms", "WR_JWKS_MAX_AGE": "0s"})
	ab := startInProcessAll(t, env, "ra", "rb")
	a, b := ab[0], ab[1]
	admin(t, a, "PUT", "/admin/api/products/rot", map[string]any{"name": "Rot", "price": 1, "stock": 1000, "queue": "rot"})
	buy := map[string]any{"product_id": "rot", "quantity": 1}
	tickets, before := admittedUsers(t, a, "rot", 10)
	oldKid := tokenHeader(t, before[0])["kid"]

	var keys struct {
		Signing string `json:"signing"`
		Keys    []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if res := call(t, "POST", a.url+"/admin/api/keys/rotate", adminToken, nil, &keys); res.StatusCode != 200 ||
		keys.Signing != oldKid || len(keys.Keys) != 2 {
		t.Fatalf("rotate: %d %+v (old kid %v)", res.StatusCode, keys, oldKid)
	}
	newKid := keys.Keys[0].Kid
	// Half the old tokens are used right after the rotation, on the other instance.
	for i := range 5 {
		if res, e, _ := order(t, b, tickets[i], before[i], "", buy); res.StatusCode != 201 {
			t.Fatalf("old-key token %d after rotation: %d %s", i, res.StatusCode, e.Error.Code)
		}
	}
	// After the delay new admissions carry the new kid, on both instances.
	testwait.For(t, 30*time.Second, "the new key signing", func() bool {
		_, toks := admittedUsers(t, b, "rot", 1)
		return tokenHeader(t, toks[0])["kid"] == newKid
	})
	tickets2, after := admittedUsers(t, b, "rot", 5)
	for i := range 5 {
		if kid := tokenHeader(t, after[i])["kid"]; kid != newKid {
			t.Fatalf("token %d signed by %v, want %v", i, kid, newKid)
		}
		if res, e, _ := order(t, a, tickets2[i], after[i], "", buy); res.StatusCode != 201 {
			t.Fatalf("new-key token %d: %d %s", i, res.StatusCode, e.Error.Code)
		}
	}
	// The rest of the old tokens still work, and both keys are published everywhere.
	for i := 5; i < 10; i++ {
		if res, e, _ := order(t, a, tickets[i], before[i], "", buy); res.StatusCode != 201 {
			t.Fatalf("old-key token %d at the end: %d %s", i, res.StatusCode, e.Error.Code)
		}
	}
	for _, in := range []*instance{a, b} {
		var set struct{ Keys []struct{ Kid string } }
		call(t, "GET", in.url+"/.well-known/jwks.json", "", nil, &set)
		if len(set.Keys) != 2 {
			t.Fatalf("%s publishes %d keys", in.id, len(set.Keys))
		}
	}
}

// TestNginxAuthRequest runs deploy/nginx-auth-request.conf, as shipped, under Debian's nginx:
// a checkout that is not Go (nginx serving a file) is reached with a live token of the
// buyer's ticket, and refused without one (401), with another buyer's ticket (403), with a
// token of another queue (403) and after the token expired (401).
func TestNginxAuthRequest(t *testing.T) {
	t.Parallel()
	bin := nginxBinary(t)
	rs := redistest.Start(t)
	in := startProcess(t, "ng", tolerantEnv(rs.URL(), testDB(t), nil))
	shop := t.TempDir()
	if err := os.MkdirAll(filepath.Join(shop, "checkout"), 0o755); err != nil {
		t.Fatal(err)
	}
	const page = "<h1>checkout: pay now</h1>\n"
	if err := os.WriteFile(filepath.Join(shop, "checkout", "index.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	proxy := runNginx(t, bin, "nginx-auth-request.conf", map[string]string{
		"server app1:8080": "server " + strings.TrimPrefix(in.url, "http://"),
		"root /srv/shop;":  "root " + shop + ";",
	})
	via := &instance{t: t, id: "nginx", url: proxy}
	tickets, tokens := admittedUsers(t, in, "drop", 2)
	_, otherTokens := admittedUsers(t, in, "elsewhere", 1)

	checkout := func(ticket, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", proxy+"/checkout/", nil)
		if ticket != "" {
			// The browser's cookie, as set by a join through this origin.
			req.AddCookie(&http.Cookie{Name: "wr_ticket_" + strings.Split(ticket, ".")[0], Value: ticket})
		}
		if token != "" {
			req.Header.Set("X-Admission-Token", token)
		}
		res, err := specClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := checkout(tickets[0], tokens[0]); code != 200 || body != page {
		t.Fatalf("live token: %d %q", code, body)
	}
	if code, body := checkout(tickets[0], tokens[0]); code != 200 || body != page {
		t.Fatalf("verify must not use the token up: %d %q", code, body)
	}
	for name, c := range map[string]struct {
		ticket, token string
		want          int
	}{
		"no token":         {tickets[0], "", 401},
		"no ticket":        {"", tokens[0], 401},
		"another's ticket": {tickets[1], tokens[0], 403},
		"another queue":    {tickets[0], otherTokens[0], 403},
		"forged":           {tickets[0], "eyJhbGciOiJub25lIn0.e30.", 401},
	} {
		if code, _ := checkout(c.ticket, c.token); code != c.want {
			t.Errorf("%s: %d, want %d", name, code, c.want)
		}
	}
	// The JWKS and redeem pass through the same origin for the shop's backend.
	if res := call(t, "GET", via.url+"/.well-known/jwks.json", "", nil, nil); res.StatusCode != 200 {
		t.Fatalf("jwks through nginx: %d", res.StatusCode)
	}
	// Expiry: the token's key lapses, as at the end of its TTL.
	rdb, key := rs.Client(), "wr:{q:drop}:token:"+jtiOf(t, tokens[1])
	rdb.PExpire(context.Background(), key, time.Millisecond)
	testwait.For(t, 30*time.Second, "the token's key to lapse", func() bool {
		return rdb.Exists(context.Background(), key).Val() == 0
	})
	if code, _ := checkout(tickets[1], tokens[1]); code != 401 {
		t.Fatalf("expired token: %d", code)
	}
}

// TestMixedTokenFormats: the two-step upgrade. An instance handing out bare tokens
// (WR_TOKEN_FORMAT=uuid) and one handing out signed tokens accept each other's; with
// WR_ACCEPT_BARE_TOKENS=false a bare token (even a signed token's jti) is refused.
func TestMixedTokenFormats(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	db := testDB(t)
	bare := launchInProcess(t, "mx-uuid", tolerantEnv(rs.URL(), db, map[string]string{"WR_TOKEN_FORMAT": "uuid"}))
	signed := launchInProcess(t, "mx-jws", tolerantEnv(rs.URL(), db, nil))
	strict := launchInProcess(t, "mx-strict", tolerantEnv(rs.URL(), db, map[string]string{"WR_ACCEPT_BARE_TOKENS": "false"}))
	readyAll(t, []*instance{bare, signed, strict})
	admin(t, signed, "PUT", "/admin/api/products/mx", map[string]any{"name": "Mx", "price": 1, "stock": 100, "queue": "mx"})
	buy := map[string]any{"product_id": "mx", "quantity": 1}
	tickets, jws := admittedUsers(t, signed, "mx", 4)
	for i, tk := range tickets[:2] {
		var st joinResp
		call(t, "GET", bare.url+"/api/queues/mx/status", tk, nil, &st)
		if st.Token != jtiOf(t, jws[i]) {
			t.Fatalf("the uuid instance hands out %q, want the bare %q", st.Token, jtiOf(t, jws[i]))
		}
	}
	// A signed token at the uuid instance, a bare one at the jws instance.
	if res, e, _ := order(t, bare, tickets[0], jws[0], "", buy); res.StatusCode != 201 {
		t.Fatalf("signed token at a uuid instance: %d %s", res.StatusCode, e.Error.Code)
	}
	if res, e, _ := order(t, signed, tickets[1], jtiOf(t, jws[1]), "", buy); res.StatusCode != 201 {
		t.Fatalf("bare token at a jws instance: %d %s", res.StatusCode, e.Error.Code)
	}
	// The strict instance: bare refused, signed accepted.
	if res, e, _ := order(t, strict, tickets[2], jtiOf(t, jws[2]), "", buy); res.StatusCode != 401 || e.Error.Code != "token_invalid" {
		t.Fatalf("bare token at a strict instance: %d %s", res.StatusCode, e.Error.Code)
	}
	if res, e, _ := order(t, strict, tickets[2], jws[2], "", buy); res.StatusCode != 201 {
		t.Fatalf("signed token at a strict instance: %d %s", res.StatusCode, e.Error.Code)
	}
	// A token admitted by a leader of the release before (no stored admission time) on a
	// queue whose tokens live 30 min: its signed form verifies everywhere.
	admin(t, signed, "PUT", "/admin/api/queues/mx", map[string]any{"token_ttl_seconds": 1800})
	longTickets, longer := admittedUsers(t, signed, "mx", 1)
	k := "wr:{q:mx}:tickets"
	id := tokenClaims(t, longer[0])["sub"].(string)
	cur := rs.Client().HGet(context.Background(), k, id).Val()
	parts := strings.Split(cur, ":")
	rs.Client().HSet(context.Background(), k, id, strings.Join(parts[:5], ":")) // as an old leader wrote it
	var st joinResp
	res := call(t, "GET", signed.url+"/api/queues/mx/status", longTickets[0], nil, &st)
	if res.StatusCode != 200 || st.Token == "" {
		t.Fatalf("status of an old leader's admission: %d %+v", res.StatusCode, st)
	}
	if c := tokenClaims(t, st.Token); num(c["exp"])-num(c["iat"]) != 86400 {
		t.Fatalf("an old leader's admission: iat should be exp − 24 h: %v", c)
	}
	if code, e := verifyCall(t, strict, longTickets[0], st.Token, "mx"); code != 204 {
		t.Fatalf("an old leader's token, signed now, verified: %d %s", code, e)
	}
}
