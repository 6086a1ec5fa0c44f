// Package redistest starts private redis-server processes for tests.
//
// Every server listens on a free loopback port in its own temporary directory and is
// stopped by t.Cleanup. A missing redis-server binary fails the test loudly: the README's
// test command installs it, and a test that silently skips would turn a missing backend
// green.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/freeport"
)

// Server is one private redis-server process.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int
	aof  bool

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Option changes how a Server is started.
type Option func(*Server)

// WithAOF turns on the append-only file, so data survives Stop and Start.
func WithAOF() Option { return func(s *Server) { s.aof = true } }

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

// Start starts a private Redis and returns it; it is stopped when the test ends.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	for _, o := range opts {
		o(s)
	}
	s.port = freePort(tb)
	s.Start()
	tb.Cleanup(s.Stop)
	return s
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is a redis:// URL for the server.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Client returns a new client for the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Start (re)starts the process on the same port and directory and waits until it answers.
func (s *Server) Start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
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
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("redistest: start %s: %v", s.bin, err)
	}
	s.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.tb.Fatalf("redistest: redis on %s did not answer: %v\n%s", s.Addr(), err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the process (SIGKILL, like a crash) and waits for it. Safe to call twice.
func (s *Server) Stop() {
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
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

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
