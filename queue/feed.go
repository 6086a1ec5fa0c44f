package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/backoff"
	"github.com/waitroom/waitroom/internal/rstore"
)

// ErrMalformedTick is returned (wrapped) by Feed.Receive for a message that is not a tick;
// the feed itself is fine.
var ErrMalformedTick = errors.New("malformed tick message")

// Feed follows the tick messages of a set of queues. The channel names and the wire format
// stay inside this package: a reader sees queue names and Ticks.
//
// On a single Redis (plain pub/sub) one connection carries every queue. On a Redis Cluster
// (sharded pub/sub) each queue has its own SSUBSCRIBE connection to the master of its slot:
// Redis refuses one SSUBSCRIBE over channels of several slots, and go-redis re-establishes a
// subscription on the node that owns its first channel's slot — so one subscription per slot
// is what survives a slot move or a failover. (A stream hub follows only the queues it has
// streams of, so this is one connection per such queue per instance.) go-redis
// re-establishes a lost connection and its subscriptions by itself; each (re)subscription is
// reported as a FeedSubscribed event, because messages published meanwhile are lost (pub/sub
// is at-most-once) and the reader must resync from Snapshot.
type Feed struct {
	q       *Queue
	plain   *redis.PubSub // nil when sharded only
	sharded bool

	ctx    context.Context
	cancel context.CancelFunc
	items  chan feedMsg
	wg     sync.WaitGroup

	mu     sync.Mutex
	shards map[string]*redis.PubSub
	closed bool
}

type feedMsg struct {
	m   any
	err error
}

// FeedKind says what a FeedEvent is.
type FeedKind int

// Kinds of FeedEvent.
const (
	FeedTick       FeedKind = iota + 1 // a tick message: Tick is set
	FeedSubscribed                     // the queue's subscription was (re)established
)

// FeedEvent is one thing that happened on a Feed.
type FeedEvent struct {
	Kind  FeedKind
	Queue string
	Tick  Tick
}

// Feed opens a subscription with no queues yet; add them with Follow. Close it when done.
func (q *Queue) Feed(ctx context.Context) *Feed {
	fctx, cancel := context.WithCancel(ctx)
	f := &Feed{q: q, ctx: fctx, cancel: cancel, items: make(chan feedMsg, 256), shards: map[string]*redis.PubSub{}}
	mode := q.PubSub()
	f.sharded = mode == PubSubSharded || mode == PubSubBoth
	if mode == PubSubPlain || mode == PubSubBoth {
		f.plain = q.rdb.Subscribe(ctx)
		f.pump(f.plain, "")
	}
	return f
}

// Sharded reports whether the feed follows sharded channels, one connection per queue
// (follow only the queues you need).
func (f *Feed) Sharded() bool { return f.sharded }

// pump moves one subscription's messages to the feed, backing off after errors (go-redis
// reconnects on the next Receive). name is the queue of a sharded subscription ("" for the
// plain one); the pump ends when the feed closes or that subscription is no longer the
// queue's (Unfollow, or a re-subscription below).
func (f *Feed) pump(ps *redis.PubSub, name string) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		bo := backoff.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}
		for {
			m, err := ps.Receive(f.ctx)
			if f.ctx.Err() != nil || !f.current(ps, name) {
				return
			}
			moved := err != nil && name != "" && strings.HasPrefix(err.Error(), "MOVED")
			if sub, ok := m.(*redis.Subscription); moved || (ok && err == nil && sub.Kind == "sunsubscribe" && name != "") {
				// Redis dropped the shard channel: its slot moved (resharding, a manual
				// failover, a master that came back as a replica). go-redis does not
				// subscribe again by itself on a live connection; a new subscription on the
				// slot's owner does, and its confirmation makes the reader resync.
				f.resubscribe(ps, name)
				return
			}
			select {
			case f.items <- feedMsg{m, err}:
			case <-f.ctx.Done():
				return
			}
			if err == nil {
				bo.Reset()
				continue
			}
			if !bo.Wait(f.ctx) {
				return
			}
		}
	}()
}

// current reports whether ps is still the feed's subscription for name.
func (f *Feed) current(ps *redis.PubSub, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	return name == "" || f.shards[name] == ps
}

// install makes a new sharded subscription (no channel yet) name's if name's is still was
// (nil: none); else, or once the feed is closed, it returns nil.
func (f *Feed) install(name string, was *redis.PubSub) *redis.PubSub {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.shards[name] != was {
		return nil
	}
	ps := f.q.rdb.SSubscribe(f.ctx)
	f.shards[name] = ps
	return ps
}

// resubscribe replaces name's sharded subscription after Redis dropped it.
func (f *Feed) resubscribe(old *redis.PubSub, name string) {
	f.q.ReloadTopology(f.ctx)
	ps := f.install(name, old)
	if ps == nil {
		return
	}
	_ = old.Close()
	// The slot map reloads in the background: give it a moment before asking the slot's
	// owner; until the new owner confirms, go-redis retries the subscription on each Receive
	// (with the pump's back-off), and a MOVED answer brings us back here.
	select {
	case <-f.ctx.Done():
		return
	case <-time.After(300 * time.Millisecond):
	}
	_ = ps.SSubscribe(f.ctx, rstore.Channel(name))
	f.pump(ps, name)
}

// Follow subscribes to the ticks of the named queues.
func (f *Feed) Follow(ctx context.Context, names ...string) error {
	if f.plain != nil {
		chans := make([]string, len(names))
		for i, n := range names {
			chans[i] = rstore.Channel(n)
		}
		if err := f.plain.Subscribe(ctx, chans...); err != nil {
			return fail("follow ticks", err)
		}
	}
	if !f.sharded {
		return nil
	}
	var errs []error
	for _, n := range names {
		ps := f.install(n, nil)
		if ps == nil {
			continue // followed already
		}
		if err := ps.SSubscribe(ctx, rstore.Channel(n)); err != nil {
			// The subscription stays: go-redis retries it on the next Receive.
			errs = append(errs, err)
		}
		f.pump(ps, n)
	}
	if err := errors.Join(errs...); err != nil {
		return fail("follow ticks", err)
	}
	return nil
}

// Unfollow stops following the named queues' sharded channels (a plain feed keeps them:
// they cost nothing there).
func (f *Feed) Unfollow(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range names {
		if ps := f.shards[n]; ps != nil {
			_ = ps.Close()
			delete(f.shards, n)
		}
	}
}

// Receive waits for the next event. An error wrapping ErrMalformedTick names the queue in
// the event and leaves the feed usable; any other error is a connection's (go-redis
// reconnects on its next receive).
func (f *Feed) Receive(ctx context.Context) (FeedEvent, error) {
	for {
		var it feedMsg
		select {
		case it = <-f.items:
		case <-ctx.Done():
			return FeedEvent{}, fail("receive ticks", ctx.Err())
		case <-f.ctx.Done():
			return FeedEvent{}, fail("receive ticks", redis.ErrClosed)
		}
		if it.err != nil {
			return FeedEvent{}, fail("receive ticks", it.err)
		}
		switch m := it.m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				return FeedEvent{Kind: FeedSubscribed, Queue: queueOfChannel(m.Channel)}, nil
			}
		case *redis.Message:
			ev := FeedEvent{Kind: FeedTick, Queue: queueOfChannel(m.Channel)}
			t, err := DecodeTick([]byte(m.Payload))
			if err != nil {
				return ev, fmt.Errorf("%w: %w", ErrMalformedTick, err)
			}
			ev.Tick = t
			return ev, nil
		}
		// Pongs and unsubscribe confirmations carry nothing for the reader.
	}
}

// Ping probes the connections; a failure makes go-redis re-establish them.
func (f *Feed) Ping(ctx context.Context) error {
	var errs []error
	if f.plain != nil {
		errs = append(errs, f.plain.Ping(ctx))
	}
	f.mu.Lock()
	shards := make([]*redis.PubSub, 0, len(f.shards))
	for _, ps := range f.shards {
		shards = append(shards, ps)
	}
	f.mu.Unlock()
	for _, ps := range shards {
		errs = append(errs, ps.Ping(ctx))
	}
	return errors.Join(errs...)
}

// Close ends every subscription.
func (f *Feed) Close() error {
	f.cancel()
	f.mu.Lock()
	f.closed = true
	var errs []error
	if f.plain != nil {
		errs = append(errs, f.plain.Close())
	}
	for n, ps := range f.shards {
		errs = append(errs, ps.Close())
		delete(f.shards, n)
	}
	f.mu.Unlock()
	f.wg.Wait()
	return errors.Join(errs...)
}

// queueOfChannel is the inverse of Channel.
func queueOfChannel(channel string) string {
	return rstore.QueueOfChannel(channel)
}
