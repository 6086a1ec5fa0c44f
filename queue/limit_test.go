package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

// rlLimiter returns a Limiter on a private Redis with a key prefix unique to the test.
func rlLimiter(t *testing.T, opts ...redistest.Option) (*queue.Limiter, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t, opts...)
	return queue.NewLimiter(srv.Client(), rlPrefix(t)), srv
}

// rlPrefix is a key prefix unique to one test (instead of FLUSHDB).
func rlPrefix(t *testing.T) string { return fmt.Sprintf("t%d:", time.Now().UnixNano()) }

// rlChain is the order API's chain: per user, then global.
func rlChain(user string, userRate float64, userBurst int, globalRate float64, globalBurst int) []queue.Limit {
	return []queue.Limit{
		{Scope: "user", Key: user, Rate: userRate, Burst: userBurst},
		{Scope: "global", Rate: globalRate, Burst: globalBurst},
	}
}

func rlAllow(t *testing.T, l *queue.Limiter, limits []queue.Limit) queue.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := l.AllowChain(ctx, limits)
	if err != nil {
		t.Fatalf("AllowChain: %v", err)
	}
	return r
}

func TestLimiterPerUserRejectsWithScopeUser(t *testing.T) {
	t.Parallel()
	l, _ := rlLimiter(t)
	for i := range 3 {
		if r := rlAllow(t, l, rlChain("alice", 1, 3, 1000, 1000)); !r.Allowed || r.Remaining != 2-i {
			t.Fatalf("request %d: %+v, want allowed with %d remaining", i+1, r, 2-i)
		}
	}
	r := rlAllow(t, l, rlChain("alice", 1, 3, 1000, 1000))
	if r.Allowed || r.Scope != "user" || r.RetryAfter <= 0 || r.RetryAfter > time.Second {
		t.Fatalf("4th request: %+v, want refused by scope user with 0 < RetryAfter ≤ 1s", r)
	}
	if r := rlAllow(t, l, rlChain("bob", 1, 3, 1000, 1000)); !r.Allowed {
		t.Fatalf("another user: %+v, want allowed", r)
	}
	t.Logf("user 1/s burst 3: 3 allowed, 4th refused scope=%s retry_after=%v", r.Scope, r.RetryAfter)
}

func TestLimiterGlobalRejectsWithScopeGlobal(t *testing.T) {
	t.Parallel()
	l, _ := rlLimiter(t)
	allowed, global := 0, 0
	for i := range 10 {
		r := rlAllow(t, l, rlChain(fmt.Sprintf("user-%d", i), 5, 5, 0.01, 5))
		switch {
		case r.Allowed:
			allowed++
		case r.Scope == "global":
			global++
		default:
			t.Fatalf("user %d refused by %q", i, r.Scope)
		}
	}
	if allowed != 5 || global != 5 {
		t.Fatalf("allowed %d, refused by global %d; want 5 and 5", allowed, global)
	}
	t.Logf("10 users, 1 request each, global burst 5: %d allowed, %d refused scope=global", allowed, global)
}

func TestLimiterRefusalsDoNotSpendOtherBuckets(t *testing.T) {
	t.Parallel()
	l, _ := rlLimiter(t)
	const slow = 0.001 // no noticeable refill during the test
	chain := func(user string) []queue.Limit { return rlChain(user, slow, 1, slow, 10) }

	// One user hammers: 1 allowed, 19 refused per user. The global bucket pays for 1.
	refusedUser := 0
	for range 20 {
		if r := rlAllow(t, l, chain("hammer")); !r.Allowed && r.Scope == "user" {
			refusedUser++
		}
	}
	if refusedUser != 19 {
		t.Fatalf("hammering user refused %d times by scope user, want 19", refusedUser)
	}
	// So 9 of the global 10 are left for everybody else.
	for i := range 9 {
		if r := rlAllow(t, l, chain(fmt.Sprintf("other-%d", i))); !r.Allowed {
			t.Fatalf("other user %d: %+v; the per-user refusals spent global budget", i, r)
		}
	}
	r := rlAllow(t, l, chain("late"))
	if r.Allowed || r.Scope != "global" {
		t.Fatalf("11th distinct request: %+v, want refused by global", r)
	}
	// The global refusal did not charge the late user's own bucket either.
	if r := rlAllow(t, l, []queue.Limit{{Scope: "user", Key: "late", Rate: slow, Burst: 1}}); !r.Allowed {
		t.Fatalf("late user's own bucket: %+v, want untouched", r)
	}
	t.Logf("19 per-user refusals left the global bucket at 9 of 10: 9 other users allowed, the next refused by global")
}

func TestLimiterRefillsOverTime(t *testing.T) {
	t.Parallel()
	l, _ := rlLimiter(t)
	// One token per 2 s: the three calls cannot refill a token between them even on a
	// machine slowed by other work (at 50/s, a 20 ms gap between two calls did).
	lim := []queue.Limit{{Scope: "user", Key: "u", Rate: 0.5, Burst: 2}}
	for range 2 {
		if r := rlAllow(t, l, lim); !r.Allowed {
			t.Fatalf("burst: %+v", r)
		}
	}
	r := rlAllow(t, l, lim)
	if r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > 2*time.Second {
		t.Fatalf("empty bucket: %+v, want refused with 0 < RetryAfter ≤ 2s", r)
	}
	// Real time: limit.lua refills by Redis TIME, and the claim is that waiting exactly
	// RetryAfter is enough — polling until allowed would not prove it.
	time.Sleep(r.RetryAfter)
	if r := rlAllow(t, l, lim); !r.Allowed {
		t.Fatalf("after RetryAfter: %+v, want allowed", r)
	}
	// A long quiet spell refills only up to Burst. A slow rate (one token per 500 ms), so
	// the five calls themselves cannot refill a token even on a loaded machine.
	slow := []queue.Limit{{Scope: "user", Key: "quiet", Rate: 2, Burst: 2}}
	for range 2 {
		rlAllow(t, l, slow)
	}
	time.Sleep(1500 * time.Millisecond) // 3 tokens' worth of Redis TIME (real time, as above)
	allowed := 0
	for range 5 {
		if rlAllow(t, l, slow).Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("after 1.5 s at 2/s with burst 2: %d allowed, want 2", allowed)
	}
}

func TestLimiterRetryAfterIsSane(t *testing.T) {
	t.Parallel()
	l, srv := rlLimiter(t)
	rdb := srv.Client()
	redisNow := func() time.Time {
		now, err := rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now
	}
	for _, tc := range []struct {
		rate  float64
		burst int
		max   time.Duration
	}{
		{rate: 2, burst: 1, max: 500 * time.Millisecond},
		{rate: 5, burst: 5, max: 200 * time.Millisecond},
		{rate: 0.5, burst: 1, max: 2 * time.Second},
	} {
		t.Run(fmt.Sprintf("%v/s burst %d", tc.rate, tc.burst), func(t *testing.T) {
			// The refill runs on Redis TIME: whatever time passed between the first call and
			// the refusal (measured on Redis's clock around them, so a slow machine cannot
			// change the verdict) shortens the wait, and nothing else may. A try in which the
			// calls took longer than the wait itself checks nothing (the bucket may have
			// refilled): it is tried again with a fresh bucket, up to 10 times (a busy
			// machine once took 635 ms for 2 calls).
			var lim []queue.Limit
			var r queue.Result
			var elapsed time.Duration
			for try := range 10 {
				lim = []queue.Limit{{Scope: "user", Key: fmt.Sprintf("%v-%d-%d", tc.rate, tc.burst, try), Rate: tc.rate, Burst: tc.burst}}
				from := redisNow()
				for range tc.burst {
					rlAllow(t, l, lim)
				}
				r = rlAllow(t, l, lim)
				if elapsed = redisNow().Sub(from); elapsed < tc.max {
					break
				}
				t.Logf("try %d: %v passed on Redis's clock during %d calls, too long to check a %v wait", try+1, elapsed, tc.burst+1, tc.max)
			}
			low := tc.max - elapsed - time.Millisecond // the script rounds to whole milliseconds
			if elapsed >= tc.max {
				t.Fatalf("every try took longer than the %v wait it checks", tc.max)
			}
			if r.Allowed || r.RetryAfter < low || r.RetryAfter > tc.max {
				t.Fatalf("%+v, want refused with RetryAfter in [%v, %v] (%v passed)", r, low, tc.max, elapsed)
			}
			if r.Remaining != 0 {
				t.Fatalf("remaining %d, want 0", r.Remaining)
			}
		})
	}
}

func TestLimiterIsAtomicUnderConcurrency(t *testing.T) {
	t.Parallel()
	l, _ := rlLimiter(t)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			r, err := l.AllowChain(context.Background(), rlChain(fmt.Sprintf("u%d", i%20), 0.001, 3, 0.001, 25))
			if err != nil {
				t.Error(err)
				return
			}
			if r.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 25 {
		t.Fatalf("200 concurrent requests from 20 users, global burst 25: %d allowed, want 25", allowed.Load())
	}
}

func TestLimiterKeysShareOneSlotAndExpire(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	prefix := rlPrefix(t)
	l := queue.NewLimiter(rdb, prefix)
	// Slow refills (0.2/s): each key lives 1 token / 0.2/s + the 1 s margin = 6 s, long
	// enough to be found below on a busy machine (a refill at 100/s left the global key
	// 1.01 s, and it was gone before the keys were listed).
	rlAllow(t, l, rlChain("alice", 0.2, 5, 0.2, 200))
	ctx := context.Background()
	want := map[string]time.Duration{
		prefix + "{rl}:user:alice": 6 * time.Second, // refill of 1 token at 0.2/s + 1s margin, at most
		prefix + "{rl}:global:":    6 * time.Second,
	}
	for key, max := range want {
		ttl, err := rdb.PTTL(ctx, key).Result()
		if err != nil || ttl <= 0 || ttl > max {
			t.Errorf("%s: PTTL %v (%v), want in (0, %v]", key, ttl, err, max)
		}
		// Redis Cluster hashes the first {…} of a key: {rl} for every bucket, one slot.
		if i := strings.Index(key, "{"); i < 0 || !strings.HasPrefix(key[i:], "{rl}") {
			t.Errorf("%s: first hash tag is not {rl}", key)
		}
	}
	n := 0
	if err := srv.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, prefix+"*").Result()
		n += len(keys)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d keys, want 2", n)
	}
}

func TestLimiterRejectsBadLimits(t *testing.T) {
	t.Parallel()
	l, _ := rlLimiter(t)
	for name, limits := range map[string][]queue.Limit{
		"empty chain":   nil,
		"zero rate":     {{Key: "k", Rate: 0, Burst: 1}},
		"negative rate": {{Key: "k", Rate: -1, Burst: 1}},
		"NaN rate":      {{Key: "k", Rate: math.NaN(), Burst: 1}},
		"infinite rate": {{Key: "k", Rate: math.Inf(1), Burst: 1}},
		"zero burst":    {{Key: "k", Rate: 1, Burst: 0}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := l.AllowChain(context.Background(), limits); !errors.Is(err, queue.ErrInvalidLimit) {
				t.Fatalf("err = %v, want ErrInvalidLimit", err)
			}
		})
	}
}

func TestLimiterReportsRedisDown(t *testing.T) {
	t.Parallel()
	l, srv := rlLimiter(t, redistest.Single()) // stopped below
	if r, err := l.Allow(context.Background(), "k", 1, 1); err != nil || !r.Allowed {
		t.Fatalf("up: %+v %v", r, err)
	}
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := l.Allow(ctx, "k", 1, 1); err == nil {
		t.Fatal("no error with Redis down")
	}
}
