// Package pglocal runs a private PostgreSQL server as a child of the current process: the
// zero-config run of the server (DATABASE_URL empty) and the tests use it.
//
// Design choices:
//
//   - It runs the PostgreSQL server binaries installed on the machine (initdb, postgres),
//     found by FindBinDir. There is deliberately no download fallback (such as
//     fergusstrange/embedded-postgres): that cannot work offline, cannot run as root, and
//     could not be tested here. With no binaries, Start returns ErrNoBinaries, whose message
//     tells the user to install PostgreSQL, set PG_BINDIR, or set DATABASE_URL.
//   - initdb runs only when the data directory is empty, so data is kept between runs. The
//     default data directory (DefaultDataDir) is a per-major-version cache directory:
//     $XDG_CACHE_HOME/waitroom/pg<major> (~/.cache/…, ~/Library/Caches/… on macOS) for a
//     normal user, and /var/tmp/waitroom-pg/pg<major> for root — /root/.cache is 0700 and
//     the postgres user could not reach a data directory under it, while /var/tmp is
//     world-traversable and, unlike /tmp, usually survives a reboot.
//   - initdb and postgres refuse to run as root. A root process runs them as the OS user
//     "postgres" (Options.RunAs) by setting the child's credentials, which is what
//     `runuser -u postgres --` does minus the extra process in between; the data and runtime
//     directories are chowned to that user, and a parent directory it cannot traverse is
//     reported by Start with a clear error.
//   - The server listens on 127.0.0.1 only, with its unix socket in a private temporary
//     directory. The pg_hba.conf is generated per start: trust on that socket (only the
//     server's own user and root can reach it), scram-sha-256 over TCP with a random
//     password generated for each Instance, so other local users cannot connect.
//   - The postmaster runs in its own process group (Ctrl-C in a terminal reaches only the Go
//     process, which shuts PostgreSQL down in order), and on Linux it gets SIGINT from the
//     kernel if the Go process dies, so a killed server or test binary leaves no orphan.
//   - Options.NoSync (tests only) turns off fsync and full_page_writes: much faster, and a
//     Kill (the processes die, the OS does not) still loses no committed transaction, since
//     WAL is still written to the OS at commit. (synchronous_commit stays on for that reason.)
package pglocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Options configures Start. The zero value is a usable default.
type Options struct {
	// DataDir is the cluster directory; empty means DefaultDataDir. initdb runs only when
	// it is missing or empty.
	DataDir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
	// BinDir holds initdb and postgres; empty means FindBinDir("").
	BinDir string
	// RunAs is the OS user for PostgreSQL when this process is root; default "postgres".
	RunAs string
	// Log receives the server's log output (a zerolog.Logger is an io.Writer); nil discards
	// it. The last lines are always kept and quoted in start errors.
	Log io.Writer
	// NoSync turns off fsync and full_page_writes (and initdb's sync). For tests only: an
	// OS crash can corrupt the cluster, a process kill cannot.
	NoSync bool
	// InitCache, when set, is a directory that keeps one initdb'd cluster per set of
	// binaries and options: an empty data directory is filled with a copy of it instead of
	// running initdb (made there by initdb the first time). For tests, which start many
	// clusters: a copy costs a fraction of initdb's CPU.
	InitCache string
	// Settings are extra server settings passed as -c name=value.
	Settings map[string]string
	// StartTimeout bounds initdb plus startup (including crash recovery); default 60s.
	StartTimeout time.Duration
	// StopTimeout bounds the fast shutdown before the server is killed; default 30s.
	StopTimeout time.Duration
}

// Instance is one running (or stopped) private PostgreSQL server.
type Instance struct {
	opts     Options
	binDir   string
	dataDir  string
	acct     account
	password string
	log      *tail

	mu     sync.Mutex
	port   int
	runDir string
	proc   *process
}

// Start prepares the data directory (initdb if it is empty), starts the server and waits
// until it accepts connections.
func Start(ctx context.Context, opts Options) (*Instance, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 30 * time.Second
	}
	binDir, err := FindBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	acct, err := serverAccount(opts.RunAs)
	if err != nil {
		return nil, err
	}
	major, err := MajorVersion(ctx, binDir)
	if err != nil {
		return nil, err
	}
	dataDir := opts.DataDir
	if dataDir == "" {
		if dataDir, err = DefaultDataDir(major); err != nil {
			return nil, err
		}
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return nil, fmt.Errorf("pglocal: %w", err)
	}
	pw := make([]byte, 18)
	_, _ = rand.Read(pw)
	in := &Instance{
		opts: opts, binDir: binDir, dataDir: dataDir, acct: acct,
		password: hex.EncodeToString(pw), log: &tail{}, port: opts.Port,
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := in.prepareDataDir(ctx, major); err != nil {
		return nil, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.boot(ctx); err != nil {
		in.cleanupLocked()
		return nil, err
	}
	return in, nil
}

// DefaultDataDir is where the zero-config run keeps its cluster for the given major
// version (see the package comment for why root uses /var/tmp).
func DefaultDataDir(major string) (string, error) {
	name := "pg" + major
	if os.Geteuid() == 0 {
		return filepath.Join("/var/tmp/waitroom-pg", name), nil
	}
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "waitroom", name), nil
	}
	return filepath.Join(os.TempDir(), "waitroom-pg-"+strconv.Itoa(os.Geteuid()), name), nil
}

// URL is a postgres:// URL for the "postgres" database over TCP on 127.0.0.1. It stays
// the same across Restart.
func (in *Instance) URL() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.urlLocked("postgres")
}

func (in *Instance) urlLocked(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", in.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(in.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port is the TCP port the server listens on.
func (in *Instance) Port() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.port
}

// DataDir is the cluster directory in use.
func (in *Instance) DataDir() string { return in.dataDir }

// Stop shuts the server down (fast shutdown: SIGINT to the postmaster, which rolls back
// open transactions and checkpoints), waits for it, and removes the runtime directory.
// The data directory is kept. After StopTimeout the server is killed instead. Stop is
// safe to call more than once and after Kill.
func (in *Instance) Stop() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	err := in.shutdownLocked()
	in.cleanupLocked()
	return err
}

// Kill ends the postmaster and every backend at once with SIGKILL, like a crash, and
// waits for them. Meant for fault tests; Restart brings the server back (with crash
// recovery).
func (in *Instance) Kill() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	p := in.proc
	if p == nil {
		return nil
	}
	in.proc = nil
	_ = signalGroup(p.pid(), sigKill)
	<-p.done
	return nil
}

// Restart stops the server if it runs (fast shutdown) and starts it again on the same
// port, data directory and password, waiting until it accepts connections.
func (in *Instance) Restart(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.shutdownLocked(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, in.opts.StartTimeout)
	defer cancel()
	return in.boot(ctx)
}

func (in *Instance) shutdownLocked() error {
	p := in.proc
	if p == nil {
		return nil
	}
	in.proc = nil
	_ = signalProcess(p.cmd.Process, sigInt)
	select {
	case <-p.done:
		return nil
	case <-time.After(in.opts.StopTimeout):
		_ = signalGroup(p.pid(), sigKill)
		<-p.done
		return fmt.Errorf("pglocal: server did not stop within %v and was killed", in.opts.StopTimeout)
	}
}

func (in *Instance) cleanupLocked() {
	if in.runDir != "" {
		_ = os.RemoveAll(in.runDir)
		in.runDir = ""
	}
}
