package admission_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/internal/testwait"
)

// TestKeyRevocation: the key that signs cannot be revoked; once another signs, revoking
// it removes it from the JWKS and verification (ErrKeyRevoked) on this instance at once
// and on another at its refresh; a key written back by an instance that has not read the
// revocation stays revoked; a key that waits to sign can be revoked and the signing key
// then keeps signing.
func TestKeyRevocation(t *testing.T) {
	t.Parallel()
	ks := store(t)
	ctx := context.Background()
	a := newRing(t, ks, admission.Config{PublishDelay: time.Millisecond})
	b := newRing(t, ks, admission.Config{Refresh: 20 * time.Millisecond})
	bctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(bctx) }()
	t.Cleanup(func() { stop(); <-done })

	old := a.Signing()
	tokOld, _ := a.Sign(claims(time.Now().Add(time.Minute)))
	if _, err := a.Revoke(ctx, old); !errors.Is(err, admission.ErrKeySigning) {
		t.Fatalf("revoke the signing key: %v", err)
	}
	if _, err := a.Revoke(ctx, "no-such-kid"); !errors.Is(err, admission.ErrUnknownKey) {
		t.Fatalf("revoke an unknown kid: %v", err)
	}
	stored, _, err := ks.SigningKeys(ctx)
	if err != nil || len(stored) != 1 {
		t.Fatalf("stored keys: %v %v", stored, err)
	}
	k, err := a.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the new key signs", func() bool { return a.Signing() == k.Kid })
	tokNew, _ := a.Sign(claims(time.Now().Add(time.Minute)))

	if _, err := a.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(ctx, tokOld); !errors.Is(err, admission.ErrKeyRevoked) {
		t.Fatalf("a token of the revoked key here: %v", err)
	}
	if strings.Contains(string(a.JWKS()), old) || len(a.Keys()) != 1 {
		t.Fatalf("the revoked key is still published: %s", a.JWKS())
	}
	testwait.For(t, 10*time.Second, "the other instance refuses the revoked key", func() bool {
		_, err := b.Verify(ctx, tokOld)
		return errors.Is(err, admission.ErrKeyRevoked) && !strings.Contains(string(b.JWKS()), old)
	})
	for _, r := range []*admission.KeyRing{a, b} {
		if _, err := r.Verify(ctx, tokNew); err != nil {
			t.Fatalf("a token of the signing key: %v", err)
		}
	}
	if _, err := a.Revoke(ctx, old); !errors.Is(err, admission.ErrUnknownKey) {
		t.Fatalf("revoke again: %v", err)
	}

	// An instance of the release before rotating with the keys it read before the
	// revocation writes the key back: it stays revoked here.
	if err := ks.PutSigningKeys(ctx, stored, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(ctx, tokOld); !errors.Is(err, admission.ErrKeyRevoked) {
		t.Fatalf("a revoked key written back: %v", err)
	}

	// A key waiting to sign is revoked; the signing key keeps signing with no successor.
	c := newRing(t, ks, admission.Config{PublishDelay: time.Hour})
	p, err := c.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, p.Kid); err != nil {
		t.Fatal(err)
	}
	keys := c.Keys()
	if c.Signing() != k.Kid || len(keys) != 1 || keys[0].Kid != k.Kid || !keys[0].Retired.IsZero() {
		t.Fatalf("after revoking the waiting key: signing %s, keys %+v", c.Signing(), keys)
	}
	if _, err := c.Revoke(ctx, k.Kid); !errors.Is(err, admission.ErrKeySigning) {
		t.Fatalf("revoke the signing key: %v", err)
	}
}
