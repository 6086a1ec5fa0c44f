package main

import (
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/orders/pgtest"
	"github.com/waitroom/waitroom/queue/redistest"
)

// TestAbandonment: a ticket with no open stream for the grace period leaves the line and
// the users behind move up; a client that polls /status instead keeps its place.
func TestAbandonment(t *testing.T) {
	rs := redistest.Start(t)
	in := startInProcess(t, "ab", baseEnv(rs.URL(), pgtest.MustDB(t), map[string]string{"WR_GRACE": "5s"}))
	admin(t, in, "PUT", "/admin/api/queues/ab", map[string]any{"paused": true, "rate_per_second": 1})
	var ghost, poller, streamer joinResp
	call(t, "POST", in.url+"/api/queues/ab/join", "", nil, &ghost)  // joins, then vanishes
	call(t, "POST", in.url+"/api/queues/ab/join", "", nil, &poller) // polls /status
	call(t, "POST", in.url+"/api/queues/ab/join", "", nil, &streamer)
	s, _ := openStream(t, in.url+"/api/queues/ab/stream", streamer.Ticket, "")
	if s == nil {
		t.Fatal("stream refused")
	}
	defer s.close()
	ev, ok := s.next(t, 3*time.Second, "position")
	if !ok || num(ev.Data["position"]) != 3 {
		t.Fatalf("first position: %+v", ev)
	}
	stopPolling := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopPolling:
				return
			case <-time.After(time.Second):
				call(t, "GET", in.url+"/api/queues/ab/status", poller.Ticket, nil, nil)
			}
		}
	}()
	defer close(stopPolling)
	// Within grace + a tick the ghost is gone: the streamer moves to 2, the poller to 1.
	ev, ok = s.next(t, 10*time.Second, "position")
	if !ok || num(ev.Data["position"]) != 2 {
		t.Fatalf("after the ghost's grace: %+v (ok=%v)", ev, ok)
	}
	var st joinResp
	call(t, "GET", in.url+"/api/queues/ab/status", poller.Ticket, nil, &st)
	if st.Position != 1 || st.Waiting != 2 {
		t.Fatalf("poller: %+v", st)
	}
	if res := call(t, "GET", in.url+"/api/queues/ab/status", ghost.Ticket, nil, nil); res.StatusCode != 404 {
		t.Fatalf("abandoned ticket status: %d", res.StatusCode)
	}
	// The streamer keeps its place well past the grace.
	time.Sleep(6 * time.Second)
	call(t, "GET", in.url+"/api/queues/ab/status", streamer.Ticket, nil, &st)
	if st.State != "waiting" || st.Position != 2 {
		t.Fatalf("streamer after 2 × grace: %+v", st)
	}
}

// TestDeadClientsAndInstanceCounts: a closed stream is noticed at the next heartbeat and
// the admin view's counts follow; a stopped instance drops out of the admin view.
func TestDeadClientsAndInstanceCounts(t *testing.T) {
	rs := redistest.Start(t)
	env := baseEnv(rs.URL(), pgtest.MustDB(t), map[string]string{"WR_HEARTBEAT": "1s", "WR_STREAMS_PER_IP": "3"})
	a, b := startInProcess(t, "a", env), startInProcess(t, "b", env)
	admin(t, a, "PUT", "/admin/api/queues/dc", map[string]any{"paused": true})
	var streams []*sseStream
	for range 3 {
		var j joinResp
		call(t, "POST", b.url+"/api/queues/dc/join", "", nil, &j)
		s, res := openStream(t, b.url+"/api/queues/dc/stream", j.Ticket, "")
		if s == nil {
			t.Fatalf("stream: %v", res.StatusCode)
		}
		streams = append(streams, s)
	}
	total := func() (int64, int) {
		var st struct {
			Instances []struct{ ID string } `json:"instances"`
			Total     int64                 `json:"sse_connections_total"`
		}
		call(t, "GET", a.url+"/admin/api/stats", adminToken, nil, &st)
		return st.Total, len(st.Instances)
	}
	testwait.For(t, 5*time.Second, "3 streams counted", func() bool { n, k := total(); return n == 3 && k == 2 })

	// A 4th stream from the same address is refused with scope ip.
	var j joinResp
	call(t, "POST", b.url+"/api/queues/dc/join", "", nil, &j)
	_, res := openStream(t, b.url+"/api/queues/dc/stream", j.Ticket, "")
	if res == nil || res.StatusCode != 429 || res.Header.Get("X-RateLimit-Scope") != "ip" || res.Header.Get("Retry-After") == "" {
		t.Fatalf("4th stream from one address: %+v", res)
	}
	res.Body.Close()

	streams[0].close()
	start := time.Now()
	testwait.For(t, 6*time.Second, "the closed stream noticed", func() bool { n, _ := total(); return n == 2 })
	t.Logf("closed stream dropped from the count after %v (heartbeat 1 s, count reported every 2 s)", time.Since(start).Round(100*time.Millisecond))

	b.stop()
	start = time.Now()
	testwait.For(t, 8*time.Second, "instance b gone", func() bool { n, k := total(); return n == 0 && k == 1 })
	t.Logf("stopped instance left the admin view after %v", time.Since(start).Round(100*time.Millisecond))
	m := readAll(call(t, "GET", a.url+"/metrics", "", nil, nil))
	if !strings.Contains(m, "sse_connections 0") {
		t.Fatalf("metrics of a: %s", grep(m, "sse_connections"))
	}
}
