package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
)

// untilRedisTime waits until Redis's clock, the one the scripts read (TIME), has passed at:
// for a test that sets a start or an end just ahead and then needs it behind.
func (f *fixture) untilRedisTime(t testing.TB, at time.Time) {
	t.Helper()
	untilRedisTime(t, f.rdb, at)
}

func untilRedisTime(t testing.TB, rdb redis.UniversalClient, at time.Time) {
	t.Helper()
	ctx := context.Background()
	testwait.For(t, 30*time.Second, "Redis TIME to pass "+at.Format(time.StampMilli), func() bool {
		now, err := rdb.Time(ctx).Result()
		return err == nil && now.After(at)
	})
}

// elapse makes the next admission tick of queue name count its whole MaxElapsed, as if
// that much time had passed since the last tick (the clock's last tick set far back):
// what the tick may admit then follows from the rate and MaxElapsed alone, not from how
// long the test took between two ticks.
func (f *fixture) elapse(t testing.TB, name string) {
	t.Helper()
	if err := f.rdb.HSet(context.Background(), "wr:{q:"+name+"}:clock", "last", 1).Err(); err != nil {
		t.Fatal(err)
	}
}

// joinMany joins n new tickets to queue name from 8 goroutines, for a test to which the
// order of joining does not matter, and returns them (in no particular order).
func joinMany(t testing.TB, f *fixture, name string, n int) []queue.Ticket {
	t.Helper()
	out := make([]queue.Ticket, n)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				tk, _ := f.signer.New(name)
				if _, _, err := f.q.Join(context.Background(), tk); err != nil {
					errs <- err
					return
				}
				out[i] = tk
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}
