package stream_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/stream"
	"github.com/waitroom/waitroom/topology"
)

type hubFixture struct {
	q      *queue.Queue
	signer *queue.Signer
	hub    *stream.Hub
	done   chan error
}

func newHub(t *testing.T, cfg stream.Config) *hubFixture {
	t.Helper()
	return newHubWith(t, cfg, nil)
}

func newHubWith(t *testing.T, cfg stream.Config, reg prometheus.Registerer) *hubFixture {
	t.Helper()
	rs := redistest.Start(t)
	// Calls may take 10 s: the default 1 s fails them on a machine busy with other tests.
	rdb := rs.Client()
	// One pre-queue shard, also on a cluster: these tests read the pre-queue's size as exact
	// (a sharded one is the leader's count, up to a second behind: queue/prequeue.go).
	q := queue.New(rdb, queue.Config{Grace: -1, OpTimeout: 10 * time.Second, PrequeueShards: 1}, nil)
	zero := 0.0
	if _, _, err := q.Put(context.Background(), "h", queue.SettingsPatch{RatePerSecond: &zero}); err != nil {
		t.Fatal(err)
	}
	f := &hubFixture{q: q, signer: queue.NewSigner([]byte("k")), hub: stream.NewHub(q, topology.New(rstore.New(rdb, q.OpTimeout())), cfg, reg), done: make(chan error, 1)}
	go func() { f.done <- f.hub.Run(context.Background()) }()
	t.Cleanup(func() { _ = f.hub.Close(context.Background()); <-f.done })
	return f
}

// attach joins a user and attaches the server side of a pipe; the test holds the client side.
func (f *hubFixture) attach(t *testing.T, ip string) net.Conn {
	t.Helper()
	ctx := context.Background()
	tk, _ := f.signer.New("h")
	if _, _, err := f.q.Join(ctx, tk); err != nil {
		t.Fatal(err)
	}
	p, err := f.q.TicketState(ctx, tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.hub.AcquireIP(ip); err != nil {
		t.Fatalf("ip slot refused: %v", err)
	}
	server, client := net.Pipe()
	if err := f.hub.Attach(ctx, server, stream.Waiter{Queue: "h", Ticket: tk.ID, IP: ip, Place: p}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func readLines(c net.Conn, out chan<- string) {
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		out <- sc.Text()
	}
	close(out)
}

func TestSlowClientIsDroppedWithoutStallingOthers(t *testing.T) {
	t.Parallel()
	f := newHub(t, stream.Config{Heartbeat: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, Shards: 1})
	slow := f.attach(t, "10.0.0.1") // never read: every write to a pipe blocks
	_ = slow
	fast := f.attach(t, "10.0.0.2")
	lines := make(chan string, 1000)
	go readLines(fast, lines)
	// The handshake arrives at once with the first position.
	var head []string
	for l := range lines {
		head = append(head, l)
		if strings.HasPrefix(l, "data: ") {
			break
		}
	}
	if head[0] != "HTTP/1.1 200 OK" || !strings.Contains(strings.Join(head, "\n"), "event: position") {
		t.Fatalf("handshake: %q", head)
	}
	testwait.For(t, 30*time.Second, "the slow client to be dropped (1 stream left)", func() bool { return f.hub.Count() == 1 })
	// The reading client keeps getting heartbeats (its shard is the slow one's too).
	pings := 0
	timeout := time.After(2 * time.Second)
	for pings < 5 {
		select {
		case l := <-lines:
			if l == "event: ping" {
				pings++
			}
		case <-timeout:
			t.Fatalf("only %d pings after the slow client was dropped", pings)
		}
	}
}

func TestShutdownSendsJitteredRetry(t *testing.T) {
	t.Parallel()
	f := newHub(t, stream.Config{Retry: 2 * time.Second, ShutdownRetry: 5 * time.Second})
	var chans []chan string
	for i := range 5 {
		c := f.attach(t, "10.0.1."+string(rune('1'+i)))
		ch := make(chan string, 100)
		go readLines(c, ch)
		chans = append(chans, ch)
	}
	// Every response head is out (a stream whose head never went out just closes): its
	// frame is one write, which returns once the client has read it all, and Run stops
	// the writers before the shutdown retries. The connect retry is read here, so the
	// last retry below can only be the shutdown's.
	for _, ch := range chans {
		waitLine(t, ch, "event: position")
	}
	if err := f.hub.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	retries := map[string]bool{}
	for i, ch := range chans {
		var last string
		for l := range ch { // ends when the hub closes the stream
			if strings.HasPrefix(l, "retry: ") {
				last = l
			}
		}
		var ms int
		if _, err := fmt.Sscan(strings.TrimPrefix(last, "retry: "), &ms); err != nil || ms < 500 || ms > 5000 {
			t.Fatalf("client %d: last retry %q, want 500–5000 ms", i, last)
		}
		retries[last] = true
	}
	if len(retries) < 2 {
		t.Fatalf("every client got the same retry %v: not jittered", retries)
	}
	if err := f.hub.AcquireIP("10.9.9.9"); !errors.Is(err, stream.ErrClosed) {
		t.Fatalf("a closed hub answered %v, want ErrClosed", err)
	}
}

func TestPerIPCap(t *testing.T) {
	t.Parallel()
	f := newHub(t, stream.Config{MaxPerIP: 2})
	// Both streams are read: a stream nobody reads is dropped as a slow client after the
	// write timeout, which gives its slot back (on a busy machine before the third try).
	for range 2 {
		go func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }(f.attach(t, "10.0.2.1"))
	}
	if err := f.hub.AcquireIP("10.0.2.1"); !errors.Is(err, stream.ErrTooMany) {
		t.Fatalf("third stream from one address: %v", err)
	}
	if err := f.hub.AcquireIP("10.0.2.2"); err != nil {
		t.Fatalf("another address refused: %v", err)
	}
}

// The admitted event of a live stream is timed from the admission in Redis to the write
// on the socket, and the tick message from Redis to the hub (operators read both to tell
// server-side delay from client-side delay).
func TestAdmissionDeliveryIsMeasured(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	f := newHubWith(t, stream.Config{}, reg)
	client := f.attach(t, "10.0.3.1")
	lines := make(chan string, 100)
	go readLines(client, lines)
	waitLine(t, lines, "event: position")
	ctx := context.Background()
	rate := 100.0
	if _, _, err := f.q.Put(ctx, "h", queue.SettingsPatch{RatePerSecond: &rate}); err != nil {
		t.Fatal(err)
	}
	ad := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "test"})
	deadline := time.Now().Add(30 * time.Second) // for both waits below
	// A tick admits by the Redis TIME elapsed since the last one.
	testwait.For(t, time.Until(deadline), "somebody to be admitted", func() bool {
		res, err := ad.TickOnce(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		return res.Admitted > 0
	})
	waitLine(t, lines, "event: admitted")
	// The write that delivered the event is observed right after it returns.
	var delivery *dto.Histogram
	testwait.For(t, time.Until(deadline), "sse_admitted_delivery_seconds to be observed", func() bool {
		delivery = histogram(t, reg, "sse_admitted_delivery_seconds")
		return delivery.GetSampleCount() > 0
	})
	if delivery.GetSampleCount() != 1 {
		t.Fatalf("sse_admitted_delivery_seconds count %d, want 1", delivery.GetSampleCount())
	}
	tick := histogram(t, reg, "stream_tick_delay_seconds")
	if tick.GetSampleCount() < 1 {
		t.Fatalf("stream_tick_delay_seconds count %d, want >= 1", tick.GetSampleCount())
	}
	// Both are seconds since the admission (Redis TIME, milliseconds): a unit slip (seconds
	// read as milliseconds, or the reverse) lands far outside this range.
	for name, h := range map[string]*dto.Histogram{"delivery": delivery, "tick": tick} {
		if avg := h.GetSampleSum() / float64(h.GetSampleCount()); avg < 0 || avg > 60 {
			t.Fatalf("%s: mean %v s since the admission", name, avg)
		}
	}
}

func waitLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stream closed before %q", want)
			}
			if l == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %q within 5 s", want)
		}
	}
}

func histogram(t *testing.T, reg *prometheus.Registry, name string) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}
