package admission_test

import (
	"context"
	"testing"
	"time"

	"github.com/waitroom/waitroom/admission"
)

// BenchmarkSign is the cost of handing out one signed token (join, status or stream);
// it reports the token's size.
func BenchmarkSign(b *testing.B) {
	r := newRing(b, store(b), admission.Config{})
	c := claims(time.Now().Add(5 * time.Minute))
	tok, _ := r.Sign(c)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Sign(c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tok)), "token_bytes")
}

// BenchmarkVerify is the cost of checking one token's signature and claims (every guard
// and /api/verify), the Redis round trip of the single-use check aside.
func BenchmarkVerify(b *testing.B) {
	r := newRing(b, store(b), admission.Config{})
	tok, _ := r.Sign(claims(time.Now().Add(5 * time.Minute)))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}
