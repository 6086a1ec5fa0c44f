package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/queue/redistest"
)

// Slot agrees with the cluster (CLUSTER KEYSLOT) on plain keys, hash tags, empty and
// unclosed tags, and the queue and limiter keys.
func TestSlotMatchesCluster(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	nc := c.Nodes()[0].Client()
	defer nc.Close()
	ctx := context.Background()
	keys := []string{"", "a", "foo", "123456789", "wr:queues", "wr:instances", "wr:instance:abc",
		"wr:{q:drop}:waiting", "wr:{q:drop}:token:x", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap",
		"foo{bar}{zap}", "{", "}", "{}", "a{b", "wr:{rl}:user:alice", "héllo{wörld}"}
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("k%d", i), fmt.Sprintf("wr:{q:q%d}:cfg", i))
	}
	for _, k := range keys {
		want, err := nc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := redistest.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
	if redistest.Slot("123456789") != 0x31C3%redistest.Slots { // CRC-16/XMODEM check value
		t.Error("crc16 check value")
	}
}

// The cluster: a URL the server parses, a client that works across slots, FlushAll, the
// hook catching a cross-slot script, MULTI/EXEC and multi-key command, and recording
// scripts by SHA1.
func TestClusterClientAndHook(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	ctx := context.Background()
	if o, err := redis.ParseClusterURL(c.URL()); err != nil || len(o.Addrs) != 6 {
		t.Fatalf("URL %s: %+v %v", c.URL(), o, err)
	}
	if ms, err := c.Masters(ctx); err != nil || len(ms) != 3 {
		t.Fatalf("masters: %v %v", ms, err)
	}
	rec := redistest.NewRecorder()
	cc := c.Client(rec)
	defer cc.Close()
	for i := range 50 {
		if err := cc.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ForEachMaster(ctx, func(ctx context.Context, nc *redis.Client) error {
		if n := nc.DBSize(ctx).Val(); n != 0 {
			return fmt.Errorf("%d keys after FlushAll", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	body := "return redis.call('SET', KEYS[1], ARGV[1])"
	ok := redis.NewScript(body)
	if err := ok.Run(ctx, cc, []string{"wr:{q:a}:x"}, 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := ok.Run(ctx, cc, []string{"wr:{q:a}:x"}, 1).Err(); err != nil {
		t.Fatal(err)
	}
	if n := rec.Scripts()[redistest.ScriptSHA1(body)]; n != 2 {
		t.Fatalf("script ran %d times, recorded %v", n, rec.Scripts())
	}
	if v := rec.Violations(); len(v) != 0 {
		t.Fatalf("violations on one slot: %v", v)
	}

	// Declared keys of two slots: the hook reports it (and the cluster refuses it).
	two := redis.NewScript("redis.call('SET', KEYS[1], 1) return redis.call('SET', KEYS[2], 1)")
	err := two.Run(ctx, cc, []string{"wr:{q:a}:x", "wr:{q:b}:x"}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("cross-slot script: %v", err)
	}
	// An undeclared key of another slot: only the cluster sees it.
	hidden := redis.NewScript("return redis.call('SET', 'wr:queues', 1)")
	if err := hidden.Run(ctx, cc, []string{"wr:{q:a}:x"}).Err(); err == nil {
		t.Fatal("a script touching an undeclared key of another slot ran")
	}
	// A multi-key command and a transaction over two slots.
	if err := cc.Del(ctx, "a", "b").Err(); err == nil {
		t.Fatal("DEL over two slots ran")
	}
	if _, err := cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "wr:{q:a}:x", 1, 0)
		p.Set(ctx, "wr:{q:b}:x", 1, 0)
		return nil
	}); err == nil {
		t.Fatal("MULTI over two slots ran")
	}
	// go-redis refuses this transaction before sending it: the hook never sees it. One it
	// sends — through a node's own client — it does see.
	n, err := c.MasterFor(ctx, "wr:{q:a}:x")
	if err != nil {
		t.Fatal(err)
	}
	node, err := cc.MasterForKey(ctx, "wr:{q:a}:x")
	if err != nil {
		t.Fatal(err)
	}
	if node.Options().Addr != n.Addr() {
		t.Fatalf("MasterFor says %s, go-redis %s", n.Addr(), node.Options().Addr)
	}
	_, _ = node.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "wr:{q:a}:x", 1, 0)
		p.Set(ctx, "wr:{q:a}:y{other}", 1, 0) // same slot: the first {…} is the tag
		p.Get(ctx, "b")
		return nil
	})
	v := rec.Violations()
	want := []string{"CROSSSLOT: EVALSHA", "refused by the cluster: EVALSHA", "CROSSSLOT: DEL", "MULTI/EXEC over several slots: SET,SET,GET"}
	for _, w := range want {
		found := false
		for _, s := range v {
			found = found || strings.HasPrefix(s, w)
		}
		if !found {
			t.Errorf("no violation %q in:\n%s", w, strings.Join(v, "\n"))
		}
	}
	if g := rec.GlobalKeys(); g["a"]["DEL/2"] != 1 {
		t.Errorf("global keys: %v", g)
	}
}

// Kill the master of a key's slot: its replica takes over within seconds, the client
// follows, and the killed node rejoins as a replica when started again.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	// A private cluster: the tests beside it use the shared one, and this one kills a node.
	c := redistest.StartCluster(t)
	ctx := context.Background()
	cc := c.Client()
	defer cc.Close()
	const key = "wr:{q:failover}:cfg"
	old, err := c.MasterFor(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// The write and its WAIT on one connection to the key's master: WAIT counts the replicas
	// that hold this connection's writes (the cluster client would send a keyless WAIT to
	// any node), and it may answer 0 when its timeout passes — asked again until the replica
	// (still syncing after an earlier test's restart, on a busy machine) holds it.
	mc := old.Client()
	defer mc.Close()
	conn := mc.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		n, err := conn.Do(ctx, "WAIT", 1, 2000).Int()
		if err == nil && n >= 1 {
			break // the replica has it
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica acknowledged the write: %d %v", n, err)
		}
	}
	start := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover took %v", time.Since(start).Round(10*time.Millisecond))
	now, err := c.MasterFor(ctx, key)
	if err != nil || now == old {
		t.Fatalf("master after failover: %v %v", now, err)
	}
	// go-redis re-reads the slot map after a MOVED, or when it is 10 s old: not after a
	// refused connection. Product code reloads it after such errors; here, at once.
	cc.ReloadState(ctx)
	var v string
	for deadline := time.Now().Add(10 * time.Second); ; {
		v, err = cc.Get(ctx, key).Result()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || v != "v" {
		t.Fatalf("GET after failover: %q %v", v, err)
	}
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if r, err := old.Role(ctx); err != nil || r != "slave" {
		t.Fatalf("restarted node: role %q %v", r, err)
	}
}

// On the shared cluster (cluster mode), Start hands out an empty cluster and refuses to
// stop or pause it; Single still gives a private server.
func TestStartModes(t *testing.T) {
	// Serial: in cluster mode it holds three clusters at once, the whole pool, which tests
	// running beside it would wait for.
	s := redistest.Start(t)
	ctx := context.Background()
	if err := s.Client().Set(ctx, "wr:{q:modes}:x", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	one := redistest.Start(t, redistest.Single())
	if one.Cluster() != nil {
		t.Fatal("Single gave the cluster")
	}
	if _, ok := one.Client().(*redis.Client); !ok {
		t.Fatal("Single's client is not a *redis.Client")
	}
	if !redistest.ClusterMode() {
		if s.Cluster() != nil {
			t.Fatal("single mode gave the cluster")
		}
		return
	}
	if _, ok := s.Client().(*redis.ClusterClient); !ok || s.Cluster() == nil {
		t.Fatal("cluster mode did not give the cluster")
	}
	again := redistest.Start(t)
	if n, err := again.Client().Exists(ctx, "wr:{q:modes}:x").Result(); err != nil || n != 0 {
		t.Fatalf("the cluster was not emptied: %d %v", n, err)
	}
	// Stop on the cluster fails the test: checked in a subtest that is expected to fail.
	fake := &fakeTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		redistest.Start(fake).Stop()
	}()
	if !fake.failed {
		t.Fatal("Stop on the shared cluster did not fail the test")
	}
}

// fakeTB records a Fatal instead of ending the test.
type fakeTB struct {
	testing.TB
	failed bool
}

var errFatal = errors.New("fatal")

func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = true; panic(errFatal) }
func (f *fakeTB) Helper()                           {}
