package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/freeport"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/static"
)

// TestBehindNginx runs deploy/nginx.conf, as shipped, under Debian's nginx in front of two
// instances: the page and the API pass, the logo route takes 100 KiB and refuses more in
// JSON, a hashed asset of another release is fetched from the next instance, a browser's same-origin join is accepted, streams
// arrive unbuffered and uncompressed, the client address reaches the per-IP cap through
// X-Forwarded-For, and when an instance dies its streams reopen through the proxy on the
// other one and every user still gets exactly one token.
func TestBehindNginx(t *testing.T) {
	t.Parallel()
	bin := nginxBinary(t)
	rs := redistest.Start(t)
	env := tolerantEnv(rs.URL(), testDB(t), map[string]string{
		"WR_LOG_LEVEL": "info", "WR_PROXY_HEADER": "X-Forwarded-For", "WR_TRUSTED_PROXIES": "127.0.0.1",
		"WR_STREAMS_PER_IP": "2",
	})
	ins := startProcessAll(t, env, "n1", "n2")
	proxy, accessLog := startNginxLogged(t, bin, ins)

	if res := call(t, "GET", proxy+"/readyz", "", nil, nil); res.StatusCode != 200 {
		t.Fatalf("readyz through nginx: %d", res.StatusCode)
	}
	if res := call(t, "PUT", proxy+"/admin/api/queues/nx", adminToken, map[string]any{"rate_per_second": 0}, nil); res.StatusCode >= 300 {
		t.Fatalf("admin PUT through nginx: %d", res.StatusCode)
	}
	if res := call(t, "GET", proxy+"/q/nx", "", nil, nil); res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src") {
		t.Fatalf("waiting page through nginx: %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	checkNginxBodies(t, proxy)
	checkNginxOtherRelease(t, bin, ins[0])
	checkNginxAccessLog(t, proxy, accessLog)

	// Six buyers, each from an address of their own (127.0.0.10…15), joining the way a
	// browser on the proxy's origin does and opening their stream through the proxy.
	const n = 6
	type buyer struct {
		client *http.Client
		ticket string
		s      *sseStream
	}
	buyers := make([]*buyer, n)
	for i := range buyers {
		b := &buyer{client: clientFrom(t, fmt.Sprintf("127.0.0.%d", 10+i))}
		var j joinResp
		res := callVia(t, b.client, "POST", proxy+"/api/queues/nx/join", "", nil, &j,
			"Origin", proxy, "Sec-Fetch-Site", "same-origin")
		if res.StatusCode >= 300 || j.Ticket == "" {
			t.Fatalf("join %d through nginx: %d (a proxy that drops the port from Host fails the same-origin check)", i, res.StatusCode)
		}
		b.ticket = j.Ticket
		s, res := openStreamWith(t, b.client, proxy+"/api/queues/nx/stream", b.ticket, "", "Accept-Encoding", "gzip")
		if s == nil {
			t.Fatalf("stream %d through nginx: %v", i, res)
		}
		if ce := s.res.Header.Get("Content-Encoding"); ce != "" {
			t.Fatalf("stream compressed by the proxy: Content-Encoding %q", ce)
		}
		if ct := s.res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("stream Content-Type %q", ct)
		}
		// The first position arrives while the stream stays open: nothing buffers it.
		if ev, ok := s.next(t, 30*time.Second, "position"); !ok || num(ev.Data["position"]) != int64(i+1) {
			t.Fatalf("buyer %d: first position through nginx: %+v %v", i, ev, ok)
		}
		b.s = s
		buyers[i] = b
	}
	t.Cleanup(func() {
		for _, b := range buyers {
			b.s.close()
		}
	})

	// Six streams with a cap of 2 per address on each of 2 instances worked, so the
	// instances told the buyers apart by X-Forwarded-For (as one address they would have been
	// refused after 4). More streams from one address are refused once an instance holds 2.
	var extra []*sseStream
	refused := false
	for k := 0; k < 2*len(ins) && !refused; k++ {
		s, res := openStreamWith(t, buyers[0].client, proxy+"/api/queues/nx/stream", buyers[0].ticket, "")
		switch {
		case s != nil:
			extra = append(extra, s)
		case res != nil && res.StatusCode == 429 && res.Header.Get("X-RateLimit-Scope") == "ip":
			refused = true
		default:
			t.Fatalf("extra stream from one address through nginx: %v", res)
		}
	}
	for _, s := range extra {
		s.close()
	}
	if !refused || 1+len(extra) > 2*len(ins) {
		t.Fatalf("one address held %d streams on 2 instances with a cap of 2 each (refused: %v)", 1+len(extra), refused)
	}
	// An instance notices a closed stream at its next write, not at once: until both have
	// let go of the extra streams, buyer 0's address still holds its cap there and a reopen
	// after the kill would be refused (a quick run reopened before that: 429 too_many_streams).
	testwait.For(t, 60*time.Second, "the extra streams released by both instances", func() bool {
		return metricValue(t, ins[0], "sse_connections")+metricValue(t, ins[1], "sse_connections") == n
	})

	// The instance holding most of the streams dies.
	counts := func(in *instance) map[string]int64 {
		var st struct {
			Instances []struct {
				ID             string `json:"id"`
				SSEConnections int64  `json:"sse_connections"`
			} `json:"instances"`
		}
		call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
		out := map[string]int64{}
		for _, in := range st.Instances {
			out[in.ID] = in.SSEConnections
		}
		return out
	}
	var c map[string]int64
	testwait.For(t, 30*time.Second, "the six streams in the admin view", func() bool {
		c = counts(ins[0])
		return c["n1"]+c["n2"] == n
	})
	victim := 0 // the instance holding more of the streams dies
	if c["n2"] > c["n1"] {
		victim = 1
	}
	t.Logf("streams per instance %v; killing %s", c, ins[victim].id)
	ins[victim].kill()
	live := ins[1-victim]

	// Streams that ended reopen through the proxy (which moves on to the live instance);
	// then admission runs and every buyer gets exactly one token.
	if res := call(t, "PUT", proxy+"/admin/api/queues/nx", adminToken, map[string]any{"rate_per_second": 20}, nil); res.StatusCode >= 300 {
		t.Fatalf("admin PUT through nginx after the kill: %d", res.StatusCode)
	}
	tokens := map[string]bool{}
	for i, b := range buyers {
		deadline := time.Now().Add(60 * time.Second)
		for {
			if time.Now().After(deadline) {
				t.Fatalf("buyer %d: no admitted event through nginx within 60 s", i)
			}
			ev, ok := b.s.next(t, time.Until(deadline), "admitted")
			if ok {
				tok, _ := ev.Data["token"].(string)
				if tok == "" || tokens[tok] {
					t.Fatalf("buyer %d: token %q empty or seen before", i, tok)
				}
				tokens[tok] = true
				break
			}
			// The stream ended (its instance died): reopen it through the proxy.
			b.s.close()
			s, res := openStreamWith(t, b.client, proxy+"/api/queues/nx/stream", b.ticket, "")
			if s == nil {
				t.Logf("buyer %d: reopen through nginx: %v (retrying)", i, res)
				time.Sleep(200 * time.Millisecond) // the client's retry delay, as EventSource waits its retry:
				// the scenario (a second failure fails the test), not a wait for something to happen
				s, res = openStreamWith(t, b.client, proxy+"/api/queues/nx/stream", b.ticket, "")
				if s == nil {
					t.Fatalf("buyer %d: reopen through nginx failed twice: %v", i, res)
				}
			}
			b.s = s
		}
	}
	if len(tokens) != n {
		t.Fatalf("%d distinct tokens for %d buyers", len(tokens), n)
	}
	// The dead instance leaves the admin view by itself.
	testwait.For(t, 30*time.Second, "the dead instance to leave the admin view", func() bool {
		_, present := counts(live)[ins[victim].id]
		return !present
	})
}

// nginxBinary is the nginx the test command provides (WR_TEST_NGINX), else one on the PATH.
func nginxBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("WR_TEST_NGINX"), "nginx", "/usr/sbin/nginx"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatal("no nginx: run the tests with scripts/test.sh (it fetches Debian's nginx), or set WR_TEST_NGINX")
	return ""
}

// startNginx runs deploy/nginx.conf with its two upstreams pointed at ins and its listener
// on a free loopback port, and stops it (by its PID) when the test ends.
func startNginx(t *testing.T, bin string, ins []*instance) string {
	t.Helper()
	url, _ := startNginxLogged(t, bin, ins)
	return url
}

// startNginxLogged is startNginx that also returns the path of the site's access log.
func startNginxLogged(t *testing.T, bin string, ins []*instance) (url, accessLog string) {
	t.Helper()
	return runNginxLogged(t, bin, "nginx.conf", map[string]string{
		"server app1:8080": "server " + strings.TrimPrefix(ins[0].url, "http://"),
		"server app2:8080": "server " + strings.TrimPrefix(ins[1].url, "http://"),
	})
}

// runNginx runs the site deploy/<file> with the replacements made (each must match once)
// and its listener on a free loopback port, and stops it (by its PID) when the test ends.
// The port is free when chosen but not held: should another process of the parallel tests
// take it before nginx binds it, nginx is started again on another port.
func runNginx(t *testing.T, bin, file string, repl map[string]string) string {
	t.Helper()
	url, _ := runNginxLogged(t, bin, file, repl)
	return url
}

// runNginxLogged is runNginx that also returns the path of the site's access log: the
// site's logs under /var/log/nginx/ are written to the run's temporary directory instead.
func runNginxLogged(t *testing.T, bin, file string, repl map[string]string) (url, accessLog string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "deploy", file))
	if err != nil {
		t.Fatal(err)
	}
	for old := range repl {
		if strings.Count(string(raw), old) != 1 {
			t.Fatalf("deploy/%s changed shape: %q appears %d times", file, old, strings.Count(string(raw), old))
		}
	}
	for attempt := 1; ; attempt++ {
		url, dir, inUse := runNginxOnce(t, bin, file, string(raw), repl)
		if !inUse {
			return url, filepath.Join(dir, "access.log")
		}
		if attempt == 3 {
			t.Fatalf("nginx: the free port was taken before nginx bound it, three times")
		}
	}
}

// runNginxOnce is one start of runNginx; dir holds its logs; inUse reports an address taken
// meanwhile.
func runNginxOnce(t *testing.T, bin, file, site string, repl map[string]string) (url, dir string, inUse bool) {
	t.Helper()
	port := freePort(t)
	const listen = "listen 80;"
	if strings.Count(site, listen) != 1 {
		t.Fatalf("deploy/%s changed shape: %q appears %d times", file, listen, strings.Count(site, listen))
	}
	site = strings.Replace(site, listen, fmt.Sprintf("listen 127.0.0.1:%d;", port), 1)
	for old, repl := range repl {
		site = strings.Replace(site, old, repl, 1)
	}
	dir = t.TempDir()
	site = strings.ReplaceAll(site, "/var/log/nginx/", dir+"/")
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n" // the workers must reach the temporary directories below
	}
	conf := fmt.Sprintf(`%sdaemon off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
%[3]s
}
`, user, dir, site)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // fast shutdown: the master stops its workers
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	exited := false
	testwait.For(t, 30*time.Second, "nginx to listen on "+addr, func() bool {
		select {
		case err := <-done:
			done <- err // for the cleanup
			exited = true
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			if strings.Contains(string(log)+out.String(), "Address already in use") {
				inUse = true
				return true
			}
			t.Fatalf("nginx exited: %v\n%s\n%s", err, out.String(), log)
		default:
		}
		// nginx's own socket (a dial could reach another process that took the port).
		got, _ := procListening(cmd.Process.Pid)
		return slices.Contains(got, addr)
	})
	if exited {
		return "", dir, inUse
	}
	return "http://" + addr, dir, false
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := freeport.Get()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// clientFrom is an HTTP client whose connections come from the loopback address src.
func clientFrom(t *testing.T, src string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: specTransport{base: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}}
}

// checkNginxBodies: through the proxy a logo of exactly 100 KiB (102,400 bytes) is stored and
// one byte more is refused with 413 in the server's JSON error shape (nginx answers it: an
// HTML page would break the dashboard's error message); any other route refuses 64 KiB + 1
// the same way.
func checkNginxBodies(t *testing.T, proxy string) {
	t.Helper()
	png := brandingPNG(t, 16, 16)
	logo := proxy + "/admin/api/queues/nx/logo"
	var put struct {
		Bytes int `json:"bytes"`
	}
	if res := call(t, "PUT", logo, adminToken, logoOfSize(t, png, 100<<10), &put, "Content-Type", "image/png"); res.StatusCode != 200 || put.Bytes != 102400 {
		t.Fatalf("a logo of 100 KiB through nginx: %d, stored %d bytes", res.StatusCode, put.Bytes)
	}
	refused := func(what, method, url string, body []byte, ctype, message string) {
		t.Helper()
		var e brandingErr
		res := call(t, method, url, adminToken, body, &e, "Content-Type", ctype)
		if res.StatusCode != 413 || e.Error.Code != "body_too_large" || !strings.Contains(e.Error.Message, message) ||
			!strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("%s through nginx: %d %s %+v, want 413 body_too_large in JSON naming %q", what, res.StatusCode, res.Header.Get("Content-Type"), e.Error, message)
		}
	}
	refused("a logo of 100 KiB + 1", "PUT", logo, logoOfSize(t, png, 100<<10+1), "image/png", "100 KiB (102,400 bytes)")
	refused("a logo of 1 MiB", "PUT", logo, logoOfSize(t, png, 1<<20), "image/png", "100 KiB")
	fat := []byte(`{"brand_message":"` + strings.Repeat("x", 64<<10) + `"}`)
	refused("a 64 KiB + settings body", "PUT", proxy+"/admin/api/queues/nx", fat, "application/json", "64 KiB")
	if res := call(t, "DELETE", logo, adminToken, nil, nil); res.StatusCode != 204 {
		t.Fatalf("delete the logo through nginx: %d", res.StatusCode)
	}
}

// checkNginxOtherRelease runs deploy/nginx.conf in front of an instance of another release
// (it answers 404 for this release's hashed assets, as staticAsset does for a hash it lacks)
// and the instance in: every fetch of a hashed asset succeeds (the proxy moves on to the
// next instance on a 404 under /static/), a hash no instance has stays 404 and is sent with
// no-store, and a 404 of the API is an answer (not retried).
func checkNginxOtherRelease(t *testing.T, bin string, in *instance) {
	t.Helper()
	var mu sync.Mutex
	hits := map[string]int{}
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)[0]]++
		mu.Unlock()
		w.Header().Set("Cache-Control", "public, max-age=300") // as the release before sends its 404s
		http.Error(w, "this asset belongs to another release", http.StatusNotFound)
	}))
	t.Cleanup(old.Close)
	proxy := runNginx(t, bin, "nginx.conf", map[string]string{
		"server app1:8080": "server " + strings.TrimPrefix(old.URL, "http://"),
		"server app2:8080": "server " + strings.TrimPrefix(in.url, "http://"),
	})
	// A plain client (not the contract-checking default): the other release's answers are
	// not this release's contract.
	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	get := func(path string) *http.Response {
		t.Helper()
		res, err := plain.Get(proxy + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res
	}
	for _, asset := range []string{"queue.js", "waitroom.js", "style.css", "order.js", "lang.js", "queue.js"} {
		res := get(static.AssetURL(asset))
		if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
			t.Fatalf("%s through nginx beside another release: %d %q", static.AssetURL(asset), res.StatusCode, res.Header.Get("Cache-Control"))
		}
	}
	if res := get("/static/queue.0123456789.js"); res.StatusCode != 404 || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("a hash no instance has: %d %q, want 404 no-store (a browser must not keep it)", res.StatusCode, res.Header.Get("Cache-Control"))
	}
	apiOld := 0
	for range 4 {
		if res := get("/api/queues/nx/status"); res.StatusCode == 404 {
			apiOld++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["static"] == 0 {
		t.Fatal("the other release's instance was never asked for an asset: the retry was not exercised")
	}
	if apiOld == 0 || hits["api"] != apiOld {
		t.Fatalf("API 404s from the other instance: %d seen by the client, %d asked: a 404 of the API must be the answer, not retried", apiOld, hits["api"])
	}
	t.Logf("beside another release: %d asset fetches met its 404 first and were served by the next instance", hits["static"])
}

// checkNginxAccessLog joins queue nxlog through the proxy and opens the stream the way a
// browser's EventSource does — the ticket in the query, a Referer whose query holds it too —
// then reads the proxy's access log (deploy/nginx.conf's log format): the stream's line is
// there, with the path and "?[redacted]", and neither the ticket nor its id is anywhere in
// the log.
func checkNginxAccessLog(t *testing.T, proxy, accessLog string) {
	t.Helper()
	if res := call(t, "PUT", proxy+"/admin/api/queues/nxlog", adminToken, map[string]any{"rate_per_second": 0}, nil); res.StatusCode >= 300 {
		t.Fatalf("admin PUT nxlog through nginx: %d", res.StatusCode)
	}
	client := clientFrom(t, "127.0.0.30")
	var j joinResp
	if res := callVia(t, client, "POST", proxy+"/api/queues/nxlog/join", "", nil, &j,
		"Origin", proxy, "Sec-Fetch-Site", "same-origin"); res.StatusCode >= 300 || j.Ticket == "" {
		t.Fatalf("join nxlog through nginx: %d", res.StatusCode)
	}
	q := "?ticket=" + url.QueryEscape(j.Ticket)
	req, err := http.NewRequestWithContext(testContext(t), "GET", proxy+"/api/queues/nxlog/stream"+q, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Referer", proxy+"/q/nxlog"+q+"#wr_token=x")
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("stream with ?ticket= through nginx: %v", err)
	}
	if res.StatusCode != 200 {
		_ = res.Body.Close()
		t.Fatalf("stream with ?ticket= through nginx: %d", res.StatusCode)
	}
	// The first event arrived, so the request reached an instance; the line is written when
	// the request ends.
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "event: position") {
	}
	_ = res.Body.Close()
	var log string
	testwait.For(t, 30*time.Second, "the stream's line in nginx's access log", func() bool {
		b, _ := os.ReadFile(accessLog)
		log = string(b)
		return strings.Contains(log, "/api/queues/nxlog/stream")
	})
	id := strings.Split(j.Ticket, ".")[1]
	for what, secret := range map[string]string{"ticket": j.Ticket, "ticket id": id, "ticket (escaped)": url.QueryEscape(j.Ticket), "query": "ticket="} {
		if strings.Contains(log, secret) {
			t.Errorf("nginx's access log holds the %s:\n%s", what, log)
		}
	}
	for _, want := range []string{`"GET /api/queues/nxlog/stream?[redacted] HTTP/1.1" 200`, `"POST /api/queues/nxlog/join HTTP/1.1"`, `"` + proxy + `/q/nxlog"`} {
		if !strings.Contains(log, want) {
			t.Errorf("nginx's access log lacks %s:\n%s", want, log)
		}
	}
}
