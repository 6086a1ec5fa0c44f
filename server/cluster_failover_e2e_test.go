package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// TestClusterMasterFailover: on a Redis Cluster of 3 masters and 3 replicas, two server
// processes admit a queue of N users (1,000 in the test command; WR_TEST_FAILOVER_N) at
// 200/s, every user on an open stream. Once a fifth are admitted (max_active stops it there),
// the replica of the queue's slot is paused (SIGSTOP) and the cap lifted: admission is held — its ticks wait for an
// acknowledgement that does not come, and no token is told — and after 2 s held the master
// that owns the slot is SIGKILLed, then the replica resumed. It takes over with whatever it
// had read; admission resumes (the seconds are logged); every user gets exactly one token
// and no token goes to two users — no admission a browser was told of is lost, since a tick's
// message goes out only once a replica holds it; every position event, before and after the
// failover, equals the true position at its tick; and every user then orders with the
// token it was told (201), the stock falling by exactly N.
func TestClusterMasterFailover(t *testing.T) {
	// Beside the other tests (it was serial until 2026-12-03: beside a CPU hog its 1,000
	// joins once took longer than the presence grace, r7 — the grace is 10 minutes below).
	// Serial, it held every parallel test of the cluster pass back for its ~25 s.
	t.Parallel()
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("WR_TEST_FAILOVER_N")); err == nil && v > 0 {
		n = v
	}
	const rate = 200
	c := redistest.StartCluster(t) // its own: a master is killed here
	// The places wait for their streams while the rest join (1,000 joins, one at a time): a
	// grace longer than any machine takes for them, so none is abandoned before its stream.
	env := baseEnv(c.URL(), testDB(t), map[string]string{"WR_LOG_LEVEL": "info", "WR_GRACE": "10m"})
	ins := []*instance{startProcess(t, "f1", env), startProcess(t, "f2", env)}
	admin(t, ins[0], "PUT", "/admin/api/queues/fo", map[string]any{"rate_per_second": rate, "paused": true, "places_per_ip": 0, "token_ttl_seconds": 600, "max_active": n / 5, "max_active_share_per_ip": 0})
	admin(t, ins[0], "PUT", "/admin/api/products/fo-item", map[string]any{"name": "Item", "price": 1000, "stock": n + 1000, "queue": "fo"})

	tickets := make([]string, n)
	for i := range n {
		var j joinResp
		if res := call(t, "POST", ins[i%2].url+"/api/queues/fo/join", "", nil, &j); res.StatusCode != 201 || j.Position != int64(i+1) {
			t.Fatalf("join %d: %d position %d", i, res.StatusCode, j.Position)
		}
		tickets[i] = j.Ticket
	}
	fs := make([]*follower, n)
	logs := make([]*userLog, n)
	for i := range n {
		fs[i] = follow(t, ins, i%2, "fo", tickets[i])
		logs[i] = &fs[i].log
	}
	defer func() {
		for _, f := range fs {
			close(f.stop)
			f.wg.Wait()
		}
	}()
	testwait.For(t, 60*time.Second, "every stream's first position", func() bool {
		return all(logs, func(u *userLog) bool { return len(u.positions) > 0 })
	})

	master, err := c.MasterFor(context.Background(), "wr:{q:fo}:clock")
	if err != nil {
		t.Fatal(err)
	}
	replica := replicaOf(t, c, master)
	admin(t, ins[0], "PUT", "/admin/api/queues/fo", map[string]any{"paused": false})
	// max_active stops admission at a fifth, however late a busy machine looks.
	testwait.For(t, 60*time.Second, "a fifth of the users admitted", func() bool { return admittedCount(fs) == n/5 })
	// With every replica attached, no admission went out unconfirmed — on a busy machine too:
	// a WAIT that falls short holds the tick instead.
	if u := unconfirmedOf(t, ins); u != 0 {
		t.Fatalf("%d admissions went out unconfirmed before the failover", u)
	}
	// The slot's replica stops acknowledging (SIGSTOP): admission is held — no tick, no token
	// told — until the master dies with the held ticks' writes its replica may not have.
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replica.Resume() }()
	pausedAt, toldBefore := time.Now(), metricAll(t, ins, "queue_token_issued_total")
	admin(t, ins[0], "PUT", "/admin/api/queues/fo", map[string]any{"max_active": 0}) // admission goes on, and is held
	testwait.For(t, 60*time.Second, "admission held for 2 s", func() bool { return metricAll(t, ins, "queue_admission_held_seconds_total") >= 2 })
	held := metricAll(t, ins, "queue_admission_held_ticks_total")
	killedAt := time.Now()
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Resume(); err != nil { // it takes over, with what it had read
		t.Fatal(err)
	}
	t.Logf("replica %s paused at %s (%v admitted by then); admission held (%v held ticks); SIGKILLed master %s (owner of the queue's slot) %.1f s later, %d users told a token by then",
		replica.Addr(), pausedAt.Format("15:04:05.000"), toldBefore, held, master.Addr(), killedAt.Sub(pausedAt).Seconds(), admittedCount(fs))

	testwait.For(t, 120*time.Second, "every user admitted", func() bool {
		for _, f := range fs {
			if len(f.admittedTokens()) == 0 {
				return false
			}
		}
		return true
	})

	// Exactly one token per user, no token twice.
	tokens := make([]string, n)
	owner := map[string]int{}
	admittedAt := make([]int64, n)
	var times []time.Time
	for i, f := range fs {
		toks := f.admittedTokens()
		if len(toks) != 1 {
			t.Fatalf("user %d was told %d different tokens: %v", i, len(toks), toks)
		}
		for tok := range toks {
			if j, ok := owner[tok]; ok {
				t.Fatalf("token %s told to users %d and %d", tok, j, i)
			}
			owner[tok] = i
			tokens[i] = tok
		}
		f.log.mu.Lock()
		first := f.log.admitted[0]
		f.log.mu.Unlock()
		admittedAt[i] = num(first.Data["tick"])
		if ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(first.Data["server_time"])); err == nil {
			times = append(times, ts)
		}
	}
	// Admission resumed: the longest pause between admissions around the kill.
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var gap time.Duration
	var resumed time.Time
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d > gap && times[i].After(killedAt) {
			gap, resumed = d, times[i]
		}
	}
	t.Logf("admission resumed %.1f s after the kill (longest pause between admissions %.1f s)", resumed.Sub(killedAt).Seconds(), gap.Seconds())

	// Positions: every event equals the true position at its tick, before and after.
	checked := checkTruePositions(t, logs, admittedAt)
	t.Logf("%d position events checked against the true positions", checked)

	// Every token a user was told buys, once.
	var wg sync.WaitGroup
	errs := make(chan string, n)
	work := make(chan int)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				// As the order page does: a 503 (the database pool busy under this burst) is
				// retried after its Retry-After with the same Idempotency-Key.
				var res *http.Response
				var e errResp
				for attempt := 0; attempt < 5; attempt++ {
					res, e, _ = order(t, ins[(i+w)%2], tickets[i], tokens[i], fmt.Sprintf("fo-%d", i), map[string]any{"product_id": "fo-item", "quantity": 1})
					if res == nil || res.StatusCode != 503 {
						break
					}
					time.Sleep(time.Second)
				}
				if res == nil || res.StatusCode != 201 {
					code := 0
					if res != nil {
						code = res.StatusCode
					}
					errs <- fmt.Sprintf("user %d: order %d %s", i, code, e.Error.Code)
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	var failed []string
	for e := range errs {
		failed = append(failed, e)
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d users could not order with their token: %s", len(failed), n, strings.Join(failed[:min(5, len(failed))], "; "))
	}
	if got := stockOf(t, ins[0], "fo-item"); got != 1000 {
		t.Fatalf("stock %d after %d orders, want 1000", got, n)
	}
	// After the failover the new master has no replica (its old master is down): admissions
	// go out unconfirmed, counted — the documented limit.
	unconf := unconfirmedOf(t, ins)
	t.Logf("%d users admitted across the failover, each told one token that bought once (0 lost); admissions confirmed %d, held ticks %v (%.1f s held in all), unconfirmed %d (after the kill: no replica left); %v token reads withheld",
		n, int64(n)-unconf, metricAll(t, ins, "queue_admission_held_ticks_total"), metricAll(t, ins, "queue_admission_held_seconds_total"), unconf,
		metricAll(t, ins, "queue_replication_withheld_total"))
}

// replicaOf finds the replica of master in c.
func replicaOf(t *testing.T, c *redistest.Cluster, master *redistest.Node) *redistest.Node {
	t.Helper()
	_, port, _ := strings.Cut(master.Addr(), ":")
	for _, nd := range c.Nodes() {
		nc := nd.Client()
		info, err := nc.Info(context.Background(), "replication").Result()
		_ = nc.Close()
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+port+"\r\n") {
			return nd
		}
	}
	t.Fatalf("no replica of %s", master.Addr())
	return nil
}

// admittedCount is how many users have been told a token.
func admittedCount(fs []*follower) int {
	n := 0
	for _, f := range fs {
		if len(f.admittedTokens()) > 0 {
			n++
		}
	}
	return n
}

// metricAll sums a metric (every label) over the instances.
func metricAll(t *testing.T, ins []*instance, name string) float64 {
	var sum float64
	for _, in := range ins {
		for _, line := range strings.Split(readAll(call(t, "GET", in.url+"/metrics", "", nil, nil)), "\n") {
			if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				sum += v
			}
		}
	}
	return sum
}

// unconfirmedOf sums queue_replication_unconfirmed_total over the instances.
func unconfirmedOf(t *testing.T, ins []*instance) int64 {
	return int64(metricAll(t, ins, "queue_replication_unconfirmed_total"))
}
