package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

// -mode flood: a descriptor flood. Every process opens its share of -n TCP connections to
// the first target, sends a request line it never finishes and holds the connection; one
// the server closes is opened again after -redial (jittered). After -duration every
// connection is closed and the parent measures how soon the instance answers /healthz and
// serves a new stream. It also watches -server-pid: an instance that exits is reported with
// the moment it did.

// floodResult is what one flood process saw.
type floodResult struct {
	Index          int              `json:"index"`
	Dials          int64            `json:"dials"`            // successful connects, first and again
	ClosedByServer int64            `json:"closed_by_server"` // ended by the server while held
	Answered       int64            `json:"answered"`         // of those, with an HTTP answer first
	AnswerStatus   map[string]int64 `json:"answer_status"`    // status line of those answers
	DialErrors     map[string]int64 `json:"dial_errors"`
	OpenAtStop     int64            `json:"open_at_stop"`
	MaxOpen        int64            `json:"max_open"`
	Held           histJSON         `json:"held"`          // how long the server kept a connection it closed without a word
	HeldAnswered   histJSON         `json:"held_answered"` // … and one it answered (408) before closing
}

// flood runs this process's share of the flood until "stop" (or EOF on stdin).
func (c *child) flood(ctx context.Context, cmds <-chan string) error {
	cfg := c.cfg
	hp := c.hostports[0]
	var open, maxOpen, dials, closed, answered atomic.Int64
	var held, heldAnswered hist
	var mu sync.Mutex
	dialErrs := map[string]int64{}
	statuses := map[string]int64{}
	conns := map[net.Conn]struct{}{}
	stopping := atomic.Bool{}
	var wg sync.WaitGroup

	track := func(nc net.Conn, add bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if add {
			if stopping.Load() {
				return false
			}
			conns[nc] = struct{}{}
			return true
		}
		delete(conns, nc)
		return true
	}
	dialer := net.Dialer{Timeout: 5 * time.Second}
	if c.src != nil {
		dialer.LocalAddr = &net.TCPAddr{IP: c.src}
		dialer.Control = bindNoPort
	}
	// one is one slot of the flood: connect, send the partial request, wait for the server to
	// end it, and (with -redial) start again. firstDone is called after the first attempt.
	one := func(firstDone func(ok bool)) {
		defer wg.Done()
		for attempt := 0; ; attempt++ {
			if stopping.Load() || ctx.Err() != nil {
				if attempt == 0 {
					firstDone(false)
				}
				return
			}
			nc, err := dialer.DialContext(ctx, "tcp", hp)
			if err == nil {
				_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, werr := io.WriteString(nc, cfg.Partial); werr != nil {
					_ = nc.Close()
					nc, err = nil, werr
				}
			}
			if err != nil {
				mu.Lock()
				dialErrs[dialErrorKind(err)]++
				mu.Unlock()
			} else if track(nc, true) {
				dials.Add(1)
				n := open.Add(1)
				for {
					m := maxOpen.Load()
					if n <= m || maxOpen.CompareAndSwap(m, n) {
						break
					}
				}
				if attempt == 0 {
					firstDone(true)
				}
				t0 := time.Now()
				buf := make([]byte, 64)
				k, rerr := io.ReadAtLeast(nc, buf, 1)
				h := &held
				if k > 0 {
					h = &heldAnswered
					// The server answered (a 408 or 400 for the request that never ended): note
					// the status and wait for the close.
					answered.Add(1)
					st := "?"
					if f := strings.Fields(string(buf[:k])); len(f) >= 2 {
						st = f[1]
					}
					mu.Lock()
					statuses[st]++
					mu.Unlock()
					_, rerr = io.Copy(io.Discard, nc)
				}
				_ = rerr
				track(nc, false)
				_ = nc.Close()
				open.Add(-1)
				if stopping.Load() {
					return
				}
				closed.Add(1)
				h.add(time.Since(t0))
			} else {
				_ = nc.Close()
				if attempt == 0 {
					firstDone(false)
				}
				return
			}
			if attempt == 0 && err != nil {
				firstDone(false)
			}
			if cfg.Redial <= 0 {
				return
			}
			d := time.Duration(float64(cfg.Redial) * (0.5 + rand.Float64()))
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			case <-c.quit:
				t.Stop()
				return
			}
		}
	}

	// Initial pass: paced, bounded in flight.
	t0 := time.Now()
	sem := make(chan struct{}, max(1, cfg.Conc))
	var okN, failN atomic.Int64
	var first sync.WaitGroup
	for i := 0; i < cfg.N; i++ {
		due := t0.Add(time.Duration(float64(i) / cfg.Rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		first.Add(1)
		var once sync.Once
		go one(func(ok bool) {
			once.Do(func() {
				if ok {
					okN.Add(1)
				} else {
					failN.Add(1)
				}
				<-sem
				first.Done()
			})
		})
	}
	first.Wait()
	c.emit("connected", connectedMsg{Index: cfg.Index, OK: int(okN.Load()), Failed: int(failN.Load()),
		Seconds: time.Since(t0).Seconds()})

	// Open counts for the parent every 500 ms.
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.emit("status", statusMsg{Index: cfg.Index, At: time.Now().UnixNano(), Total: cfg.N, Live: int(open.Load())})
			case <-c.quit:
				return
			}
		}
	}()
	for cmd := range cmds {
		if cmd == "stop" {
			break
		}
	}
	res := floodResult{Index: cfg.Index, OpenAtStop: open.Load()}
	stopping.Store(true)
	c.quitOnce.Do(func() { close(c.quit) })
	mu.Lock()
	for nc := range conns {
		_ = nc.Close()
	}
	mu.Unlock()
	wg.Wait()
	mu.Lock()
	res.DialErrors, res.AnswerStatus = dialErrs, statuses
	mu.Unlock()
	res.Dials, res.ClosedByServer, res.Answered, res.MaxOpen = dials.Load(), closed.Load(), answered.Load(), maxOpen.Load()
	res.Held, res.HeldAnswered = held.snapshot(), heldAnswered.snapshot()
	c.emit("result", childResult{Index: cfg.Index, Flood: &res})
	return nil
}

// dialErrorKind names a failed connect by its cause.
func dialErrorKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no_local_port"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "client_out_of_files"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other"
}

// floodReport is the summary of -mode flood.
type floodReport struct {
	Label     string   `json:"label,omitempty"`
	Date      string   `json:"date"`
	Target    string   `json:"target"`
	ServerPID int      `json:"server_pid,omitempty"`
	N         int      `json:"n"`
	Procs     int      `json:"procs"`
	Sources   int      `json:"sources"`
	Partial   string   `json:"partial_request"`
	RedialMS  int64    `json:"redial_ms"`
	HoldS     float64  `json:"hold_seconds"`
	Initial   struct { // after the first pass
		Open    int     `json:"open"`
		Failed  int     `json:"failed"`
		Seconds float64 `json:"seconds"`
	} `json:"initial"`
	MaxOpenClient  int64            `json:"max_open_client_side"`
	Dials          int64            `json:"dials"`
	ClosedByServer int64            `json:"closed_by_server"`
	Answered       int64            `json:"answered_before_close"`
	AnswerStatus   map[string]int64 `json:"answer_status"`
	DialErrors     map[string]int64 `json:"dial_errors"`
	Held           summary          `json:"held_until_closed_without_answer"`
	HeldAnswered   summary          `json:"held_until_answered_and_closed"`

	// The instance during the flood.
	Alive       bool    `json:"server_alive_at_end"`
	ExitedAfter float64 `json:"server_exited_after_s,omitempty"` // since the flood began (0 = it did not)
	OpenAtExit  int     `json:"flood_open_at_exit,omitempty"`
	Probes      struct {
		Sent   int     `json:"sent"`
		OK     int     `json:"ok"`
		P50MS  float64 `json:"ok_p50_ms"`
		MaxMS  float64 `json:"ok_max_ms"`
		Failed int     `json:"failed"`
	} `json:"healthz_probes_during_flood"`

	// After the flood.
	HealthzAfterMS float64 `json:"healthz_after_flood_ms"` // flood closed → first 200 (-1 = never)
	HealthzProbes  int     `json:"healthz_probes_until_ok"`
	StreamAfterMS  float64 `json:"stream_after_flood_ms"` // flood closed → first event of a new stream (join included)
	StreamMS       float64 `json:"stream_own_ms"`         // that join + stream, dial to first event
	StreamError    string  `json:"stream_error,omitempty"`

	Metrics map[string]float64 `json:"server_metrics"` // before → after deltas and gauges
	Errors  []string           `json:"notes,omitempty"`
}

// runFlood is the parent of -mode flood.
func runFlood(o options) error {
	r := &run{o: o, start: time.Now()}
	r.logf = func(f string, a ...any) {
		if !o.Quiet {
			fmt.Fprintf(os.Stderr, "[%6.1fs] "+f+"\n", append([]any{time.Since(r.start).Seconds()}, a...)...)
		}
	}
	planned := time.Duration(float64(o.N)/o.ConnectRate*float64(time.Second)) + o.Duration + 2*time.Minute
	if o.HardStop <= 0 {
		o.HardStop = planned + time.Minute
	}
	hard := time.AfterFunc(o.HardStop, func() {
		warnf("hard stop after %v: killing the child processes and exiting", o.HardStop)
		r.killAll()
		os.Exit(3)
	})
	defer hard.Stop()
	target := o.Targets[0]
	rep := floodReport{Label: o.Label, Date: time.Now().UTC().Format(time.RFC3339), Target: target, ServerPID: o.ServerPID,
		N: o.N, Procs: o.Procs, Sources: o.SrcCount, Partial: o.Partial, RedialMS: o.Redial.Milliseconds(), HoldS: o.Duration.Seconds(),
		Metrics: map[string]float64{}, HealthzAfterMS: -1, StreamAfterMS: -1}
	r.logf("flood: %d idle connections to %s from %d processes over %d source addresses, hold %v, redial %v, watching pid %d",
		o.N, target, o.Procs, o.SrcCount, o.Duration, o.Redial, o.ServerPID)
	if o.AdminToken != "" {
		if err := r.putQueue(map[string]any{"paused": true, "rate_per_second": 0, "closed": false, "places_per_ip": 0}); err != nil {
			return err
		}
	}
	before, err := scrape(target)
	if err != nil {
		return fmt.Errorf("metrics before the flood: %w", err)
	}
	floodStart := time.Now()
	if err := r.spawn(floodStart.Add(o.HardStop)); err != nil {
		r.killAll()
		return err
	}

	// The watch: is the instance alive, does it answer /healthz (a new connection each time)?
	var wmu sync.Mutex
	var probeOK []float64
	open := map[int]int{}
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	for _, p := range r.procs {
		go func() {
			for m := range p.status {
				wmu.Lock()
				open[m.Index] = m.Live
				wmu.Unlock()
			}
		}()
	}
	sumOpen := func() int {
		wmu.Lock()
		defer wmu.Unlock()
		n := 0
		for _, v := range open {
			n += v
		}
		return n
	}
	go func() {
		defer close(watchDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if o.ServerPID > 0 && rep.ExitedAfter == 0 && !pidAlive(o.ServerPID) {
				wmu.Lock()
				rep.ExitedAfter = round(time.Since(floodStart).Seconds(), 1)
				wmu.Unlock()
				rep.OpenAtExit = sumOpen()
				r.logf("the instance (pid %d) has EXITED, %.1f s into the flood, %d flood connections open", o.ServerPID, rep.ExitedAfter, rep.OpenAtExit)
			}
			ms, ok := probeHealthz(target, 2*time.Second)
			wmu.Lock()
			rep.Probes.Sent++
			if ok {
				rep.Probes.OK++
				probeOK = append(probeOK, ms)
			} else {
				rep.Probes.Failed++
			}
			wmu.Unlock()
			select {
			case <-t.C:
			case <-stopWatch:
				return
			}
		}
	}()

	conn := r.waitConnected()
	rep.Initial.Open, rep.Initial.Failed, rep.Initial.Seconds = conn.OK, conn.Failed, round(conn.Seconds, 2)
	r.logf("first pass: %d connections open, %d failed, in %.1f s", conn.OK, conn.Failed, conn.Seconds)
	holdEnd := time.Now().Add(o.Duration)
	for time.Now().Before(holdEnd) {
		time.Sleep(min(5*time.Second, time.Until(holdEnd)))
		wmu.Lock()
		ok, failed := rep.Probes.OK, rep.Probes.Failed
		wmu.Unlock()
		r.logf("  holding: %d flood connections open; /healthz during the flood %d ok, %d failed", sumOpen(), ok, failed)
	}
	r.broadcast("stop")
	var results []childResult
	for _, p := range r.procs {
		_ = p.stdin.Close()
		select {
		case res := <-p.result:
			results = append(results, res)
		case <-time.After(60 * time.Second):
			warnf("a flood process did not report within 60 s; killing it")
			_ = p.cmd.Process.Kill()
		}
		_ = p.cmd.Wait()
	}
	floodEnd := time.Now()
	close(stopWatch)
	<-watchDone
	r.logf("flood closed (%.1f s of flood)", floodEnd.Sub(floodStart).Seconds())

	// After: how soon /healthz answers, then a new user's join + stream.
	for i := 0; time.Since(floodEnd) < 60*time.Second; i++ {
		if o.ServerPID > 0 && !pidAlive(o.ServerPID) {
			rep.Errors = append(rep.Errors, "the instance is gone: nothing answers after the flood")
			break
		}
		if _, ok := probeHealthz(target, time.Second); ok {
			rep.HealthzAfterMS = round(float64(time.Since(floodEnd).Microseconds())/1000, 1)
			rep.HealthzProbes = i + 1
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rep.HealthzAfterMS >= 0 {
		ms, err := probeStream(target, o.Queue, 10*time.Second)
		if err != nil {
			rep.StreamError = err.Error()
		} else {
			rep.StreamMS = round(ms, 1)
			rep.StreamAfterMS = round(float64(time.Since(floodEnd).Microseconds())/1000, 1)
		}
	}
	r.logf("after the flood: /healthz 200 after %.1f ms (%d probes); a new join + stream's first event after %.1f ms (its own %.1f ms) %s",
		rep.HealthzAfterMS, rep.HealthzProbes, rep.StreamAfterMS, rep.StreamMS, rep.StreamError)
	rep.Alive = o.ServerPID <= 0 || pidAlive(o.ServerPID)
	if o.ServerPID > 0 && !rep.Alive && rep.ExitedAfter == 0 {
		rep.ExitedAfter = round(time.Since(floodStart).Seconds(), 1)
	}

	var heldAll, heldAns histJSON
	for _, res := range results {
		f := res.Flood
		if f == nil {
			continue
		}
		rep.Dials += f.Dials
		rep.ClosedByServer += f.ClosedByServer
		rep.Answered += f.Answered
		rep.MaxOpenClient += f.MaxOpen
		rep.AnswerStatus = addCounts(rep.AnswerStatus, f.AnswerStatus)
		rep.DialErrors = addCounts(rep.DialErrors, f.DialErrors)
		heldAll.merge(f.Held)
		heldAns.merge(f.HeldAnswered)
	}
	if heldAll.N > 0 {
		rep.Held = heldAll.summary()
	}
	if heldAns.N > 0 {
		rep.HeldAnswered = heldAns.summary()
	}
	sort.Float64s(probeOK)
	if len(probeOK) > 0 {
		rep.Probes.P50MS = round(probeOK[len(probeOK)/2], 1)
		rep.Probes.MaxMS = round(probeOK[len(probeOK)-1], 1)
	}
	if after, err := scrape(target); err == nil {
		for _, k := range []string{"http_connections_shed_total", "sse_refused_total", "stream_swept_total"} {
			a, _ := after.sum(k)
			b, _ := before.sum(k)
			rep.Metrics[k] = a - b
		}
		for k, v := range after {
			if strings.HasPrefix(k, "http_accept_errors_total") {
				rep.Metrics[k] = v - before[k]
			}
		}
		for _, k := range []string{"http_connections", "http_connections_budget", "sse_streams_budget", "sse_connections",
			"process_open_fds", "process_max_fds", "process_resident_memory_bytes", "go_goroutines"} {
			if v, ok := after.sum(k); ok {
				rep.Metrics[k+" (after)"] = v
			}
		}
		// fasthttp keeps idle workers (a goroutine and its buffers each) for ~10 s: read again
		// once they are gone.
		if rep.Alive {
			time.Sleep(15 * time.Second)
			if later, err := scrape(target); err == nil {
				for _, k := range []string{"http_connections", "go_goroutines", "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes"} {
					if v, ok := later.sum(k); ok {
						rep.Metrics[k+" (15 s later)"] = v
					}
				}
			}
		}
	} else {
		rep.Errors = append(rep.Errors, "metrics after the flood: "+err.Error())
	}
	hard.Stop()
	rep.table(os.Stdout)
	if o.Out != "" {
		return writeJSON(o.Out, rep)
	}
	return nil
}

func addCounts(dst, src map[string]int64) map[string]int64 {
	if dst == nil {
		dst = map[string]int64{}
	}
	for k, v := range src {
		dst[k] += v
	}
	return dst
}

// pidAlive tells whether pid is a running process (a zombie, exited but not yet reaped by
// its parent, counts as gone).
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

// probeHealthz is one GET /healthz on a new connection: its time in ms and whether it
// answered 200.
func probeHealthz(base string, timeout time.Duration) (float64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	t0 := time.Now()
	rc, err := dialRaw(ctx, nil, hostPort(base))
	if err != nil {
		return 0, false
	}
	defer rc.close()
	r, err := rc.do("GET", "/healthz", "", timeout)
	if err != nil || r.status != 200 {
		return 0, false
	}
	return float64(time.Since(t0).Microseconds()) / 1000, true
}

// probeStream is a new user: join, then the stream up to its first event (ms).
func probeStream(base, queue string, timeout time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	t0 := time.Now()
	rc, err := dialRaw(ctx, nil, hostPort(base))
	if err != nil {
		return 0, err
	}
	defer rc.close()
	r, err := rc.do("POST", "/api/queues/"+queue+"/join", "", timeout)
	if err != nil {
		return 0, err
	}
	if r.status != 200 && r.status != 201 {
		return 0, fmt.Errorf("join: %d %s", r.status, r.body)
	}
	tk, ok := jsonStr(r.body, "ticket")
	if !ok {
		return 0, errors.New("join: no ticket")
	}
	if !r.keepAlive {
		rc.close()
		if rc, err = dialRaw(ctx, nil, hostPort(base)); err != nil {
			return 0, err
		}
	}
	s, err := rc.openStream("/api/queues/"+queue+"/stream", string(tk), timeout)
	if err != nil {
		return 0, err
	}
	if s.status != 200 {
		return 0, fmt.Errorf("stream: %d %s", s.status, s.body)
	}
	for {
		line, err := rc.br.ReadSlice('\n')
		if err != nil {
			return 0, fmt.Errorf("stream ended before an event: %w", err)
		}
		if strings.HasPrefix(string(line), "event:") {
			return float64(time.Since(t0).Microseconds()) / 1000, nil
		}
	}
}

func (rep floodReport) table(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	p := func(f string, a ...any) { fmt.Fprintf(tw, f+"\n", a...) }
	p("== swarm flood: %d idle connections to %s, %d procs, %d source addrs, held %.0f s (redial %d ms)", rep.N, rep.Target, rep.Procs, rep.Sources, rep.HoldS, rep.RedialMS)
	p("first pass\t%d open, %d failed, %.1f s", rep.Initial.Open, rep.Initial.Failed, rep.Initial.Seconds)
	p("client side\t%d connects in all, at most %d open at once; %d closed by the server while held (%d with an answer first: %v); dial errors %v",
		rep.Dials, rep.MaxOpenClient, rep.ClosedByServer, rep.Answered, rep.AnswerStatus, rep.DialErrors)
	if rep.Held.N > 0 {
		p("closed by the server without an answer\t%d, held p50 %.1f ms, p99 %.1f ms, max %.0f ms", rep.Held.N, rep.Held.P50MS, rep.Held.P99MS, rep.Held.MaxMS)
	}
	if rep.HeldAnswered.N > 0 {
		p("answered, then closed by the server\t%d, held p50 %.0f ms, p99 %.0f ms, max %.0f ms", rep.HeldAnswered.N, rep.HeldAnswered.P50MS, rep.HeldAnswered.P99MS, rep.HeldAnswered.MaxMS)
	}
	if rep.ExitedAfter > 0 {
		p("instance\tEXITED %.1f s into the flood (%d flood connections open)", rep.ExitedAfter, rep.OpenAtExit)
	} else {
		p("instance\talive at the end: %v", rep.Alive)
	}
	p("/healthz during the flood\t%d probes: %d ok (p50 %.1f ms, max %.1f ms), %d failed", rep.Probes.Sent, rep.Probes.OK, rep.Probes.P50MS, rep.Probes.MaxMS, rep.Probes.Failed)
	p("after the flood\t/healthz 200 after %.1f ms (%d probes); new join + stream first event after %.1f ms (its own %.1f ms) %s",
		rep.HealthzAfterMS, rep.HealthzProbes, rep.StreamAfterMS, rep.StreamMS, rep.StreamError)
	keys := make([]string, 0, len(rep.Metrics))
	for k := range rep.Metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p("  %s\t%.0f", k, rep.Metrics[k])
	}
	for _, e := range rep.Errors {
		p("note\t%s", e)
	}
	_ = tw.Flush()
}
