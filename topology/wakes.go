package topology

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/backoff"
	"github.com/waitroom/waitroom/internal/rstore"
)

// The wake channel (rstore.WakeChannel) carries the names of queues whose rest ended (a
// join into an idle queue, a settings change): every instance's admitter and shared
// snapshot listen. It is a plain channel — wakes are rare (one per idle-to-busy change), so
// a Redis Cluster copying them to every node costs nothing worth a channel per slot.

// Wake tells every instance's admission loop of queue name to look at it now (its rest ended
// or its settings changed). It also ends the rest in Redis, so a lost message costs at most
// one rest check, never the queue.
func (t *Topology) Wake(ctx context.Context, name string) error {
	ctx, cancel := t.st.Bound(ctx)
	defer cancel()
	if err := t.st.Client().HDel(ctx, rstore.KeysFor(name).Clock(), "idle").Err(); err != nil {
		return rstore.Fail("wake "+name, err)
	}
	return t.PublishWake(ctx, name)
}

// PublishWake only sends the wake message of queue name, for a caller that has already
// ended the rest (a join's script does) or has none to end (a lease handed over, a sold-out
// flag changed). It adds no deadline of its own: the caller's ctx bounds it.
func (t *Topology) PublishWake(ctx context.Context, name string) error {
	if err := t.st.Client().Publish(ctx, rstore.WakeChannel, name).Err(); err != nil {
		return rstore.Fail("wake "+name, err)
	}
	return nil
}

// WatchWakes follows the wake channel until ctx ends: woke(name) for each queue whose rest
// ended or whose settings changed (a join into a resting queue, a PUT of its settings, a new
// queue, a lease handed over), subscribed() after each (re)subscription — wakes published
// meanwhile are lost, so the caller treats every queue as changed. It costs one pub/sub
// connection and no command. Both callbacks run on WatchWakes' goroutine and must not block.
func (t *Topology) WatchWakes(ctx context.Context, woke func(name string), subscribed func()) {
	ps := t.st.Client().Subscribe(ctx, rstore.WakeChannel)
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
			if rstore.ValidName(m.Payload) {
				woke(m.Payload)
			}
		}
	}
}
