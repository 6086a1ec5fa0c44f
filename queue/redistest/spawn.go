package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Every redis-server a test starts dies with the test binary, however the binary ends
// (tests failing, a panic, -timeout, os.Exit in a TestMain, SIGKILL): it is started with a
// parent-death signal (SIGKILL). Linux sends that signal when the *thread* that forked the
// child ends, not the process, and the Go runtime may end idle threads — so every server is
// forked from one goroutine locked to its OS thread for the life of the process. That
// thread ends only with the process.

type spawnJob struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawnJobs chan spawnJob
)

// startGuarded starts cmd with SIGKILL as its parent-death signal.
func startGuarded(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnJobs = make(chan spawnJob)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives until the process ends
			for j := range spawnJobs {
				j.done <- j.cmd.Start()
			}
		}()
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	done := make(chan error, 1)
	spawnJobs <- spawnJob{cmd: cmd, done: done}
	return <-done
}

// reapers keeps the write ends of the pipes that removeAtExit's processes read: they are
// never closed by this process, so they close when it ends, whatever the way.
var (
	reapersMu sync.Mutex
	reapers   []*os.File
)

// removeAtExit makes a small shell process remove dir once this process has ended (its
// stdin, a pipe whose only writer is this process, reaches end of file then). It is not
// parent-death guarded: it must outlive this process. A cluster's directory is removed by
// Stop too; this covers the ends where no code runs (the shared cluster has no test to
// clean up after, and a binary killed or timed out runs no cleanup).
func removeAtExit(dir string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	// sleep: the servers, SIGKILLed by their parent-death signal at the same moment, must
	// be gone before their files are removed.
	// It first closes the descriptors it may have inherited (fd 3 of the server package's
	// test child is the pipe its parent reads to the end): it must hold nothing open but
	// its stdin.
	cmd := exec.Command("/bin/sh", "-c",
		`for fd in 3 4 5 6 7 8 9; do eval "exec $fd>&-"; done; cat >/dev/null; sleep 1; rm -rf -- "$1"`,
		"redistest-reaper", dir)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a Ctrl-C to the test's group leaves it to finish
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return err
	}
	r.Close()
	go func() { _ = cmd.Wait() }()
	reapersMu.Lock()
	reapers = append(reapers, w)
	reapersMu.Unlock()
	return nil
}

// errNotOurs: the server answering on a port is not the process started for it — another
// test's server took the port between freeport.Get and this bind (the started process then
// exits with "Address already in use"). The caller starts again on other ports.
var errNotOurs = errors.New("another process answers on the port (taken between choosing it and binding it)")

// answersAs reports whether the server c reaches is process pid (INFO server's process_id).
func answersAs(ctx context.Context, c *redis.Client, pid int) (bool, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return v == strconv.Itoa(pid), nil
		}
	}
	return false, fmt.Errorf("INFO server without process_id")
}

// exited reports whether the process of cmd has ended (without reaping it).
func exited(cmd *exec.Cmd) bool {
	return cmd.Process.Signal(syscall.Signal(0)) != nil || zombie(cmd.Process.Pid)
}

// zombie reports whether pid has ended and waits to be reaped (signal 0 still reaches it).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}
