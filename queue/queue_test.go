package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/topology"
)

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }
func dur(v time.Duration) *time.Duration {
	return &v
}
func boolp(v bool) *bool { return &v }

type fixture struct {
	srv    *redistest.Server
	rdb    redis.UniversalClient
	q      *queue.Queue
	signer *queue.Signer
	topo   *topology.Topology // on rdb: the instances, wakes and health windows the tests write and follow
}

func newFixture(t testing.TB, opts ...redistest.Option) *fixture {
	t.Helper()
	srv := redistest.Start(t, opts...)
	rdb := srv.Client()
	// Calls may take 10 s (the default, 1 s, fails them on a machine busy with the tests
	// beside them); a test about the bound makes its own Queue. One pre-queue shard, also on
	// a cluster: the sharded pre-queue has its own tests (prequeue_test.go, cluster_test.go).
	return &fixture{srv: srv, rdb: rdb, q: queue.New(rdb, queue.Config{OpTimeout: 10 * time.Second, PrequeueShards: 1}, nil), signer: queue.NewSigner([]byte("test-secret")),
		topo: topology.New(rstore.New(rdb, 10*time.Second))}
}

func (f *fixture) mkQueue(t testing.TB, name string, rate float64, maxActive int64) {
	t.Helper()
	if _, _, err := f.q.Put(context.Background(), name, queue.SettingsPatch{RatePerSecond: f64(rate), MaxActive: i64(maxActive)}); err != nil {
		t.Fatal(err)
	}
}

func TestJoin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "drop", 0, 0)
	// The floods below wait for the client's pool beyond the default 1 s per call on a busy
	// machine: a queue whose calls may wait longer (the property is the sequences, not speed).
	patient := queue.New(f.rdb, queue.Config{OpTimeout: 30 * time.Second}, nil)

	t.Run("1000 concurrent distinct joins get contiguous sequences", func(t *testing.T) {
		var wg sync.WaitGroup
		seqs := make([]int64, 1000)
		errs := make(chan error, 1000)
		for i := range 1000 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tk, _ := f.signer.New("drop")
				p, created, err := patient.Join(ctx, tk)
				if err != nil || !created {
					errs <- fmt.Errorf("join: created=%v err=%v", created, err)
					return
				}
				seqs[i] = p.Seq
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for i, s := range seqs {
			if s != int64(i+1) {
				t.Fatalf("sequence %d is %d, want %d", i, s, i+1)
			}
		}
		if n := f.rdb.ZCard(ctx, "wr:{q:drop}:waiting").Val(); n != 1000 {
			t.Fatalf("waiting = %d, want 1000", n)
		}
	})

	t.Run("one ticket joining 100 times concurrently has one place", func(t *testing.T) {
		tk, _ := f.signer.New("drop")
		var wg sync.WaitGroup
		var mu sync.Mutex
		created, seqs := 0, map[int64]bool{}
		for range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, c, err := patient.Join(ctx, tk)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if c {
					created++
				}
				seqs[p.Seq] = true
			}()
		}
		wg.Wait()
		if created != 1 || len(seqs) != 1 {
			t.Fatalf("created %d places with %d sequences, want 1 and 1", created, len(seqs))
		}
		if n := f.rdb.ZCard(ctx, "wr:{q:drop}:waiting").Val(); n != 1001 {
			t.Fatalf("waiting = %d, want 1001", n)
		}
	})

	t.Run("position, leave and status", func(t *testing.T) {
		f.mkQueue(t, "small", 0, 0)
		var tks []queue.Ticket
		for i := range 3 {
			tk, _ := f.signer.New("small")
			p, _, err := f.q.Join(ctx, tk)
			if err != nil || p.Position != int64(i+1) || p.Waiting != int64(i+1) {
				t.Fatalf("join %d: %+v %v", i, p, err)
			}
			tks = append(tks, tk)
		}
		if err := f.q.Leave(ctx, tks[0]); err != nil {
			t.Fatal(err)
		}
		p, err := f.q.Status(ctx, tks[2])
		if err != nil || p.Position != 2 || p.Waiting != 2 || p.State != "waiting" {
			t.Fatalf("status after leave: %+v %v", p, err)
		}
		if _, err := f.q.Status(ctx, tks[0]); !errors.Is(err, queue.ErrNoPlace) {
			t.Fatalf("status of a departed ticket: %v, want ErrNoPlace", err)
		}
		if err := f.q.Leave(ctx, tks[0]); !errors.Is(err, queue.ErrNoPlace) {
			t.Fatalf("second leave: %v, want ErrNoPlace", err)
		}
	})

	t.Run("unknown and closed queues", func(t *testing.T) {
		tk, _ := f.signer.New("nope")
		if _, _, err := f.q.Join(ctx, tk); !errors.Is(err, queue.ErrQueueNotFound) {
			t.Fatalf("unknown queue: %v", err)
		}
		f.mkQueue(t, "shut", 1, 0)
		if _, _, err := f.q.Put(ctx, "shut", queue.SettingsPatch{Closed: boolp(true)}); err != nil {
			t.Fatal(err)
		}
		tk, _ = f.signer.New("shut")
		if _, _, err := f.q.Join(ctx, tk); !errors.Is(err, queue.ErrQueueClosed) {
			t.Fatalf("closed queue: %v", err)
		}
	})
}

func TestSettingsValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	bad := []queue.SettingsPatch{
		{RatePerSecond: f64(-1)},
		{RatePerSecond: f64(1e9)},
		{MaxActive: i64(-5)},
		{TokenTTL: dur(time.Second)},
		{TokenTTL: dur(48 * time.Hour)},
	}
	for i, p := range bad {
		if _, _, err := f.q.Put(ctx, "q", p); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("patch %d: %v, want ErrInvalid", i, err)
		}
	}
	if _, _, err := f.q.Put(ctx, "bad name!", queue.SettingsPatch{}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("bad name: %v", err)
	}
	s, created, err := f.q.Put(ctx, "q", queue.SettingsPatch{RatePerSecond: f64(7.5)})
	if err != nil || !created || s.RatePerSecond != 7.5 || s.TokenTTL != 5*time.Minute {
		t.Fatalf("create: %+v %v %v", s, created, err)
	}
	s, created, err = f.q.Put(ctx, "q", queue.SettingsPatch{Paused: boolp(true)})
	if err != nil || created || s.RatePerSecond != 7.5 || !s.Paused {
		t.Fatalf("partial update kept the rest: %+v %v %v", s, created, err)
	}
}

func TestTicketSigning(t *testing.T) {
	t.Parallel()
	s := queue.NewSigner([]byte("k1"))
	tk, raw := s.New("drop")
	got, err := s.Parse(raw)
	if err != nil || got != tk {
		t.Fatalf("round trip: %v %v", got, err)
	}
	other := queue.NewSigner([]byte("k2"))
	forged := []string{
		"", "x", raw + "x", "drop." + tk.ID, "other." + tk.ID + "." + raw[len("drop."+tk.ID+"."):],
		other.String(tk), "dr op." + tk.ID + ".abc", string(make([]byte, 500)),
	}
	for _, f := range forged {
		if _, err := s.Parse(f); !errors.Is(err, queue.ErrTicketInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrTicketInvalid", f, err)
		}
	}
	// A 32-byte signature is 43 base64 characters; the last carries 4 bits of padding. The
	// other spellings of the same bytes (padding bits set) are refused: one ticket has one
	// string.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, raw[len(raw)-1])
	refused := 0
	for bits := 1; bits < 4; bits++ {
		alt := raw[:len(raw)-1] + string(alphabet[last^bits])
		if _, err := s.Parse(alt); !errors.Is(err, queue.ErrTicketInvalid) {
			t.Errorf("non-canonical signature %q accepted", alt)
		}
		refused++
	}
	if refused != 3 {
		t.Fatal("not every non-canonical spelling was tried")
	}
}

func withAOF() redistest.Option { return redistest.WithAOF() }
