package stream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/topology"
)

// The writers' timing — heartbeat spacing, the write timeout that drops a slow client, the
// bound on the shutdown retry — is proved here on synctest's fake clock: the hub runs only
// its writers (no Redis), the clients are net.Pipe ends, and every wait is durable, so each
// test is deterministic and takes no real time. The hub tests against a real Redis
// (hub_test.go) cover the same paths end to end.

// stubSource answers the snapshot read of Attach; nothing else is called while only the
// writers run.
type stubSource struct{}

func (stubSource) Names(context.Context) ([]string, error) { return nil, nil }
func (stubSource) Feed(context.Context) *queue.Feed        { return nil }
func (stubSource) Snapshot(context.Context, string) (queue.Snapshot, error) {
	return queue.Snapshot{Ev: 1, Tail: 1000, Waiting: 1000, Rate: 10, AdmitRate: 10}, nil
}
func (stubSource) Touch(context.Context, string, []string) error { return nil }
func (stubSource) TicketState(context.Context, queue.Ticket) (queue.Place, error) {
	return queue.Place{}, nil
}
func (stubSource) Seqs(_ context.Context, _ string, ids []string) ([]int64, error) {
	return make([]int64, len(ids)), nil
}

// stubRegistry takes the hub's instance reports and keeps nothing.
type stubRegistry struct{}

func (stubRegistry) ReportInstance(context.Context, topology.Instance, time.Duration) error {
	return nil
}
func (stubRegistry) RemoveInstance(context.Context, string) error { return nil }

// pipeClient is the far end of one stream: the lines it read and when, by the bubble's
// clock (a line is read at the instant it is written: the pipe has no buffer).
type pipeClient struct {
	nc     net.Conn
	slot   int // the stream's heartbeat slot
	done   chan struct{}
	mu     sync.Mutex
	lines  []string
	at     []time.Time
	endErr error
}

// read records lines until the stream ends, or until a line starting with stopAfter (when
// not "") — after which the client never reads again, like a stalled browser.
func (c *pipeClient) read(stopAfter string) {
	defer close(c.done)
	r := bufio.NewReader(c.nc)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			c.mu.Lock()
			c.endErr = err
			c.mu.Unlock()
			return
		}
		l = strings.TrimSuffix(l, "\n")
		c.mu.Lock()
		c.lines, c.at = append(c.lines, strings.TrimSuffix(l, "\r")), append(c.at, time.Now())
		c.mu.Unlock()
		if stopAfter != "" && strings.HasPrefix(l, stopAfter) {
			return
		}
	}
}

// first returns when the first line with prefix was read.
func (c *pipeClient) first(prefix string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, l := range c.lines {
		if strings.HasPrefix(l, prefix) {
			return c.at[i], true
		}
	}
	return time.Time{}, false
}

// pings returns when each heartbeat was read.
func (c *pipeClient) pings() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for i, l := range c.lines {
		if l == "event: ping" {
			out = append(out, c.at[i])
		}
	}
	return out
}

// retries returns every "retry:" value read, in ms.
func (c *pipeClient) retries() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, l := range c.lines {
		if v, ok := strings.CutPrefix(l, "retry: "); ok {
			ms, err := strconv.Atoi(v)
			if err != nil {
				ms = -1
			}
			out = append(out, ms)
		}
	}
	return out
}

// attachPipe attaches a waiting stream on a net.Pipe. A reading client reads it to the end
// (stopAfter ""), or up to a line with prefix stopAfter; a non-reading one never reads.
func attachPipe(t *testing.T, h *Hub, i int, reading bool, stopAfter string) *pipeClient {
	t.Helper()
	server, cl := net.Pipe()
	t.Cleanup(func() { _ = server.Close(); _ = cl.Close() }) // also when the test fails early
	ip := fmt.Sprintf("10.1.%d.%d", i/250, i%250)
	if err := h.AcquireIP(ip); err != nil {
		t.Fatal(err)
	}
	ticket := fmt.Sprintf("t%d", i)
	if err := h.Attach(context.Background(), server, Waiter{Queue: "q", Ticket: ticket, IP: ip,
		Place: queue.Place{State: queue.StateWaiting, Seq: int64(i + 1)}}); err != nil {
		t.Fatal(err)
	}
	c := &pipeClient{nc: cl, done: make(chan struct{})}
	qh := h.localQueue("q")
	qh.mu.Lock()
	c.slot = qh.byTicket[ticket][0].hbSlot
	qh.mu.Unlock()
	if reading {
		go c.read(stopAfter)
	} else {
		close(c.done)
	}
	return c
}

// runWriters starts the hub's writers (and nothing else of Run); stop ends them, and runs
// at the end of the test if it was not called.
func runWriters(t *testing.T, h *Hub) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range h.shards {
		wg.Go(func() { s.run(ctx) })
	}
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Every stream gets its ping once per Heartbeat, exactly; the streams of one writer are
// spread over hbSlots instants Heartbeat/hbSlots apart (a stream in slot s is pinged at
// (s+1) steps, then every Heartbeat), so they are not all pinged at once.
func TestHeartbeatOncePerHeartbeatSpreadOverSlots(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const hb, beats = 15 * time.Second, 5
		step := hb / hbSlots
		h := NewHub(stubSource{}, stubRegistry{}, Config{Heartbeat: hb, Shards: 2}, nil)
		start := time.Now()
		stop := runWriters(t, h)
		var cs []*pipeClient
		for i := range 45 {
			cs = append(cs, attachPipe(t, h, i, true, ""))
		}
		synctest.Wait() // every response head is written: nothing is pending but the clock
		time.Sleep(beats*hb + step/2)
		stop()
		slots := map[int]int{}
		for i, c := range cs {
			_ = c.nc.Close()
			<-c.done
			if at, ok := c.first("HTTP/1.1 200 OK"); !ok || !at.Equal(start) {
				t.Fatalf("stream %d: response head at %v (read %v), want at once", i, at.Sub(start), ok)
			}
			pings := c.pings()
			if len(pings) != beats {
				t.Fatalf("stream %d: %d pings in %d heartbeats, want %d", i, len(pings), beats, beats)
			}
			for k, at := range pings {
				if want := time.Duration(c.slot+1)*step + time.Duration(k)*hb; at.Sub(start) != want {
					t.Fatalf("stream %d (slot %d): ping %d at %v, want %v", i, c.slot, k, at.Sub(start), want)
				}
			}
			slots[c.slot]++
		}
		if len(slots) != hbSlots {
			t.Fatalf("streams in %d heartbeat slots, want all %d: %v", len(slots), hbSlots, slots)
		}
	})
}

// A client that does not read holds its writer up for one WriteTimeout, then is dropped as
// a slow client; the reading client behind it gets its response head at that moment and
// its pings on schedule after it, one per Heartbeat.
func TestSlowClientHoldsItsWriterOneWriteTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const hb, wt = time.Second, 250 * time.Millisecond
		h := NewHub(stubSource{}, stubRegistry{}, Config{Heartbeat: hb, WriteTimeout: wt, Shards: 1}, nil)
		start := time.Now()
		stop := runWriters(t, h)
		slow := attachPipe(t, h, 0, false, "") // first in the writer's queue, never read
		fast := attachPipe(t, h, 1, true, "")
		if h.Count() != 2 {
			t.Fatalf("%d streams, want 2", h.Count())
		}
		time.Sleep(wt)
		synctest.Wait()
		if at, ok := fast.first("HTTP/1.1 200 OK"); !ok || at.Sub(start) > wt {
			t.Fatalf("reading client's response head at %v (read %v), want within one write timeout (%v)", at.Sub(start), ok, wt)
		}
		if h.Count() != 1 {
			t.Fatalf("%d streams after the write timeout, want the slow client dropped", h.Count())
		}
		if n := counterValue(t, h.m.drops.WithLabelValues("slow_client")); n != 1 {
			t.Fatalf("slow_client drops %v, want 1", n)
		}
		if _, err := slow.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("slow client's read: %v, want EOF (stream closed)", err)
		}
		time.Sleep(5 * hb)
		stop()
		_ = fast.nc.Close()
		<-fast.done
		pings := fast.pings()
		if len(pings) != 5 {
			t.Fatalf("reading client: %d pings in 5 heartbeats, want 5", len(pings))
		}
		step := hb / hbSlots
		for k, at := range pings {
			if want := time.Duration(fast.slot+1)*step + time.Duration(k)*hb; at.Sub(start) != want {
				t.Fatalf("reading client (slot %d): ping %d at %v, want %v", fast.slot, k, at.Sub(start), want)
			}
		}
	})
}

// At shutdown every stream is told to come back after a random delay in
// [Retry/4, ShutdownRetry] and closed; a client that stopped reading holds the shutdown up
// for shutdownWriteTimeout at most.
func TestShutdownRetryJitteredAndBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Retry: 2 * time.Second, ShutdownRetry: 5 * time.Second, Shards: 2}
		h := NewHub(stubSource{}, stubRegistry{}, cfg, nil)
		stop := runWriters(t, h)
		var cs []*pipeClient
		for i := range 20 {
			cs = append(cs, attachPipe(t, h, i, true, ""))
		}
		stuck := attachPipe(t, h, 20, true, "data: ") // reads its response head, then stops
		synctest.Wait()
		for i, c := range append(cs, stuck) {
			if _, ok := c.first("data: "); !ok {
				t.Fatalf("stream %d: no response head before the shutdown", i)
			}
		}
		stop() // as Run does: the writers end, then shutdownConns
		begin := time.Now()
		h.shutdownConns()
		if took := time.Since(begin); took > shutdownWriteTimeout {
			t.Fatalf("shutdown took %v with one stalled client, want at most %v", took, shutdownWriteTimeout)
		}
		if h.Count() != 0 {
			t.Fatalf("%d streams left open", h.Count())
		}
		if n := counterValue(t, h.m.drops.WithLabelValues("shutdown")); n != 21 {
			t.Fatalf("shutdown drops %v, want 21", n)
		}
		lo, hi := int(cfg.Retry/4/time.Millisecond), int(cfg.ShutdownRetry/time.Millisecond)
		retries := map[int]bool{}
		for i, c := range cs {
			<-c.done          // the stream was closed
			rs := c.retries() // the connect retry, then the shutdown's
			if len(rs) != 2 || rs[1] < lo || rs[1] > hi {
				t.Fatalf("client %d: retries %v ms, want the connect one then one in %d–%d", i, rs, lo, hi)
			}
			retries[rs[1]] = true
		}
		if len(retries) < 2 {
			t.Fatalf("every client got the same retry %v: not jittered", retries)
		}
		if _, err := stuck.nc.Read(make([]byte, 1)); err == nil {
			t.Fatal("the stalled client's stream is still open")
		}
	})
}
