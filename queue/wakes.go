package queue

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/backoff"
)

// WatchWakes follows the wake channel until ctx ends: woke(name) for each queue whose rest
// ended or whose settings changed (a join into a resting queue, a PUT of its settings, a new
// queue, a lease handed over), subscribed() after each (re)subscription — wakes published
// meanwhile are lost, so the caller treats every queue as changed. It costs one pub/sub
// connection and no command. Both callbacks run on WatchWakes' goroutine and must not block.
func (q *Queue) WatchWakes(ctx context.Context, woke func(name string), subscribed func()) {
	ps := q.rdb.Subscribe(ctx, wakeChannel)
	// A Receive blocked on the connection ends only when the subscription is closed.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	defer ps.Close()
	bo := backoff.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	for {
		m, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !bo.Wait(ctx) {
				return
			}
			continue
		}
		bo.Reset()
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				subscribed()
			}
		case *redis.Message:
			if ValidName(m.Payload) {
				woke(m.Payload)
			}
		}
	}
}
