package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/analytics"
	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/orders/pgtest"
)

// TestMain runs the tests with every HTTP request checked against docs/openapi.yaml
// (openapi_test.go): in a child process, because pgtest.Main ends in os.Exit and the count
// of checks is printed after the tests.
func TestMain(m *testing.M) {
	if os.Getenv(specChildEnv) == "" {
		os.Exit(runSpecChild())
	}
	s, err := loadSpec()
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
	s.events = os.NewFile(3, "openapi-events")
	spec = s
	pgtest.Main(m)
}

// specClient is the tests' plain HTTP client (call uses it): every request it sends is
// checked against docs/openapi.yaml (specTransport).
var specClient = &http.Client{Transport: specTransport{base: http.DefaultTransport}}

const adminToken = "test-admin-token"

// instance is one server, in process (run) or as a child process (the built binary).
type instance struct {
	t      *testing.T
	id     string
	url    string
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error    // run's error, or the child's exit
	exited chan struct{} // a child process: closed when it has exited
	cmd    *exec.Cmd
}

// syncBuffer is an instance's log (or a child's output): written by its goroutines, read by
// the test; changed tells a reader waiting for a line that more has been written.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed at the next write; made by the reader that waits
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// since returns what was written from offset off on, and a channel closed at the next write
// (taken in the same critical section, so no write falls between the two).
func (s *syncBuffer) since(off int) (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return string(s.b.Bytes()[min(off, s.b.Len()):]), s.changed
}

// baseEnv is the configuration every test instance shares.
func baseEnv(redisURL, dbURL string, extra map[string]string) map[string]string {
	env := map[string]string{
		"WR_ADDR": "127.0.0.1:0", "REDIS_URL": redisURL, "DATABASE_URL": dbURL,
		"WR_SECRET": "0123456789abcdef-test-secret", "WR_ADMIN_TOKEN": adminToken,
		"WR_LOG_LEVEL": "debug", "WR_DEMO": "false", "WR_DEMO_CROWD": "0", "WR_STREAMS_PER_IP": "10000",
		"WR_JOIN_RATE_PER_IP": "0", "WR_ORDER_RATE_PER_TICKET": "0", "WR_ORDER_RATE_GLOBAL": "0",
		"WR_STATUS_RATE_PER_TICKET": "0", // tests poll status to wait for admission
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// testDB is a database for a test's instances: a copy of one that the orders' and the
// history's migrations were applied to once per test binary (pgtest.Template), so an
// instance's start finds them applied. Migrating an empty database at every start cost ~0.15
// CPU-seconds of PostgreSQL, and the package starts a few hundred instances; the migrations
// themselves are tested in orders and analytics (a fresh database, an upgrade, concurrent
// starts), and run here once, through the same calls as the server's start, for the template.
func testDB(t testing.TB) string {
	t.Helper()
	return pgtest.MustDBFrom(t, pgtest.Template(t, "migrated", func(ctx context.Context, url string) error {
		st, err := orders.Open(ctx, orders.Config{URL: url, AcquireTimeout: 30 * time.Second, QueryTimeout: time.Minute}, nil)
		if err != nil {
			return err
		}
		st.Close()
		pool, err := analytics.OpenPool(ctx, url, 2)
		if err != nil {
			return err
		}
		defer pool.Close()
		_, err = analytics.Migrate(ctx, pool)
		return err
	}))
}

// tolerantEnv is baseEnv with the per-request budgets of Redis calls and of the wait for a
// pooled PostgreSQL connection (1 s and 500 ms in production) raised to 10 s, and the wait
// for a replica's acknowledgement (250 ms) to 2 s, for a test that is not about those
// budgets: on a busy machine (tests in parallel, a CPU hog) a Redis call or a new
// PostgreSQL connection can take longer than the production budget, and the 503 that
// follows would be a verdict from the load; a replica late by more than 250 ms holds the
// tick (Redis Cluster pass), and admission crawls. extra still wins.
func tolerantEnv(redisURL, dbURL string, extra map[string]string) map[string]string {
	env := baseEnv(redisURL, dbURL, map[string]string{"WR_REDIS_TIMEOUT": "10s", "WR_PG_ACQUIRE_TIMEOUT": "10s",
		"WR_REDIS_ACK_TIMEOUT": "2s"})
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// startTimeout bounds an instance's start (until it logs "listening"); generous, since
// tests start instances in parallel on a busy machine.
const startTimeout = 60 * time.Second

// startInProcess runs the server's run() in this process (race detector included).
func startInProcess(t *testing.T, id string, env map[string]string) *instance {
	t.Helper()
	in := launchInProcess(t, id, env)
	if err := in.ready(); err != nil {
		t.Fatal(err)
	}
	return in
}

// startInProcessAll starts one in-process instance per id, all with env, at the same time
// (their starts overlap instead of adding up); the instances are in the order of ids.
func startInProcessAll(t *testing.T, env map[string]string, ids ...string) []*instance {
	t.Helper()
	ins := make([]*instance, len(ids))
	for i, id := range ids {
		ins[i] = launchInProcess(t, id, env)
	}
	readyAll(t, ins)
	return ins
}

// readyAll waits for every instance to listen, all at once.
func readyAll(t *testing.T, ins []*instance) {
	t.Helper()
	errs := make([]error, len(ins))
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = in.ready() }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// launchInProcess starts run() in a goroutine, stopped when the test ends; ready waits for it
// to listen.
func launchInProcess(t *testing.T, id string, env map[string]string) *instance {
	env = copyEnv(env)
	env["WR_INSTANCE_ID"] = id
	in := &instance{t: t, id: id, logs: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go func() { in.done <- run(ctx, func(k string) string { return env[k] }, in.logs) }()
	t.Cleanup(in.stop)
	return in
}

// ready waits until the instance logs where it listens and sets in.url. It may run on any
// goroutine (it reports instead of failing the test).
func (in *instance) ready() error {
	url, err := listening(in.logs, in.done, startTimeout)
	if err != nil {
		return fmt.Errorf("instance %s: %w", in.id, err)
	}
	in.url = url
	return nil
}

// stopTimeout bounds a graceful stop (generous: a busy machine, many instances at once).
const stopTimeout = 30 * time.Second

// stop shuts the instance down gracefully (SIGINT for a child process).
func (in *instance) stop() {
	if in.cmd != nil {
		select {
		case <-in.exited:
			return
		default:
		}
		_ = in.cmd.Process.Signal(os.Interrupt)
		select {
		case <-in.exited:
		case <-time.After(stopTimeout):
			_ = in.cmd.Process.Kill()
			<-in.exited
		}
		return
	}
	if in.cancel != nil {
		in.cancel()
		in.cancel = nil
		select {
		case err := <-in.done:
			if err != nil {
				in.t.Errorf("instance %s: run: %v", in.id, err)
			}
		case <-time.After(stopTimeout):
			in.t.Errorf("instance %s did not shut down within %v", in.id, stopTimeout)
		}
	}
}

// kill SIGKILLs a child-process instance.
func (in *instance) kill() {
	_ = in.cmd.Process.Kill()
	<-in.exited
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binDirEnv names the directory binary builds into: made by the parent process of the
// OpenAPI check (runSpecChild), which removes it when the tests end (the child, which runs
// them, ends in os.Exit).
const binDirEnv = "WR_TEST_BIN_DIR"

// binary builds the server once per test run; tests in parallel wait for the one build.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		// scripts/test.sh builds the binary once for all its passes (WR_TEST_SERVER_BIN): each
		// pass's own build was a link of its own, ~4 CPU-seconds each.
		if p := os.Getenv("WR_TEST_SERVER_BIN"); p != "" {
			if st, err := os.Stat(p); err != nil || st.IsDir() {
				buildErr = fmt.Errorf("WR_TEST_SERVER_BIN=%q: not a binary (%v)", p, err)
			}
			binPath = p
			return
		}
		dir := os.Getenv(binDirEnv)
		if dir == "" {
			var err error
			if dir, err = os.MkdirTemp("", "waitroom-bin-"); err != nil {
				buildErr = err
				return
			}
		}
		binPath = filepath.Join(dir, "waitroom")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// startProcess runs the built binary as a child process.
func startProcess(t *testing.T, id string, env map[string]string) *instance {
	t.Helper()
	return startCommand(t, id, env, binary(t))
}

// startProcessAll starts the built binary once per id, all with env, at the same time; the
// instances are in the order of ids.
func startProcessAll(t *testing.T, env map[string]string, ids ...string) []*instance {
	t.Helper()
	bin := binary(t)
	ins := make([]*instance, len(ids))
	for i, id := range ids {
		ins[i] = launchCommand(t, id, env, bin)
	}
	readyAll(t, ins)
	return ins
}

// startCommand runs argv (the built binary, perhaps behind a wrapper such as prlimit) as a
// child process.
func startCommand(t *testing.T, id string, env map[string]string, argv ...string) *instance {
	t.Helper()
	in := launchCommand(t, id, env, argv...)
	if err := in.ready(); err != nil {
		t.Fatal(err)
	}
	return in
}

// launchCommand starts argv as a child process, stopped when the test ends; ready waits for
// it to listen.
func launchCommand(t *testing.T, id string, env map[string]string, argv ...string) *instance {
	t.Helper()
	env = copyEnv(env)
	env["WR_INSTANCE_ID"] = id
	cmd := exec.Command(argv[0], argv[1:]...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	in := &instance{t: t, id: id, logs: &syncBuffer{}, done: make(chan error, 1), exited: make(chan struct{}), cmd: cmd}
	cmd.Stdout, cmd.Stderr = in.logs, in.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		close(in.exited)
		in.done <- err
	}()
	t.Cleanup(in.stop)
	return in
}

func copyEnv(env map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v
	}
	return out
}

// waitListening reads the "listening" log line for the chosen address.
func waitListening(t *testing.T, logs *syncBuffer, done chan error) string {
	t.Helper()
	url, err := listening(logs, done, startTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// listening waits for the "listening" log line and returns the address it names, reading
// each line once as it is written; it fails if the server exits first or the timeout passes.
func listening(logs *syncBuffer, done chan error, timeout time.Duration) (string, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	off := 0
	for {
		text, changed := logs.since(off)
		if end := strings.LastIndexByte(text, '\n'); end >= 0 {
			off += end + 1
			for _, line := range strings.Split(text[:end], "\n") {
				if !strings.Contains(line, `"message":"listening"`) {
					continue
				}
				var l struct{ Addr string }
				if json.Unmarshal([]byte(line), &l) == nil && l.Addr != "" {
					return "http://" + l.Addr, nil
				}
			}
		}
		select {
		case <-changed:
		case err := <-done:
			done <- err // for stop, which waits for it too
			return "", fmt.Errorf("server exited before listening: %v\n%s", err, logs.String())
		case <-deadline.C:
			return "", fmt.Errorf("server did not listen within %v\n%s", timeout, logs.String())
		}
	}
}

// call makes one HTTP request and decodes a JSON answer into out (when not nil).
func call(t *testing.T, method, url, bearer string, body any, out any, hdr ...string) *http.Response {
	t.Helper()
	return callVia(t, specClient, method, url, bearer, body, out, hdr...)
}

// callVia is call through a client of the caller's (a source address, say).
func callVia(t *testing.T, client *http.Client, method, url, bearer string, body any, out any, hdr ...string) *http.Response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(testContext(t), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, url, res.StatusCode, data, err)
		}
	}
	res.Body = io.NopCloser(bytes.NewReader(data))
	return res
}

func admin(t *testing.T, in *instance, method, path string, body any) *http.Response {
	t.Helper()
	return call(t, method, in.url+path, adminToken, body, nil)
}

type joinResp struct {
	Ticket   string   `json:"ticket"`
	State    string   `json:"state"`
	Position int64    `json:"position"`
	Waiting  int64    `json:"waiting"`
	ETA      *float64 `json:"eta_seconds"`
	Token    string   `json:"token"`
}

type errResp struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	ID, Name string
	Data     map[string]any
	At       time.Time
}

// sseStream reads one SSE response in a goroutine.
type sseStream struct {
	res    *http.Response
	events chan sseEvent
	retry  chan int
	done   chan struct{}
}

func openStream(t *testing.T, url, ticket, lastID string) (*sseStream, *http.Response) {
	t.Helper()
	return openStreamWith(t, streamClient, url, ticket, lastID)
}

// openStreamWith is openStream with a client of the caller's (a source address, say).
func openStreamWith(t *testing.T, client *http.Client, url, ticket, lastID string, hdr ...string) (*sseStream, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(testContext(t), "GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	req.Header.Set("Authorization", "Bearer "+ticket)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Logf("open stream: %v", err)
		return nil, nil
	}
	if res.StatusCode != 200 {
		return nil, res
	}
	s := &sseStream{res: res, events: make(chan sseEvent, 1024), retry: make(chan int, 16), done: make(chan struct{})}
	go s.read()
	return s, res
}

// streamClient has no overall timeout and no connection reuse between streams.
var streamClient = &http.Client{Transport: specTransport{base: &http.Transport{DisableKeepAlives: true, MaxConnsPerHost: 0}}}

func (s *sseStream) read() {
	defer close(s.done)
	defer close(s.events)
	sc := bufio.NewScanner(s.res.Body)
	var ev sseEvent
	var data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Name != "" || data != "" {
				ev.Data = map[string]any{}
				_ = json.Unmarshal([]byte(data), &ev.Data)
				ev.At = time.Now()
				s.events <- ev
			}
			ev, data = sseEvent{}, ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "retry: "):
			var n int
			fmt.Sscan(line[7:], &n)
			select {
			case s.retry <- n:
			default:
			}
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.Name = line[7:]
		case strings.HasPrefix(line, "data: "):
			data += line[6:]
		}
	}
}

func (s *sseStream) close() { _ = s.res.Body.Close(); <-s.done }

// mustStream opens a stream that must succeed; it is closed when the test ends.
func mustStream(t *testing.T, url, ticket string) *sseStream {
	t.Helper()
	s, res := openStream(t, url, ticket, "")
	if s == nil {
		t.Fatalf("stream %s: %v", url, res)
	}
	t.Cleanup(s.close)
	return s
}

// next waits for the next event of one of the names (any when none given).
func (s *sseStream) next(t *testing.T, timeout time.Duration, names ...string) (sseEvent, bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return sseEvent{}, false
			}
			if len(names) == 0 {
				return ev, true
			}
			for _, n := range names {
				if ev.Name == n {
					return ev, true
				}
			}
		case <-deadline:
			return sseEvent{}, false
		}
	}
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}
