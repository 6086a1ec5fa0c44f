//go:build unix

package stream

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the client has closed its side of nc, without blocking and
// without consuming data: a MSG_PEEK read that returns 0 bytes is an orderly close. This
// lets a heartbeat detect a vanished client at once instead of one or two writes later.
func peerClosed(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil && n == 0:
			closed = true
		case err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR):
			closed = true
		}
		return true
	})
	return closed || err != nil
}
