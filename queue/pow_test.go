package queue_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// solve finds a nonce whose hash with challenge has at least bits leading zero bits.
func solve(tb testing.TB, challenge string, bits int) string {
	tb.Helper()
	for i := 0; i < 1<<30; i++ {
		n := strconv.FormatInt(int64(i), 36)
		if queue.PowSolves(challenge, n, bits) {
			return n
		}
	}
	tb.Fatalf("no nonce found for %d bits", bits)
	return ""
}

// exactly finds a nonce whose hash has exactly bits leading zero bits.
func exactly(tb testing.TB, challenge string, bits int) string {
	tb.Helper()
	for i := 0; i < 1<<30; i++ {
		n := "x" + strconv.FormatInt(int64(i), 36)
		sum := sha256.Sum256([]byte(challenge + ":" + n))
		if queue.LeadingZeroBits(sum[:]) == bits {
			return n
		}
	}
	tb.Fatalf("no nonce found with exactly %d bits", bits)
	return ""
}

func TestPowChallengeRoundTrip(t *testing.T) {
	t.Parallel()
	s := queue.NewSigner([]byte("test-secret"))
	now := time.Unix(1_800_000_000, 0)
	c := s.NewChallenge("drop", 12, now)
	if c.Difficulty != 12 || c.Queue != "drop" || !c.Expires.Equal(now.Add(queue.PowChallengeTTL)) {
		t.Fatalf("challenge %+v", c)
	}
	if len(c.Challenge) > queue.MaxPowChallenge || strings.Trim(c.Challenge, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
		t.Fatalf("challenge %q is not compact URL-safe text", c.Challenge)
	}
	t.Logf("challenge: %q (%d characters)", c.Challenge, len(c.Challenge))
	nonce := solve(t, c.Challenge, 12)
	p, err := s.VerifyPow("drop", c.Challenge, nonce, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != c.ID || p.Difficulty != 12 || !p.Expires.Equal(c.Expires) || len(p.ID) != 22 {
		t.Fatalf("proof %+v for challenge %+v", p, c)
	}
	// Another instance with the same secret verifies it: nothing is stored.
	if _, err := queue.NewSigner([]byte("test-secret")).VerifyPow("drop", c.Challenge, nonce, now); err != nil {
		t.Fatalf("same secret, other signer: %v", err)
	}
	// Ids are random: two challenges never share one.
	if d := s.NewChallenge("drop", 12, now); d.ID == c.ID || d.Challenge == c.Challenge {
		t.Fatal("two challenges share an id")
	}
	// Out-of-range difficulties are clamped.
	if d := s.NewChallenge("drop", 99, now).Difficulty; d != queue.MaxPowDifficulty {
		t.Fatalf("difficulty 99 issued as %d", d)
	}
	// Difficulty 0: any nonce solves it.
	z := s.NewChallenge("drop", 0, now)
	if _, err := s.VerifyPow("drop", z.Challenge, "x", now); err != nil {
		t.Fatalf("difficulty 0: %v", err)
	}
}

func TestPowChallengeRefused(t *testing.T) {
	t.Parallel()
	s := queue.NewSigner([]byte("test-secret"))
	now := time.Unix(1_800_000_000, 0)
	c := s.NewChallenge("drop", 8, now)
	nonce := solve(t, c.Challenge, 8)
	weak := exactly(t, c.Challenge, 7)
	parts := strings.Split(c.Challenge, ".")
	resign := func(fields ...string) string { // a well-formed string with the old MAC
		return strings.Join(append(fields, parts[4]), ".")
	}
	cases := []struct {
		name, queue, challenge, nonce string
		at                            time.Time
	}{
		{"other queue", "drop2", c.Challenge, nonce, now},
		{"expired at its expiry", "drop", c.Challenge, nonce, c.Expires},
		{"expired after", "drop", c.Challenge, nonce, c.Expires.Add(time.Hour)},
		{"forged by another secret", "drop", queue.NewSigner([]byte("other-secret")).NewChallenge("drop", 8, now).Challenge, nonce, now},
		{"difficulty lowered", "drop", resign(parts[0], parts[1], "0", parts[3]), "x", now},
		{"expiry moved", "drop", resign(parts[0], parts[1], parts[2], strconv.FormatInt(now.Add(time.Hour).Unix(), 10)), nonce, now},
		{"queue renamed", "drop2", resign("drop2", parts[1], parts[2], parts[3]), nonce, now},
		{"leading zero in difficulty", "drop", resign(parts[0], parts[1], "08", parts[3]), nonce, now},
		{"one bit short", "drop", c.Challenge, weak, now},
		{"empty nonce", "drop", c.Challenge, "", now},
		{"nonce of 65 characters", "drop", c.Challenge, strings.Repeat("a", 65), now},
		{"empty challenge", "drop", "", nonce, now},
		{"truncated", "drop", c.Challenge[:len(c.Challenge)-1], nonce, now},
		{"padded", "drop", c.Challenge + "=", nonce, now},
		{"too long", "drop", strings.Repeat("a", queue.MaxPowChallenge+1), nonce, now},
		{"a ticket instead", "drop", func() string { _, raw := s.New("drop"); return raw }(), nonce, now},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.VerifyPow(tc.queue, tc.challenge, tc.nonce, tc.at); !errors.Is(err, queue.ErrPowInvalid) {
				t.Fatalf("VerifyPow = %v, want ErrPowInvalid", err)
			}
		})
	}
	t.Run("every single-character change", func(t *testing.T) {
		for i := range len(c.Challenge) {
			for _, r := range []byte{'A', 'b', '0', '-', '.'} {
				if c.Challenge[i] == r {
					continue
				}
				m := c.Challenge[:i] + string(r) + c.Challenge[i+1:]
				if _, err := s.VerifyPow("drop", m, nonce, now); err == nil {
					t.Fatalf("accepted %q (character %d changed to %q)", m, i, r)
				}
			}
		}
	})
	t.Run("64-character nonce accepted", func(t *testing.T) {
		long := strings.Repeat("n", 58)
		var n string
		for i := 0; ; i++ {
			n = long + strconv.FormatInt(int64(i), 36)
			if queue.PowSolves(c.Challenge, n, 8) {
				break
			}
		}
		if len(n) > 64 {
			t.Fatalf("nonce grew to %d characters", len(n))
		}
		if _, err := s.VerifyPow("drop", c.Challenge, n, now); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPowLeadingZeroBits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		b    []byte
		want int
	}{
		{[]byte{0xff}, 0}, {[]byte{0x80}, 0}, {[]byte{0x7f}, 1}, {[]byte{0x01}, 7},
		{[]byte{0x00, 0xff}, 8}, {[]byte{0x00, 0x80}, 8}, {[]byte{0x00, 0x40}, 9}, {[]byte{0x00, 0x01}, 15},
		{[]byte{0x00, 0x00, 0x80}, 16}, {[]byte{0x00, 0x00, 0x01}, 23}, {[]byte{0, 0, 0, 0x80}, 24},
		{[]byte{0, 0, 0, 0}, 32}, {nil, 0},
	} {
		if got := queue.LeadingZeroBits(tc.b); got != tc.want {
			t.Errorf("LeadingZeroBits(% x) = %d, want %d", tc.b, got, tc.want)
		}
	}
	// At and around the byte boundaries, on real hashes: a nonce with exactly n zero bits
	// solves difficulty n and not n+1.
	const ch = "drop.boundary"
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16} {
		nonce := exactly(t, ch, n)
		if !queue.PowSolves(ch, nonce, n) || (n > 0 && !queue.PowSolves(ch, nonce, n-1)) {
			t.Errorf("%d bits: nonce %q does not solve difficulty %d", n, nonce, n)
		}
		if queue.PowSolves(ch, nonce, n+1) {
			t.Errorf("%d bits: nonce %q solves difficulty %d", n, nonce, n+1)
		}
	}
}

// TestPowJoinGate runs the join script's gate on a real Redis with verified proofs.
func TestPowJoinGate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.q.PowDifficulty(ctx, "nope"); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("unknown queue: %v", err)
	}
	if _, err := f.q.PowDifficulty(ctx, "bad name"); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("invalid name: %v", err)
	}
	f.mkQueue(t, "pw", 0, 0)
	if d, err := f.q.PowDifficulty(ctx, "pw"); err != nil || d != 0 {
		t.Fatalf("default difficulty %d, %v", d, err)
	}
	diff := 10
	if _, _, err := f.q.Put(ctx, "pw", queue.SettingsPatch{PowDifficulty: &diff}); err != nil {
		t.Fatal(err)
	}
	if d, err := f.q.PowDifficulty(ctx, "pw"); err != nil || d != 10 {
		t.Fatalf("difficulty %d, %v; want 10", d, err)
	}
	proof := func(bits int) queue.PowProof {
		c := f.signer.NewChallenge("pw", bits, time.Now())
		p, err := f.signer.VerifyPow("pw", c.Challenge, solve(t, c.Challenge, bits), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	tk, _ := f.signer.New("pw")
	_, _, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{})
	var pe *queue.PowRequiredError
	if !errors.As(err, &pe) || pe.Difficulty != 10 || !errors.Is(err, queue.ErrPowRequired) {
		t.Fatalf("join without proof: %v", err)
	}
	if _, _, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{Pow: proof(9)}); !errors.As(err, &pe) || pe.Difficulty != 10 {
		t.Fatalf("join with a 9-bit proof: %v", err)
	}
	p10 := proof(10)
	if _, created, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{Pow: p10}); err != nil || !created {
		t.Fatalf("join with a 10-bit proof: created %v, %v", created, err)
	}
	if _, created, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{}); err != nil || created {
		t.Fatalf("rejoin of the live place without proof: created %v, %v", created, err)
	}
	other, _ := f.signer.New("pw")
	if _, _, err := f.q.JoinWith(ctx, other, queue.JoinOptions{Pow: p10}); !errors.Is(err, queue.ErrPowInvalid) {
		t.Fatalf("replayed proof: %v", err)
	}
	ttl, err := f.rdb.PTTL(ctx, "wr:{q:pw}:pow:"+p10.ID).Result()
	if err != nil || ttl <= 0 || ttl > queue.PowChallengeTTL {
		t.Fatalf("single-use record TTL %v, %v", ttl, err)
	}
	if _, created, err := f.q.JoinWith(ctx, other, queue.JoinOptions{Pow: proof(12)}); err != nil || !created {
		t.Fatalf("a harder proof than asked: created %v, %v", created, err)
	}

	// A join refused by the per-address cap does not spend its proof.
	one := int64(1)
	if _, _, err := f.q.Put(ctx, "pw", queue.SettingsPatch{PlacesPerIP: &one}); err != nil {
		t.Fatal(err)
	}
	a, _ := f.signer.New("pw")
	if _, _, err := f.q.JoinWith(ctx, a, queue.JoinOptions{Client: "198.51.100.7", Pow: proof(10)}); err != nil {
		t.Fatal(err)
	}
	b, _ := f.signer.New("pw")
	kept := proof(10)
	if _, _, err := f.q.JoinWith(ctx, b, queue.JoinOptions{Client: "198.51.100.7", Pow: kept}); !errors.Is(err, queue.ErrTooManyPlaces) {
		t.Fatalf("over the cap: %v", err)
	}
	// The same proof, from another address, makes a place: it was not spent.
	if _, created, err := f.q.JoinWith(ctx, b, queue.JoinOptions{Client: "198.51.100.8", Pow: kept}); err != nil || !created {
		t.Fatalf("the proof refused for the cap, used again: created %v, %v", created, err)
	}
}

func FuzzParseChallenge(f *testing.F) {
	s := queue.NewSigner([]byte("fuzz-secret"))
	now := time.Unix(1_800_000_000, 0)
	good := s.NewChallenge("drop", 16, now).Challenge
	for _, seed := range []string{good, "", ".", "....", "drop.AAAAAAAAAAAAAAAAAAAAAA.16.1800000120.AAAAAAAAAAAAAAAAAAAAAA",
		good + ".", "drop..16..", good[:len(good)-2], strings.Replace(good, ".16.", ".016.", 1), "a.b.99.-1.c"} {
		f.Add(seed, "0")
	}
	f.Fuzz(func(t *testing.T, raw, nonce string) {
		c, err := s.ParseChallenge(raw)
		if err != nil {
			if !errors.Is(err, queue.ErrPowInvalid) {
				t.Fatalf("ParseChallenge(%q) = %v, not ErrPowInvalid", raw, err)
			}
			return
		}
		// Anything accepted is exactly a challenge this signer issues.
		if c.Challenge != raw || !queue.ValidName(c.Queue) || len(c.ID) != 22 ||
			c.Difficulty < 0 || c.Difficulty > queue.MaxPowDifficulty {
			t.Fatalf("accepted %q as %+v", raw, c)
		}
		want := c.Queue + "." + c.ID + "." + strconv.Itoa(c.Difficulty) + "." + strconv.FormatInt(c.Expires.Unix(), 10) + "."
		if !strings.HasPrefix(raw, want) {
			t.Fatalf("accepted %q, which does not spell its fields %q canonically", raw, want)
		}
		if _, err := s.VerifyPow(c.Queue, raw, nonce, now); err != nil && !errors.Is(err, queue.ErrPowInvalid) {
			t.Fatalf("VerifyPow: %v", err)
		}
	})
}

// BenchmarkPowVerify is the server's CPU per join with a proof of work: parse, MAC check,
// expiry and the SHA-256 of the solution (the single-use record in Redis aside).
func BenchmarkPowVerify(b *testing.B) {
	s := queue.NewSigner([]byte("0123456789abcdef-bench-secret"))
	now := time.Now()
	for _, name := range []string{"demo", strings.Repeat("q", 64)} {
		c := s.NewChallenge(name, 16, now)
		nonce := solve(b, c.Challenge, 16)
		b.Run("queue name of "+strconv.Itoa(len(name)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.VerifyPow(name, c.Challenge, nonce, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("issue a challenge", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.NewChallenge("demo", 16, now)
		}
	})
}

// TestPowRecordOnRedisTime: a challenge's single-use record follows Redis time, not the
// clock of the instance that verified it. An instance whose clock is 3 minutes behind
// Redis verifies a challenge that expired a minute ago (for it, the challenge is fresh):
// the join script refuses it (before, the record was kept for time.Until(expiry) — 1 ms —
// so the same challenge made a second place). An instance 100 s behind issues a challenge
// that, on Redis time, expires in 20 s: the record is kept exactly that long.
func TestPowRecordOnRedisTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "pwt", 0, 0)
	diff := 4
	if _, _, err := f.q.Put(ctx, "pwt", queue.SettingsPatch{PowDifficulty: &diff}); err != nil {
		t.Fatal(err)
	}
	redisNow, err := f.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The lagging instance's view of "now".
	behind := redisNow.Add(-3 * time.Minute)
	c := f.signer.NewChallenge("pwt", diff, behind)
	p, err := f.signer.VerifyPow("pwt", c.Challenge, solve(t, c.Challenge, diff), behind.Add(time.Second))
	if err != nil {
		t.Fatalf("the lagging instance verifies its challenge: %v", err)
	}
	places := 0
	for i := range 2 {
		tk, _ := f.signer.New("pwt")
		_, _, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{Pow: p})
		switch {
		case err == nil:
			places++
			// How long was its record kept? (Before: 1 ms; the next join came after it.)
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
				if n, _ := f.rdb.Exists(ctx, "wr:{q:pwt}:pow:"+p.ID).Result(); n == 0 {
					break
				}
			}
		case !errors.Is(err, queue.ErrPowInvalid):
			t.Fatalf("join %d with the expired challenge: %v", i, err)
		}
	}
	t.Logf("a challenge expired on Redis time 1 min ago, verified by an instance 3 min behind: %d places from it", places)
	if places != 0 {
		t.Fatalf("%d places from a challenge expired on Redis time, want 0", places)
	}
	if n, _ := f.rdb.Exists(ctx, "wr:{q:pwt}:pow:"+p.ID).Result(); n != 0 {
		t.Fatal("a refused expired challenge left a record")
	}

	// Expiry in Unix seconds: the challenge ends between 19 and 20 s from Redis's now.
	skewed := redisNow.Add(-100 * time.Second)
	c = f.signer.NewChallenge("pwt", diff, skewed)
	p, err = f.signer.VerifyPow("pwt", c.Challenge, solve(t, c.Challenge, diff), skewed)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := f.signer.New("pwt")
	if _, created, err := f.q.JoinWith(ctx, tk, queue.JoinOptions{Pow: p}); err != nil || !created {
		t.Fatalf("join with a live challenge: %v %v", created, err)
	}
	ttl, err := f.rdb.PTTL(ctx, "wr:{q:pwt}:pow:"+p.ID).Result()
	now2, _ := f.rdb.Time(ctx).Result()
	want := p.Expires.Sub(now2)
	t.Logf("record TTL %v; the challenge expires in %v on Redis time", ttl, want)
	if err != nil || ttl <= 0 || ttl > p.Expires.Sub(redisNow) || ttl < want-2*time.Second {
		t.Fatalf("single-use record TTL %v (%v), want about %v: until the challenge's expiry on Redis time", ttl, err, want)
	}
	other, _ := f.signer.New("pwt")
	if _, _, err := f.q.JoinWith(ctx, other, queue.JoinOptions{Pow: p}); !errors.Is(err, queue.ErrPowInvalid) {
		t.Fatalf("the challenge again: %v, want ErrPowInvalid", err)
	}
}
