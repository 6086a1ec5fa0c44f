package main

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// tokenClaims decodes the claims of a signed admission token without verifying it (the
// tests that need verification use the JWKS or the guards).
func tokenClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// jtiOf is the token id Redis stores for a signed admission token.
func jtiOf(t *testing.T, tok string) string {
	t.Helper()
	s, _ := tokenClaims(t, tok)["jti"].(string)
	return s
}
