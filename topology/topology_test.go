package topology_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/topology"
)

type fixture struct {
	rdb  redis.UniversalClient
	topo *topology.Topology
}

// newFixture gives a test a private Redis and a Topology on it. Calls may take 10 s (the
// default, 1 s, fails them on a machine busy with the tests beside them).
func newFixture(t testing.TB) *fixture {
	t.Helper()
	rdb := redistest.Start(t).Client()
	return &fixture{rdb: rdb, topo: topology.New(rstore.New(rdb, 10*time.Second))}
}

// The registry lists the live instances sorted by id with what they reported; an instance
// whose key expired drops out (and out of the set), one removed at shutdown drops out of
// the registry and the live set at once.
func TestInstanceRegistry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if ins, err := f.topo.Instances(ctx); err != nil || len(ins) != 0 {
		t.Fatalf("an empty registry: %v %v", ins, err)
	}
	started := time.Now().UTC().Truncate(time.Millisecond)
	for _, in := range []topology.Instance{
		{ID: "c", SSEConnections: 3, StartedAt: started, LastSeen: started},
		{ID: "a", SSEConnections: 1, MaxStreams: 10, Queues: map[string]int64{"drop": 1}, StartedAt: started, LastSeen: started},
		{ID: "b", StartedAt: started, LastSeen: started},
	} {
		if err := f.topo.ReportInstance(ctx, in, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	ins, err := f.topo.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 3 || ins[0].ID != "a" || ins[1].ID != "b" || ins[2].ID != "c" {
		t.Fatalf("instances %+v, want a, b, c", ins)
	}
	if a := ins[0]; a.SSEConnections != 1 || a.MaxStreams != 10 || a.Queues["drop"] != 1 || !a.StartedAt.Equal(started) {
		t.Fatalf("instance a read back as %+v", a)
	}

	// b's key expires (deleted here rather than waited for).
	if err := f.rdb.Del(ctx, rstore.InstanceKey("b")).Err(); err != nil {
		t.Fatal(err)
	}
	if ins, err := f.topo.Instances(ctx); err != nil || len(ins) != 2 || ins[0].ID != "a" || ins[1].ID != "c" {
		t.Fatalf("after b expired: %+v %v, want a, c", ins, err)
	}
	if ok, _ := f.rdb.SIsMember(ctx, rstore.InstancesKey, "b").Result(); ok {
		t.Fatal("an expired instance stays in the set")
	}

	if err := f.topo.RemoveInstance(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if ins, err := f.topo.Instances(ctx); err != nil || len(ins) != 1 || ins[0].ID != "a" {
		t.Fatalf("after c left: %+v %v, want a", ins, err)
	}
	alive, err := f.topo.Alive(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// b's key expired but its last report is recent: the live set is about reports, not keys.
	if len(alive) != 2 || alive[0] != "a" || alive[1] != "b" {
		t.Fatalf("alive %v, want [a b]", alive)
	}
}

// Alive lists the instances that reported within ttl, sorted; an older report is not a sign
// of life.
func TestAlive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, id := range []string{"z", "m"} {
		if err := f.topo.ReportInstance(ctx, topology.Instance{ID: id}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	old := float64(time.Now().Add(-10 * time.Minute).UnixMilli())
	if err := f.rdb.ZAdd(ctx, rstore.AliveKey, redis.Z{Score: old, Member: "gone"}).Err(); err != nil {
		t.Fatal(err)
	}
	alive, err := f.topo.Alive(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(alive) != 2 || alive[0] != "m" || alive[1] != "z" {
		t.Fatalf("alive %v, want [m z]", alive)
	}
	if alive, err := f.topo.Alive(ctx, time.Hour); err != nil || len(alive) != 3 {
		t.Fatalf("alive within an hour %v %v, want all three", alive, err)
	}
}

// A wake reaches every watcher with the queue's name and ends the queue's rest in Redis; a
// bare publish leaves the rest flag alone; a message that is no queue name is not passed on.
func TestWakes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	woke := make(chan string, 16)
	subscribed := make(chan struct{}, 1)
	done := make(chan struct{})
	wctx, stop := context.WithCancel(ctx)
	go func() {
		defer close(done)
		f.topo.WatchWakes(wctx, func(n string) { woke <- n }, func() {
			select {
			case subscribed <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-subscribed:
	case <-ctx.Done():
		t.Fatal("no subscription")
	}
	next := func() string {
		t.Helper()
		select {
		case n := <-woke:
			return n
		case <-ctx.Done():
			t.Fatal("no wake arrived")
			return ""
		}
	}

	clock := rstore.KeysFor("calm").Clock()
	if err := f.rdb.HSet(ctx, clock, "idle", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.topo.Wake(ctx, "calm"); err != nil {
		t.Fatal(err)
	}
	if n := next(); n != "calm" {
		t.Fatalf("woke %q, want calm", n)
	}
	if f.rdb.HExists(ctx, clock, "idle").Val() {
		t.Fatal("a wake left the queue resting")
	}

	if err := f.rdb.HSet(ctx, clock, "idle", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rdb.Publish(ctx, rstore.WakeChannel, "no such name!").Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.topo.PublishWake(ctx, "calm"); err != nil {
		t.Fatal(err)
	}
	if n := next(); n != "calm" {
		t.Fatalf("woke %q, want calm (an invalid name is not passed on)", n)
	}
	if !f.rdb.HExists(ctx, clock, "idle").Val() {
		t.Fatal("a bare publish ended the rest")
	}
}
