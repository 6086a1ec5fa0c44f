package trust_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/trust"
)

// The key ring's use of this storage (rotation, revocation across instances, the first
// key made once) is tested in admission; these are the storage's own promises.
func TestSigningKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	key := func(kid string) trust.StoredKey {
		return trust.StoredKey{Kid: kid, Public: []byte("pub-" + kid), Sealed: []byte("sealed-" + kid), CreatedMs: 1, SignsFromMs: 2}
	}
	byKid := func(keys []trust.StoredKey) map[string]trust.StoredKey {
		m := map[string]trust.StoredKey{}
		for _, k := range keys {
			m[k.Kid] = k
		}
		return m
	}

	if keys, revoked, err := f.tr.SigningKeys(ctx); err != nil || len(keys) != 0 || len(revoked) != 0 {
		t.Fatalf("a new deployment: %v %v %v", keys, revoked, err)
	}
	if err := f.tr.PutSigningKeys(ctx, []trust.StoredKey{key("a"), key("b"), key("c")}, nil); err != nil {
		t.Fatal(err)
	}
	retired := key("a")
	retired.RetiredMs = 3
	if err := f.tr.PutSigningKeys(ctx, []trust.StoredKey{retired}, []string{"c"}); err != nil {
		t.Fatal(err)
	}
	keys, _, err := f.tr.SigningKeys(ctx)
	if m := byKid(keys); err != nil || len(m) != 2 || m["a"].RetiredMs != 3 || string(m["b"].Sealed) != "sealed-b" {
		t.Fatalf("after a write and a drop: %+v %v", keys, err)
	}

	if err := f.tr.RevokeSigningKey(ctx, "b", 42, []trust.StoredKey{key("a")}, nil); err != nil {
		t.Fatal(err)
	}
	keys, revoked, err := f.tr.SigningKeys(ctx)
	if m := byKid(keys); err != nil || len(m) != 1 || m["a"].RetiredMs != 0 || revoked["b"] != 42 || len(revoked) != 1 {
		t.Fatalf("after a revocation: %+v %v %v", keys, revoked, err)
	}
	// A revoked key written back (by an instance that had not read the revocation) stays out.
	if err := f.tr.PutSigningKeys(ctx, []trust.StoredKey{key("b")}, nil); err != nil {
		t.Fatal(err)
	}
	if keys, _, _ := f.tr.SigningKeys(ctx); len(keys) != 1 || keys[0].Kid != "a" {
		t.Fatalf("a revoked key written back is read: %+v", keys)
	}
	// Forgetting a mark makes the kid a key like any other again.
	if err := f.tr.RevokeSigningKey(ctx, "d", 43, nil, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	keys, revoked, err = f.tr.SigningKeys(ctx)
	if m := byKid(keys); err != nil || len(m) != 2 || m["b"].Kid != "b" || len(revoked) != 1 || revoked["d"] != 43 {
		t.Fatalf("after forgetting a mark: %+v %v %v", keys, revoked, err)
	}

	t.Run("the first-key lock is taken once until it expires", func(t *testing.T) {
		ok, err := f.tr.LockFirstSigningKey(ctx, time.Second)
		if err != nil || !ok {
			t.Fatalf("first lock: %v %v", ok, err)
		}
		if ok, err := f.tr.LockFirstSigningKey(ctx, time.Second); err != nil || ok {
			t.Fatalf("second lock: %v %v", ok, err)
		}
	})
}

// A Redis that does not answer is ErrUnavailable, as for the queue.
func TestSigningKeysRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Single()) // stopped below
	tr := trust.New(rstore.New(srv.Client(), 300*time.Millisecond))
	srv.Stop()
	if _, _, err := tr.SigningKeys(context.Background()); !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("read with Redis down: %v", err)
	}
}
