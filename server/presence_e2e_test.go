package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// TestAbandonment: a ticket with no open stream for the grace period leaves the line and
// the users behind move up; a client that polls /status instead keeps its place, and so
// does one with an open stream, past the moment its place would have lapsed without one
// (shown by a witness that joins after it and never calls again: when the witness is gone,
// the streamer's own grace has passed too).
func TestAbandonment(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "ab", tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_GRACE": "5s"}))
	admin(t, in, "PUT", "/admin/api/queues/ab", map[string]any{"paused": true, "rate_per_second": 1})
	var ghost, poller, streamer, witness joinResp
	call(t, "POST", in.url+"/api/queues/ab/join", "", nil, &ghost)  // joins, then vanishes
	call(t, "POST", in.url+"/api/queues/ab/join", "", nil, &poller) // polls /status
	var polled sync.Mutex
	var last joinResp       // the poller's latest status …
	var lastAsked time.Time // … asked at this time
	stopPolling := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopPolling:
				return
			case <-time.After(time.Second): // the client's polling interval: the scenario
				var st joinResp
				asked := time.Now()
				if res := call(t, "GET", in.url+"/api/queues/ab/status", poller.Ticket, nil, &st); res.StatusCode == 200 {
					polled.Lock()
					last, lastAsked = st, asked
					polled.Unlock()
				}
			}
		}
	}()
	defer wg.Wait()
	defer close(stopPolling)
	call(t, "POST", in.url+"/api/queues/ab/join", "", nil, &streamer)
	s, _ := openStream(t, in.url+"/api/queues/ab/stream", streamer.Ticket, "")
	if s == nil {
		t.Fatal("stream refused")
	}
	defer s.close()
	ev, ok := s.next(t, 30*time.Second, "position")
	if !ok || num(ev.Data["position"]) != 3 {
		t.Fatalf("first position: %+v", ev)
	}
	// The witness joins once the stream is open, so its grace ends after the streamer's
	// would (the streamer joined before it); it is never asked about, which would keep it.
	call(t, "POST", in.url+"/api/queues/ab/join", "", nil, &witness)
	// Within grace + a tick the ghost is gone: the streamer moves to 2, the poller to 1.
	ev, ok = s.next(t, 30*time.Second, "position")
	if !ok || num(ev.Data["position"]) != 2 {
		t.Fatalf("after the ghost's grace: %+v (ok=%v)", ev, ok)
	}
	var st joinResp
	call(t, "GET", in.url+"/api/queues/ab/status", poller.Ticket, nil, &st)
	if st.Position != 1 || st.State != "waiting" {
		t.Fatalf("poller: %+v", st)
	}
	if res := call(t, "GET", in.url+"/api/queues/ab/status", ghost.Ticket, nil, nil); res.StatusCode != 404 {
		t.Fatalf("abandoned ticket status: %d", res.StatusCode)
	}
	// The witness lapses too (the poller's statuses, asked from now on, count the line:
	// poller and streamer).
	from := time.Now()
	testwait.For(t, 30*time.Second, "the witness abandoned", func() bool {
		polled.Lock()
		defer polled.Unlock()
		return lastAsked.After(from) && last.Waiting == 2
	})
	// The streamer (and the poller) kept their places past that point.
	call(t, "GET", in.url+"/api/queues/ab/status", streamer.Ticket, nil, &st)
	if st.State != "waiting" || st.Position != 2 {
		t.Fatalf("streamer after the grace: %+v", st)
	}
	call(t, "GET", in.url+"/api/queues/ab/status", poller.Ticket, nil, &st)
	if st.State != "waiting" || st.Position != 1 || st.Waiting != 2 {
		t.Fatalf("poller after the grace: %+v", st)
	}
}

// TestDeadClientsAndInstanceCounts: a closed stream is noticed at the next heartbeat and
// the admin view's counts follow; a stopped instance drops out of the admin view.
func TestDeadClientsAndInstanceCounts(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	env := tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_HEARTBEAT": "1s", "WR_STREAMS_PER_IP": "3"})
	ab := startInProcessAll(t, env, "a", "b")
	a, b := ab[0], ab[1]
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
	testwait.For(t, 30*time.Second, "3 streams counted", func() bool { n, k := total(); return n == 3 && k == 2 })

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
	testwait.For(t, 30*time.Second, "the closed stream noticed", func() bool { n, _ := total(); return n == 2 })
	t.Logf("closed stream dropped from the count after %v (heartbeat 1 s, count reported every 2 s)", time.Since(start).Round(100*time.Millisecond))

	b.stop()
	start = time.Now()
	testwait.For(t, 30*time.Second, "instance b gone", func() bool { n, k := total(); return n == 0 && k == 1 })
	t.Logf("stopped instance left the admin view after %v", time.Since(start).Round(100*time.Millisecond))
	m := readAll(call(t, "GET", a.url+"/metrics", "", nil, nil))
	if !strings.Contains(m, "sse_connections 0") {
		t.Fatalf("metrics of a: %s", grep(m, "sse_connections"))
	}
}
