package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrMalformedTick is returned (wrapped) by Feed.Receive for a message that is not a tick;
// the feed itself is fine.
var ErrMalformedTick = errors.New("malformed tick message")

// Feed follows the tick messages of a set of queues on one Redis pub/sub connection. The
// channel names and the wire format stay inside this package: a reader sees queue names
// and Ticks. go-redis re-establishes a lost connection and its subscriptions by itself;
// each (re)subscription is reported as a FeedSubscribed event, because messages published
// meanwhile are lost (pub/sub is at-most-once) and the reader must resync from Snapshot.
type Feed struct{ ps *redis.PubSub }

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
func (q *Queue) Feed(ctx context.Context) *Feed { return &Feed{ps: q.rdb.Subscribe(ctx)} }

// Follow subscribes to the ticks of the named queues.
func (f *Feed) Follow(ctx context.Context, names ...string) error {
	chans := make([]string, len(names))
	for i, n := range names {
		chans[i] = Channel(n)
	}
	if err := f.ps.Subscribe(ctx, chans...); err != nil {
		return fail("follow ticks", err)
	}
	return nil
}

// Receive waits for the next event. An error wrapping ErrMalformedTick names the queue in
// the event and leaves the feed usable; any other error is the connection's (go-redis
// reconnects on the next call; back off before calling again).
func (f *Feed) Receive(ctx context.Context) (FeedEvent, error) {
	for {
		m, err := f.ps.Receive(ctx)
		if err != nil {
			return FeedEvent{}, fail("receive ticks", err)
		}
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
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

// Ping probes the connection; a failure makes go-redis re-establish it.
func (f *Feed) Ping(ctx context.Context) error { return f.ps.Ping(ctx) }

// Close ends the subscription.
func (f *Feed) Close() error { return f.ps.Close() }

// queueOfChannel is the inverse of Channel.
func queueOfChannel(channel string) string {
	s := strings.TrimPrefix(channel, keyPrefix)
	s = strings.TrimSuffix(s, "}:events")
	return s
}
