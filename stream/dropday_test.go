package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/stream"
	"github.com/waitroom/waitroom/topology"
)

// Drop day on the stream, against a real Redis and the real admission leader (TickOnce):
// the pre-queue's events, the draw's positions, sold out, the end, a lottery's positions and
// the ping event. Each test drives queue "h" of newHub.

// sseEvent is one parsed event of a stream.
type sseEvent struct {
	ID    int64
	HasID bool
	Name  string
	Data  map[string]any
}

// evStream is the client end of one stream: every event it read, and whether the server
// ended it.
type evStream struct {
	mu       sync.Mutex
	events   []sseEvent
	comments int // lines starting with ':'
	eof      bool
}

var streamIPs atomic.Int64

// join makes a ticket of queue h and joins it.
func (f *hubFixture) join(t *testing.T) queue.Ticket {
	t.Helper()
	tk, _ := f.signer.New("h")
	if _, _, err := f.q.Join(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	return tk
}

// place is what the web layer reads before it attaches a stream.
func (f *hubFixture) place(t *testing.T, tk queue.Ticket) queue.Place {
	t.Helper()
	p, err := f.q.TicketState(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// open attaches a stream for tk with place p (each from its own address) and reads it.
func (f *hubFixture) open(t *testing.T, tk queue.Ticket, p queue.Place) *evStream {
	t.Helper()
	ip := fmt.Sprintf("10.7.%d.%d", streamIPs.Add(1)/250, streamIPs.Load()%250)
	if err := f.hub.AcquireIP(ip); err != nil {
		t.Fatal(err)
	}
	server, client := net.Pipe()
	t.Cleanup(func() { _ = client.Close() })
	if err := f.hub.Attach(context.Background(), server, stream.Waiter{Queue: "h", Ticket: tk.ID, IP: ip, Place: p}); err != nil {
		t.Fatal(err)
	}
	s := &evStream{}
	go s.read(client)
	return s
}

func (s *evStream) read(c net.Conn) {
	sc := bufio.NewScanner(c)
	var ev sseEvent
	var data string
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "":
			if ev.Name != "" {
				ev.Data = map[string]any{}
				_ = json.Unmarshal([]byte(data), &ev.Data)
				s.mu.Lock()
				s.events = append(s.events, ev)
				s.mu.Unlock()
			}
			ev, data = sseEvent{}, ""
		case strings.HasPrefix(l, ":"):
			s.mu.Lock()
			s.comments++
			s.mu.Unlock()
		case strings.HasPrefix(l, "id: "):
			id, err := strconv.ParseInt(l[4:], 10, 64)
			ev.ID, ev.HasID = id, err == nil
		case strings.HasPrefix(l, "event: "):
			ev.Name = l[7:]
		case strings.HasPrefix(l, "data: "):
			data = l[6:]
		}
	}
	s.mu.Lock()
	s.eof = true
	s.mu.Unlock()
}

// named returns the events called name, in order.
func (s *evStream) named(name string) []sseEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sseEvent
	for _, e := range s.events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// names returns every event's name but pings, in order.
func (s *evStream) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		if e.Name != "ping" {
			out = append(out, e.Name)
		}
	}
	return out
}

// last returns the latest event called name.
func (s *evStream) last(name string) (sseEvent, bool) {
	evs := s.named(name)
	if len(evs) == 0 {
		return sseEvent{}, false
	}
	return evs[len(evs)-1], true
}

func (s *evStream) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eof
}

// ticking waits for cond while the leader ticks queue h (a tick publishes what changed; a
// message that went out before the hub subscribed is made up by the next one's resync).
func (f *hubFixture) ticking(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ad := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "test"})
	testwait.For(t, 30*time.Second, what, func() bool {
		if _, err := ad.TickOnce(context.Background(), "h"); err != nil {
			t.Fatal(err)
		}
		return cond()
	})
}

// startSoon moves queue h's start to just ahead; the ticks of f.ticking then run the draw
// once it has passed (admission counts by Redis TIME).
func (f *hubFixture) startSoon(t *testing.T) {
	t.Helper()
	// 100 ms ahead; on a busy machine the save can take longer than that and find the start
	// already past (refused: starts_at must be in the future), so a refused start is set
	// again further ahead.
	for ahead := 100 * time.Millisecond; ; ahead *= 2 {
		starts := time.Now().Add(ahead)
		_, _, err := f.q.Put(context.Background(), "h", queue.SettingsPatch{StartsAt: &starts})
		var inv *queue.InvalidError
		if err == nil {
			return
		}
		if !errors.As(err, &inv) || inv.Field != "starts_at" || ahead >= 10*time.Second {
			t.Fatal(err)
		}
	}
}

func every(ss []*evStream, f func(s *evStream) bool) bool {
	for _, s := range ss {
		if !f(s) {
			return false
		}
	}
	return true
}

func lastPrequeueSize(s *evStream) int64 {
	e, ok := s.last("prequeue")
	if !ok {
		return -1
	}
	n, _ := e.Data["prequeue_size"].(float64)
	return int64(n)
}

// Before the start a pre-queue stream gets a prequeue event on connect (with its draw id)
// and one when the pre-queue's size changes, no position; a stream that connects after the
// draw with the place it read before is placed by the next fan-out; a member that left
// before the start is dropped at the draw.
func TestPrequeueEventsAndLateDrawnStream(t *testing.T) {
	t.Parallel()
	f := newHub(t, stream.Config{UpdateInterval: 100 * time.Millisecond})
	ctx := context.Background()
	// An hour ahead while the members join and connect; moved to just ahead for the draw.
	starts := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if _, _, err := f.q.Put(ctx, "h", queue.SettingsPatch{StartsAt: &starts}); err != nil {
		t.Fatal(err)
	}
	const n = 4
	var tks []queue.Ticket
	for range n {
		tks = append(tks, f.join(t))
	}
	var ss []*evStream
	for _, tk := range tks[:n-1] { // the last member joins without a stream; it is watched later
		p := f.place(t, tk)
		if p.State != queue.StatePrequeue {
			t.Fatalf("place before the start: %+v", p)
		}
		ss = append(ss, f.open(t, tk, p))
	}
	late := f.place(t, tks[n-1]) // read before the draw, used after it
	testwait.For(t, 30*time.Second, "a prequeue event on every stream", func() bool {
		return every(ss, func(s *evStream) bool { return len(s.named("prequeue")) > 0 })
	})
	for i, s := range ss {
		e := s.named("prequeue")[0]
		at, err := time.Parse(stream.TimeFormat, fmt.Sprint(e.Data["starts_at"]))
		if err != nil || !at.Equal(starts) || e.Data["prequeue_size"] != float64(n) || e.Data["sold_out"] != false {
			t.Fatalf("stream %d: connect event %+v (starts_at %v), want starts %v, size %d", i, e.Data, err, starts, n)
		}
		if id, _ := e.Data["draw_id"].(string); len(id) < 16 {
			t.Fatalf("stream %d: connect event without a draw id: %+v", i, e.Data)
		}
		if !e.HasID {
			t.Fatalf("stream %d: prequeue event without an id", i)
		}
	}
	// One more joins: every stream hears the new size once, without the draw id.
	f.join(t)
	f.ticking(t, "prequeue_size 5 on every stream", func() bool {
		return every(ss, func(s *evStream) bool { return lastPrequeueSize(s) == n+1 })
	})
	e, _ := ss[0].last("prequeue")
	if _, has := e.Data["draw_id"]; has {
		t.Fatalf("size update carries a draw id: %+v", e.Data)
	}
	// One member leaves with its stream open: it has no place at the draw.
	if err := f.q.Leave(ctx, tks[0]); err != nil {
		t.Fatal(err)
	}
	f.startSoon(t)
	f.ticking(t, "the draw placed the others, and the leaver's stream ended", func() bool {
		return ss[0].ended() && every(ss[1:], func(s *evStream) bool { return len(s.named("position")) > 0 })
	})
	lateStream := f.open(t, tks[n-1], late) // its place said prequeue
	testwait.For(t, 30*time.Second, "the late stream's position", func() bool { return len(lateStream.named("position")) > 0 })
	for i, s := range append(ss[1:], lateStream) {
		tk := append(tks[1:n-1], tks[n-1])[i]
		p, err := f.q.Status(ctx, tk)
		if err != nil {
			t.Fatal(err)
		}
		e := s.named("position")[0]
		if e.Data["position"] != float64(p.Position) || p.Position < 1 {
			t.Fatalf("stream %d: position event %+v, Redis says %d", i, e.Data, p.Position)
		}
	}
	if names := ss[1].names(); names[0] != "prequeue" || names[len(names)-1] != "position" {
		t.Fatalf("events of a drawn stream: %v", names)
	}
}

// At the start every pre-queue stream gets its drawn place at once: the fan-out never runs
// in this test (an hour apart), so only the draw loop can have pushed the positions.
func TestDrawPushesPositionsAtOnce(t *testing.T) {
	t.Parallel()
	f := newHub(t, stream.Config{UpdateInterval: time.Hour})
	ctx := context.Background()
	starts := time.Now().Add(time.Hour) // moved to just ahead once every member is connected
	if _, _, err := f.q.Put(ctx, "h", queue.SettingsPatch{StartsAt: &starts}); err != nil {
		t.Fatal(err)
	}
	const n = 30
	var tks []queue.Ticket
	var ss []*evStream
	for range n {
		tks = append(tks, f.join(t))
	}
	for _, tk := range tks {
		ss = append(ss, f.open(t, tk, f.place(t, tk)))
	}
	testwait.For(t, 30*time.Second, "connect events", func() bool {
		return every(ss, func(s *evStream) bool { return len(s.named("prequeue")) == 1 })
	})
	f.startSoon(t)
	f.ticking(t, "every member's drawn position", func() bool {
		return every(ss, func(s *evStream) bool { return len(s.named("position")) > 0 })
	})
	seen := map[int64]bool{}
	for i, s := range ss {
		p, err := f.q.Status(ctx, tks[i])
		if err != nil {
			t.Fatal(err)
		}
		e := s.named("position")[0]
		pos := int64(e.Data["position"].(float64))
		if pos != p.Position || seen[pos] || e.Data["waiting"] != float64(n) {
			t.Fatalf("stream %d: position event %+v, Redis says position %d (seen before: %v)", i, e.Data, p.Position, seen[pos])
		}
		seen[pos] = true
		if e.Data["sold_out"] != false || e.Data["paused"] != false {
			t.Fatalf("stream %d: position event %+v, want paused and sold_out false", i, e.Data)
		}
	}
}

// Sold out: every open stream gets sold_out once, from the tick's handling, and keeps its
// stream; a stream that connects while sold out gets its position saying so, then the
// sold_out event; when stock returns every stream gets a position saying "sold_out":false.
func TestSoldOutReachesEveryStream(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	f := newHubWith(t, stream.Config{UpdateInterval: 100 * time.Millisecond}, reg)
	ctx := context.Background()
	var ss []*evStream
	for range 5 {
		tk := f.join(t)
		ss = append(ss, f.open(t, tk, f.place(t, tk)))
	}
	later := f.join(t) // joins are refused while sold out: its stream opens then
	testwait.For(t, 30*time.Second, "connect positions", func() bool {
		return every(ss, func(s *evStream) bool { return len(s.named("position")) == 1 })
	})
	if e, _ := ss[0].last("position"); e.Data["sold_out"] != false {
		t.Fatalf("position before the sell-out: %+v", e.Data)
	}
	if err := f.q.SetSoldOut(ctx, "h", true, 0); err != nil {
		t.Fatal(err)
	}
	f.ticking(t, "sold_out on every stream", func() bool {
		return every(ss, func(s *evStream) bool { return len(s.named("sold_out")) > 0 })
	})
	sl := f.open(t, later, f.place(t, later))
	ad := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "test"})
	// More ticks and fan-outs while sold out: five ticks, then three fan-out rounds (the
	// hub's own count of them) after the last.
	for range 5 {
		if _, err := ad.TickOnce(ctx, "h"); err != nil {
			t.Fatal(err)
		}
	}
	rounds := func() uint64 { return histogram(t, reg, "stream_fanout_seconds").GetSampleCount() }
	r0 := rounds()
	testwait.For(t, 30*time.Second, "three more fan-out rounds", func() bool { return rounds() >= r0+3 })
	for i, s := range ss {
		evs := s.named("sold_out")
		if len(evs) != 1 || s.ended() || !evs[0].HasID || evs[0].Data["server_time"] == nil {
			t.Fatalf("stream %d: sold_out events %+v (stream ended: %v), want one with id and server_time, stream open", i, evs, s.ended())
		}
	}
	if names := sl.names(); len(names) != 2 || names[0] != "position" || names[1] != "sold_out" {
		t.Fatalf("stream opened while sold out: events %v, want position then sold_out", names)
	}
	if e, _ := sl.last("position"); e.Data["sold_out"] != true || e.Data["eta_seconds"] != nil {
		t.Fatalf("position while sold out: %+v, want sold_out true and no ETA", e.Data)
	}
	// Stock returns: every stream hears it from a position event, whatever its tier.
	if err := f.q.SetSoldOut(ctx, "h", false, 0); err != nil {
		t.Fatal(err)
	}
	all := append(ss, sl)
	f.ticking(t, `a position with "sold_out":false after sold_out on every stream`, func() bool {
		return every(all, func(s *evStream) bool {
			names := s.names()
			e, _ := s.last("position")
			return names[len(names)-1] == "position" && e.Data["sold_out"] == false && len(s.named("position")) >= 2
		})
	})
}

// At ends_at every waiting stream of the queue gets the closed event, then the stream ends;
// a stream opened after the end by a ticket whose place was dropped gets closed and ends
// too. A buyer holding a live token keeps it: that stream is not closed, and a reconnect
// after the end gets the admitted event again.
func TestEndClosesEveryStream(t *testing.T) {
	t.Parallel()
	f := newHub(t, stream.Config{UpdateInterval: 100 * time.Millisecond})
	ctx := context.Background()
	one, rate := int64(1), 100.0
	if _, _, err := f.q.Put(ctx, "h", queue.SettingsPatch{MaxActive: &one, RatePerSecond: &rate}); err != nil {
		t.Fatal(err)
	}
	a, b := f.join(t), f.join(t)
	f.ticking(t, "the first joiner admitted", func() bool { return f.place(t, a).State == queue.StateAdmitted })
	sa, sb := f.open(t, a, f.place(t, a)), f.open(t, b, f.place(t, b))
	testwait.For(t, 30*time.Second, "admitted and position events", func() bool {
		return len(sa.named("admitted")) == 1 && len(sb.named("position")) > 0
	})
	// Just ahead: the ticks below run until it has passed and the end is done.
	ends := time.Now().Add(100 * time.Millisecond)
	if _, _, err := f.q.Put(ctx, "h", queue.SettingsPatch{EndsAt: &ends}); err != nil {
		t.Fatal(err)
	}
	f.ticking(t, "the waiting stream closed and ended", sb.ended)
	names := sb.names()
	e, _ := sb.last("closed")
	if len(sb.named("closed")) != 1 || names[len(names)-1] != "closed" || e.Data["reason"] != "ended" || e.Data["server_time"] == nil || !e.HasID {
		t.Fatalf("waiting stream: events %v, closed %+v; want one closed event (reason ended) last", names, e)
	}
	if sa.ended() || len(sa.named("closed")) != 0 {
		t.Fatalf("the admitted stream was closed at the end: events %v", sa.names())
	}
	// A stream opened after the end: the admitted ticket gets its token again; the ticket
	// whose place was dropped gets closed only.
	sa2 := f.open(t, a, f.place(t, a))
	testwait.For(t, 30*time.Second, "the admitted reconnect", func() bool { return len(sa2.named("admitted")) == 1 })
	sc := f.open(t, b, queue.Place{Queue: "h", State: queue.StateWaiting, Seq: 2})
	testwait.For(t, 30*time.Second, "the late stream to end", sc.ended)
	if names := sc.names(); len(names) != 1 || names[0] != "closed" {
		t.Fatalf("stream opened after the end: events %v, want closed only", names)
	}
}

// A random queue (a lottery) shows no place: "position" and "eta_seconds" are null, the
// number waiting is there; every open stream hears it when the method changes.
func TestRandomQueueHidesPositions(t *testing.T) {
	t.Parallel()
	f := newHub(t, stream.Config{UpdateInterval: 100 * time.Millisecond})
	var ss []*evStream
	for range 3 {
		tk := f.join(t)
		ss = append(ss, f.open(t, tk, f.place(t, tk)))
	}
	testwait.For(t, 30*time.Second, "connect positions", func() bool {
		return every(ss, func(s *evStream) bool { return len(s.named("position")) == 1 })
	})
	m := queue.MethodRandom
	if _, _, err := f.q.Put(context.Background(), "h", queue.SettingsPatch{Method: &m}); err != nil {
		t.Fatal(err)
	}
	hidden := func(s *evStream) bool {
		e, _ := s.last("position")
		pos, has := e.Data["position"]
		return has && pos == nil && e.Data["eta_seconds"] == nil && e.Data["waiting"] == float64(3)
	}
	f.ticking(t, "positions without a place on every stream", func() bool { return every(ss, hidden) })
	tk := f.join(t)
	s := f.open(t, tk, f.place(t, tk))
	testwait.For(t, 30*time.Second, "the connect position", func() bool { return len(s.named("position")) == 1 })
	if e, _ := s.last("position"); e.Data["position"] != nil || e.Data["eta_seconds"] != nil || e.Data["waiting"] == nil {
		t.Fatalf("connect position in a random queue: %+v", e.Data)
	}
}

// The heartbeat is a ping event carrying the queue's current event id and the server time,
// no longer a comment.
func TestPingEventCarriesTheEventID(t *testing.T) {
	t.Parallel()
	f := newHub(t, stream.Config{Heartbeat: 100 * time.Millisecond})
	tk := f.join(t)
	s := f.open(t, tk, f.place(t, tk))
	ad := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "test"})
	var ev int64
	testwait.For(t, 30*time.Second, "a ping with the latest event id", func() bool {
		res, err := ad.TickOnce(context.Background(), "h")
		if err != nil {
			t.Fatal(err)
		}
		ev = max(ev, res.Ev)
		p, ok := s.last("ping")
		return ok && ev > 0 && p.ID == ev
	})
	p, _ := s.last("ping")
	if _, err := time.Parse(stream.TimeFormat, fmt.Sprint(p.Data["server_time"])); err != nil || len(p.Data) != 1 {
		t.Fatalf("ping data %+v: %v", p.Data, err)
	}
	s.mu.Lock()
	comments := s.comments
	s.mu.Unlock()
	if comments != 0 {
		t.Fatalf("%d comment lines: the heartbeat is an event now", comments)
	}
}

// countingSource is the queue store with its per-ticket calls counted.
type countingSource struct {
	*queue.Queue
	mu      sync.Mutex
	touched map[string]int
	states  int // TicketState calls
	seqs    int // tickets asked about by Seqs
}

func (s *countingSource) Touch(ctx context.Context, q string, ids []string) error {
	s.mu.Lock()
	for _, id := range ids {
		s.touched[id]++
	}
	s.mu.Unlock()
	return s.Queue.Touch(ctx, q, ids)
}

func (s *countingSource) TicketState(ctx context.Context, t queue.Ticket) (queue.Place, error) {
	s.mu.Lock()
	s.states++
	s.mu.Unlock()
	return s.Queue.TicketState(ctx, t)
}

func (s *countingSource) Seqs(ctx context.Context, q string, ids []string) ([]int64, error) {
	s.mu.Lock()
	s.seqs += len(ids)
	s.mu.Unlock()
	return s.Queue.Seqs(ctx, q, ids)
}

// An idle pre-queue costs no Redis work per member: its streams are not touched (their
// places do not expire before the start), not even when one closes, and nothing is asked
// about their tickets. Once drawn they are touched like any waiter.
func TestPrequeueCostsNoPresenceWork(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	rdb := rs.Client()
	q := queue.New(rdb, queue.Config{Grace: -1, PrequeueShards: 1}, nil) // one shard, as newHubFixture's
	ctx := context.Background()
	zero := 0.0
	starts := time.Now().Add(2500 * time.Millisecond) // past the first flush of closed streams (2 s)
	if _, _, err := q.Put(ctx, "h", queue.SettingsPatch{RatePerSecond: &zero, StartsAt: &starts}); err != nil {
		t.Fatal(err)
	}
	src := &countingSource{Queue: q, touched: map[string]int{}}
	f := &hubFixture{q: q, signer: queue.NewSigner([]byte("k")), done: make(chan error, 1),
		hub: stream.NewHub(src, topology.New(rstore.New(rdb, q.OpTimeout())), stream.Config{UpdateInterval: 50 * time.Millisecond, PresenceEvery: 50 * time.Millisecond,
			Heartbeat: 50 * time.Millisecond}, nil)}
	go func() { f.done <- f.hub.Run(context.Background()) }()
	t.Cleanup(func() { _ = f.hub.Close(context.Background()); <-f.done })

	var tks []queue.Ticket
	var ss []*evStream
	for range 3 {
		tk := f.join(t)
		tks = append(tks, tk)
		ss = append(ss, f.open(t, tk, f.place(t, tk)))
	}
	// One stream closes (a ping finds it): its ticket gets no last sign of life either.
	server, client := net.Pipe()
	closer := f.join(t)
	if err := f.hub.AcquireIP("10.8.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := f.hub.Attach(ctx, server, stream.Waiter{Queue: "h", Ticket: closer.ID, IP: "10.8.0.1", Place: f.place(t, closer)}); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = bufio.NewReader(client).ReadString('}'); _ = client.Close() }()
	testwait.For(t, 30*time.Second, "the closed stream to be noticed", func() bool { return f.hub.Count() == 3 })
	time.Sleep(time.Until(starts) - 100*time.Millisecond) // many presence and fan-out rounds
	src.mu.Lock()
	touched, states, seqs := len(src.touched), src.states, src.seqs
	src.mu.Unlock()
	if touched != 0 || states != 0 || seqs != 0 {
		t.Fatalf("idle pre-queue: %d tickets touched, %d ticket reads, %d asked by Seqs; want none", touched, states, seqs)
	}
	time.Sleep(time.Until(starts))
	f.ticking(t, "the drawn members to be touched", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		for _, tk := range tks {
			if src.touched[tk.ID] == 0 {
				return false
			}
		}
		return true
	})
	if !every(ss, func(s *evStream) bool { return len(s.named("position")) == 1 }) {
		t.Fatal("a drawn member has no position event")
	}
}
