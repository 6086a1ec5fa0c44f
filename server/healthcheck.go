package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// healthHelp is what the usage and docs/CONFIGURATION.md say about `waitroom healthcheck`.
const healthHelp = `healthcheck asks GET /readyz of the server on WR_ADDR (an empty or unspecified host, as in :8080 or 0.0.0.0:8080, means 127.0.0.1), never through a proxy, and waits 3 s at most. ` +
	`Exit 0: the server is ready, or full: at its stream budget (WR_MAX_STREAMS) /readyz answers 503 "full" so that a load balancer sends new users elsewhere, but the instance is alive and serves the streams it holds, which a restart would drop. ` +
	`Exit 1: no answer in time (not running, not listening, hung), or not ready because Redis or PostgreSQL does not answer a ping (/readyz 503 "unavailable"): the instance can neither admit nor sell, so the container is marked unhealthy (Docker marks it; Swarm and autoheal tools replace it, and a new instance starts only once Redis answers). ` +
	`A load balancer's own check belongs on /readyz (it also steers new users away from a full instance); Kubernetes probes /readyz for readiness and /healthz for liveness (deploy/k8s). ` +
	`Exit 2 (which Docker reserves) is only ever a wrong command line.`

// healthTimeout bounds the whole check: /readyz pings Redis and PostgreSQL for up to 1 s
// each, one after the other, so a slow backend is still told apart from no answer.
const healthTimeout = 3 * time.Second

// runHealthcheck is `waitroom healthcheck`: one line on stdout when healthy, on stderr when
// not.
func runHealthcheck(ctx context.Context, _ []string, env environ, stdout, stderr io.Writer) int {
	target, err := readyzURL(env.getenv("WR_ADDR"))
	if err != nil {
		fmt.Fprintln(stderr, "unhealthy:", err)
		return exitFail
	}
	healthy, why := checkReady(ctx, target)
	if !healthy {
		fmt.Fprintf(stderr, "unhealthy: %s: %s\n", target, why)
		return exitFail
	}
	fmt.Fprintf(stdout, "healthy: %s: %s\n", target, why)
	return exitOK
}

// readyzURL is the local /readyz of a server listening on addr (WR_ADDR; empty: its default).
func readyzURL(addr string) (string, error) {
	if addr == "" {
		addr = settingDefault("WR_ADDR")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("invalid WR_ADDR=%q: must be host:port or :port", addr)
	}
	// A service name (:http) is a port to net.Listen as well.
	n, err := net.LookupPort("tcp", port)
	if err != nil {
		return "", fmt.Errorf("invalid WR_ADDR=%q: %q is not a port", addr, port)
	}
	if n == 0 {
		return "", fmt.Errorf("WR_ADDR=%q: port 0 is chosen at start, there is no fixed port to check", addr)
	}
	port = strconv.Itoa(n)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1" // a server on every address answers on loopback too
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

// checkReady asks target (a /readyz URL) and says whether the answer is healthy, and why.
func checkReady(ctx context.Context, target string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	// No proxy: an HTTP_PROXY set for the container's outbound traffic must not carry a
	// check of loopback. No keep-alive: one request, then the process ends.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false, err.Error()
	}
	res, err := client.Do(req)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return false, fmt.Sprintf("no answer within %v", healthTimeout)
	case err != nil:
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is on the line already
		}
		return false, err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	var r struct{ Status, Redis, Postgres string }
	_ = json.Unmarshal(body, &r) // an answer that is not /readyz's falls to the default case
	switch {
	case res.StatusCode == http.StatusOK:
		return true, "ready"
	case res.StatusCode == http.StatusServiceUnavailable && r.Status == "full":
		return true, "full (alive at its stream budget, serving the streams it holds)"
	case res.StatusCode == http.StatusServiceUnavailable && r.Status == "unavailable":
		return false, fmt.Sprintf("not ready: redis %s, postgres %s", r.Redis, r.Postgres)
	}
	return false, fmt.Sprintf("answered %d %q", res.StatusCode, strings.TrimSpace(string(body[:min(len(body), 200)])))
}

// settingDefault is the default of the setting name in the table.
func settingDefault(name string) string {
	for _, s := range settings {
		if s.name == name {
			return s.def
		}
	}
	panic("no setting " + name)
}
