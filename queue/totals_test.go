package queue_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
)

// tickLog is a TickObserver that keeps what it saw.
type tickLog struct {
	mu    sync.Mutex
	ticks []queue.TickResult
}

func (l *tickLog) ObserveTick(_ string, _ time.Time, r queue.TickResult) {
	l.mu.Lock()
	l.ticks = append(l.ticks, r)
	l.mu.Unlock()
}

// TestRunningTotalsAndAdaptiveTTL: the scripts keep the queue's running totals (new places,
// places given up), observers see each tick with its rate and the line's tail, and a token
// issued while the line is long gets the adaptive TTL: ttl × H / (H + waiting), not below
// the minimum.
func TestRunningTotalsAndAdaptiveTTL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, _, err := f.q.Put(ctx, "tot", queue.SettingsPatch{RatePerSecond: f64(0), TokenTTL: dur(100 * time.Second),
		TokenTTLMin: dur(20 * time.Second), TokenTTLHalveAt: i64(10)})
	if err != nil {
		t.Fatal(err)
	}
	var tks []queue.Ticket
	for range 30 {
		tk, _ := f.signer.New("tot")
		if _, _, err := f.q.Join(ctx, tk); err != nil {
			t.Fatal(err)
		}
		tks = append(tks, tk)
	}
	if _, _, err := f.q.Join(ctx, tks[0]); err != nil { // the same ticket again: no new place
		t.Fatal(err)
	}
	for _, tk := range tks[:2] {
		if err := f.q.Leave(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	st, err := f.q.Stats(ctx, "tot")
	if err != nil {
		t.Fatal(err)
	}
	if st.Joined != 30 || st.Left != 2 || st.Waiting != 28 {
		t.Fatalf("joined %d, left %d, waiting %d; want 30, 2, 28", st.Joined, st.Left, st.Waiting)
	}
	want := st.EffectiveTTL(28)
	if math.Abs(want.Seconds()-100.0*10/38) > 0.01 {
		t.Fatalf("effective TTL at 28 waiting = %v, want %.2fs", want, 100.0*10/38)
	}
	if got := st.EffectiveTTL(1000); got != 20*time.Second {
		t.Fatalf("effective TTL at 1000 waiting = %v, want the 20 s minimum", got)
	}

	log := &tickLog{}
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "tot-1", Observers: []queue.TickObserver{log}})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	// Let the leader settle at rate 0, then admit the whole line in one tick.
	testwait.For(t, 30*time.Second, "a tick observed", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.ticks) > 0
	})
	if _, _, err := f.q.Put(ctx, "tot", queue.SettingsPatch{RatePerSecond: f64(5000)}); err != nil {
		t.Fatal(err)
	}
	var p queue.Place
	testwait.For(t, 30*time.Second, "the line admitted", func() bool {
		p, err = f.q.Status(ctx, tks[29])
		return err == nil && p.State == queue.StateAdmitted
	})
	// The observers hear a tick after its script has run: the last ticket can read as admitted
	// a moment before the tick that admitted it reaches the log.
	testwait.For(t, 30*time.Second, "the observers told of every admission", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		var n int64
		for _, r := range log.ticks {
			n += r.Admitted
		}
		return n >= 28
	})
	ttl := p.TokenExpiresAt.Sub(p.TokenIssuedAt)
	// All 28 went in one tick (5,000/s × 100 ms) unless the tick was split; the first
	// admission saw at most 28 waiting, so the TTL lies between the values for 28 and 1.
	lo, hi := st.EffectiveTTL(28), st.EffectiveTTL(1)
	if ttl < lo-time.Millisecond || ttl > hi+time.Millisecond {
		t.Fatalf("token TTL %v, want within [%v, %v] (adaptive)", ttl, lo, hi)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	var admitted int64
	var sawRate bool
	seqs := map[int64]bool{}
	for _, r := range log.ticks {
		admitted += r.Admitted
		for _, s := range r.Seqs {
			seqs[s] = true
		}
		if r.Tail != 30 {
			t.Fatalf("tick tail %d, want 30 (the last sequence handed out)", r.Tail)
		}
		sawRate = sawRate || r.Rate == 5000
	}
	for s := int64(3); s <= 30; s++ { // 1 and 2 left
		if !seqs[s] {
			t.Fatalf("sequence %d admitted but not in any tick's Seqs (%v)", s, seqs)
		}
	}
	if len(seqs) != 28 {
		t.Fatalf("ticks named %d admitted sequences, want 28", len(seqs))
	}
	if admitted != 28 || !sawRate {
		t.Fatalf("observers saw %d admitted (want 28), rate 5000 seen: %v", admitted, sawRate)
	}
}
