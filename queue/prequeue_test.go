package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/draw"
)

// TestShardedPrequeue drives a pre-queue over 3 shards (on a cluster, each on its own master;
// the queue's own slot takes no entry)
// from the first join to admission: entries spread over the shards, a reload keeps its
// entry, the per-address cap holds across shards (before and after the start), a leave
// before the start and one after the freeze, the pre-queue's size summed by the leader, a
// join racing the start queued behind the draw, a leader that loses its lease mid-draw, the
// draw over every shard verified as published, and every member placed once at its drawn
// place.
func TestShardedPrequeue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q := queue.New(f.rdb, queue.Config{OpTimeout: 10 * time.Second, PrequeueShards: 3}, nil)
	ctx := context.Background()
	const name = "shd"
	// Another instance read the queue before it was sharded (its copy is 5 s good).
	stale := queue.New(f.rdb, queue.Config{OpTimeout: 10 * time.Second, PrequeueShards: 3}, nil)
	probe, _ := f.signer.New(name)
	if _, err := stale.Status(ctx, probe); err == nil {
		t.Fatal("a status in a queue that does not exist")
	}
	if _, _, err := q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: f64(1000), PlacesPerIP: i64(2), StartsAt: timep(time.Now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	tags, _ := f.rdb.HGet(ctx, rstore.KeysFor(name).Cfg(), "pq_tags").Result()
	if len(strings.Split(tags, ",")) != 3 {
		t.Fatalf("pq_tags %q, want 3 shards", tags)
	}
	shardPre := func(tag string) string { return rstore.ShardKeysFor(name, tag).Pre() }
	var shardKeys []string
	for _, tag := range strings.Split(tags, ",") {
		shardKeys = append(shardKeys, shardPre(tag))
	}
	if cc, ok := f.rdb.(*redis.ClusterClient); ok {
		// Each shard on its own master.
		masters := map[string]bool{}
		for _, key := range shardKeys {
			m, err := cc.MasterForKey(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			masters[m.Options().Addr] = true
		}
		if len(masters) != 3 {
			t.Fatalf("the 3 shards sit on %d masters", len(masters))
		}
	}

	// 40 addresses join twice each (their cap); the third join of each is refused.
	var tickets []queue.Ticket
	join := func(client string) (queue.Ticket, queue.Place, bool, error) {
		tk, _ := f.signer.NewWhere(name, q.IDFits(ctx, name, client, ""))
		p, created, err := q.JoinWith(ctx, tk, queue.JoinOptions{Client: client})
		return tk, p, created, err
	}
	for a := range 40 {
		client := fmt.Sprintf("10.0.%d.%d", a/200, a%200)
		for i := range 3 {
			tk, p, created, err := join(client)
			if i == 2 {
				if !errors.Is(err, queue.ErrTooManyPlaces) {
					t.Fatalf("third join of %s: %+v %v", client, p, err)
				}
				continue
			}
			if err != nil || !created || p.State != queue.StatePrequeue || p.DrawID != draw.ID(tk.ID) {
				t.Fatalf("join %d of %s: %+v %v %v", i, client, p, created, err)
			}
			tickets = append(tickets, tk)
		}
	}
	n := int64(len(tickets))
	var total int64
	for _, key := range shardKeys {
		c, _ := f.rdb.ZCard(ctx, key).Result()
		if c == 0 {
			t.Fatalf("shard %s holds no entry", key)
		}
		total += c
	}
	if total != n {
		t.Fatalf("the shards hold %d entries, want %d", total, n)
	}
	// The instance with the stale copy finds an entry in its shard, and a new join there
	// lands in a shard, not in the queue's own slot.
	if p, err := stale.Status(ctx, tickets[2]); err != nil || p.State != queue.StatePrequeue {
		t.Fatalf("status through an instance with a stale copy: %+v %v", p, err)
	}
	extra, _ := f.signer.New(name)
	if p, created, err := stale.JoinWith(ctx, extra, queue.JoinOptions{Client: "10.8.8.8"}); err != nil || !created || p.State != queue.StatePrequeue {
		t.Fatalf("join through an instance with a stale copy: %+v %v %v", p, created, err)
	}
	if c, _ := f.rdb.ZCard(ctx, rstore.KeysFor(name).Pre()).Result(); c != 0 {
		t.Fatalf("the queue's own slot took %d entries", c)
	}
	if err := stale.Leave(ctx, extra); err != nil {
		t.Fatal(err)
	}
	// A reload keeps its entry, wherever it is.
	for _, tk := range tickets[:6] {
		if p, created, err := q.Join(ctx, tk); err != nil || created || p.State != queue.StatePrequeue {
			t.Fatalf("reload: %+v %v %v", p, created, err)
		}
		if p, err := q.Status(ctx, tk); err != nil || p.State != queue.StatePrequeue {
			t.Fatalf("status: %+v %v", p, err)
		}
	}
	// One leaves before the start (its address may join again).
	if err := q.Leave(ctx, tickets[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Status(ctx, tickets[0]); !errors.Is(err, queue.ErrNoPlace) {
		t.Fatalf("status after leaving: %v", err)
	}
	again, _, _, err := join("10.0.0.0")
	if err != nil {
		t.Fatalf("a join after leaving, within the cap: %v", err)
	}
	tickets[0] = again
	// The leader's tick sums the shards: every answer shows the whole pre-queue.
	a := queue.NewAdmitter(q, queue.AdmitConfig{Owner: "first", DrawBatch: 16, MaxElapsed: 10 * time.Millisecond})
	if r, err := a.TickOnce(ctx, name); err != nil || r.Phase != queue.DrawScheduled {
		t.Fatalf("tick before the start: %+v %v", r, err)
	}
	for _, tk := range tickets[:6] {
		if p, err := q.Status(ctx, tk); err != nil || p.PrequeueSize != n {
			t.Fatalf("pre-queue size %d, want %d (%v)", p.PrequeueSize, n, err)
		}
	}

	// The start. A join racing it (minted in another shard than the queue's own) finds the
	// shard past its start, freezes every shard and queues behind the draw.
	start := time.Now().Add(time.Second)
	if _, _, err := q.Put(ctx, name, queue.SettingsPatch{StartsAt: timep(start)}); err != nil {
		t.Fatal(err)
	}
	f.untilRedisTime(t, start)
	late, lp, created, err := join("10.9.9.9")
	if err != nil || !created || lp.State != queue.StateWaiting || lp.Seq != n+1 {
		t.Fatalf("the join racing the start: %+v %v %v (want seq %d)", lp, created, err, n+1)
	}
	// A member leaves after the freeze: the draw records its sequence as a departure.
	if err := q.Leave(ctx, tickets[1]); err != nil {
		t.Fatal(err)
	}
	// The first leader places part of the list, then loses its lease mid-draw.
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		for {
			placed, _ := f.rdb.HGet(ctx, rstore.KeysFor(name).Draw(), "placed").Int()
			if placed > 0 {
				f.rdb.Del(ctx, rstore.KeysFor(name).Lease())
				return
			}
		}
	}()
	_, _ = a.TickOnce(ctx, name)
	<-stop
	second := queue.NewAdmitter(q, queue.AdmitConfig{Owner: "second", MaxElapsed: 10 * time.Millisecond})
	f.rdb.Del(ctx, rstore.KeysFor(name).Lease())
	if _, err := second.TickOnce(ctx, name); err != nil {
		t.Fatal(err)
	}
	d, err := q.Draw(ctx, name)
	if err != nil || d.Phase != queue.DrawDone || d.Participants != n {
		t.Fatalf("draw: %+v %v (want %d participants)", d, err, n)
	}
	order, err := q.DrawOrder(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(order, "\n"), "\n")
	if err := draw.Verify(d.Seed, d.Commitment, d.ParticipantsHash, lines); err != nil {
		t.Fatalf("published draw does not verify: %v", err)
	}
	byID := map[string]int{}
	for i, id := range lines {
		byID[id] = i + 1
	}
	// Everyone but the one who left is in the line once, in drawn order (the departure
	// ahead of them counted), the racing join behind them all.
	positions := map[int64]bool{}
	for i, tk := range tickets {
		p, err := q.Status(ctx, tk)
		if i == 1 {
			if !errors.Is(err, queue.ErrNoPlace) {
				t.Fatalf("the member who left after the freeze: %+v %v", p, err)
			}
			continue
		}
		want := int64(byID[draw.ID(tk.ID)])
		if want > int64(byID[draw.ID(tickets[1].ID)]) {
			want--
		}
		if err != nil || p.State != queue.StateWaiting || p.Position != want || positions[p.Position] {
			t.Fatalf("member %d: %+v %v (drawn place %d)", i, p, err, byID[draw.ID(tk.ID)])
		}
		positions[p.Position] = true
	}
	if p, _ := q.Status(ctx, late); p.Position != n {
		t.Fatalf("the racing join at %d, want %d", p.Position, n)
	}
	// The cap holds after the start: an address with two drawn places gets no third.
	if _, p, _, err := join("10.0.0.5"); !errors.Is(err, queue.ErrTooManyPlaces) {
		t.Fatalf("a third place after the start: %+v %v", p, err)
	}
	// The shards are empty once the draw is done.
	for _, tag := range strings.Split(tags, ",") {
		sk := rstore.ShardKeysFor(name, tag)
		if c, _ := f.rdb.Exists(ctx, sk.DrawSet(), sk.Tickets(), sk.Pre()).Result(); c != 0 {
			t.Fatalf("shard %s keeps %d keys after the draw", tag, c)
		}
	}
	// Admission runs in drawn order: a prefix of the line.
	for range 3 {
		f.elapse(t, name)
		if _, err := second.TickOnce(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	admitted := map[int64]bool{}
	for i, tk := range tickets {
		if i == 1 {
			continue
		}
		if p, _ := q.Status(ctx, tk); p.State == queue.StateAdmitted {
			want := int64(byID[draw.ID(tk.ID)])
			if want > int64(byID[draw.ID(tickets[1].ID)]) {
				want--
			}
			admitted[want] = true
		}
	}
	if len(admitted) == 0 {
		t.Fatal("nobody admitted after the draw")
	}
	for k := int64(1); k <= int64(len(admitted)); k++ {
		if !admitted[k] {
			t.Fatalf("admitted places %v: not the first %d of the drawn order", admitted, len(admitted))
		}
	}
}

// TestPrequeueNotShardedBesideAnOlderRelease: while an instance that does not report the
// feature (a release before sharded pre-queues) is alive, a new schedule keeps one shard.
func TestPrequeueNotShardedBesideAnOlderRelease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q := queue.New(f.rdb, queue.Config{OpTimeout: 10 * time.Second, PrequeueShards: 3}, nil)
	ctx := context.Background()
	// The older release's report: no features.
	if err := f.rdb.Set(ctx, rstore.InstanceKey("old-1"), `{"id":"old-1","sse_connections":0}`, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rdb.SAdd(ctx, rstore.InstancesKey, "old-1").Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Put(ctx, "mixed", queue.SettingsPatch{StartsAt: timep(time.Now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if tags, err := f.rdb.HGet(ctx, rstore.KeysFor("mixed").Cfg(), "pq_tags").Result(); err != redis.Nil {
		t.Fatalf("sharded beside an older release: pq_tags %q (%v)", tags, err)
	}
}
