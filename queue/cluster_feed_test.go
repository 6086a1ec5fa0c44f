package queue_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

// TestShardedFeedFollowsAManualFailover: on a Redis Cluster a tick travels by SPUBLISH on the
// queue's own shard, and a feed keeps following it when the slot changes owner without the
// old master dying (CLUSTER FAILOVER on its replica: Redis drops the shard channel with an
// sunsubscribe and keeps the connection). The feed subscribes again on the new owner, says so
// (FeedSubscribed: the reader resyncs), and receives the ticks published there.
func TestShardedFeedFollowsAManualFailover(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t) // its own: roles change here
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rdb := c.Client()
	defer rdb.Close()
	q := queue.New(rdb, queue.Config{}, nil)
	if q.PubSub() != queue.PubSubSharded {
		t.Fatalf("pub/sub on a cluster: %s, want sharded", q.PubSub())
	}
	feed := q.Feed(ctx)
	defer feed.Close()
	if err := feed.Follow(ctx, "moving"); err != nil {
		t.Fatal(err)
	}
	next := func(what string, want queue.FeedKind) queue.FeedEvent {
		t.Helper()
		for {
			rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
			ev, err := feed.Receive(rctx)
			rcancel()
			if err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
			if ev.Kind == want && ev.Queue == "moving" {
				return ev
			}
		}
	}
	next("the subscription", queue.FeedSubscribed)
	publish := func(ev int64) {
		t.Helper()
		// Published the way a leader does on a cluster: SPUBLISH, routed to the slot's master.
		if err := rdb.SPublish(ctx, queue.Channel("moving"), `{"v":1,"ev":`+strconv.FormatInt(ev, 10)+`,"tick":1}`).Err(); err != nil {
			t.Fatal(err)
		}
	}
	publish(1)
	if ev := next("the first tick", queue.FeedTick); ev.Tick.Ev != 1 {
		t.Fatalf("tick %+v", ev.Tick)
	}

	// The slot's master hands over to its replica (no process dies).
	master, err := c.MasterFor(ctx, queue.Channel("moving"))
	if err != nil {
		t.Fatal(err)
	}
	mid, _ := master.ID(ctx)
	var replica *redistest.Node
	for _, n := range c.Nodes() {
		nc := n.Client()
		info, err := nc.Do(ctx, "CLUSTER", "NODES").Text()
		_ = nc.Close()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(info, "\n") {
			if strings.Contains(line, "myself") && strings.Contains(line, "slave") && strings.Contains(line, mid) {
				replica = n
			}
		}
	}
	if replica == nil {
		t.Fatalf("no replica of %s", master.Addr())
	}
	rc := replica.Client()
	defer rc.Close()
	promoted := func(mode ...any) bool {
		if err := rc.Do(ctx, append([]any{"CLUSTER", "FAILOVER"}, mode...)...).Err(); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if role, _ := replica.Role(ctx); role == "master" {
				return true
			}
		}
		return false
	}
	// A manual failover waits for the replica to catch up with its master; FORCE does not.
	if !promoted() && !promoted("FORCE") {
		t.Fatalf("replica %s was not promoted", replica.Addr())
	}
	t.Logf("slot of %s moved from %s to %s", queue.Channel("moving"), master.Addr(), replica.Addr())
	next("the subscription on the new owner", queue.FeedSubscribed)
	// The publisher's client learns the new owner on MOVED; publish until the feed hears it.
	deadline := time.Now().Add(20 * time.Second)
	for ev := int64(2); ; ev++ {
		publish(ev)
		rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		got, err := feed.Receive(rctx)
		rcancel()
		if err == nil && got.Kind == queue.FeedTick && got.Queue == "moving" {
			t.Logf("tick %d received after the failover", got.Tick.Ev)
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no tick received on the new owner")
		}
	}
}
