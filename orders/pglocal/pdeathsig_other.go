//go:build unix && !linux

package pglocal

import "syscall"

// setPdeathsig is Linux-only; elsewhere an orphaned postmaster is found by the next Start
// through postmaster.pid and reported in the error.
func setPdeathsig(*syscall.SysProcAttr) {}
