package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// childConfig is what the parent hands each process (JSON in SWARM_CHILD).
type childConfig struct {
	Index     int           `json:"index"`
	Targets   []string      `json:"targets"`
	Offset    int           `json:"offset"` // global index of the first waiter: target = (Offset+i) % len(Targets)
	N         int           `json:"n"`
	Src       string        `json:"src"`
	Rate      float64       `json:"rate"` // connects per second in this process
	Queue     string        `json:"queue"`
	Mode      string        `json:"mode"` // stream or poll: what the connect phase opens
	PollEvery time.Duration `json:"poll_every"`
	TTL       time.Duration `json:"ttl"`
	Front     int64         `json:"front"`
	Conc      int           `json:"conc"` // most connects in flight
	Deadline  time.Time     `json:"deadline"`

	// -mode storm: streams reconnect like a browser's, admitted users leave, and on
	// "arrive" new users join at ArrivalRate for ArrivalFor.
	Reconnect     bool          `json:"reconnect,omitempty"`
	LeaveAdmitted bool          `json:"leave_admitted,omitempty"`
	ArrivalRate   float64       `json:"arrival_rate,omitempty"`
	ArrivalFor    time.Duration `json:"arrival_for,omitempty"`

	// -mode flood: N idle connections that send Partial and never finish it; one closed by
	// the server is opened again after Redial (0 = not).
	Partial string        `json:"partial,omitempty"`
	Redial  time.Duration `json:"redial,omitempty"`

	// -mode draw and soldout: every waiter keeps its drop-day events (first position, first
	// sold_out, with their times) for the parent, and "watch" starts progress reports.
	DropDay bool `json:"drop_day,omitempty"`
}

// child runs one process's share of the waiters and answers the parent's commands on
// stdin: "idle", "active", "poll", "stop" (or EOF).
type child struct {
	cfg       childConfig
	src       net.IP
	hostports []string
	start     time.Time
	st        *clientStats
	waiters   []*waiter
	epoch     atomic.Int64
	active    atomic.Bool
	out       *bufio.Writer
	outMu     sync.Mutex

	wmu       sync.Mutex // guards waiters (storm arrivals append while others read)
	quit      chan struct{}
	quitOnce  sync.Once
	spawners  sync.WaitGroup
	lastUp    atomic.Int64   // unix ns: the latest waiter to get a stream (back)
	pending   atomic.Int64   // storm arrivals not started yet
	downUntil []atomic.Int64 // per target: unix ns until which it is taken for dead

	mark    atomic.Int64 // drop day: unix ns of "watch"; positions before it are not the drawn ones
	gotPos  atomic.Int64 // drop day: waiters that have had a position event since mark
	gotSold atomic.Int64 // drop day: waiters that have had a sold_out event
	ended   atomic.Int64 // drop day: streams that ended (after their first event) without the swarm closing them
}

// dropMsg is a drop-day process's progress: how many of its waiters have had their first
// position and sold_out events so far.
type dropMsg struct {
	Index int   `json:"index"`
	Pos   int64 `json:"pos"`
	Sold  int64 `json:"sold"`
	Ended int64 `json:"ended"`
}

// reportDrop sends the drop-day counts every 50 ms until the run stops.
func (c *child) reportDrop() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		c.emit("drop", dropMsg{Index: c.cfg.Index, Pos: c.gotPos.Load(), Sold: c.gotSold.Load(), Ended: c.ended.Load()})
		select {
		case <-t.C:
		case <-c.quit:
			return
		}
	}
}

// all is a copy of the waiter list.
func (c *child) all() []*waiter {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return append([]*waiter(nil), c.waiters...)
}

func (c *child) addWaiter(w *waiter) {
	c.wmu.Lock()
	c.waiters = append(c.waiters, w)
	c.wmu.Unlock()
}

// markDown takes target t for dead for a few seconds (a refused connection), as a load
// balancer's health check would.
func (c *child) markDown(t int) {
	c.downUntil[t].Store(time.Now().Add(5 * time.Second).UnixNano())
}

// pickTarget chooses the instance a reconnect goes to: at random among the others that
// are not taken for dead; failing that any other; with one target, that one.
func (c *child) pickTarget(cur int) int {
	now := time.Now().UnixNano()
	var live, other []int
	for t := range c.hostports {
		if t == cur {
			continue
		}
		other = append(other, t)
		if c.downUntil[t].Load() < now {
			live = append(live, t)
		}
	}
	switch {
	case len(live) > 0:
		return live[rand.IntN(len(live))]
	case len(other) > 0:
		return other[rand.IntN(len(other))]
	}
	return cur
}

// sleep waits d unless the run ends first; false if it did.
func (c *child) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-c.quit:
	}
	return false
}

// statusMsg is a storm process's count of its waiters by state.
type statusMsg struct {
	Index   int   `json:"index"`
	At      int64 `json:"at_ns"`
	Total   int   `json:"total"`
	New     int   `json:"new"`
	Down    int   `json:"down"`
	Live    int   `json:"live"`
	Done    int   `json:"done"`
	Lost    int   `json:"lost"`
	LastUp  int64 `json:"last_up_ns"`
	Drops   int64 `json:"drops"`   // streams that ended after events, so far
	Pending int   `json:"pending"` // arrivals not started yet
}

func (c *child) status() statusMsg {
	m := statusMsg{Index: c.cfg.Index, LastUp: c.lastUp.Load(), Drops: c.st.drops.Load(), Pending: int(c.pending.Load())}
	for _, w := range c.all() {
		m.Total++
		switch w.state.Load() {
		case wsNew:
			m.New++
		case wsDown:
			m.Down++
		case wsLive:
			m.Live++
		case wsDone:
			m.Done++
		case wsLost:
			m.Lost++
		}
	}
	m.At = time.Now().UnixNano()
	return m
}

// reportStatus sends the counts every 100 ms until the run stops.
func (c *child) reportStatus() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		c.emit("status", c.status())
		select {
		case <-t.C:
		case <-c.quit:
			return
		}
	}
}

// arrivals adds new users at the configured rate (storm), spread over the targets.
func (c *child) arrivals(ctx context.Context, streams *sync.WaitGroup, offset int) {
	defer c.spawners.Done()
	cfg := c.cfg
	n := int(cfg.ArrivalRate * cfg.ArrivalFor.Seconds())
	t0 := time.Now()
	defer c.pending.Store(0)
	for i := 0; i < n; i++ {
		c.pending.Store(int64(n - i))
		due := t0.Add(time.Duration(float64(i) / cfg.ArrivalRate * float64(time.Second)))
		if !c.sleep(ctx, time.Until(due)) {
			return
		}
		g := offset + i
		w := &waiter{c: c, index: g, target: g % len(cfg.Targets)}
		c.addWaiter(w)
		streams.Add(1)
		go func() { defer streams.Done(); w.arrive(ctx) }()
	}
}

func (c *child) emit(tag string, v any) {
	c.outMu.Lock()
	_, _ = c.out.Write(jsonLine(tag, v))
	_ = c.out.Flush()
	c.outMu.Unlock()
}

// connectedMsg reports the end of the connect phase.
type connectedMsg struct {
	Index     int     `json:"index"`
	OK        int     `json:"ok"`
	Failed    int     `json:"failed"`
	Seconds   float64 `json:"seconds"`
	FirstDone float64 `json:"first_done"`
	// Drop day: waiters whose stream's first event was prequeue, and whose join answered
	// state "prequeue".
	PrequeueFirst int `json:"prequeue_first,omitempty"`
	JoinPrequeue  int `json:"join_prequeue,omitempty"`
}

// childResult is everything a process measured.
type childResult struct {
	Index         int                 `json:"index"`
	Queue         string              `json:"queue"`
	Connected     int                 `json:"connected"`
	Hist          map[string]histJSON `json:"hist"`
	Counts        map[string]int64    `json:"counts"`
	Errors        map[string]int64    `json:"errors"`
	Groups        []groupOut          `json:"groups"`
	AdmCounts     map[int64]int64     `json:"adm_counts"`
	AdmRecs       []admRecord         `json:"adm_recs"`
	JoinWrong     int64               `json:"join_order_wrong"`
	JoinSkipped   int64               `json:"join_order_skipped"`
	HealthyAtStop int                 `json:"healthy_at_stop"`
	// -mode storm
	Tokens  []tokenOut     `json:"tokens,omitempty"`
	Reconns []reconnRecord `json:"reconns,omitempty"`
	Final   *statusMsg     `json:"final,omitempty"`
	Arrived int            `json:"arrived,omitempty"`
	// -mode flood
	Flood *floodResult `json:"flood,omitempty"`
	// -mode draw, soldout: one record per waiter that joined
	Drop []dropRec `json:"drop,omitempty"`
}

// tokenOut is what one storm user ended with.
type tokenOut struct {
	Ticket  string `json:"ticket"` // the id part of the signed ticket
	Token   string `json:"token,omitempty"`
	Issued  int64  `json:"issued_ms,omitempty"`
	Changed bool   `json:"changed,omitempty"`
	State   int32  `json:"state"`
	Reconn  int    `json:"reconnects,omitempty"`
}

type groupOut struct {
	Target      int   `json:"target"`
	Tick        int64 `json:"tick"`
	FirstServer int64 `json:"first_server_us"`
	LastParsed  int64 `json:"last_parsed_us"`
	N           int64 `json:"n"`
}

func runChild(raw string) error {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("child config: %w", err)
	}
	// Hard stop: whatever happens, this process ends by the deadline.
	time.AfterFunc(time.Until(cfg.Deadline), func() {
		fmt.Fprintf(os.Stderr, "swarm child %d: hard deadline reached, exiting\n", cfg.Index)
		os.Exit(4)
	})
	c := &child{cfg: cfg, start: time.Now(), st: newClientStats(), out: bufio.NewWriter(os.Stdout),
		quit: make(chan struct{}), downUntil: make([]atomic.Int64, len(cfg.Targets))}
	if cfg.Src != "" {
		c.src = net.ParseIP(cfg.Src)
	}
	for _, t := range cfg.Targets {
		c.hostports = append(c.hostports, hostPort(t))
	}
	ctx, cancel := context.WithDeadline(context.Background(), cfg.Deadline)
	defer cancel()

	cmds := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- strings.TrimSpace(sc.Text())
		}
		close(cmds)
	}()

	if cfg.Mode == "flood" {
		return c.flood(ctx, cmds)
	}
	var streams, polls sync.WaitGroup
	c.connect(ctx, &streams, &polls)
	for cmd := range cmds {
		switch cmd {
		case "storm":
			c.spawners.Add(1)
			go func() { defer c.spawners.Done(); c.reportStatus() }()
		case "watch":
			c.mark.Store(time.Now().UnixNano())
			c.spawners.Add(1)
			go func() { defer c.spawners.Done(); c.reportDrop() }()
		case "arrive":
			if cfg.ArrivalRate > 0 && cfg.ArrivalFor > 0 {
				c.pending.Store(int64(cfg.ArrivalRate * cfg.ArrivalFor.Seconds()))
				c.spawners.Add(1)
				go c.arrivals(ctx, &streams, 1<<30+cfg.Index<<20)
			}
		case "idle":
			c.active.Store(false)
			c.epoch.Add(1)
		case "active":
			c.epoch.Add(1)
			c.active.Store(true)
		case "poll":
			c.switchToPoll(ctx, &streams, &polls)
			c.emit("ack", map[string]int{"index": cfg.Index})
		case "stop":
			c.stopAll(&streams, &polls)
			c.emit("result", c.result())
			return nil
		}
	}
	c.stopAll(&streams, &polls)
	c.emit("result", c.result())
	return nil
}

// connect joins (and streams) every waiter of this process at the configured rate.
func (c *child) connect(ctx context.Context, streams, polls *sync.WaitGroup) {
	cfg := c.cfg
	var ok, failed atomic.Int64
	var done sync.WaitGroup
	t0 := time.Now()
	var firstDone atomic.Int64
	// Paced, and bounded in flight: an overloaded server slows the connect phase down
	// instead of collecting a pile of timed-out handshakes.
	sem := make(chan struct{}, max(1, cfg.Conc))
	for i := 0; i < cfg.N; i++ {
		due := t0.Add(time.Duration(float64(i) / cfg.Rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		g := cfg.Offset + i
		w := &waiter{c: c, index: g, target: g % len(cfg.Targets)}
		c.addWaiter(w)
		done.Add(1)
		report := func(good bool) {
			if good {
				ok.Add(1)
				firstDone.CompareAndSwap(0, int64(time.Since(t0)))
			} else {
				failed.Add(1)
			}
			<-sem
			done.Done()
		}
		if cfg.Mode == "poll" {
			go func() {
				rc, good := w.join(ctx)
				if good {
					w.healthy = true
					w.setConn(rc)
				}
				report(good)
			}()
			continue
		}
		streams.Add(1)
		go func() {
			defer streams.Done()
			dialStart := time.Now()
			rc, good := w.join(ctx)
			if !good {
				report(false)
				return
			}
			w.streamLoop(ctx, rc, dialStart, report)
		}()
	}
	done.Wait()
	m := connectedMsg{Index: cfg.Index, OK: int(ok.Load()), Failed: int(failed.Load()),
		Seconds: time.Since(t0).Seconds(), FirstDone: time.Duration(firstDone.Load()).Seconds()}
	if cfg.DropDay {
		// Every waiter's first event (or failure) is in: their goroutines wrote these
		// before reporting, and done.Wait ordered it.
		for _, w := range c.all() {
			if w.drop.First == evPrequeue {
				m.PrequeueFirst++
			}
			if w.joinPre {
				m.JoinPrequeue++
			}
		}
	}
	c.emit("connected", m)
	if cfg.Mode == "poll" {
		c.startPolls(ctx, polls, false)
	}
}

// switchToPoll closes every stream and has the same tickets poll instead.
func (c *child) switchToPoll(ctx context.Context, streams, polls *sync.WaitGroup) {
	for _, w := range c.all() {
		w.shut()
	}
	streams.Wait()
	c.startPolls(ctx, polls, true)
}

func (c *child) startPolls(ctx context.Context, polls *sync.WaitGroup, reset bool) {
	for _, w := range c.all() {
		if w.ticket == "" || w.admitted {
			continue
		}
		var rc *rawConn
		w.mu.Lock()
		if reset {
			w.stop = false
			w.conn = nil
		} else {
			rc = w.conn
		}
		w.mu.Unlock()
		off := time.Duration(rand.Int64N(int64(c.cfg.PollEvery)))
		polls.Add(1)
		go func() { defer polls.Done(); w.runPoll(ctx, rc, off) }()
	}
}

func (c *child) stopAll(streams, polls *sync.WaitGroup) {
	c.quitOnce.Do(func() { close(c.quit) })
	c.spawners.Wait()
	for _, w := range c.all() {
		w.shut()
	}
	streams.Wait()
	polls.Wait()
}

func (c *child) result() childResult {
	st := c.st
	r := childResult{Index: c.cfg.Index, Queue: c.cfg.Queue, Hist: map[string]histJSON{}, Counts: map[string]int64{}}
	for name, h := range map[string]*hist{
		"join": &st.joinLat, "connect": &st.connectLat, "position": &st.posLat, "admitted": &st.admLat,
		"admitted_from_issue": &st.admIssueLat, "expired": &st.expLat, "ping_gap": &st.pingGap,
		"position_gap_front": &st.gapFront, "position_gap_all": &st.gapAll, "poll": &st.pollLat,
		"poll_admitted_from_issue": &st.pollIssueLat, "reconnect": &st.reconnectLat, "arrival_join": &st.arrivalJoinLat,
		"admitted_from_issue_reconnected": &st.admIssueLatReconnect,
	} {
		r.Hist[name] = h.snapshot()
	}
	for name, v := range map[string]*atomic.Int64{
		"position": &st.positions, "admitted": &st.admitted, "expired": &st.expired, "ping": &st.pings,
		"other": &st.other, "position_after_admitted": &st.posAfterAdmitted,
		"position_increase": &st.monoViolations, "join_to_stream_increase": &st.joinToStreamUp,
		"admitted_twice": &st.dupAdmitted, "polls": &st.polls, "poll_admitted": &st.pollAdmitted,
		"poll_position_increase": &st.pollMonoViolations, "stream_drops": &st.drops, "stream_sheds": &st.sheds,
		"stream_conn_failures": &st.connFails, "places_lost": &st.lost, "reconnects": &st.reconnects,
		"join_503": &st.join503, "token_changed": &st.tokenChanged, "admitted_resent": &st.admittedResent,
		"prequeue": &st.prequeues, "sold_out": &st.soldOuts, "closed": &st.closedEv, "ping_event": &st.pingEvents,
		"join_prequeue": &st.joinPrequeue, "sold_out_twice": &st.soldOutTwice,
	} {
		r.Counts[name] = v.Load()
	}
	st.mu.Lock()
	r.Errors = st.errs
	r.AdmCounts = st.admCounts
	r.AdmRecs = st.admRecs
	for k, g := range st.groups {
		r.Groups = append(r.Groups, groupOut{Target: k.Target, Tick: k.Tick,
			FirstServer: g.FirstServer.UnixMicro(), LastParsed: g.LastParsed.UnixMicro(), N: g.N})
	}
	st.mu.Unlock()
	if c.cfg.Reconnect {
		f := c.status()
		r.Final = &f
	}
	var recs []joinRec
	for _, w := range c.all() {
		if c.cfg.Reconnect {
			if w.index >= 1<<30 {
				r.Arrived++
			}
			if w.ticket != "" {
				id := w.ticket
				if parts := strings.Split(w.ticket, "."); len(parts) == 3 {
					id = parts[1]
				}
				r.Tokens = append(r.Tokens, tokenOut{Ticket: id, Token: w.token, Issued: w.tokenIssued,
					Changed: w.tokenChanged, State: w.state.Load(), Reconn: w.reconnects})
			}
			for _, rr := range w.reconns {
				rr.Adm = w.admTick
				r.Reconns = append(r.Reconns, rr)
			}
		}
		if w.ticket == "" {
			continue
		}
		if c.cfg.DropDay {
			d := w.drop
			d.Index = w.index
			r.Drop = append(r.Drop, d)
		}
		r.Connected++
		if w.healthy {
			r.HealthyAtStop++
		}
		recs = append(recs, joinRec{Start: w.joinStart, End: w.joinEnd, AdmTick: w.admTick, Healthy: w.healthy})
	}
	r.JoinWrong, r.JoinSkipped = joinOrderViolations(recs)
	return r
}
