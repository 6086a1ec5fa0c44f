package stream

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

// TestLinePositionsMatchRedis is the property behind live positions: random joins,
// leaves and admissions, and after every tick each instance's locally computed position
// of every waiting ticket equals its ZRANK + 1 in Redis. Instance a follows from the
// start; instance b starts from a snapshot halfway, as a new instance would.
func TestLinePositionsMatchRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q := queue.New(rdb, queue.Config{Grace: -1}, nil)
	rate := 40.0
	if _, _, err := q.Put(ctx, "prop", queue.SettingsPatch{RatePerSecond: &rate}); err != nil {
		t.Fatal(err)
	}
	adm := queue.NewAdmitter(q, queue.AdmitConfig{Owner: "prop", MaxElapsed: 200 * time.Millisecond})
	signer := queue.NewSigner([]byte("k"))
	feed := q.Feed(ctx)
	defer feed.Close()
	if err := feed.Follow(ctx, "prop"); err != nil {
		t.Fatal(err)
	}
	if ev, err := feed.Receive(ctx); err != nil || ev.Kind != queue.FeedSubscribed {
		t.Fatalf("subscribe: %+v, %v", ev, err)
	}
	waitingSeqs := func() []int64 {
		zs, err := rdb.ZRangeWithScores(ctx, "wr:{q:prop}:waiting", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int64, len(zs))
		for i, z := range zs {
			out[i] = int64(z.Score)
		}
		return out
	}
	snap, err := q.Snapshot(ctx, "prop")
	if err != nil {
		t.Fatal(err)
	}
	var a, b line
	a.reset(snap)
	rng := rand.New(rand.NewPCG(1, 2))
	var waiting []queue.Ticket
	checks := 0
	for step := range 150 {
		for range rng.IntN(12) {
			tk, _ := signer.New("prop")
			if _, _, err := q.Join(ctx, tk); err != nil {
				t.Fatal(err)
			}
			waiting = append(waiting, tk)
		}
		for range rng.IntN(4) {
			if len(waiting) == 0 {
				break
			}
			i := rng.IntN(len(waiting))
			_ = q.Leave(ctx, waiting[i]) // may already be admitted: ErrNoPlace is fine
			waiting = append(waiting[:i], waiting[i+1:]...)
		}
		// Real time, deliberately: admit.lua admits rate × the Redis TIME elapsed since the
		// last tick, so this random pause is what makes the number admitted per tick vary.
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		res, err := adm.TickOnce(ctx, "prop")
		if err != nil {
			t.Fatal(err)
		}
		if res.Ev == 0 {
			continue
		}
		m := receiveTick(t, feed)
		if m.Ev != a.ev+1 {
			t.Fatalf("step %d: event %d after %d", step, m.Ev, a.ev)
		}
		a.apply(m)
		if step == 60 {
			s, err := q.Snapshot(ctx, "prop")
			if err != nil {
				t.Fatal(err)
			}
			b.reset(s)
		} else if b.synced && m.Ev == b.ev+1 {
			b.apply(m)
		}
		checks += comparePositions(t, waitingSeqs(), step, &a, &b)
	}
	if checks < 500 {
		t.Fatalf("only %d position checks ran", checks)
	}
	t.Logf("%d positions compared with ZRANK+1, all equal", checks)
}

func receiveTick(t *testing.T, feed *queue.Feed) queue.Tick {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ev, err := feed.Receive(ctx)
	if err != nil || ev.Kind != queue.FeedTick {
		t.Fatalf("receive: %+v, %v", ev, err)
	}
	return ev.Tick
}

// comparePositions checks every line's position of each waiting sequence (in Redis order)
// against its rank.
func comparePositions(t *testing.T, zs []int64, step int, lines ...*line) int {
	t.Helper()
	n := 0
	for _, l := range lines {
		if !l.synced {
			continue
		}
		if l.waiting != int64(len(zs)) {
			t.Fatalf("step %d: line says %d waiting, Redis %d", step, l.waiting, len(zs))
		}
		for i, seq := range zs {
			if got := l.position(seq); got != int64(i+1) {
				t.Fatalf("step %d: seq %d at position %d, ZRANK+1 = %d", step, seq, got, i+1)
			}
			n++
		}
	}
	return n
}

func TestParseLastEventID(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", 0, false}, {"0", 0, true}, {"42", 42, true}, {"-1", 0, false}, {"abc", 0, false},
		{"99999999999999999999", 0, false}, {"4611686018427387904", 0, false}, {" 1", 0, false},
	} {
		got, ok := ParseLastEventID(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseLastEventID(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseLastEventID(f *testing.F) {
	for _, s := range []string{"", "0", "17", "-3", "1e9", "９", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseLastEventID(s)
		if ok && (n < 0 || n >= 1<<62) {
			t.Fatalf("accepted %q as %d", s, n)
		}
		if !ok && n != 0 {
			t.Fatalf("rejected %q but returned %d", s, n)
		}
	})
}

func TestPositionRendererIsValidJSON(t *testing.T) {
	for _, l := range []line{
		{ev: 7, tick: 42, waiting: 100, rate: 5, arate: 4.567},
		{ev: 1, tick: 1, waiting: 3, rate: 2.5, paused: true},
		{ev: 9, tick: 2, waiting: 1, rate: 0, arate: 0},
	} {
		b := newPositionRenderer(&l).render(3)
		s := string(b)
		if !strings.HasPrefix(s, "id: ") || !strings.HasSuffix(s, "\n\n") {
			t.Fatalf("frame %q", s)
		}
		data := strings.TrimPrefix(strings.Split(s, "\n")[2], "data: ")
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		for _, k := range []string{"position", "waiting", "eta_seconds", "rate_per_second", "admit_rate", "server_time", "tick"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("%q lacks %s", data, k)
			}
		}
		if m["position"] != 3.0 || (l.paused && (m["eta_seconds"] != nil || m["rate_per_second"] != 0.0)) {
			t.Fatalf("%q for %+v", data, l)
		}
		if !l.paused && l.rate > 0 && m["eta_seconds"] == nil {
			t.Fatalf("%q: no ETA for a running queue", data)
		}
	}
}
