package stream_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/stream"
	"github.com/waitroom/waitroom/topology"
)

// A buyer whose token was lost and who is admitted again is told the new token on the
// stream it has open. The loss is made the way a Redis failover makes it: the queue's keys
// go back to what they were just before the admitting tick (DUMP before, RESTORE after), so
// the same ticket is admitted again by the next tick, with another token and the same event
// number. The stream, which has sent "admitted" with the first token, sends a second
// "admitted" with the new one.
func TestStreamDeliversAReplacementToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rs := redistest.Start(t)
	rdb := rs.Client()
	q := queue.New(rdb, queue.Config{Grace: -1, OpTimeout: 10 * time.Second}, nil) // a busy machine's calls may outlast the 1 s default
	const name = "rp"
	rate := 100.0
	if _, _, err := q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: &rate, Paused: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	hub := stream.NewHub(q, topology.New(rstore.New(rdb, q.OpTimeout())), stream.Config{}, nil)
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()
	t.Cleanup(func() { _ = hub.Close(context.Background()); <-done })

	tk, _ := queue.NewSigner([]byte("k")).New(name)
	if _, _, err := q.Join(ctx, tk); err != nil {
		t.Fatal(err)
	}
	p, err := q.TicketState(ctx, tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.AcquireIP("10.9.0.1"); err != nil {
		t.Fatal(err)
	}
	server, client := net.Pipe()
	t.Cleanup(func() { _ = client.Close() })
	if err := hub.Attach(ctx, server, stream.Waiter{Queue: name, Ticket: tk.ID, IP: "10.9.0.1", Place: p}); err != nil {
		t.Fatal(err)
	}
	s := &evStream{}
	go s.read(client)
	testwait.For(t, 5*time.Second, "the first position event", func() bool { return len(s.named("position")) > 0 })

	if _, _, err := q.Put(ctx, name, queue.SettingsPatch{Paused: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	ad := queue.NewAdmitter(q, queue.AdmitConfig{Owner: "replace"})
	var before map[string]dumped
	admit := func(what string) {
		testwait.For(t, 10*time.Second, what, func() bool {
			before = dumpQueue(t, rs, rdb, name)
			res, err := ad.TickOnce(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			return res.Admitted > 0
		})
	}
	admit("the first admission")
	testwait.For(t, 5*time.Second, "the first admitted event", func() bool { return len(s.named("admitted")) == 1 })
	first := fmt.Sprint(s.named("admitted")[0].Data["token"])

	// The failover: Redis forgets the admitting tick.
	restoreQueue(t, rs, rdb, name, before)
	if p, err := q.TicketState(ctx, tk); err != nil || p.State != queue.StateWaiting {
		t.Fatalf("after the restore: %+v %v, want waiting", p, err)
	}
	admit("the admission again")
	testwait.For(t, 5*time.Second, "the replacement's admitted event", func() bool { return len(s.named("admitted")) == 2 })
	evs := s.named("admitted")
	second := fmt.Sprint(evs[1].Data["token"])
	p, err = q.TicketState(ctx, tk)
	if err != nil {
		t.Fatal(err)
	}
	if second == first || second != p.Token {
		t.Fatalf("admitted events told %s then %s; Redis holds %s", first, second, p.Token)
	}

}

func ptr[T any](v T) *T { return &v }

// dumped is one key's DUMP and its time to live.
type dumped struct {
	val string
	ttl time.Duration
}

// queueKeys lists the keys of queue name (its hash tag) on every master.
func queueKeys(t *testing.T, rs *redistest.Server, name string) []string {
	t.Helper()
	var keys []string
	err := rs.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		ks, err := c.Keys(ctx, "*{q:"+name+"}*").Result()
		keys = append(keys, ks...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func dumpQueue(t *testing.T, rs *redistest.Server, rdb redis.UniversalClient, name string) map[string]dumped {
	t.Helper()
	out := map[string]dumped{}
	for _, k := range queueKeys(t, rs, name) {
		v, err := rdb.Dump(context.Background(), k).Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ttl, _ := rdb.PTTL(context.Background(), k).Result()
		out[k] = dumped{val: v, ttl: max(ttl, 0)}
	}
	return out
}

func restoreQueue(t *testing.T, rs *redistest.Server, rdb redis.UniversalClient, name string, d map[string]dumped) {
	t.Helper()
	ctx := context.Background()
	for _, k := range queueKeys(t, rs, name) {
		if strings.Contains(k, ":lease") {
			continue // the leader keeps its lease (a failover does not end it either)
		}
		if err := rdb.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range d {
		if strings.Contains(k, ":lease") {
			continue
		}
		if err := rdb.RestoreReplace(ctx, k, v.ttl, v.val).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
