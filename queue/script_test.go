package queue

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// The contract of join.lua and admit.lua (script.go, errors.go) on both Redis
// implementations the server runs on: redis-server, and miniredis, the zero-config default,
// whose Lua is another interpreter with its own cjson and redis.error_reply. Every named
// refusal reaches its package error, and the answers' fields reach Place and TickResult.
func TestScriptContract(t *testing.T) {
	t.Parallel()
	for _, backend := range []struct {
		name string
		open func(t *testing.T) redis.UniversalClient
	}{
		{"redis", func(t *testing.T) redis.UniversalClient { return redistest.Start(t).Client() }},
		{"miniredis", func(t *testing.T) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
	} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			rdb := backend.open(t)
			q := New(rdb, Config{OpTimeout: 10 * time.Second}, nil)
			t.Run("refusals are named", func(t *testing.T) { testRefusals(t, q, rdb) })
			t.Run("a join and a tick answer by name", func(t *testing.T) { testAnswers(t, q) })
			t.Run("the freeze runs in a join, the draw places in batches", func(t *testing.T) { testFreezeByJoin(t, q, rdb) })
		})
	}
}

func put(t *testing.T, q *Queue, name string, p SettingsPatch) {
	t.Helper()
	if _, _, err := q.Put(context.Background(), name, p); err != nil {
		t.Fatal(err)
	}
}

func ptrTo[T any](v T) *T { return &v }

func testRefusals(t *testing.T, q *Queue, rdb redis.UniversalClient) {
	ctx := context.Background()
	signer := NewSigner([]byte("test-secret"))
	join := func(name string, o JoinOptions) error {
		tk, _ := signer.New(name)
		_, created, err := q.JoinWith(ctx, tk, o)
		if err == nil || created {
			t.Errorf("%s: created %v, err %v; want a refusal", name, created, err)
		}
		return err
	}
	put(t, q, "open", SettingsPatch{RatePerSecond: ptrTo(10.0)})
	put(t, q, "closed", SettingsPatch{Closed: ptrTo(true)})
	put(t, q, "reject", SettingsPatch{Method: ptrTo(MethodReject)})
	put(t, q, "sold", SettingsPatch{})
	if err := q.SetSoldOut(ctx, "sold", true, 1); err != nil {
		t.Fatal(err)
	}
	put(t, q, "ended", SettingsPatch{})
	if err := rdb.HSet(ctx, rstore.KeysFor("ended").Cfg(), "ended", "1").Err(); err != nil {
		t.Fatal(err)
	}
	put(t, q, "pow", SettingsPatch{PowDifficulty: ptrTo(12)})
	put(t, q, "capped", SettingsPatch{PlacesPerIP: ptrTo(int64(1))})
	tk, _ := signer.New("capped")
	if _, _, err := q.JoinFrom(ctx, tk, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(time.Hour)
	for _, c := range []struct {
		what      string
		err, want error
	}{
		{"UNKNOWN_QUEUE", join("nosuch", JoinOptions{}), ErrQueueNotFound},
		{"CLOSED", join("closed", JoinOptions{}), ErrQueueClosed},
		{"NOT_OPEN", join("reject", JoinOptions{}), ErrQueueNotOpen},
		{"SOLD_OUT", join("sold", JoinOptions{}), ErrSoldOut},
		{"ENDED", join("ended", JoinOptions{}), ErrQueueEnded},
		{"INVITE_INVALID", join("open", JoinOptions{Invite: "NOSUCHCODE"}), ErrInviteInvalid},
		{"TOO_MANY_PLACES", join("capped", JoinOptions{Client: "192.0.2.1"}), ErrTooManyPlaces},
		{"POW_INVALID", join("pow", JoinOptions{Pow: PowProof{ID: "c1", Difficulty: 12, Expires: time.Now().Add(-time.Second)}}), ErrPowInvalid},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.err, c.want)
		}
	}
	for what, o := range map[string]JoinOptions{
		"POW_REQUIRED": {},
		"POW_TOO_EASY": {Pow: PowProof{ID: "c2", Difficulty: 8, Expires: hour}},
	} {
		var pr *PowRequiredError
		if err := join("pow", o); !errors.As(err, &pr) || pr.Difficulty != 12 {
			t.Errorf("%s: %v, want a *PowRequiredError of 12 bits", what, err)
		}
	}
	stranger, _ := signer.New("open")
	if _, err := q.Status(ctx, stranger); !errors.Is(err, ErrNoPlace) {
		t.Errorf("NO_PLACE: %v, want %v", err, ErrNoPlace)
	}
	// FENCED: a tick under a fencing token that is not the lease's changes nothing.
	a := NewAdmitter(q, AdmitConfig{Owner: "contract"})
	if r, err := a.tick(ctx, "open", "nobody", 99, 10, 0, 0, false); err != nil || !r.fenced {
		t.Errorf("FENCED: %+v %v, want a fenced result", r, err)
	}
}

func testAnswers(t *testing.T, q *Queue) {
	ctx := context.Background()
	signer := NewSigner([]byte("test-secret"))
	const name = "answers"
	put(t, q, name, SettingsPatch{RatePerSecond: ptrTo(1000.0), PriorityShare: ptrTo(0.25)})
	var tks []Ticket
	for i := range 3 {
		tk, _ := signer.New(name)
		p, created, err := q.Join(ctx, tk)
		if err != nil || !created {
			t.Fatalf("join %d: created %v, %v", i, created, err)
		}
		if p.State != StateWaiting || p.Seq != int64(i+1) || p.Position != int64(i+1) || p.Waiting != int64(i+1) ||
			p.Lane != LaneNormal || p.Rate != 1000 || p.Paused || p.Method != MethodFIFO || !p.TokenExpiresAt.IsZero() {
			t.Fatalf("join %d: %+v", i, p)
		}
		tks = append(tks, tk)
	}
	if p, created, err := q.Join(ctx, tks[1]); err != nil || created || p.Seq != 2 || p.Position != 2 {
		t.Fatalf("the second join again: %+v created %v, %v", p, created, err)
	}
	a := NewAdmitter(q, AdmitConfig{Owner: "contract"})
	var seqs []int64
	var last TickResult
	testwait.For(t, 10*time.Second, "three admissions", func() bool {
		r, err := a.TickOnce(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		seqs, last = append(seqs, r.Seqs...), r
		return len(seqs) == 3
	})
	if !slices.Equal(seqs, []int64{1, 2, 3}) || last.Waiting != 0 || last.Active != 3 || last.Head != 3 ||
		last.Tail != 3 || last.Rate != 1000 || last.Tick < 2 || last.Ev < 1 || last.Phase != DrawNone || last.Rested {
		t.Fatalf("ticks admitted %v; the last: %+v", seqs, last)
	}
	p, err := q.Status(ctx, tks[0])
	if err != nil || p.State != StateAdmitted || p.Token == "" || p.TokenExpiresAt.IsZero() || p.TokenIssuedAt.IsZero() || p.Seq != 1 {
		t.Fatalf("the first ticket after the ticks: %+v %v", p, err)
	}
}

func testFreezeByJoin(t *testing.T, q *Queue, rdb redis.UniversalClient) {
	ctx := context.Background()
	signer := NewSigner([]byte("test-secret"))
	const name = "freeze"
	start := time.Now().Add(1500 * time.Millisecond)
	put(t, q, name, SettingsPatch{RatePerSecond: ptrTo(10.0), StartsAt: &start})
	// On a cluster the pre-queue is sharded (auto), where a join's size is the shard's or the
	// leader's last count: between 1 and the exact figure.
	var early []Ticket
	for i := range 5 {
		tk, _ := signer.New(name)
		if p, created, err := q.Join(ctx, tk); err != nil || !created || p.State != StatePrequeue || p.PrequeueSize < 1 || p.PrequeueSize > int64(i+1) ||
			p.StartsAt.UnixMilli() != start.UnixMilli() {
			t.Fatalf("a join before the start: %+v created %v, %v", p, created, err)
		}
		early = append(early, tk)
	}
	testwait.For(t, 10*time.Second, "Redis time to pass the start", func() bool {
		now, err := rdb.Time(ctx).Result()
		return err == nil && !now.Before(start)
	})
	// The first join after the start freezes the pre-queue (freeze.lua): its five members'
	// sequences are reserved, so this place is the sixth.
	late, _ := signer.New(name)
	if p, created, err := q.Join(ctx, late); err != nil || !created || p.State != StateWaiting || p.Seq != 6 {
		t.Fatalf("a join after the start: %+v created %v, %v", p, created, err)
	}
	d, err := rdb.HMGet(ctx, rstore.KeysFor(name).Draw(), "base", "n").Result()
	if err != nil || d[0] != "0" || d[1] != "5" {
		t.Fatalf("the draw's record: %v %v", d, err)
	}
	if ph, err := rdb.HGet(ctx, rstore.KeysFor(name).Cfg(), "draw").Result(); err != nil || DrawPhase(ph) != DrawFrozen {
		t.Fatalf("the phase after the freeze: %q %v", ph, err)
	}
	// One member leaves after the freeze; the draw (drawplace.lua's batched reads and
	// variadic writes, here batches of 2) places the others at 1…4 and counts the departure.
	if err := q.Leave(ctx, early[2]); err != nil {
		t.Fatal(err)
	}
	a := NewAdmitter(q, AdmitConfig{Owner: "contract", DrawBatch: 2, MaxElapsed: 10 * time.Millisecond})
	testwait.For(t, 10*time.Second, "the draw", func() bool {
		_, _ = a.TickOnce(ctx, name)
		ph, _ := rdb.HGet(ctx, rstore.KeysFor(name).Cfg(), "draw").Result()
		return DrawPhase(ph) == DrawDone
	})
	// The leaver's reserved sequence is a departure of the line (what every instance's
	// positions subtract: seq − head − departures ahead).
	if g, err := rdb.ZRange(ctx, rstore.KeysFor(name).Gone(), 0, -1).Result(); err != nil || len(g) != 1 {
		t.Fatalf("departures after the draw: %v %v (want the leaver's one)", g, err)
	}
	seen := map[int64]bool{}
	for i, tk := range early {
		p, err := q.Status(ctx, tk)
		if i == 2 {
			if !errors.Is(err, ErrNoPlace) {
				t.Fatalf("the member who left after the freeze: %+v %v", p, err)
			}
			continue
		}
		if err != nil || p.State != StateWaiting || p.Position < 1 || p.Position > 4 || seen[p.Position] {
			t.Fatalf("drawn member %d: %+v %v", i, p, err)
		}
		seen[p.Position] = true
	}
	if p, err := q.Status(ctx, late); err != nil || p.Position != 5 {
		t.Fatalf("the join after the start: %+v %v (want position 5)", p, err)
	}
}
