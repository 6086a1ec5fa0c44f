package queue_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/notify"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/trust"
)

// subscribeTicks subscribes to a queue's tick messages as the queue publishes them with
// the default configuration (PubSubAuto): SUBSCRIBE on a single Redis, SSUBSCRIBE (sharded
// pub/sub, to the master of the queue's slot) on a Redis Cluster.
func subscribeTicks(ctx context.Context, rdb redis.UniversalClient, name string) *redis.PubSub {
	if queue.New(rdb, queue.Config{}, nil).PubSub() == queue.PubSubSharded {
		return rdb.SSubscribe(ctx, queue.Channel(name))
	}
	return rdb.Subscribe(ctx, queue.Channel(name))
}

// TestScriptsKeepToOneSlot is the proof that the queue works on a Redis Cluster: it runs
// every Lua script of this package (every queue/*.lua, found by its SHA1) on a real cluster
// of 3 masters and 3 replicas, through the package's own API, with a client whose hook
// checks every command before it is sent (redistest/hook.go): all keys of a script, of a
// multi-key command and of a MULTI/EXEC hash to one slot, and no reply is a cluster's
// refusal (CROSSSLOT, or a script touching an undeclared key of another slot). Keys outside
// the queues' hash tags (wr:queues, wr:alive, instance and signing keys, …) are only touched
// alone or with keys of their own slot.
//
// In cluster mode (WR_TEST_REDIS=cluster) it uses the shared cluster; otherwise it starts
// one for itself (about 2 s), so the single-Redis pass proves it too.
//
// A new script fails this test until the scenario below runs it.
func TestScriptsKeepToOneSlot(t *testing.T) {
	t.Parallel()
	var c *redistest.Cluster
	if redistest.ClusterMode() {
		c = redistest.Start(t).Cluster()
	} else {
		c = redistest.StartCluster(t)
	}
	rec := redistest.NewRecorder()
	cc := c.Client(rec)
	t.Cleanup(func() { _ = cc.Close() })
	ctx := context.Background()
	// The pre-queue over 3 shards (pjoin.lua, pleave.lua, pfreeze.lua, freezeall.lua,
	// ptake.lua), each on its own master.
	q := queue.New(cc, queue.Config{PrequeueShards: 3}, nil) // shards 1…3 (0: the queue's own slot)
	signer := queue.NewSigner([]byte("test-secret"))
	a := queue.NewAdmitter(q, queue.AdmitConfig{Owner: "proof"})
	const name = "proof"

	// A scheduled sale (schedule.lua), a pre-queue (pjoin.lua), two leaving (pleave.lua).
	// The start an hour away, moved to just ahead before the ticks.
	start := time.Now().Add(time.Hour)
	rate, maxActive := 1000.0, int64(0)
	if _, _, err := q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: &rate, MaxActive: &maxActive, StartsAt: &start}); err != nil {
		t.Fatal(err)
	}
	var tks []queue.Ticket
	for _, shard := range []int{1, 2, 3, 1, 2} { // the two who leave in shards 1 and 2
		tk, _ := signer.NewWhere(name, func(id string) bool { return queue.ShardOfID(id, 4) == shard })
		if _, _, err := q.Join(ctx, tk); err != nil {
			t.Fatal(err)
		}
		tks = append(tks, tk)
	}
	for _, tk := range tks[3:] {
		if err := q.Leave(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	tks = tks[:3]
	// Signs of life (touch.lua), the snapshot (snapshot.lua), invites (invites_*.lua).
	if err := q.Touch(ctx, name, []string{tks[0].ID, tks[1].ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Snapshot(ctx, name); err != nil {
		t.Fatal(err)
	}
	tr := trust.New(rstore.New(cc, q.OpTimeout()))
	inv, err := tr.CreateInvites(ctx, name, trust.InviteSpec{Count: 2, Lane: queue.LanePriority, MaxUses: 1})
	if err != nil || len(inv) != 2 {
		t.Fatalf("invites: %v %v", inv, err)
	}
	if l, err := tr.Invites(ctx, name); err != nil || len(l) != 2 {
		t.Fatalf("invite list: %v %v", l, err)
	}
	if err := tr.RevokeInvite(ctx, name, inv[1].Code); err != nil {
		t.Fatal(err)
	}
	// A chain of rate limits, several keys in one script (limit.lua).
	l := queue.NewLimiter(cc, "")
	if r, err := l.AllowChain(ctx, []queue.Limit{{Scope: "user", Key: "u1", Rate: 10, Burst: 10}, {Scope: "global", Rate: 100, Burst: 100}}); err != nil || !r.Allowed {
		t.Fatalf("limit: %+v %v", r, err)
	}
	// Sold out and restocked (soldout.lua).
	for _, so := range []bool{true, false} {
		if err := q.SetSoldOut(ctx, name, so, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Admission ticks (lease.lua, admit.lua): before the start, then the draw at the start
	// (drawplace.lua, drawdone.lua), then admissions and a token (token.lua).
	if _, err := a.TickOnce(ctx, name); err != nil {
		t.Fatal(err)
	}
	// The start a moment ahead, further if the save took longer than that and refused it (a
	// busy machine: "starts_at must be in the future", a fresh-clone run on 2026-12-03).
	for ahead := 100 * time.Millisecond; ; ahead *= 2 {
		start = time.Now().Add(ahead)
		_, _, err := q.Put(ctx, name, queue.SettingsPatch{StartsAt: &start})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "must be in the future") || ahead > 10*time.Second {
			t.Fatal(err)
		}
	}
	untilRedisTime(t, cc, start)
	if r, err := a.TickOnce(ctx, name); err != nil {
		t.Fatalf("start tick: %+v %v", r, err)
	}
	if d, err := q.Draw(ctx, name); err != nil || d.Phase != queue.DrawDone || d.Participants != 3 {
		t.Fatalf("draw: %+v %v", d, err)
	}
	// E-mail reminders (mailjoin.lua, mailscan.lua, mailforget.lua): a drawn member
	// registers, the leader's scan claims its near message (and makes its link), the
	// registration is forgotten.
	ms := notify.NewStore(cc, notify.Hold, q.OpTimeout())
	if err := ms.Register(ctx, name, tks[1].ID, signer.String(tks[1]), "proof@example.com", "en"); err != nil {
		t.Fatalf("reminder: %v", err)
	}
	sender, err := notify.ParseSMTP("smtp://127.0.0.1:1?from=proof@example.com") // never dialled: nothing runs the sender
	if err != nil {
		t.Fatal(err)
	}
	if err := notify.New(ms, sender, notify.Config{BaseURL: "http://proof.example", Near: 1000}).Scan(ctx, name); err != nil {
		t.Fatalf("reminder scan: %v", err)
	}
	if err := ms.Forget(ctx, name, tks[1].ID); err != nil {
		t.Fatal(err)
	}
	// A join after the start queues behind the draw (join.lua) and leaves (leave.lua).
	late, _ := signer.New(name)
	if p, _, err := q.Join(ctx, late); err != nil || p.State != queue.StateWaiting {
		t.Fatalf("a join after the start: %+v %v", p, err)
	}
	if err := q.Leave(ctx, late); err != nil {
		t.Fatal(err)
	}
	var p queue.Place
	testwait.For(t, 30*time.Second, "the first member's admission", func() bool {
		if _, err := a.TickOnce(ctx, name); err != nil {
			t.Fatal(err)
		}
		var err error
		if p, err = q.Status(ctx, tks[0]); err != nil {
			t.Fatal(err)
		}
		return p.Token != ""
	})
	if v, _, err := q.CheckToken(ctx, tks[0], p.Token); err != nil {
		t.Fatalf("token: %v %v", v, err)
	}
	// A revocation (revoke.lua): the mark, the ended row and the freed slot, one slot.
	if r, err := q.RevokeTicketToken(ctx, tks[0]); err != nil || r.Token != p.Token {
		t.Fatalf("revoke: %+v %v", r, err)
	}
	// The end of the sale (end.lua).
	end := time.Now().Add(100 * time.Millisecond)
	if _, _, err := q.Put(ctx, name, queue.SettingsPatch{EndsAt: &end}); err != nil {
		t.Fatal(err)
	}
	untilRedisTime(t, cc, end)
	if r, err := a.TickOnce(ctx, name); err != nil || !r.EndDue {
		t.Fatalf("end tick: %+v %v", r, err)
	}

	// Every script of the package ran, none without keys, and nothing broke the rule.
	ran := rec.Scripts()
	keyless := rec.KeylessScripts()
	scripts := rstore.Scripts()
	if len(scripts) == 0 {
		t.Fatal("no scripts found")
	}
	files := make([]string, 0, len(scripts))
	for f := range scripts {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		sha := scripts[f].Hash() // with its prelude where it has one (lua/freeze.lua)
		switch {
		case ran[sha] == 0:
			t.Errorf("%s (%s) never ran on the cluster: run it in this test's scenario", f, sha)
		case keyless[sha] > 0:
			t.Errorf("%s ran %d times with no key: a keyless script goes to a random node", f, keyless[sha])
		default:
			t.Logf("%-22s ran %d times", f, ran[sha])
		}
	}
	if v := rec.Violations(); len(v) > 0 {
		t.Errorf("%d command(s) broke the one-slot rule:\n%s", len(v), strings.Join(v, "\n"))
	}
	globals := rec.GlobalKeys()
	keys := make([]string, 0, len(globals))
	for k := range globals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("global key %s (slot %d): %v", k, redistest.Slot(k), globals[k])
	}
}

// A queue's keys share the hash tag {q:<name>}, which only holds if a name cannot close it
// early or open another: ValidName (^[A-Za-z0-9_-]{1,64}$) refuses "{" and "}", and so do
// Put and the ticket parser. ("a}b" would give wr:{q:a}b}:cfg, hashed as {q:a}: queue a's
// slot, whatever its other keys do.)
func TestQueueNamesKeepTheHashTag(t *testing.T) {
	t.Parallel()
	if redistest.Slot("wr:{q:a}b}:cfg") != redistest.Slot("wr:{q:a}:cfg") {
		t.Fatal("the example in this test's comment is wrong")
	}
	for _, n := range []string{"a{b", "a}b", "{a}", "{", "}", "q:{x}", "", "a b", "a:b", strings.Repeat("a", 65)} {
		if queue.ValidName(n) {
			t.Errorf("ValidName(%q) = true", n)
		}
	}
	for _, n := range []string{"a", "drop-1", "A_b-9", strings.Repeat("z", 64)} {
		if !queue.ValidName(n) {
			t.Errorf("ValidName(%q) = false", n)
		}
		k := []string{"wr:{q:" + n + "}:cfg", "wr:{q:" + n + "}:waiting", "wr:{q:" + n + "}:token:x", queue.Channel(n)}
		for _, key := range k[1:] {
			if redistest.Slot(key) != redistest.Slot(k[0]) {
				t.Errorf("%s and %s: different slots", key, k[0])
			}
		}
	}
	f := newFixture(t)
	for _, n := range []string{"a{b", "a}b", "{x}"} {
		if _, _, err := f.q.Put(context.Background(), n, queue.SettingsPatch{}); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("Put(%q): %v, want ErrInvalid", n, err)
		}
		tk, _ := f.signer.New("a")
		raw := strings.Replace(f.signer.String(tk), "a.", n+".", 1)
		if _, err := f.signer.Parse(raw); err == nil {
			t.Errorf("a ticket for queue %q parsed", n)
		}
	}
}
