package web

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
)

// flakyListener fails its first Accepts with the errors given, then accepts real
// connections from a loopback listener.
type flakyListener struct {
	net.Listener
	errs []error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, err
	}
	return l.Listener.Accept()
}

func TestAcceptErrorsAreRetriedNotFatal(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	aborted := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}
	m := newMetrics(prometheus.NewRegistry())
	var open atomic.Int64
	l := budgetListener(&flakyListener{Listener: ln, errs: []error{emfile, emfile, aborted}}, 2, &open, m, zerolog.Nop())

	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	c1, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept after transient errors: %v", err)
	}
	if got := counterValue(m.acceptErrors.WithLabelValues("too_many_open_files")); got != 2 {
		t.Fatalf("EMFILE counted %v times, want 2", got)
	}
	if got := counterValue(m.acceptErrors.WithLabelValues("aborted")); got != 1 {
		t.Fatalf("ECONNABORTED counted %v times, want 1", got)
	}
	if _, ok := c1.(syscall.Conn); !ok {
		t.Fatal("the accepted conn lost syscall.Conn (the streams peek through it)")
	}
	// The budget is 2: a third connection is closed at accept, and one freed slot is
	// handed out again.
	dial()
	c2, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	over := dial()
	done := make(chan net.Conn)
	go func() {
		c, _ := l.Accept() // sheds "over", then waits for the next connection
		done <- c
	}()
	buf := make([]byte, 1)
	_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := over.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection over the budget was not closed")
	}
	if got := counterValue(m.connsShed); got != 1 {
		t.Fatalf("shed %v, want 1", got)
	}
	_ = c1.Close()
	_ = c1.Close() // twice: the slot is given back once
	if open.Load() != 1 {
		t.Fatalf("open = %d after one close, want 1", open.Load())
	}
	dial() // fits in the freed slot
	c3 := <-done
	if c3 == nil || open.Load() != 2 {
		t.Fatalf("the freed slot was not handed out: %v, open %d", c3, open.Load())
	}
	_ = c3.Close()
	_ = c2.Close()
	_ = ln.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v, want net.ErrClosed", err)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
