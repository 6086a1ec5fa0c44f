// Package redistest gives tests a Redis: a private redis-server, or a shared Redis Cluster.
//
// Start hands a test its Redis. By default that is a private redis-server on a free
// loopback port in its own temporary directory, stopped by t.Cleanup. With
// WR_TEST_REDIS=cluster in the environment it is instead a Redis Cluster (3 masters,
// 3 replicas, see cluster.go) lent to this test alone from the test binary's pool (pool.go:
// up to WR_TEST_CLUSTERS clusters, so parallel tests each have their own) and emptied
// (FLUSHALL on every master) first: tests in the packages run against both (scripts/test.sh
// runs both passes).
// A test that crashes, pauses or restarts its Redis, or needs persistence, asks for a
// private server in both modes with Single (WithAOF implies it); Stop, Start, Pause, Resume
// and Restart on the shared cluster fail the test, so no such test runs against it by
// accident.
//
// In cluster mode every client handed out is checked by a hook (hook.go): a command or
// script whose keys span several hash slots, or a MULTI/EXEC over several slots, fails the
// test that made the client when it ends.
//
// Every redis-server dies with the test binary, however it ends (spawn.go). A missing
// redis-server binary fails the test loudly: the README's test command installs it, and a
// test that silently skips would turn a missing backend green.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/freeport"
)

// EnvMode is the environment variable that chooses what Start hands out: "" or "single"
// (a private redis-server per test) or "cluster" (the shared cluster).
const EnvMode = "WR_TEST_REDIS"

// ClusterMode reports whether Start hands out the shared cluster (WR_TEST_REDIS=cluster).
func ClusterMode() bool { return os.Getenv(EnvMode) == "cluster" }

func checkMode(tb testing.TB) {
	tb.Helper()
	switch m := os.Getenv(EnvMode); m {
	case "", "single", "cluster":
	default:
		tb.Fatalf("redistest: %s=%q: want single or cluster", EnvMode, m)
	}
}

// Server is the Redis of one test: a private redis-server process, or (cluster mode) the
// shared cluster.
type Server struct {
	tb     testing.TB
	bin    string
	dir    string
	port   int
	aof    bool
	single bool

	cluster *Cluster  // cluster mode: the shared cluster
	rec     *Recorder // cluster mode: what this test's clients saw

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Option changes how a Server is started.
type Option func(*Server)

// WithAOF turns on the append-only file, so data survives Stop and Start. It implies
// Single.
func WithAOF() Option { return func(s *Server) { s.aof, s.single = true, true } }

// Single asks for a private redis-server in every mode: for a test that stops, pauses or
// restarts its Redis (Stop, Start, Pause, Resume, Restart), which it must not do to the
// shared cluster.
func Single() Option { return func(s *Server) { s.single = true } }

// Binary returns the redis-server path: $WR_TEST_REDIS_BIN, else redis-server on PATH,
// else Debian's location.
func Binary() (string, error) {
	if b := os.Getenv("WR_TEST_REDIS_BIN"); b != "" {
		return b, nil
	}
	if b, err := exec.LookPath("redis-server"); err == nil {
		return b, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", fmt.Errorf("redis-server not found: run the README test command (make test), which installs it")
}

// Start hands the test its Redis: a private server (stopped when the test ends), or in
// cluster mode the shared cluster, healthy and emptied.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	checkMode(tb)
	s := &Server{tb: tb}
	for _, o := range opts {
		o(s)
	}
	if ClusterMode() && !s.single {
		s.cluster = borrowCluster(tb)
		s.rec = NewRecorder()
		tb.Cleanup(func() {
			if v := s.rec.Violations(); len(v) > 0 {
				tb.Errorf("redistest: %d command(s) broke Redis Cluster's one-slot rule:\n%s", len(v), strings.Join(v, "\n"))
			}
		})
		return s
	}
	bin, err := Binary()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s.bin, s.dir = bin, tb.TempDir()
	tb.Cleanup(s.Stop)
	// A port can be taken between choosing it and binding it (by another test's server on
	// a busy machine): the start is tried again on another one.
	for try := 1; ; try++ {
		s.port = freePort(tb)
		err := s.start()
		if err == nil {
			return s
		}
		if !errors.Is(err, errNotOurs) || try == 5 {
			tb.Fatalf("redistest: %v", err)
		}
	}
}

// Cluster is the shared cluster in cluster mode, nil for a private server.
func (s *Server) Cluster() *Cluster { return s.cluster }

// Recorder is what this test's clients saw on the cluster (nil for a private server).
func (s *Server) Recorder() *Recorder { return s.rec }

// Addr is host:port of a private server. A cluster has no one address: a test that
// needs it must use Single.
func (s *Server) Addr() string {
	if s.cluster != nil {
		s.tb.Helper()
		s.tb.Fatalf("redistest: Addr of the shared Redis Cluster: use URL, Client or ClientWith, or start this test's Redis with redistest.Single()")
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// URL is a redis:// URL for the server; for the cluster, a go-redis cluster URL
// (redis://host:port?addr=host:port&addr=…, see redis.ParseClusterURL).
func (s *Server) URL() string {
	if s.cluster != nil {
		return s.cluster.URL()
	}
	return "redis://" + s.Addr() + "/0"
}

// Client returns a new client, closed when the test ends: a *redis.Client of a private
// server, or a *redis.ClusterClient checked by the one-slot hook.
func (s *Server) Client() redis.UniversalClient { return s.ClientWith(redis.UniversalOptions{}) }

// ClientWith is Client with options (Addrs is set here; for the cluster, the options
// apply to every node's client).
func (s *Server) ClientWith(o redis.UniversalOptions) redis.UniversalClient {
	var c redis.UniversalClient
	if s.cluster != nil {
		c = s.cluster.ClientWith(o.Cluster(), s.rec)
	} else {
		o.Addrs = []string{s.Addr()}
		c = redis.NewClient(o.Simple())
	}
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// ClientURL returns a new client for a URL that Server.URL returned (a plain or a cluster
// URL, as the server's REDIS_URL parses it), closed when the test ends. A cluster client of
// the shared cluster is checked by its hook.
func ClientURL(tb testing.TB, url string) redis.UniversalClient {
	tb.Helper()
	var c redis.UniversalClient
	if strings.Contains(url, "addr=") {
		o, err := redis.ParseClusterURL(url)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		if sc := poolCluster(url); sc != nil {
			c = sc.ClientWith(o)
		} else {
			c = redis.NewClusterClient(o)
		}
	} else {
		o, err := redis.ParseURL(url)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		c = redis.NewClient(o)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// ForEachMaster calls fn with a plain client of the server, or of every master of the
// cluster in turn: for what one node answers about itself (INFO, KEYS, CLIENT KILL, …).
func (s *Server) ForEachMaster(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	if s.cluster != nil {
		return s.cluster.ForEachMaster(ctx, fn)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	return fn(ctx, c)
}

// notOnCluster fails the test: what it asked would take down or stall the shared cluster.
func (s *Server) notOnCluster(what string) bool {
	if s.cluster == nil {
		return false
	}
	s.tb.Helper()
	s.tb.Fatalf("redistest: %s on the shared Redis Cluster: start this test's Redis with redistest.Start(t, redistest.Single())", what)
	return true
}

// Start (re)starts the process on the same port and directory and waits until it answers.
func (s *Server) Start() {
	s.tb.Helper()
	if s.notOnCluster("Start") {
		return
	}
	if err := s.start(); err != nil {
		s.tb.Fatalf("redistest: %v", err)
	}
}

// start starts the process and waits until it answers as itself; errNotOurs if the port
// turned out to be another process's.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	args := []string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--protected-mode", "no", "--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}
	if s.aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	cmd := exec.Command(s.bin, args...)
	if err := startGuarded(cmd); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	notOurs := func() error {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("redis on %s: %w", s.Addr(), errNotOurs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		ours, err := answersAs(ctx, c, cmd.Process.Pid)
		if err == nil && ours {
			err = c.Ping(ctx).Err() // INFO answers while an AOF loads; PING once it is loaded
		}
		cancel()
		switch {
		case err == nil && ours:
			s.cmd = cmd
			return nil
		case err == nil && !ours, exited(cmd):
			return notOurs() // someone else answers, or ours gave up (the port was taken)
		case time.Now().After(deadline):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis on %s did not answer: %v\n%s", s.Addr(), err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the process (SIGKILL, like a crash) and waits for it. Safe to call twice.
func (s *Server) Stop() {
	if s.notOnCluster("Stop") {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the process (SIGSTOP): connections stay open, nothing is answered — a
// stalled server, as under a long fork or a frozen VM. Resume ends it.
func (s *Server) Pause() {
	if !s.notOnCluster("Pause") {
		s.signal(syscall.SIGSTOP)
	}
}

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() {
	if !s.notOnCluster("Resume") {
		s.signal(syscall.SIGCONT)
	}
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		if err := s.cmd.Process.Signal(sig); err != nil {
			s.tb.Fatalf("redistest: %v: %v", sig, err)
		}
	}
}

// Restart stops and starts the server on the same port.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.Start()
}

func freePort(tb testing.TB) int {
	tb.Helper()
	p, err := freeport.Get()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return p
}
