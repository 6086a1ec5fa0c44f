package web

import (
	"encoding/base64"
	"testing"
)

// The order store records one id per admission: a signed token's jti, the bare token
// itself, in one spelling.
func TestOrderTokenID(t *testing.T) {
	t.Parallel()
	const id = "6f1c1f2e-8a4b-4c1d-9e2f-0a1b2c3d4e5f"
	seg := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	jws := func(payload string) string { return seg(`{"alg":"EdDSA","kid":"k"}`) + "." + seg(payload) + ".c2ln" }
	for _, c := range []struct{ raw, want string }{
		{jws(`{"iss":"waitroom","sub":"t","aud":"q","jti":"` + id + `","iat":1,"exp":2}`), id},
		{id, id},
		{"6F1C1F2E-8A4B-4C1D-9E2F-0A1B2C3D4E5F", id},
		{jws(`{"jti":"not-a-uuid"}`), ""},
		{jws(`{"sub":"t"}`), ""},
		{jws(`[1]`), ""},
		{"a.!!!.c", ""},
		{"", ""},
		{"not-a-token", ""},
	} {
		if got := orderTokenID(c.raw); got != c.want {
			t.Errorf("orderTokenID(%q) = %q, want %q", c.raw, got, c.want)
		}
	}
}
