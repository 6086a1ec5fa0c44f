package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/branding"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/topology"
)

// snapServer is a Server on a private Redis with n resting queues q000… (as an admission
// loop leaves an idle queue: clock idle = 1), serving on a loopback port.
type snapServer struct {
	s     *Server
	q     *queue.Queue
	topo  *topology.Topology
	rdb   redis.UniversalClient
	count *redistest.CommandCounter
	url   string
}

func startSnapServer(t *testing.T, n int, cfg Config) *snapServer {
	t.Helper()
	rs := redistest.Start(t)
	rdb := rs.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	q := queue.New(rdb, queue.Config{}, nil)
	topo := topology.New(rstore.New(rdb, q.OpTimeout()))
	rate := 1.0
	for i := range n {
		name := fmt.Sprintf("q%03d", i)
		if _, _, err := q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: &rate}); err != nil {
			t.Fatal(err)
		}
		rest(t, rdb, name)
	}
	count := &redistest.CommandCounter{}
	rdb.AddHook(count)
	s, err := New(cfg, Deps{
		Line:      q,
		Tokens:    q,
		Settings:  q,
		Logos:     branding.New(rstore.New(rdb, q.OpTimeout())),
		Wakes:     topo,
		Instances: topo,
		SoldOut:   q,
		Log:       zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
	})
	return &snapServer{s: s, q: q, topo: topo, rdb: rdb, count: count, url: "http://" + ln.Addr().String()}
}

// rest marks queue name resting, as its admission loop's last tick does.
func rest(t *testing.T, rdb redis.UniversalClient, name string) {
	t.Helper()
	if err := rdb.HSet(context.Background(), "wr:{q:"+name+"}:clock", "idle", "1").Err(); err != nil {
		t.Fatal(err)
	}
}

var entryRE = regexp.MustCompile(`data-testid="queue-item" data-queue="([^"]+)" data-state="([a-z_]+)"`)

// index reads one page of GET / into its entries (name → data-state) and the status.
func (ss *snapServer) index(t *testing.T, query string) (int, map[string]string, string) {
	t.Helper()
	res, err := http.Get(ss.url + "/" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	out := map[string]string{}
	for _, m := range entryRE.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return res.StatusCode, out, string(b)
}

func (ss *snapServer) refreshes() int {
	ss.s.snap.mu.Lock()
	defer ss.s.snap.mu.Unlock()
	return ss.s.snap.refreshes
}

// Many visitors share one refresh per second: 100 requests from 10 visitors after the first build
// start at most one refresh per second that passes, and the Redis commands they cost do not
// grow with their number (at rest a refresh reads only a slice of probes).
func TestSnapshotVisitorsShareOneRefresh(t *testing.T) {
	t.Parallel()
	ss := startSnapServer(t, 120, Config{})
	if code, got, _ := ss.index(t, ""); code != 200 || len(got) != indexPerPage {
		t.Fatalf("first page: %d with %d entries, want 200 with %d", code, len(got), indexPerPage)
	}
	r0, c0 := ss.refreshes(), ss.count.N.Load()
	start := time.Now()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 10 { // 10 visitors at once, 10 requests each
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				res, err := http.Get(ss.url + "/?page=2")
				if err != nil {
					bad.Add(1)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	refreshes, cmds := ss.refreshes()-r0, ss.count.N.Load()-c0
	if bad.Load() > 0 {
		t.Fatalf("%d of 100 requests failed", bad.Load())
	}
	// Refreshes start at least a second apart, whoever asks.
	if most := 1 + int(elapsed/time.Second); refreshes > most {
		t.Fatalf("100 requests in %v started %d refreshes, want at most %d", elapsed, refreshes, most)
	}
	// A refresh of 120 resting queues with no wake: the list is not re-read, no queue is
	// read whole; only probes (4 commands) of the share due — at most all 120.
	if most := int64(refreshes) * 4 * 120; cmds > most {
		t.Fatalf("100 requests cost %d Redis commands over %d refreshes, want at most %d", cmds, refreshes, most)
	}
	t.Logf("100 requests in %v: %d refreshes, %d Redis commands", elapsed.Round(time.Millisecond), refreshes, cmds)
}

// Pages: 50 queues a page, in name order, each with its data-state; a page past the last
// redirects to the last; a page that is not a whole number from 1 is a 400 naming page.
func TestIndexPages(t *testing.T) {
	t.Parallel()
	ss := startSnapServer(t, 120, Config{})
	seen := map[string]bool{}
	for p, want := range []int{50, 50, 20} {
		code, got, body := ss.index(t, fmt.Sprintf("?page=%d&lang=en", p+1))
		if code != 200 || len(got) != want {
			t.Fatalf("page %d: %d with %d entries, want 200 with %d", p+1, code, len(got), want)
		}
		for n, st := range got {
			if seen[n] || st != "open" {
				t.Fatalf("page %d: %s (%s) listed twice or not open", p+1, n, st)
			}
			seen[n] = true
		}
		if first := fmt.Sprintf(`data-queue="q%03d"`, p*50); !strings.Contains(body, first) {
			t.Errorf("page %d does not start at q%03d", p+1, p*50)
		}
		if !strings.Contains(body, fmt.Sprintf(`data-testid="index-pager" data-page="%d" data-pages="3"`, p+1)) ||
			!strings.Contains(body, fmt.Sprintf("Page %d of 3", p+1)) {
			t.Errorf("page %d: no pager saying page %d of 3", p+1, p+1)
		}
		if hasPrev := strings.Contains(body, `rel="prev"`); hasPrev != (p > 0) {
			t.Errorf("page %d: previous link %v", p+1, hasPrev)
		}
		if hasNext := strings.Contains(body, `rel="next" data-testid="index-next" href="/?page=`+fmt.Sprint(p+2)+`"`); hasNext != (p < 2) {
			t.Errorf("page %d: next link %v", p+1, hasNext)
		}
	}
	if len(seen) != 120 {
		t.Fatalf("the pages list %d queues, want 120", len(seen))
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(ss.url + "/?page=9")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 303 || res.Header.Get("Location") != "/?page=3" {
		t.Errorf("a page past the last: %d %q, want 303 to /?page=3", res.StatusCode, res.Header.Get("Location"))
	}
	for _, bad := range []string{"0", "-1", "x", "1.5", "99999999"} {
		res, err := http.Get(ss.url + "/?page=" + bad)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 400 || !strings.Contains(string(b), `"field":"page"`) {
			t.Errorf("page=%s: %d %s, want 400 naming page", bad, res.StatusCode, b)
		}
	}
}

// What changes reaches the snapshot: a settings change (its wake) within a refresh or two;
// a new queue (its wake names it); a change that publishes no wake (a sold-out flag) at
// the queue's next probe — here made due at once.
func TestSnapshotFollowsChanges(t *testing.T) {
	t.Parallel()
	ss := startSnapServer(t, 3, Config{})
	ctx := context.Background()
	if _, got, _ := ss.index(t, ""); len(got) != 3 {
		t.Fatalf("%d entries, want 3", len(got))
	}
	until := func(what string, ok func(map[string]string) bool) {
		t.Helper()
		testwait.For(t, 15*time.Second, what+" on the index", func() bool {
			_, got, _ := ss.index(t, "")
			return ok(got)
		})
	}
	yes, rate := true, 2.0
	if _, _, err := ss.q.Put(ctx, "q001", queue.SettingsPatch{Paused: &yes}); err != nil {
		t.Fatal(err)
	}
	rest(t, ss.rdb, "q001")
	until("a paused queue", func(m map[string]string) bool { return m["q001"] == "paused" })
	if _, _, err := ss.q.Put(ctx, "new", queue.SettingsPatch{RatePerSecond: &rate}); err != nil {
		t.Fatal(err)
	}
	until("a new queue", func(m map[string]string) bool { return m["new"] == "open" })
	rest(t, ss.rdb, "new")
	// A sold-out flag that changes publishes a wake too.
	if err := ss.q.SetSoldOut(ctx, "q002", true, 0); err != nil {
		t.Fatal(err)
	}
	until("a sold-out queue", func(m map[string]string) bool { return m["q002"] == "sold_out" })
}

// One queue whose keys cannot be read (a key of the wrong type here; a Cluster node down in
// production) is that queue's problem: the others of its pipeline keep following their
// changes, and the broken one keeps what the view had.
func TestSnapshotOneBrokenQueue(t *testing.T) {
	t.Parallel()
	ss := startSnapServer(t, 3, Config{})
	ctx := context.Background()
	if _, got, _ := ss.index(t, ""); len(got) != 3 {
		t.Fatalf("%d entries, want 3", len(got))
	}
	if err := ss.rdb.Set(ctx, "wr:{q:q000}:clock", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := ss.topo.Wake(ctx, "q000"); err == nil {
		t.Fatal("a wake of a queue whose clock is a string: no error") // HDEL on a string fails
	}
	if err := ss.rdb.Publish(ctx, "wr:wake", "q000").Err(); err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, _, err := ss.q.Put(ctx, "q001", queue.SettingsPatch{Paused: &yes}); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	testwait.For(t, 15*time.Second, "q001 paused on the index", func() bool {
		var code int
		code, got, _ = ss.index(t, "")
		return code == 200 && got["q001"] == "paused"
	})
	if got["q000"] != "open" || got["q002"] != "open" {
		t.Fatalf("the other queues: %v", got)
	}
}

// Admin streams: at most AdminStreamsPerToken per token and AdminStreamsPerInstance in all;
// past either, 429 too_many_streams with Retry-After and the usual error body; a stream
// that ends gives its slot back. Every stream reads the one snapshot.
func TestAdminStreamBounds(t *testing.T) {
	t.Parallel()
	tokA, tokB, tokC := "operator-token-aaaaaaaa", "viewer-token-bbbbbbbbbb", "viewer-token-cccccccccc"
	ss := startSnapServer(t, 2, Config{AdminToken: tokA, AdminStreamsPerToken: 2, AdminStreamsPerInstance: 3,
		AdminTokens: []AdminToken{{Name: "bee", Role: RoleViewer, Token: tokB}, {Name: "cee", Role: RoleViewer, Token: tokC}}})
	type open struct {
		res    *http.Response
		cancel context.CancelFunc
	}
	var opened []open
	t.Cleanup(func() {
		for _, o := range opened {
			o.cancel()
			o.res.Body.Close()
		}
	})
	stream := func(tok string) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequest("GET", ss.url+"/admin/api/stream", nil).WithContext(ctx)
		req.RequestURI = ""
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if res.StatusCode == 200 {
			opened = append(opened, open{res, cancel})
			// The first event: the stats, from the snapshot.
			r := bufio.NewReader(res.Body)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Fatalf("stream: %v", err)
				}
				if strings.HasPrefix(line, "data: ") {
					if !strings.Contains(line, `"name":"q001"`) {
						t.Fatalf("stream event without the queues: %s", line)
					}
					break
				}
			}
		} else {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			res.Body = io.NopCloser(strings.NewReader(string(b)))
			cancel()
		}
		return res, cancel
	}
	refused := func(res *http.Response, scope string) {
		t.Helper()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 429 || res.Header.Get("Retry-After") == "" || res.Header.Get("X-RateLimit-Scope") != scope ||
			!strings.Contains(string(b), `"code":"too_many_streams"`) {
			t.Fatalf("want 429 too_many_streams (scope %s) with Retry-After: %d %v %s", scope, res.StatusCode, res.Header, b)
		}
	}
	for range 2 {
		if res, _ := stream(tokA); res.StatusCode != 200 {
			t.Fatalf("stream of token A: %d", res.StatusCode)
		}
	}
	res, _ := stream(tokA)
	refused(res, "admin_token")
	if res, _ := stream(tokB); res.StatusCode != 200 {
		t.Fatalf("stream of token B: %d", res.StatusCode)
	}
	res, _ = stream(tokC)
	refused(res, "instance")
	// Token A's first stream ends: its slot comes back once the server sees it gone.
	opened[0].cancel()
	opened[0].res.Body.Close()
	testwait.For(t, 20*time.Second, "a closed stream's slot back", func() bool {
		res, _ := stream(tokC)
		if res.StatusCode != 200 {
			res.Body.Close()
			return false
		}
		return true
	})
}

// GET /admin/api/stats reads the writes this instance answered: a PUT of a queue, then the
// stats at once show it (a read of that queue alone, even within the snapshot's second).
func TestAdminStatsReadsOwnWrites(t *testing.T) {
	t.Parallel()
	tok := "operator-token-aaaaaaaa"
	ss := startSnapServer(t, 2, Config{AdminToken: tok})
	do := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, ss.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		return string(b)
	}
	pausedRE := regexp.MustCompile(`"name":"q001"[^}]*"paused":(true|false)`)
	for i, want := range []string{"false", "true", "false"} {
		if i > 0 {
			do("PUT", "/admin/api/queues/q001", `{"paused":`+want+`}`)
		}
		m := pausedRE.FindStringSubmatch(do("GET", "/admin/api/stats", ""))
		if m == nil || m[1] != want {
			t.Fatalf("step %d: stats show paused %v, want %s", i, m, want)
		}
	}
}
