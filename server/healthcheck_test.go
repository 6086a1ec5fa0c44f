package main

import (
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// TestHealthcheckAddress: the /readyz asked is on loopback for a server on every address,
// and a WR_ADDR with no fixed port or no port at all is refused with a reason.
func TestHealthcheckAddress(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"":                "http://127.0.0.1:8080/readyz",
		":9000":           "http://127.0.0.1:9000/readyz",
		"0.0.0.0:9000":    "http://127.0.0.1:9000/readyz",
		"[::]:9000":       "http://127.0.0.1:9000/readyz",
		"10.1.2.3:9000":   "http://10.1.2.3:9000/readyz",
		"[::1]:9000":      "http://[::1]:9000/readyz",
		"localhost:9000":  "http://localhost:9000/readyz",
		"nonsense":        `error: invalid WR_ADDR="nonsense": must be host:port or :port`,
		"127.0.0.1:0":     `error: WR_ADDR="127.0.0.1:0": port 0 is chosen at start, there is no fixed port to check`,
		":http":           "http://127.0.0.1:80/readyz", // a service name, as net.Listen takes it
		"127.0.0.1:8080x": `error: invalid WR_ADDR="127.0.0.1:8080x": "8080x" is not a port`,
	} {
		got, err := readyzURL(addr)
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("readyzURL(%q) = %q, want %q", addr, got, want)
		}
	}
	code, out, errOut := runCLI(t, []string{"WR_ADDR=nonsense"}, "healthcheck")
	if code != exitFail || out != "" || !strings.Contains(errOut, `invalid WR_ADDR="nonsense"`) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestHealthcheckAgainstARealInstance: a running instance is healthy when ready and when
// full (at its stream budget /readyz is 503 "full", yet it is alive and holds its streams);
// with Redis gone it is not (503 "unavailable"); a port nobody listens on is not.
func TestHealthcheckAgainstARealInstance(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t, redistest.Single()) // a server of its own to stop
	in := startInProcess(t, "hc", tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_MAX_STREAMS": "1", "WR_HEARTBEAT": "1h"}))
	u, err := url.Parse(in.url)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(u.Host)
	check := func(addr string, wantCode int, wantOut string) {
		t.Helper()
		code, out, errOut := runCLI(t, []string{"WR_ADDR=" + addr}, "healthcheck")
		got := out + errOut
		if code != wantCode || !strings.Contains(got, wantOut) || (code == exitOK) != (errOut == "") {
			t.Fatalf("healthcheck on %s: exit %d, stdout %q, stderr %q; want %d and %q", addr, code, out, errOut, wantCode, wantOut)
		}
	}

	check(u.Host, exitOK, "healthy: "+in.url+"/readyz: ready\n")
	check(":"+port, exitOK, ": ready\n") // the instance listens on 127.0.0.1 only: :port must mean loopback

	admin(t, in, "PUT", "/admin/api/queues/hc", map[string]any{"paused": true})
	var j joinResp
	call(t, "POST", in.url+"/api/queues/hc/join", "", nil, &j)
	stream := mustStream(t, in.url+"/api/queues/hc/stream", j.Ticket)
	testwait.For(t, 30*time.Second, "/readyz to say full", func() bool {
		var ready map[string]any
		res := call(t, "GET", in.url+"/readyz", "", nil, &ready)
		return res.StatusCode == 503 && ready["status"] == "full"
	})
	check(u.Host, exitOK, "healthy: "+in.url+"/readyz: full (alive at its stream budget")
	stream.close()

	rs.Stop()
	testwait.For(t, 30*time.Second, "/readyz to say Redis is down", func() bool {
		var ready map[string]any
		res := call(t, "GET", in.url+"/readyz", "", nil, &ready)
		return res.StatusCode == 503 && ready["redis"] == "down"
	})
	check(u.Host, exitFail, "unhealthy: "+in.url+"/readyz: not ready: redis down, postgres ok\n")

	closed := freeAddr(t)
	check(closed, exitFail, "unhealthy: http://"+closed+"/readyz: dial tcp "+closed+": connect: connection refused\n")
}
