//go:build linux

package stream

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/topology"
)

// The floor under every pushed event on this machine: one write(2) of a position frame to a
// loopback TCP connection. On loopback the receiver's TCP processing runs inside the
// sender's syscall, so this is what a push costs the server here before any code of ours
// runs. BENCHMARKS.md compares it with the measured cost of one 1 Hz poll.
//
//	go test -run '^$' -bench . -benchtime 200000x ./stream
func BenchmarkLoopbackWrite(b *testing.B) {
	l := line{ev: 1234567, tick: 98765, head: 1000, waiting: 5000, rate: 10, arate: 10}
	frame := newPositionRenderer(&l).render(2500)
	conns := loopbackPairs(b, 500)
	b.Run("write", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		defer threadCPU(b)()
		for i := 0; b.Loop(); i++ {
			if _, err := conns[i%len(conns)].Write(frame); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("deadline+write", func(b *testing.B) { // what shard.write does per frame
		b.SetBytes(int64(len(frame)))
		defer threadCPU(b)()
		for i := 0; b.Loop(); i++ {
			c := conns[i%len(conns)]
			_ = c.SetWriteDeadline(time.Now().Add(250 * time.Millisecond))
			if _, err := c.Write(frame); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("render", func(b *testing.B) { // the fan-out's per-event rendering
		r := newPositionRenderer(&l)
		defer threadCPU(b)()
		for i := 0; b.Loop(); i++ {
			frame = r.render(int64(1 + i%5000))
		}
	})
}

// loopbackPairs opens n loopback TCP connections whose far ends are drained by readers.
func loopbackPairs(b *testing.B, n int) []net.Conn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.Cleanup(func() { _ = c.Close() })
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	out := make([]net.Conn, n)
	for i := range out {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		out[i] = c
	}
	return out
}

// threadCPU pins the benchmark to its OS thread and, when the returned func runs, reports
// that thread's CPU time per operation (user + system, so the loopback receive work the
// kernel does inside the sender's write is included; the readers' own CPU is not).
func threadCPU(b *testing.B) func() {
	runtime.LockOSThread()
	var start syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &start); err != nil {
		b.Fatal(err)
	}
	return func() {
		defer runtime.UnlockOSThread()
		var end syscall.Rusage
		if err := syscall.Getrusage(1, &end); err != nil {
			b.Fatal(err)
		}
		cpu := time.Duration(end.Utime.Nano()+end.Stime.Nano()-start.Utime.Nano()-start.Stime.Nano()) * time.Nanosecond
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkSoldOutFanout times a whole-line announcement: 19,000 streams of one queue (one
// instance's share at the stream budget) on net.Pipe, from the tick message that says the
// queue sold out to the last client having read its sold_out event (a pipe write returns
// only once the client has read it). The contract wants it under a second. Pipes, not
// loopback TCP: 19,000 pairs need 38,000 descriptors, over this machine's limit.
//
//	go test -run '^$' -bench SoldOutFanout -benchtime 5x ./stream
func BenchmarkSoldOutFanout(b *testing.B) {
	const n = 19000
	// A pipe write waits for its reader to be scheduled (a socket's would not: the kernel
	// buffers it), so among 19,000 readers the default write timeout would drop streams.
	h := NewHub(stubSource{}, stubRegistry{}, Config{Heartbeat: time.Hour, MaxPerIP: n, WriteTimeout: time.Minute}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var writers sync.WaitGroup
	for _, s := range h.shards {
		writers.Go(func() { s.run(ctx) })
	}
	var ready, got, want atomic.Int64
	done := make(chan struct{}, 1)
	var readers sync.WaitGroup
	clients := make([]net.Conn, 0, n)
	b.Cleanup(func() {
		cancel()
		writers.Wait()
		for _, c := range clients {
			_ = c.Close()
		}
		readers.Wait()
	})
	for i := range n {
		server, client := net.Pipe()
		clients = append(clients, client)
		ip := fmt.Sprintf("10.2.%d.%d", i/250, i%250)
		if err := h.AcquireIP(ip); err != nil {
			b.Fatal(err)
		}
		if err := h.Attach(ctx, server, Waiter{Queue: "q", Ticket: fmt.Sprintf("t%d", i), IP: ip,
			Place: queue.Place{State: queue.StateWaiting, Seq: int64(i%1000 + 1)}}); err != nil {
			b.Fatal(err)
		}
		readers.Go(func() {
			r := bufio.NewReaderSize(client, 256) // 19,000 readers: small buffers
			for {
				l, err := r.ReadSlice('\n')
				switch {
				case err == bufio.ErrBufferFull:
					continue
				case err != nil:
					return
				case bytes.HasPrefix(l, []byte("event: position")):
					ready.Add(1)
				case bytes.HasPrefix(l, []byte("event: sold_out")):
					if got.Add(1) == want.Load() {
						done <- struct{}{}
					}
				}
			}
		})
	}
	for deadline := time.Now().Add(time.Minute); ready.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d streams read their first event", ready.Load(), n)
		}
	}
	ev := int64(1) // the stub's snapshot
	tick := func(soldOut bool) {
		ev++
		h.onTick(ctx, "q", queue.Tick{V: 1, Ev: ev, Tick: ev, Tail: 1000, Waiting: 1000, Rate: 10, ARate: 10, SoldOut: soldOut})
	}
	var worst time.Duration
	for b.Loop() {
		want.Add(n)
		start := time.Now()
		tick(true)
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.Fatalf("%d of %d sold_out events read (%d streams open)", got.Load()-(want.Load()-n), n, h.Count())
		}
		worst = max(worst, time.Since(start))
		b.StopTimer()
		tick(false) // stock returns: the next sell-out is announced again
		b.StartTimer()
	}
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
	b.ReportMetric(float64(n), "streams")
}

// BenchmarkDrawPlacement times the start of a drop on one instance holding 100,000 pre-queue
// streams: from the tick message that says the draw is done to the last of their position
// events written — the draw loop's read of the drawn places (Seqs, a real Redis: 100
// commands in one pipeline), giving each stream its sequence, and the writers. The sockets
// take every write at once (a healthy client's kernel buffer), so this is the server's share.
// seqs-ms is the Redis read alone.
//
//	go test -run '^$' -bench DrawPlacement -benchtime 3x ./stream
func BenchmarkDrawPlacement(b *testing.B) {
	const n, name = 100000, "drop"
	rs := redistest.Start(b)
	rdb := rs.Client()
	q := queue.New(rdb, queue.Config{Grace: -1}, nil)
	ctx := context.Background()
	zero := 0.0
	if _, _, err := q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: &zero}); err != nil {
		b.Fatal(err)
	}
	// The draw's outcome as Seqs reads it: ticket i waits with sequence i+1.
	ids := make([]string, n)
	pipe := rdb.Pipeline()
	for from := 0; from < n; from += 1000 {
		args := make([]any, 0, 2000)
		for i := from; i < from+1000; i++ {
			ids[i] = "t" + strconv.Itoa(i)
			args = append(args, ids[i], "w:"+strconv.Itoa(i+1))
		}
		pipe.HSet(ctx, "wr:{q:"+name+"}:tickets", args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if seqs, err := q.Seqs(ctx, name, ids); err != nil || seqs[n-1] != n {
		b.Fatalf("seqs: %v", err)
	}
	seqsTook := time.Since(start)

	var written, want atomic.Int64
	done := make(chan struct{}, 1)
	for b.Loop() {
		b.StopTimer()
		h := NewHub(q, topology.New(rstore.New(rdb, q.OpTimeout())), Config{Heartbeat: time.Hour, MaxPerIP: n}, nil)
		hctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, s := range h.shards {
			wg.Go(func() { s.run(hctx) })
		}
		wg.Go(func() { h.drawLoop(hctx) })
		written.Store(0)
		want.Store(n)
		for i := range n {
			if err := h.AcquireIP("10.3.0.1"); err != nil {
				b.Fatal(err)
			}
			nc := &discardConn{written: &written, want: &want, done: done}
			if err := h.Attach(ctx, nc, Waiter{Queue: name, Ticket: ids[i], IP: "10.3.0.1",
				Place: queue.Place{State: queue.StatePrequeue, Seq: int64(i + 1)}}); err != nil {
				b.Fatal(err)
			}
		}
		qh := h.localQueue(name)
		qh.mu.Lock()
		ev := qh.line.ev
		qh.mu.Unlock()
		b.StartTimer()
		h.onTick(ctx, name, queue.Tick{V: 1, Ev: ev + 1, Tick: 1, Tail: n, Waiting: n,
			Sched: &queue.TickSchedule{Starts: time.Now().UnixMilli(), Phase: string(queue.DrawDone), N: n}})
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.Fatalf("%d of %d position events written", written.Load(), n)
		}
		b.StopTimer()
		cancel()
		wg.Wait()
		b.StartTimer()
	}
	b.ReportMetric(n, "streams")
	b.ReportMetric(float64(seqsTook.Microseconds())/1000, "seqs-ms") // after b.Loop, which resets metrics
}

// discardConn is a stream's socket that takes every write at once, counting position events.
type discardConn struct {
	net.Conn // nil: only the methods below are called
	written  *atomic.Int64
	want     *atomic.Int64
	done     chan struct{}
}

func (c *discardConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("event: position")) && c.written.Add(1) == c.want.Load() {
		c.done <- struct{}{}
	}
	return len(b), nil
}

func (c *discardConn) SetWriteDeadline(time.Time) error { return nil }
func (c *discardConn) Close() error                     { return nil }
