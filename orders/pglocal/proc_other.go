//go:build !unix

package pglocal

import (
	"errors"
	"os"
	"syscall"
)

var errUnsupported = errors.New("pglocal: not supported on this operating system; set DATABASE_URL")

// On systems without unix process control (Windows) Start fails with a clear error;
// use DATABASE_URL there.

type account struct{ name string }

const (
	sigInt  = syscall.SIGINT
	sigKill = syscall.SIGKILL
)

func serverAccount(string) (account, error)       { return account{}, errUnsupported }
func (account) sysProcAttr() *syscall.SysProcAttr { return nil }
func (account) own(string) error                  { return errUnsupported }
func (account) checkReachable(string) error       { return errUnsupported }
func signalGroup(int, syscall.Signal) error       { return errUnsupported }
func signalProcess(p *os.Process, _ syscall.Signal) error {
	return p.Kill()
}

func privateDir(string) error { return errUnsupported }
