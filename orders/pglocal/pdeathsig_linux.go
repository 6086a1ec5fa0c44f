package pglocal

import "syscall"

// setPdeathsig makes the kernel send SIGINT (PostgreSQL's fast shutdown) to the postmaster
// when the thread that started it dies. The starting goroutine stays locked to that thread
// until the postmaster exits (see run), so this fires only when the whole process dies —
// a test binary killed by -timeout or a server killed with SIGKILL leaves no orphan.
func setPdeathsig(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGINT }
