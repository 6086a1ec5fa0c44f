//go:build unix

package main

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// private reports an error when another user could know the token in the file: it belongs
// to someone else (made in a shared directory, say), or its mode lets others read or write
// it.
func private(fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); int(st.Uid) != uid {
			return fmt.Errorf("is owned by user %d, not by this process's user %d", st.Uid, uid)
		}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("is open to other users (mode %04o; chmod 600 it if nobody else has read it)", perm)
	}
	return nil
}
