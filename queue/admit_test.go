package queue_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

// collect subscribes to a queue's channel and returns a func that stops and returns
// every message received.
func collect(t *testing.T, rdb redis.UniversalClient, name string) func() []queue.Tick {
	t.Helper()
	_, stop := collectLive(t, rdb, name)
	return stop
}

// collectLive is collect with a second func that returns the messages received so far
// while the subscription goes on.
func collectLive(t *testing.T, rdb redis.UniversalClient, name string) (sofar, stop func() []queue.Tick) {
	t.Helper()
	ps := subscribeTicks(context.Background(), rdb, name)
	if _, err := ps.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var msgs []queue.Tick
	done := make(chan struct{})
	// Also on a failed wait: no reader outlives the test.
	t.Cleanup(func() { _ = ps.Close(); <-done })
	go func() {
		defer close(done)
		for m := range ps.Channel() {
			tm, err := queue.DecodeTick([]byte(m.Payload))
			if err != nil {
				t.Errorf("bad tick message %q: %v", m.Payload, err)
				continue
			}
			if tm.V != queue.TickVersion {
				t.Errorf("tick message version %d, want %d: %s", tm.V, queue.TickVersion, m.Payload)
			}
			mu.Lock()
			msgs = append(msgs, tm)
			mu.Unlock()
		}
	}()
	sofar = func() []queue.Tick {
		mu.Lock()
		defer mu.Unlock()
		return append([]queue.Tick(nil), msgs...)
	}
	stop = func() []queue.Tick {
		_ = ps.Close()
		<-done
		return sofar()
	}
	return sofar, stop
}

func joinN(t testing.TB, f *fixture, name string, n int) []queue.Ticket {
	t.Helper()
	out := make([]queue.Ticket, n)
	for i := range out {
		tk, _ := f.signer.New(name)
		if _, _, err := f.q.Join(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
		out[i] = tk
	}
	return out
}

// instance is one simulated server: its own Redis client and admission loop.
type instance struct {
	rdb    redis.UniversalClient
	a      *queue.Admitter
	cancel context.CancelFunc
	done   chan struct{}
}

func startInstance(t *testing.T, f *fixture, id, name string, hooks ...redis.Hook) *instance {
	t.Helper()
	return startInstanceWith(t, f, queue.AdmitConfig{Owner: id}, name, hooks...)
}

func startInstanceWith(t *testing.T, f *fixture, cfg queue.AdmitConfig, name string, hooks ...redis.Hook) *instance {
	t.Helper()
	rdb := f.srv.ClientWith(redis.UniversalOptions{MaxRetries: -1})
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	q := queue.New(rdb, queue.Config{Grace: -1}, nil)
	a := queue.NewAdmitter(q, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{rdb: rdb, a: a, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(in.done); a.Loop(ctx, name) }()
	t.Cleanup(func() { in.stop(); _ = rdb.Close() })
	return in
}

func (in *instance) stop() { in.cancel(); <-in.done }

// crash makes the instance vanish without releasing its lease.
func (in *instance) crash() { _ = in.rdb.Close(); in.stop() }

func leader(ins []*instance, name string) int {
	for i, in := range ins {
		for _, n := range in.a.Leading() {
			if n == name {
				return i
			}
		}
	}
	return -1
}

func TestAdmissionThreeLoops(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const name, rate = "race", 20.0
	// The rate is measured over this much Redis TIME, from the first admission's tick to
	// the last tick inside the window (so the count and the time it took match exactly:
	// a tick that comes late, on a busy machine, admits what is due by its TIME).
	const window = 5000 // ms
	f.mkQueue(t, name, rate, 0)
	tickets := joinN(t, f, name, 400)
	sofar, stop := collectLive(t, f.rdb, name)
	var ins []*instance
	// Ticks late by up to 2 s (a busy machine) still admit all that is due (the default
	// MaxElapsed, 300 ms, lets a late tick drop the rest): the rate is the loops' to keep.
	for _, id := range []string{"a", "b", "c"} {
		ins = append(ins, startInstanceWith(t, f, queue.AdmitConfig{Owner: id, MaxElapsed: 2 * time.Second}, name))
	}

	// The loops admit by Redis TIME (fake time cannot reach a redis-server): wait for a
	// tick past the window after the first admission.
	firstAdmission := func(msgs []queue.Tick) int64 {
		for _, m := range msgs {
			if len(m.Adm) > 0 {
				return m.Now
			}
		}
		return 0
	}
	testwait.For(t, 60*time.Second, "a tick 5 s of Redis TIME after the first admission", func() bool {
		msgs := sofar()
		first := firstAdmission(msgs)
		return first > 0 && msgs[len(msgs)-1].Now > first+window
	})
	li := leader(ins, name)
	if li < 0 {
		t.Fatal("no loop holds the lease")
	}
	crashAt := time.Now()
	ins[li].crash()
	// The takeover waits for the crashed leader's lease, a key TTL in Redis, to lapse; then
	// admission runs on under the new leader: wait for its first admission.
	testwait.For(t, 60*time.Second, "admission to resume under a new leader", func() bool {
		for _, m := range sofar() {
			if len(m.Adm) > 0 && m.Now > crashAt.UnixMilli() {
				return true
			}
		}
		return false
	})
	msgs := stop()

	// Exactly once, FIFO.
	seen := map[string]bool{}
	var lastSeq int64
	var firstNow, resumedNow int64
	for _, m := range msgs {
		for _, a := range m.Adm {
			if seen[a.Ticket] {
				t.Fatalf("ticket %s admitted twice", a.Ticket)
			}
			seen[a.Ticket] = true
			if a.Seq <= lastSeq {
				t.Fatalf("admitted sequence %d after %d: not FIFO", a.Seq, lastSeq)
			}
			lastSeq = a.Seq
			if firstNow == 0 {
				firstNow = m.Now
			}
			if resumedNow == 0 && m.Now > crashAt.UnixMilli() {
				resumedNow = m.Now
			}
		}
	}
	for i, tk := range tickets[:len(seen)] {
		if !seen[tk.ID] {
			t.Fatalf("ticket %d (join order) not admitted although later ones were", i)
		}
	}

	// Rate over the window from the first admission, before the crash: what the ticks after
	// the first admitted, over the Redis TIME from the first to the last of them.
	var n int
	var lastNow int64
	for _, m := range msgs {
		if m.Now > firstNow && m.Now <= firstNow+window {
			n += len(m.Adm)
			lastNow = m.Now
		}
	}
	span := float64(lastNow-firstNow) / 1000
	got := float64(n) / span
	t.Logf("admitted %d in %.2f s of Redis TIME: %.1f/s (setting %.0f/s); %d in total", n, span, got, rate, len(seen))
	if span < window/2000 || math.Abs(got-rate) > 1 {
		t.Fatalf("rate over %.2f s = %.1f/s, want %.0f ± 1 over about %d s", span, got, rate, window/1000)
	}

	// Takeover within the lease time.
	if resumedNow == 0 {
		t.Fatal("admission did not resume after the leader crashed")
	}
	gap := time.Duration(resumedNow-crashAt.UnixMilli()) * time.Millisecond
	t.Logf("admission resumed %v after the leader crashed", gap)
	if gap > 3*time.Second {
		t.Fatalf("takeover took %v, want ≤ 3 s", gap)
	}
	if nl := leader(ins, name); nl < 0 || nl == li {
		t.Fatalf("leader after crash = %d (crashed %d)", nl, li)
	}
}

func TestFencedTickRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mkQueue(t, "fence", 1000, 0)
	joinN(t, f, "fence", 50)
	sent := &redistest.CommandCounter{}
	in := startInstance(t, f, "old", "fence", sent)
	testwait.For(t, 10*time.Second, "the loop to take the lease", func() bool { return leader([]*instance{in}, "fence") >= 0 })
	// Another owner steals the lease (as if the old one had been deposed after a pause).
	ctx := context.Background()
	f.rdb.Set(ctx, "wr:{q:fence}:lease", "thief", 10*time.Second)
	f.rdb.Incr(ctx, "wr:{q:fence}:fence")
	// The loop learns it at its next tick, when admit.lua refuses its fencing token.
	testwait.For(t, 10*time.Second, "the loop to notice it was deposed", func() bool { return leader([]*instance{in}, "fence") < 0 })
	before := f.rdb.ZCard(ctx, "wr:{q:fence}:waiting").Val()
	// The deposed loop runs on against Redis: wait until it has sent two more commands (its
	// lease retries, LeaseRenew apart), each a moment at which it could wrongly admit.
	n0 := sent.N.Load()
	testwait.For(t, 30*time.Second, "the deposed loop to try Redis twice more", func() bool { return sent.N.Load() >= n0+2 })
	after := f.rdb.ZCard(ctx, "wr:{q:fence}:waiting").Val()
	if after != before {
		t.Fatalf("a deposed loop still admitted: waiting %d -> %d", before, after)
	}
	if leader([]*instance{in}, "fence") >= 0 {
		t.Fatal("deposed loop still believes it leads")
	}
}

func TestMaxActiveNeverExceeded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const name, maxActive = "cap", 5
	f.mkQueue(t, name, 200, maxActive)
	// A short token TTL (below the API minimum) so expiry happens within the test.
	f.rdb.HSet(ctx, "wr:{q:cap}:cfg", "ttl_ms", 400)
	tickets := joinN(t, f, name, 300)
	byID := map[string]queue.Ticket{}
	for _, tk := range tickets {
		byID[tk.ID] = tk
	}
	ps := subscribeTicks(ctx, f.rdb, name)
	defer ps.Close()
	startInstance(t, f, "x", name)

	consumed, admitted, samples := 0, 0, 0
	timeout := time.After(60 * time.Second) // an upper bound: about 3 s on a quiet machine
	for admitted < 120 {
		select {
		case <-timeout:
			t.Fatalf("only %d admitted", admitted)
		case m := <-ps.Channel():
			tm, err := queue.DecodeTick([]byte(m.Payload))
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UnixMilli()
			live := f.rdb.ZCount(ctx, "wr:{q:cap}:active", "("+itoa(now), "+inf").Val()
			total := f.rdb.ZCard(ctx, "wr:{q:cap}:active").Val()
			samples++
			if total > maxActive || live > maxActive {
				t.Fatalf("active tokens %d (live %d) > max_active %d", total, live, maxActive)
			}
			for i, a := range tm.Adm {
				admitted++
				if i%2 == 0 { // consume every other token at once; the rest expire
					if err := f.q.ConsumeToken(ctx, byID[a.Ticket], a.Token, "order-1"); err != nil {
						t.Fatal(err)
					}
					consumed++
				}
			}
		}
	}
	t.Logf("%d admitted, %d consumed, %d expired or pending; max_active held on %d samples", admitted, consumed, admitted-consumed, samples)
}

// TestNoTicketLostWhenRedisDiesMidAdmission proves the property the admit script is built
// for. Popping a user and issuing their token happen inside one Lua script, and Redis
// runs a script all-or-nothing: no other command runs in between, and the script is
// written to the AOF only as a whole. So there is no moment at which a ticket has left
// the line without a token, whether the Go process, the network or Redis itself dies.
// (A Lua runtime error would not roll back earlier writes, so admit.lua does every check
// before its first write and nothing after the first write can fail.) Here Redis is
// SIGKILLed while admitting 2,000 users/s and restarted from its AOF.
func TestNoTicketLostWhenRedisDiesMidAdmission(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withAOF()) // WithAOF: a private server in cluster mode too
	ctx := context.Background()
	const name = "crash"
	f.mkQueue(t, name, 2000, 0)
	tickets := joinN(t, f, name, 3000)
	in := startInstance(t, f, "x", name)
	testwait.For(t, 10*time.Second, "admission to be under way (500 of 3,000 admitted)", func() bool {
		return f.rdb.ZCard(ctx, "wr:{q:crash}:waiting").Val() <= 2500
	})
	f.srv.Stop() // SIGKILL mid-admission
	in.stop()
	f.srv.Start()

	waiting, admitted := 0, 0
	for _, tk := range tickets {
		st, err := f.rdb.HGet(ctx, "wr:{q:crash}:tickets", tk.ID).Result()
		if err != nil {
			t.Fatalf("ticket %s lost its state: %v", tk.ID, err)
		}
		inLine := f.rdb.ZScore(ctx, "wr:{q:crash}:waiting", tk.ID).Err() == nil
		switch {
		case strings.HasPrefix(st, "w:"):
			if !inLine {
				t.Fatalf("ticket %s is 'waiting' but not in the line", tk.ID)
			}
			waiting++
		case strings.HasPrefix(st, "a:"):
			if inLine {
				t.Fatalf("ticket %s admitted and still in the line", tk.ID)
			}
			token := strings.Split(st, ":")[2]
			if got := f.rdb.Get(ctx, "wr:{q:crash}:token:"+token).Val(); got != tk.ID {
				t.Fatalf("ticket %s admitted without its token (got %q)", tk.ID, got)
			}
			admitted++
		default:
			t.Fatalf("ticket %s in unexpected state %q", tk.ID, st)
		}
	}
	t.Logf("after the crash: %d admitted with tokens, %d still waiting, 0 lost", admitted, waiting)
	if admitted == 0 || waiting == 0 {
		t.Fatalf("the crash did not land mid-admission (admitted %d, waiting %d)", admitted, waiting)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "tok", 1000, 0)
	tks := joinN(t, f, "tok", 2)
	stop := collect(t, f.rdb, "tok")
	startInstance(t, f, "x", "tok")
	var tokens map[string]string
	testwait.For(t, 30*time.Second, "both tokens to be issued", func() bool {
		p0, _ := f.q.Status(ctx, tks[0])
		p1, _ := f.q.Status(ctx, tks[1])
		if p0.Token != "" && p1.Token != "" {
			tokens = map[string]string{tks[0].ID: p0.Token, tks[1].ID: p1.Token}
			return true
		}
		return false
	})
	stop()
	a, b := tks[0], tks[1]
	ta := tokens[a.ID]
	cases := []struct {
		name   string
		ticket queue.Ticket
		token  string
		want   queue.Verdict
	}{
		{"unknown", a, "00000000-0000-4000-8000-000000000000", queue.TokenUnknown},
		{"malformed", a, "nope", queue.TokenUnknown},
		{"not yours", b, ta, queue.TokenNotYours},
		{"live", a, ta, queue.TokenLive},
		{"busy while claimed", a, ta, queue.TokenBusy},
	}
	for _, c := range cases {
		v, _, err := f.q.ClaimToken(ctx, c.ticket, c.token, "req-"+c.name, false)
		if err != nil || v != c.want {
			t.Errorf("%s: %v %v, want %v", c.name, v, err, c.want)
		}
	}
	if err := f.q.ReleaseToken(ctx, a, ta, "req-live"); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := f.q.ClaimToken(ctx, a, ta, "idem-1", true); v != queue.TokenLive {
		t.Fatalf("after release: %v", v)
	}
	if v, _, _ := f.q.ClaimToken(ctx, a, ta, "idem-1", true); v != queue.TokenShared {
		t.Fatalf("same idempotency key: %v", v)
	}
	if err := f.q.ConsumeToken(ctx, a, ta, "idem-1"); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := f.q.ClaimToken(ctx, a, ta, "idem-1", true); v != queue.TokenReplay {
		t.Fatalf("repeat after consume: %v", v)
	}
	if v, _, _ := f.q.ClaimToken(ctx, a, ta, "idem-2", true); v != queue.TokenUsed {
		t.Fatalf("other request after consume: %v", v)
	}
	// Expiry: shorten the second token's life to 1 ms and let it lapse (a key TTL: Redis's
	// own clock).
	tb := tokens[b.ID]
	f.rdb.PExpire(ctx, "wr:{q:tok}:token:"+tb, time.Millisecond)
	testwait.For(t, 10*time.Second, "the token's key to expire", func() bool {
		return f.rdb.Exists(ctx, "wr:{q:tok}:token:"+tb).Val() == 0
	})
	if v, _, _ := f.q.ClaimToken(ctx, b, tb, "r", false); v != queue.TokenExpired {
		t.Fatalf("expired token: %v", v)
	}
}

func itoa(n int64) string { return strings.TrimSpace(jsonNum(n)) }

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestLeaveAfterAdmission: leaving with a live token gives the token up (its max_active
// slot is free at once) and the ticket's row is scheduled for retirement.
func TestLeaveAfterAdmission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "la", 1000, 1)
	tks := joinN(t, f, "la", 2)
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "la"})
	var p queue.Place
	// Each tick admits by the Redis TIME elapsed since the last one.
	testwait.For(t, 30*time.Second, "the first user to be admitted", func() bool {
		if _, err := a.TickOnce(ctx, "la"); err != nil {
			t.Fatal(err)
		}
		p, _ = f.q.Status(ctx, tks[0])
		return p.State == "admitted"
	})
	if n := f.rdb.ZCard(ctx, "wr:{q:la}:retire").Val(); n != 1 {
		t.Fatalf("retire set has %d entries, want 1", n)
	}
	if err := f.q.Leave(ctx, tks[0]); err != nil {
		t.Fatal(err)
	}
	if f.rdb.Exists(ctx, "wr:{q:la}:token:"+p.Token).Val() != 0 || f.rdb.ZCard(ctx, "wr:{q:la}:active").Val() != 0 {
		t.Fatal("the token outlived its ticket's leave")
	}
	if v, _, _ := f.q.ClaimToken(ctx, tks[0], p.Token, "r", false); v == queue.TokenLive {
		t.Fatal("a left ticket's token still claims as live")
	}
	// max_active 1: the slot is free, so the second user is admitted next.
	testwait.For(t, 30*time.Second, "the freed slot to be reused (the second user admitted)", func() bool {
		if _, err := a.TickOnce(ctx, "la"); err != nil {
			t.Fatal(err)
		}
		p2, _ := f.q.Status(ctx, tks[1])
		return p2.State == "admitted"
	})
}
