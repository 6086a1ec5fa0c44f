package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// An instance with 1,024 open files takes 1,100 idle TCP connections (no request sent in
// full). The first release exited ("accept4: too many open files" ended fasthttp's Serve);
// now it sheds what is over its connection budget, stays up, and answers health checks and
// new streams once the flood ends. (How soon, in the log line: a duration is no verdict on
// a shared machine.)
func TestDescriptorFloodIsShed(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	// The flood's connections stay until the test closes them, however long dialling takes
	// on a busy machine (the read timeout would otherwise free slots meanwhile, and fewer
	// connections would be over the budget).
	env := tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_LOG_LEVEL": "info", "WR_READ_TIMEOUT": "10m"})
	in := startCommand(t, "fd", env, "prlimit", "--nofile=1024:1024", "--", binary(t))
	admin(t, in, "PUT", "/admin/api/queues/fd", map[string]any{"paused": true})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the instance's log:\n%s", tail(in.logs.String(), 6000))
		}
	})
	addr := strings.TrimPrefix(in.url, "http://")
	maxConns := logInt(t, in, "connection budgets", "max_conns")

	const floodSize = 1100
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			_ = c.Close()
		}
	}()
	// Each connection's reader counts the ones the instance closes (shed at accept); its
	// own close at the end is not counted.
	var closedByServer atomic.Int64
	for range floodSize {
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", len(flood), err)
		}
		_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\n")) // a request that never ends
		flood = append(flood, c)
		go func() {
			if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, net.ErrClosed) {
				closedByServer.Add(1)
			}
		}()
	}
	// The instance has taken the flood when it has shed everything over its budget.
	testwait.For(t, 60*time.Second, fmt.Sprintf("the %d connections over the budget of %d shed", floodSize-maxConns, maxConns), func() bool {
		return closedByServer.Load() >= int64(floodSize-maxConns)
	})
	t.Logf("closed by the instance: %d", closedByServer.Load())
	select {
	case <-in.exited:
		t.Fatalf("the instance exited under the flood: %v\n%s", <-in.done, in.logs.String())
	default:
	}
	for _, c := range flood {
		_ = c.Close()
	}
	flood = nil
	ended := time.Now()

	var healthy, streaming time.Duration
	testwait.For(t, 30*time.Second, "/healthz after the flood", func() bool {
		ok, _ := tryGet(in.url + "/healthz")
		return ok
	})
	healthy = time.Since(ended)
	var j joinResp
	if res := call(t, "POST", in.url+"/api/queues/fd/join", "", nil, &j); res.StatusCode != 201 {
		t.Fatalf("join after the flood: %d", res.StatusCode)
	}
	s, res := openStream(t, in.url+"/api/queues/fd/stream", j.Ticket, "")
	if s == nil || res.StatusCode != 200 {
		t.Fatalf("stream after the flood: %v", res)
	}
	if _, ok := s.next(t, 30*time.Second, "position"); !ok {
		t.Fatal("no position event on the stream after the flood")
	}
	streaming = time.Since(ended)
	s.close()
	shed := metricLine(readAll(call(t, "GET", in.url+"/metrics", "", nil, nil)), "http_connections_shed_total")
	if shed == "" || strings.HasSuffix(shed, " 0") {
		t.Fatalf("no connection was shed: %q", shed)
	}
	t.Logf("%d idle connections against 1,024 files (budget %d): alive; %s; /healthz %v and a new stream %v after the flood",
		floodSize, maxConns, shed, healthy.Round(time.Millisecond), streaming.Round(time.Millisecond))
}

// logInt is the integer field of the instance's first log line with the message msg.
func logInt(t *testing.T, in *instance, msg, field string) int {
	t.Helper()
	for _, line := range strings.Split(in.logs.String(), "\n") {
		if !strings.Contains(line, `"message":"`+msg+`"`) {
			continue
		}
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err == nil {
			if v, ok := l[field].(float64); ok {
				return int(v)
			}
		}
	}
	t.Fatalf("no %q line with %s in the log of %s", msg, field, in.id)
	return 0
}

// tryGet is one GET that reports whether it got a 200 (a shed connection is just false).
func tryGet(url string) (bool, error) {
	c := &http.Client{Timeout: 200 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get(url)
	if err != nil {
		return false, err
	}
	res.Body.Close()
	return res.StatusCode == 200, nil
}

// metricLine is the sample line of an unlabelled metric in a Prometheus text page.
func metricLine(page, name string) string {
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("…%s", s[len(s)-n:])
}

// At its stream budget an instance sheds without dying: a new stream gets 200 with a
// jittered retry and ends (a 503 would make EventSource give up for good), a join gets 503
// instance_full with Retry-After, /readyz says "full" so a load balancer steers new users
// away; a stream whose client has gone is swept at once, so the capacity it held is
// there for the next one.
func TestStreamBudgetSheds(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	// Heartbeats far apart: the sweep, not a heartbeat, must be what finds the gone client.
	in := startInProcess(t, "budget", tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_MAX_STREAMS": "2", "WR_HEARTBEAT": "1h"}))
	admin(t, in, "PUT", "/admin/api/queues/bq", map[string]any{"paused": true})
	var tickets []string
	for range 3 {
		var j joinResp
		call(t, "POST", in.url+"/api/queues/bq/join", "", nil, &j)
		tickets = append(tickets, j.Ticket)
	}
	first := mustStream(t, in.url+"/api/queues/bq/stream", tickets[0])
	second := mustStream(t, in.url+"/api/queues/bq/stream", tickets[1])
	defer second.close()

	shed := func() (bool, string) {
		req, _ := http.NewRequest("GET", in.url+"/api/queues/bq/stream", nil)
		req.Header.Set("Authorization", "Bearer "+tickets[2])
		res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body := readAll(res)
		return res.StatusCode == 200 && strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") &&
			strings.HasPrefix(body, "retry: ") && !strings.Contains(body, "event:"), body
	}
	if ok, body := shed(); !ok {
		t.Fatalf("third stream at a budget of 2: %q, want 200 with only a retry", body)
	}
	res := call(t, "POST", in.url+"/api/queues/bq/join", "", nil, nil)
	if res.StatusCode != 503 || errCode(res) != "instance_full" || res.Header.Get("Retry-After") == "" {
		t.Fatalf("join while full: %d %s Retry-After %q", res.StatusCode, errCode(res), res.Header.Get("Retry-After"))
	}
	var ready map[string]any
	if res := call(t, "GET", in.url+"/readyz", "", nil, &ready); res.StatusCode != 503 || ready["status"] != "full" {
		t.Fatalf("/readyz while full: %d %v", res.StatusCode, ready)
	}
	// The first client goes away without a word; /readyz (which a load balancer polls while
	// the instance is full) asks for the sweep that finds its socket.
	first.close()
	testwait.For(t, 30*time.Second, "the gone client's slot to be free", func() bool {
		var r map[string]any
		call(t, "GET", in.url+"/readyz", "", nil, &r)
		return r["status"] == "ok"
	})
	third := mustStream(t, in.url+"/api/queues/bq/stream", tickets[2])
	if _, ok := third.next(t, 30*time.Second, "position"); !ok {
		t.Fatal("no position on the stream that took the freed slot")
	}
	m := readAll(call(t, "GET", in.url+"/metrics", "", nil, nil))
	for _, want := range []string{`sse_refused_total{reason="full"} 1`, "stream_swept_total 1", "sse_streams_budget 2", "sse_connections 2"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(m, "sse_"))
		}
	}
}

// A connection that never completes a request is closed after WR_READ_TIMEOUT, so idle
// sockets cost a bounded time. (The two connections wait side by side; 15 s is the bound
// that says "not closed", far above the 1 s setting.)
func TestIncompleteRequestsAreClosed(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "idle", tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_READ_TIMEOUT": "1s"}))
	addr := strings.TrimPrefix(in.url, "http://")
	for _, start := range []string{"", "GET /healthz HTTP/1.1\r\nHost: x\r\n"} {
		t.Run(fmt.Sprintf("%q", start), func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _ = c.Write([]byte(start))
			began := time.Now()
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			buf := make([]byte, 512)
			for {
				if _, err := c.Read(buf); err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						t.Fatalf("%q: still open after 15 s with WR_READ_TIMEOUT=1s", start)
					}
					break
				}
			}
			t.Logf("%q: closed after %v", start, time.Since(began).Round(10*time.Millisecond))
		})
	}
}
