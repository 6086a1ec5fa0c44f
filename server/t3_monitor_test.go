package main

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/queue/redistest"
)

// commandWatch follows MONITOR on the test's Redis (the one server, or every master of a
// cluster) and counts the commands that match: the signal a test waits for when what it
// waits for changes nothing it could read (a check that finds the state already right).
type commandWatch struct {
	match func(line string) bool
	conns []net.Conn
	wg    sync.WaitGroup

	mu sync.Mutex
	n  int
}

// watchCommands starts following; it returns once every MONITOR is on (later commands are
// all seen) and stops when the test ends.
func watchCommands(t *testing.T, rs *redistest.Server, match func(line string) bool) *commandWatch {
	t.Helper()
	w := &commandWatch{match: match}
	t.Cleanup(w.stop)
	err := rs.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		conn, err := net.Dial("tcp", c.Options().Addr)
		if err != nil {
			return err
		}
		w.conns = append(w.conns, conn)
		if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
			return err
		}
		r := bufio.NewReaderSize(conn, 1<<20)
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if ok, err := r.ReadString('\n'); err != nil || ok != "+OK\r\n" {
			t.Fatalf("MONITOR on %s: %q %v", c.Options().Addr, ok, err)
		}
		_ = conn.SetReadDeadline(time.Time{})
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if w.match(line) {
					w.mu.Lock()
					w.n++
					w.mu.Unlock()
				}
			}
		}()
		return nil
	})
	if err != nil {
		t.Fatalf("MONITOR: %v", err)
	}
	return w
}

// count is how many matching commands ran since the watch began.
func (w *commandWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *commandWatch) stop() {
	for _, c := range w.conns {
		_ = c.Close()
	}
	w.wg.Wait()
}

// soldOutScriptOn matches a MONITOR line of the sold-out script (internal/rstore/lua/soldout.lua) run for
// queue name: the only script given the queue's soldlog key.
func soldOutScriptOn(name string) func(line string) bool {
	key := `"wr:{q:` + name + `}:soldlog"`
	return func(line string) bool {
		return (strings.Contains(line, `"evalsha"`) || strings.Contains(line, `"eval"`)) && strings.Contains(line, key)
	}
}
