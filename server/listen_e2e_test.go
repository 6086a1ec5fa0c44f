package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue/redistest"
)

// TestListensOnlyWhereWRAddrSays: with REDIS_URL and DATABASE_URL set, the process has
// exactly one listening socket, on WR_ADDR.
func TestListensOnlyWhereWRAddrSays(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startProcess(t, "l", tolerantEnv(rs.URL(), testDB(t), nil))
	want := strings.TrimPrefix(in.url, "http://")
	got := listeningSockets(t, in.cmd.Process.Pid)
	if len(got) != 1 || got[0] != want {
		t.Fatalf("process listens on %v, want only %s", got, want)
	}
}

// listeningSockets lists the TCP addresses pid listens on, from /proc.
func listeningSockets(t *testing.T, pid int) []string {
	t.Helper()
	out, err := procListening(pid)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// procListening is listeningSockets that reports an error (a process gone, say).
func procListening(pid int) ([]string, error) {
	inodes := map[string]bool{}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, file := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/" + file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A = LISTEN
				continue
			}
			out = append(out, procAddr(f[1]))
		}
	}
	return out, nil
}

// procAddr turns /proc/net/tcp's "0100007F:1F90" into "127.0.0.1:8080".
func procAddr(s string) string {
	hostPort := strings.Split(s, ":")
	port, _ := strconv.ParseUint(hostPort[1], 16, 16)
	h := hostPort[0]
	if len(h) != 8 {
		return "[v6]:" + strconv.FormatUint(port, 10)
	}
	var ip []string
	for i := 6; i >= 0; i -= 2 {
		n, _ := strconv.ParseUint(h[i:i+2], 16, 8)
		ip = append(ip, strconv.FormatUint(n, 10))
	}
	return strings.Join(ip, ".") + ":" + strconv.FormatUint(port, 10)
}
