//go:build linux

package stream

import (
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
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
