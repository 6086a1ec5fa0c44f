//go:build unix

package pglocal

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// account is the OS user the PostgreSQL processes run as. uid < 0 means "this process's
// own user": no credential switch, no chown.
type account struct {
	name     string
	uid, gid int
}

// serverAccount picks the user for initdb and postgres. Both refuse to run as root, so a
// root process runs them as runAs (default "postgres") by setting the child's credentials
// directly — the effect of `runuser -u postgres --`, but the child we start IS the
// postmaster, so signals and Wait reach it without an intermediate process.
func serverAccount(runAs string) (account, error) {
	if os.Geteuid() != 0 {
		return account{uid: -1, gid: -1}, nil
	}
	if runAs == "" {
		runAs = "postgres"
	}
	u, err := user.Lookup(runAs)
	if err != nil {
		return account{}, fmt.Errorf("pglocal: running as root needs the OS user %q to run PostgreSQL "+
			"(the postgresql package creates it): %w", runAs, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return account{}, fmt.Errorf("pglocal: user %q: %w", runAs, err)
	}
	return account{name: runAs, uid: uid, gid: gid}, nil
}

func (a account) switched() bool { return a.uid >= 0 }

// sysProcAttr puts the child in its own process group (a terminal's Ctrl-C reaches only
// the Go process, which then shuts PostgreSQL down in order; Kill can take the whole
// group down like a crash), asks the kernel to send SIGINT (fast shutdown) to the
// postmaster if the Go process dies without stopping it, and switches user when root.
func (a account) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(attr)
	if a.switched() {
		attr.Credential = &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid)}
	}
	return attr
}

// own hands path to the server account (no-op when not switching users).
func (a account) own(path string) error {
	if !a.switched() {
		return nil
	}
	if err := os.Chown(path, a.uid, a.gid); err != nil {
		return fmt.Errorf("pglocal: chown %s to %s: %w", path, a.name, err)
	}
	return nil
}

// checkReachable fails with a clear message when the server account cannot traverse one
// of path's parent directories (for example /root, or a 0700 directory from os.MkdirTemp):
// PostgreSQL would otherwise fail later with a terse "permission denied".
func (a account) checkReachable(path string) error {
	if !a.switched() {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("pglocal: %w", err)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if ok {
			perm := st.Mode().Perm()
			var can bool
			switch {
			case int(sys.Uid) == a.uid:
				can = perm&0o100 != 0
			case int(sys.Gid) == a.gid:
				can = perm&0o010 != 0
			default:
				can = perm&0o001 != 0
			}
			if !can {
				return fmt.Errorf("pglocal: user %s cannot reach %s because %s is %v; "+
					"choose a data directory under a traversable path (e.g. /var/tmp/waitroom-pg) or chmod o+x %s",
					a.name, abs, dir, perm, dir)
			}
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}

func signalProcess(p *os.Process, sig syscall.Signal) error {
	return p.Signal(sig)
}

const (
	sigInt  = syscall.SIGINT
	sigKill = syscall.SIGKILL
)

// privateDir fails unless dir is a directory (not a symbolic link) owned by this process's
// user and writable by nobody else.
func privateDir(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case !ok || int(sys.Uid) != os.Geteuid():
		return fmt.Errorf("%s is not this user's", dir)
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (%v)", dir, st.Mode().Perm())
	}
	return nil
}
