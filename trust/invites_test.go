package trust_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/trust"
)

// fixture is a trust store and a queue on one private Redis (the queue makes the lines the
// invites belong to).
type fixture struct {
	srv *redistest.Server
	q   *queue.Queue
	tr  *trust.Store
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	// Calls may take 10 s (the default, 1 s, fails them on a machine busy with the tests
	// beside them).
	return &fixture{srv: srv, q: queue.New(rdb, queue.Config{OpTimeout: 10 * time.Second}, nil),
		tr: trust.New(rstore.New(rdb, 10*time.Second))}
}

func (f *fixture) mkQueue(t testing.TB, name string) {
	t.Helper()
	rate, maxActive := 0.0, int64(0)
	if _, _, err := f.q.Put(context.Background(), name, queue.SettingsPatch{RatePerSecond: &rate, MaxActive: &maxActive}); err != nil {
		t.Fatal(err)
	}
}

func mkInvites(t testing.TB, f *fixture, name string, spec trust.InviteSpec) []trust.Invite {
	t.Helper()
	ins, err := f.tr.CreateInvites(context.Background(), name, spec)
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

func TestInvitesCreateListRevoke(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "inv")

	ins := mkInvites(t, f, "inv", trust.InviteSpec{Count: 3, Lane: queue.LaneBypass})
	seen := map[string]bool{}
	for _, in := range ins {
		// 128 random bits, URL-safe.
		if len(in.Code) != 22 || strings.Trim(in.Code, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" || seen[in.Code] {
			t.Fatalf("code %q", in.Code)
		}
		seen[in.Code] = true
		if in.Lane != queue.LaneBypass || in.UsesLeft != 1 || in.MaxUses != 1 {
			t.Fatalf("defaults: %+v", in)
		}
		if d := time.Until(in.ExpiresAt); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour {
			t.Fatalf("default expiry in %v, want 7 days", d)
		}
	}
	exp := time.Now().Add(48 * time.Hour).Truncate(time.Millisecond)
	pri := mkInvites(t, f, "inv", trust.InviteSpec{Count: 2, Lane: queue.LanePriority, MaxUses: 5, ExpiresAt: exp})
	if pri[0].UsesLeft != 5 || !pri[0].ExpiresAt.Equal(exp) {
		t.Fatalf("priority invite %+v", pri[0])
	}
	list, err := f.tr.Invites(ctx, "inv")
	if err != nil || len(list) != 5 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	if err := f.tr.RevokeInvite(ctx, "inv", ins[1].Code); err != nil {
		t.Fatal(err)
	}
	if err := f.tr.RevokeInvite(ctx, "inv", ins[1].Code); !errors.Is(err, trust.ErrInviteNotFound) {
		t.Fatalf("revoke twice: %v", err)
	}
	if err := f.tr.RevokeInvite(ctx, "inv", "no-such-code-at-all"); !errors.Is(err, trust.ErrInviteNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
	if err := f.tr.RevokeInvite(ctx, "nope", ins[0].Code); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("revoke in an unknown queue: %v", err)
	}
	// What cannot be a code is not looked up, yet an unknown queue is still told from an
	// unknown code.
	if err := f.tr.RevokeInvite(ctx, "inv", "not a code: at all"); !errors.Is(err, trust.ErrInviteNotFound) {
		t.Fatalf("revoke a malformed code: %v", err)
	}
	if err := f.tr.RevokeInvite(ctx, "nope", "not a code: at all"); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("revoke a malformed code in an unknown queue: %v", err)
	}
	list, _ = f.tr.Invites(ctx, "inv")
	for _, in := range list {
		if in.Code == ins[1].Code {
			t.Fatal("revoked code still listed")
		}
	}
	if len(list) != 4 {
		t.Fatalf("%d listed after a revoke, want 4", len(list))
	}
	if _, err := f.tr.Invites(ctx, "nope"); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("list of an unknown queue: %v", err)
	}
	if _, err := f.tr.CreateInvites(ctx, "nope", trust.InviteSpec{Count: 1, Lane: queue.LaneBypass}); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("create in an unknown queue: %v", err)
	}

	t.Run("values out of range name their field", func(t *testing.T) {
		for _, c := range []struct {
			spec  trust.InviteSpec
			field string
		}{
			{trust.InviteSpec{Count: 0, Lane: queue.LaneBypass}, "count"},
			{trust.InviteSpec{Count: 10001, Lane: queue.LaneBypass}, "count"},
			{trust.InviteSpec{Count: 1, Lane: queue.LaneNormal}, "lane"},
			{trust.InviteSpec{Count: 1, Lane: "vip"}, "lane"},
			{trust.InviteSpec{Count: 1, Lane: queue.LanePriority, MaxUses: -1}, "max_uses"},
			{trust.InviteSpec{Count: 1, Lane: queue.LanePriority, MaxUses: 1_000_001}, "max_uses"},
			{trust.InviteSpec{Count: 1, Lane: queue.LanePriority, ExpiresAt: time.Now().Add(-time.Second)}, "expires_at"},
			{trust.InviteSpec{Count: 1, Lane: queue.LanePriority, ExpiresAt: time.Now().Add(91 * 24 * time.Hour)}, "expires_at"},
		} {
			_, err := f.tr.CreateInvites(ctx, "inv", c.spec)
			var ie *queue.InvalidError
			if !errors.As(err, &ie) || ie.Field != c.field {
				t.Errorf("%+v: %v, want an invalid %s", c.spec, err, c.field)
			}
		}
	})

	t.Run("10000 codes in one call", func(t *testing.T) {
		f.mkQueue(t, "many")
		ins := mkInvites(t, f, "many", trust.InviteSpec{Count: 10000, Lane: queue.LanePriority})
		list, err := f.tr.Invites(ctx, "many")
		if err != nil || len(list) != 10000 || len(ins) != 10000 {
			t.Fatalf("made %d, listed %d (%v)", len(ins), len(list), err)
		}
	})
}
