package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

// crowdLine reads queue demo-crowd straight from the test's Redis.
func crowdLine(t *testing.T, q *queue.Queue) queue.Snapshot {
	t.Helper()
	s, err := q.Snapshot(context.Background(), "demo-crowd")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testQueue is a Queue on the test's Redis, for reading what the instances wrote.
func testQueue(rs *redistest.Server) *queue.Queue {
	return queue.New(rs.Client(), queue.Config{OpTimeout: 10 * time.Second}, nil)
}

// TestDemoCrowdLineMoves: with the demo on and a crowd of 30, a visitor who joins queue
// demo-crowd through HTTP finds the crowd ahead (place 31), watches the place count down on
// the stream, and is let in with a token. The index introduces both demo lines, and the
// crowd line's waiting page says that its crowd is simulated and links to the empty line.
func TestDemoCrowdLineMoves(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "demo", tolerantEnv(rs.URL(), testDB(t), map[string]string{
		"WR_DEMO": "true", "WR_DEMO_CROWD": "30", "WR_UPDATE_INTERVAL": "100ms"}))
	q := testQueue(rs)
	// Held still while the visitor joins, so the place found is the crowd's size plus one.
	mustAdmin(t, in, "PUT", "/admin/api/queues/demo-crowd", map[string]any{"paused": true, "rate_per_second": 10})
	testwait.For(t, time.Minute, "a crowd of 30 in line", func() bool { return crowdLine(t, q).Waiting == 30 })

	var j joinResp
	if res := call(t, "POST", in.url+"/api/queues/demo-crowd/join", "", nil, &j); res.StatusCode != 201 || j.Position != 31 {
		t.Fatalf("join demo-crowd: %d at place %d; want 201 at place 31 (behind the crowd of 30)", res.StatusCode, j.Position)
	}
	s := mustStream(t, in.url+"/api/queues/demo-crowd/stream", j.Ticket)
	mustAdmin(t, in, "PUT", "/admin/api/queues/demo-crowd", map[string]any{"paused": false})

	var places []int64
	etas := 0
	for {
		ev, ok := s.next(t, time.Minute, "position", "admitted")
		if !ok {
			t.Fatalf("the stream ended or went quiet after places %v", places)
		}
		if ev.Name == "admitted" {
			if tok, _ := ev.Data["token"].(string); tok == "" {
				t.Fatalf("admitted without a token: %v", ev.Data)
			}
			break
		}
		p := num(ev.Data["position"])
		if n := len(places); n > 0 && p > places[n-1] {
			t.Fatalf("the place went up: %v then %d", places, p)
		}
		if eta, ok := ev.Data["eta_seconds"].(float64); ok && eta > 0 {
			etas++
		}
		places = append(places, p)
	}
	if len(places) < 3 || places[0] != 31 || places[len(places)-1] >= places[0] {
		t.Fatalf("places seen %v: want a count down from 31 over several events", places)
	}
	t.Logf("places seen on the stream: %v, then admitted", places)
	if etas == 0 {
		t.Fatalf("no position event carried an ETA (places %v)", places)
	}

	idx := readIndex(t, in.url)
	for name, sentence := range map[string]string{
		"demo":       "an empty line — you go straight in",
		"demo-crowd": "a line with a simulated crowd ahead of you",
	} {
		e, ok := idx[name]
		if !ok || !e.link || !strings.Contains(e.html, `href="/q/`+name+`"`) || !strings.Contains(e.html, sentence) {
			t.Errorf("the index's entry for %s (listed %v): want a link to /q/%s and %q\n%s", name, ok, name, sentence, e.html)
		}
	}
	page := readAll(call(t, "GET", in.url+"/q/demo-crowd?lang=en", "", nil, nil))
	for _, want := range []string{`data-demo="crowd"`, "simulated crowd", `id="demo-switch" href="/q/demo"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the crowd line's waiting page lacks %q", want)
		}
	}
	page = readAll(call(t, "GET", in.url+"/q/demo?lang=en", "", nil, nil))
	for _, want := range []string{`data-demo="empty"`, `id="demo-switch" href="/q/demo-crowd"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the empty line's waiting page lacks %q", want)
		}
	}
}

// TestDemoCrowdTwoInstancesKeepOneCrowd: two instances on one Redis each run the crowd; the
// line never holds more than the crowd's size, however many are let in meanwhile, and is
// topped up to exactly that size again.
func TestDemoCrowdTwoInstancesKeepOneCrowd(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	env := tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_DEMO": "true", "WR_DEMO_CROWD": "40"})
	ins := startInProcessAll(t, env, "a", "b")
	q := testQueue(rs)
	mustAdmin(t, ins[0], "PUT", "/admin/api/queues/demo-crowd", map[string]any{"rate_per_second": 20})

	// Both crowds top the line up many times over while 120 are let in (three crowds' worth).
	var most int64
	testwait.For(t, 2*time.Minute, "120 of the crowd let in", func() bool {
		s := crowdLine(t, q)
		most = max(most, s.Waiting)
		if s.Waiting > 40 {
			t.Fatalf("%d waiting in a crowd of 40 kept by two instances", s.Waiting)
		}
		st, err := q.Stats(context.Background(), "demo-crowd")
		if err != nil {
			t.Fatal(err)
		}
		return st.AdmittedTotal >= 120
	})
	mustAdmin(t, ins[1], "PUT", "/admin/api/queues/demo-crowd", map[string]any{"paused": true})
	var last queue.Snapshot
	defer func() {
		if t.Failed() {
			t.Logf("the line when the test ended: %d waiting, head %d, tail %d, paused %v", last.Waiting, last.Head, last.Tail, last.Paused)
		}
	}()
	testwait.For(t, time.Minute, "the line topped up to 40", func() bool { last = crowdLine(t, q); return last.Waiting == 40 })
	// The admitted members gave their tokens back: none lingers until it lapses.
	testwait.For(t, time.Minute, "the crowd's tokens given back", func() bool {
		st, err := q.Stats(context.Background(), "demo-crowd")
		if err != nil {
			t.Fatal(err)
		}
		return st.ActiveTokens == 0
	})
	t.Logf("the most waiting seen while the crowd was let in: %d", most)
}

// TestDemoCrowdOff: WR_DEMO_CROWD=0 makes no crowd queue and no crowd product; the empty
// demo line's page then offers nothing to switch to.
func TestDemoCrowdOff(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "nocrowd", tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_DEMO": "true", "WR_DEMO_CROWD": "0"}))
	if _, err := testQueue(rs).Settings(context.Background(), "demo"); err != nil {
		t.Fatalf("queue demo: %v", err)
	}
	if _, err := testQueue(rs).Settings(context.Background(), "demo-crowd"); err != queue.ErrQueueNotFound {
		t.Fatalf("queue demo-crowd with WR_DEMO_CROWD=0: %v, want %v", err, queue.ErrQueueNotFound)
	}
	if res := call(t, "GET", in.url+"/api/products/demo-crowd", "", nil, nil); res.StatusCode != 404 {
		t.Errorf("product demo-crowd with WR_DEMO_CROWD=0: %d, want 404", res.StatusCode)
	}
	idx := readIndex(t, in.url)
	if _, ok := idx["demo-crowd"]; ok {
		t.Error("the index lists demo-crowd with WR_DEMO_CROWD=0")
	}
	if e, ok := idx["demo"]; !ok || !strings.Contains(e.html, "an empty line — you go straight in") {
		t.Errorf("the index's entry for demo (listed %v) lacks its sentence:\n%s", ok, e.html)
	}
	page := readAll(call(t, "GET", in.url+"/q/demo?lang=en", "", nil, nil))
	if !strings.Contains(page, `data-demo="empty"`) || strings.Contains(page, `id="demo-switch"`) {
		t.Error("the empty line's page: want the demo note without a link to a crowd line that does not exist")
	}
}
