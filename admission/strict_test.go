package admission_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/admission"
)

const b64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// TestOneSpellingPerToken: of the 64 last-character variants of each segment of a real
// token (header, payload, signature), exactly one verifies — the token as signed — though
// the lenient base64url decoder reads several of them as the same bytes; padding and the
// standard alphabet are refused too.
func TestOneSpellingPerToken(t *testing.T) {
	t.Parallel()
	r := newRing(t, store(t), admission.Config{})
	tok, err := r.Sign(claims(time.Now().Add(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	parts := strings.Split(tok, ".")
	for i, seg := range []string{"header", "payload", "signature"} {
		orig, _ := base64.RawURLEncoding.DecodeString(parts[i])
		verified, sameBytes := 0, 0
		for _, c := range b64url {
			p := append([]string(nil), parts...)
			p[i] = p[i][:len(p[i])-1] + string(c)
			variant := strings.Join(p, ".")
			if b, err := base64.RawURLEncoding.DecodeString(p[i]); err == nil && string(b) == string(orig) {
				sameBytes++
			}
			if _, err := r.Verify(ctx, variant); err == nil {
				verified++
				if variant != tok {
					t.Errorf("%s: the variant %q verifies", seg, variant)
				}
			}
		}
		if verified != 1 {
			t.Errorf("%s: %d of 64 last-character variants verify, want exactly 1", seg, verified)
		}
		t.Logf("%s: %d of 64 variants are the same bytes to a lenient decoder; %d verifies", seg, sameBytes, verified)
		if seg == "signature" && sameBytes != 16 {
			t.Errorf("signature: %d spellings of the same bytes, want 16 (4 unused bits)", sameBytes)
		}
	}
	for name, variant := range map[string]string{
		"padded signature":  tok + "==",
		"padded header":     parts[0] + "=." + parts[1] + "." + parts[2],
		"standard alphabet": strings.NewReplacer("-", "+", "_", "/").Replace(tok),
	} {
		if variant == tok {
			continue
		}
		if _, err := r.Verify(ctx, variant); !errors.Is(err, admission.ErrMalformed) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
}
