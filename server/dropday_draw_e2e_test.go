package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/draw"
	"github.com/waitroom/waitroom/queue/redistest"
)

// ticketID is the random id inside a ticket string "<queue>.<id>.<signature>".
func ticketID(ticket string) string {
	parts := strings.Split(ticket, ".")
	if len(parts) != 3 {
		return ""
	}
	return parts[1]
}

// parallel runs fn(i) for i in 0…n-1 on workers goroutines and fails the test with the
// first error.
func parallel(t *testing.T, n, workers int, fn func(i int) error) {
	t.Helper()
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// joinAll joins n tickets through the instances in turn, with workers in parallel, and
// returns the ticket strings (in no particular order).
func joinAll(t *testing.T, ins []*instance, name string, n, workers int) []string {
	t.Helper()
	out := make([]string, n)
	parallel(t, n, workers, func(i int) error {
		res, err := specClient.Post(ins[i%len(ins)].url+"/api/queues/"+name+"/join", "application/json", nil)
		if err != nil {
			return err
		}
		var j joinResp
		err = json.NewDecoder(res.Body).Decode(&j)
		res.Body.Close()
		if err != nil || res.StatusCode != 201 || j.State != "prequeue" {
			return fmt.Errorf("join %d: %d %+v %v", i, res.StatusCode, j, err)
		}
		out[i] = j.Ticket
		return nil
	})
	return out
}

// waitDrawn waits until the queue's draw is published and returns it with the order.
func waitDrawn(t *testing.T, in *instance, name string, within time.Duration) (publishedDraw, []string) {
	t.Helper()
	var d publishedDraw
	testwait.For(t, within, "the draw published", func() bool {
		d = publishedDraw{}
		call(t, "GET", in.url+"/api/queues/"+name+"/draw", "", nil, &d)
		return d.Seed != ""
	})
	res := call(t, "GET", in.url+"/api/queues/"+name+"/draw/order", "", nil, nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("draw order: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	order := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(body) == 0 {
		order = nil
	}
	if err := draw.Verify(d.Seed, d.Commitment, d.ParticipantsHash, order); err != nil {
		t.Fatalf("the published draw does not verify: %v", err)
	}
	if d.Algorithm != draw.Algorithm || d.Participants != int64(len(order)) {
		t.Fatalf("draw %+v with %d ids", d, len(order))
	}
	return d, order
}

// statusPositions reads every ticket's status (through the instances in turn) and returns
// the positions.
func statusPositions(t *testing.T, ins []*instance, name string, tickets []string, workers int) []int64 {
	t.Helper()
	out := make([]int64, len(tickets))
	parallel(t, len(tickets), workers, func(i int) error {
		req, _ := http.NewRequest("GET", ins[i%len(ins)].url+"/api/queues/"+name+"/status", nil)
		req.Header.Set("Authorization", "Bearer "+tickets[i])
		res, err := specClient.Do(req)
		if err != nil {
			return err
		}
		var j joinResp
		err = json.NewDecoder(res.Body).Decode(&j)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || j.State != "waiting" {
			return fmt.Errorf("status %d: %d %+v %v", i, res.StatusCode, j, err)
		}
		out[i] = j.Position
		return nil
	})
	return out
}

// TestDrawAcrossInstances: a pre-queue joined over two instances is drawn at the start:
// every ticket is placed exactly once, at the place the published order gives it
// (positions 1…n exact, read back through both instances), the published seed and list
// reproduce the order, joiners after the start queue behind in FIFO, and the pre-queue
// members watching a stream get their drawn place pushed. n is 2,000 in the test command,
// drawn in batches of 500 so that the draw spans several script calls as a big one does;
// WR_TEST_DRAW_N=10000 (with the default batch of 5,000) is the benchmark's size.
func TestDrawAcrossInstances(t *testing.T) {
	t.Parallel()
	n, batch := 2000, "500"
	if v := os.Getenv("WR_TEST_DRAW_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			t.Fatalf("WR_TEST_DRAW_N=%q: want a size ≥ 100", v)
		}
		batch = "5000"
	}
	rs := redistest.Start(t)
	env := tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_LOG_LEVEL": "info", "WR_DRAW_BATCH": batch})
	ins := []*instance{startProcess(t, "d1", env), startProcess(t, "d2", env)}
	admin(t, ins[0], "PUT", "/admin/api/queues/drop10k", map[string]any{
		"rate_per_second": 0, "places_per_ip": 0, "starts_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	})
	var before publishedDraw
	call(t, "GET", ins[1].url+"/api/queues/drop10k/draw", "", nil, &before)
	if len(before.Commitment) != 64 || before.Seed != "" {
		t.Fatalf("draw before the start: %+v", before)
	}
	tickets := joinAll(t, ins, "drop10k", n, 16)

	// Some pre-queue members watch a stream, on both instances.
	const watchers = 60
	streams := make([]*sseStream, watchers)
	for i := range streams {
		streams[i] = mustStream(t, ins[i%2].url+"/api/queues/drop10k/stream", tickets[i])
		// On a Redis Cluster the pre-queue is sharded (queue/prequeue.go): its size is the
		// leader's count of the shards, at most a second or two behind the joins.
		ev, ok := streams[i].next(t, 30*time.Second, "prequeue", "position")
		for ok && ev.Name == "prequeue" && num(ev.Data["prequeue_size"]) < int64(n) {
			ev, ok = streams[i].next(t, 10*time.Second, "prequeue", "position")
		}
		if !ok || ev.Name != "prequeue" || num(ev.Data["prequeue_size"]) != int64(n) {
			t.Fatalf("stream %d before the start: %+v", i, ev)
		}
	}

	// The sale starts now (starts_at null on a scheduled queue that has not started).
	admin(t, ins[0], "PUT", "/admin/api/queues/drop10k", map[string]any{"starts_at": nil})
	started := time.Now()
	var late []string
	for i := range 20 {
		var j joinResp
		res := call(t, "POST", ins[i%2].url+"/api/queues/drop10k/join", "", nil, &j)
		if res.StatusCode != 201 || j.State != "waiting" {
			t.Fatalf("join after the start: %d %+v", res.StatusCode, j)
		}
		late = append(late, j.Ticket)
	}
	d, order := waitDrawn(t, ins[1], "drop10k", 60*time.Second)
	t.Logf("drawn %d in %v after the start (commitment %s…, seed %s…)", d.Participants, time.Since(started).Round(time.Millisecond), d.Commitment[:12], d.Seed[:12])
	if d.Commitment != before.Commitment || d.Participants != int64(n) {
		t.Fatalf("draw after: %+v", d)
	}
	place := make(map[string]int64, n)
	for i, id := range order {
		place[id] = int64(i + 1)
	}
	positions := statusPositions(t, ins, "drop10k", tickets, 16)
	seen := make([]bool, n+1)
	for i, tk := range tickets {
		p := positions[i]
		if p < 1 || p > int64(n) || seen[p] {
			t.Fatalf("ticket %d at position %d (seen before: %v)", i, p, p >= 1 && p <= int64(n) && seen[p])
		}
		seen[p] = true
		if want := place[draw.ID(ticketID(tk))]; p != want {
			t.Fatalf("ticket %d at position %d, the published order says %d", i, p, want)
		}
	}
	for i, p := range statusPositions(t, ins, "drop10k", late, 4) {
		if p != int64(n+i+1) {
			t.Fatalf("late joiner %d at %d, want %d", i, p, n+i+1)
		}
	}
	for i, s := range streams {
		ev, ok := s.next(t, 30*time.Second, "position")
		if !ok || num(ev.Data["position"]) != positions[i] {
			t.Fatalf("stream %d: %+v, want position %d", i, ev, positions[i])
		}
	}
	// The start cannot move any more, and nothing drawn was lost by trying.
	var e errResp
	res := call(t, "PUT", ins[0].url+"/admin/api/queues/drop10k", adminToken,
		map[string]any{"starts_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, &e)
	if res.StatusCode != 409 || e.Error.Code != "draw_done" {
		t.Fatalf("moving the start after the draw: %d %+v", res.StatusCode, e)
	}
	again := statusPositions(t, ins, "drop10k", tickets[:200], 4)
	for i := range again {
		if again[i] != positions[i] {
			t.Fatalf("ticket %d moved from %d to %d", i, positions[i], again[i])
		}
	}
}

// TestDrawLeaderKilledMidDraw: the instance running the draw is SIGKILLed after it placed
// its first batch, while Redis holds its next one; the other instance takes the lease and finishes the draw: every
// member placed exactly once, none lost or doubled, the published order verifies. The size
// is WR_TEST_DRAW_KILL_N (10,000 in the test command; 100,000 for the benchmark record).
func TestDrawLeaderKilledMidDraw(t *testing.T) {
	n := 10000
	if v := os.Getenv("WR_TEST_DRAW_KILL_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	t.Parallel()
	rs := redistest.Start(t)
	// Batches of 10 (1,000 script calls): the draw lasts long enough that the poll below sees
	// its first batches before its end even when the test is held off the CPU for a while.
	env := tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_LOG_LEVEL": "info", "WR_DRAW_BATCH": "10"})
	ins := []*instance{startProcess(t, "k1", env), startProcess(t, "k2", env)}
	admin(t, ins[0], "PUT", "/admin/api/queues/kill", map[string]any{
		"rate_per_second": 0, "places_per_ip": 0, "starts_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	})
	// The pre-queue is filled through the queue package (the joins' own code path, without
	// HTTP, so 100,000 take seconds).
	rdb := rs.Client()
	q := queue.New(rdb, queue.Config{OpTimeout: 30 * time.Second}, nil) // the joins' budget: generous beside other tests
	signer := queue.NewSigner([]byte(env["WR_SECRET"]))
	ctx := context.Background()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				tk, _ := signer.New("kill")
				if p, _, err := q.Join(ctx, tk); err != nil || p.State != queue.StatePrequeue {
					t.Errorf("join: %+v %v", p, err)
					return
				}
				ids[i] = tk.ID
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var leader string
	testwait.For(t, 30*time.Second, "a leader", func() bool {
		var st struct {
			Queues []struct{ Name, Leader string } `json:"queues"`
		}
		call(t, "GET", ins[0].url+"/admin/api/stats", adminToken, nil, &st)
		for _, s := range st.Queues {
			if s.Name == "kill" && s.Leader != "" {
				leader = s.Leader
				return true
			}
		}
		return false
	})
	t.Logf("%s leads before the start", leader)
	admin(t, ins[0], "PUT", "/admin/api/queues/kill", map[string]any{"starts_at": nil})
	// Polled without a pause until the first batch is placed; then Redis holds every write
	// (CLIENT PAUSE … WRITE: the draw's next batch waits in it) until the leader is killed, so
	// the kill lands mid-draw however busy the machine (waiting for a quarter, the test was
	// descheduled past the draw's end beside a CPU hog: "placed 10000 of 10000").
	var placed int
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		placed, _ = rdb.HGet(ctx, "wr:{q:kill}:draw", "placed").Int()
		if placed >= 1 {
			break
		}
	}
	clientPause := func(args ...any) {
		t.Helper()
		if err := rs.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.Do(ctx, append([]any{"CLIENT"}, args...)...).Err()
		}); err != nil {
			t.Fatalf("CLIENT %v: %v", args, err)
		}
	}
	clientPause("PAUSE", 60000, "WRITE")
	unpaused := false
	defer func() {
		if !unpaused {
			clientPause("UNPAUSE")
		}
	}()
	placed, _ = rdb.HGet(ctx, "wr:{q:kill}:draw", "placed").Int() // reads go on
	// The victim is whoever holds the lease now (leadership may have moved to the instance
	// the spread prefers since the start was set).
	victim, survivor := ins[0], ins[1]
	if strings.HasPrefix(rdb.Get(ctx, "wr:{q:kill}:lease").Val(), "k2:") {
		victim, survivor = ins[1], ins[0]
	}
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	phase, _ := rdb.HGet(ctx, "wr:{q:kill}:cfg", "draw").Result()
	clientPause("UNPAUSE")
	unpaused = true
	t.Logf("killed %s (the leader) with %d of %d placed, phase %q", victim.id, placed, n, phase)
	if placed == 0 || placed >= n || phase != "f" {
		t.Fatalf("the kill did not land mid-draw: placed %d of %d, phase %q", placed, n, phase)
	}
	start := time.Now()
	_, order := waitDrawn(t, survivor, "kill", 60*time.Second)
	t.Logf("%s finished the draw %v after the kill", survivor.id, time.Since(start).Round(time.Millisecond))
	if len(order) != n {
		t.Fatalf("%d in the published order, want %d", len(order), n)
	}
	rows, err := rdb.HGetAll(ctx, "wr:{q:kill}:tickets").Result()
	if err != nil {
		t.Fatal(err)
	}
	seqs := make(map[int64]bool, n)
	for _, id := range ids {
		st := rows[id]
		var seq int64
		if _, err := fmt.Sscanf(st, "w:%d", &seq); err != nil || seq < 1 || seq > int64(n) || seqs[seq] {
			t.Fatalf("ticket %s: state %q (placed twice: %v)", id, st, seqs[seq])
		}
		seqs[seq] = true
	}
	if w, _ := rdb.ZCard(ctx, "wr:{q:kill}:waiting").Result(); w != int64(n) {
		t.Fatalf("%d in the line, want %d", w, n)
	}
	// The drawn order is the order of the sequences.
	bySeq := make([]string, n+1)
	for _, id := range ids {
		var seq int64
		fmt.Sscanf(rows[id], "w:%d", &seq)
		bySeq[seq] = draw.ID(id)
	}
	for i, id := range order {
		if bySeq[i+1] != id {
			t.Fatalf("place %d holds %s, the published order says %s", i+1, bySeq[i+1], id)
		}
	}
}
