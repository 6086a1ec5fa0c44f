package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process as the parent sees it.
type proc struct {
	conn      *connectedMsg // set when its connect phase was awaited already (the probe)
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	connected chan connectedMsg
	ack       chan struct{}
	result    chan childResult
	status    chan statusMsg // storm and flood: the process's counts, every 100–500 ms
	drop      chan dropMsg   // draw and soldout: the process's progress, every 50 ms
}

func (p *proc) send(cmd string) {
	_, _ = io.WriteString(p.stdin, cmd+"\n")
}

func (p *proc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		line := sc.Bytes()
		tag, body, _ := bytes.Cut(line, []byte(" "))
		switch string(tag) {
		case "@connected":
			var m connectedMsg
			if json.Unmarshal(body, &m) == nil {
				p.connected <- m
			}
		case "@ack":
			p.ack <- struct{}{}
		case "@status":
			var m statusMsg
			if json.Unmarshal(body, &m) == nil {
				select {
				case p.status <- m:
				default: // nobody reads them: drop
				}
			}
		case "@drop":
			var m dropMsg
			if json.Unmarshal(body, &m) == nil {
				select {
				case p.drop <- m:
				default:
				}
			}
		case "@result":
			var res childResult
			if err := json.Unmarshal(body, &res); err != nil {
				warnf("child result: %v", err)
				continue
			}
			p.result <- res
		default:
			fmt.Fprintf(os.Stderr, "%s\n", line)
		}
	}
}

type run struct {
	o       options
	procs   []*proc
	start   time.Time
	logf    func(string, ...any)
	windows []window
}

func runParent(o options) error {
	r := &run{o: o, start: time.Now()}
	r.logf = func(f string, a ...any) {
		if !o.Quiet {
			fmt.Fprintf(os.Stderr, "[%6.1fs] "+f+"\n", append([]any{time.Since(r.start).Seconds()}, a...)...)
		}
	}
	windows := 1.0
	if o.Mode == "compare" {
		windows = 2
	}
	planned := time.Duration(float64(o.N)/o.ConnectRate*float64(time.Second))*2 + o.Baseline + o.Settle + o.Idle + o.MemWait +
		time.Duration(windows*float64(o.Duration+o.Drain)) + 30*time.Second
	deadline, hard := r.armHardStop(&o, planned)
	defer hard.Stop()

	if o.AdminToken != "" {
		// Paused while connecting: positions stand still, so memory and idle cost are
		// measured on a quiet line.
		if err := r.putQueues(map[string]any{"paused": true, "rate_per_second": o.Rate, "max_active": 0,
			"token_ttl_seconds": int(o.TTL.Seconds()), "closed": false, "places_per_ip": 0}); err != nil {
			return err
		}
	}
	before := r.sample()
	if o.Baseline > 0 {
		r.measure("baseline (no waiters, queue paused)", "baseline", 0, o.Baseline)
		before = r.sample()
	}
	if err := r.spawn(deadline); err != nil {
		r.killAll()
		return err
	}
	conn := r.waitConnected()
	connectedAt := time.Now()
	r.logf("connected %d/%d in %.1fs (%.0f/s), %d failed", conn.OK, o.N, conn.Seconds, float64(conn.OK)/max(conn.Seconds, 1e-9), conn.Failed)
	time.Sleep(o.Settle)
	afterConnect := r.sample()
	mem := memoryOf(fmt.Sprintf("%v after connecting", o.Settle), before, afterConnect, conn.OK)
	r.logf("server memory per waiter: RSS %.2f KB, heap in use %.2f KB, goroutines %.3f", mem.RSSPerWaiterKB, mem.HeapInusePerWaiterKB, mem.GoroutinesPerWaiter)

	var streamIssued map[string]float64
	var memIdle *memory
	if o.Mode != "poll" {
		if o.Idle > 0 {
			r.broadcast("idle")
			w := r.measure("idle (paused, heartbeats only)", "idle", conn.OK, o.Idle)
			m := memoryOf(fmt.Sprintf("%v after connecting, end of idle window", o.Settle+o.Idle), before, w.end, conn.OK)
			memIdle = &m
			r.logf("server memory per waiter after the idle window: RSS %.2f KB, heap in use %.2f KB, goroutines %.3f", m.RSSPerWaiterKB, m.HeapInusePerWaiterKB, m.GoroutinesPerWaiter)
			if o.MemWait > 0 {
				// Heap figures include garbage until a GC runs, and fasthttp keeps its idle
				// workers (goroutine + stack) for up to ~20 s after the handshakes. Wait for a
				// GC that ran after both are gone (Go forces one every 2 minutes at the latest).
				if s, ok := r.waitGC(connectedAt.Add(25*time.Second), o.MemWait); ok {
					m := memoryOf(fmt.Sprintf("after a GC %.0fs after connecting", s.at.Sub(connectedAt).Seconds()), before, s, conn.OK)
					memIdle = &m
					r.logf("server memory per waiter after a GC: RSS %.2f KB, heap in use %.2f KB, goroutines %.3f", m.RSSPerWaiterKB, m.HeapInusePerWaiterKB, m.GoroutinesPerWaiter)
				} else {
					r.logf("no GC on every instance within -mem-wait %v; the idle-window reading stands", o.MemWait)
				}
			}
		}
		r.setRate(false)
		r.broadcast("active")
		r.measure(fmt.Sprintf("push: streams, admitting %.0f/s", o.Rate), "stream", conn.OK, o.Duration)
		r.setRate(true) // pause, let in-flight admissions arrive
		time.Sleep(o.Drain)
		streamIssued = r.issuedBy()
	}
	if o.Mode == "poll" || o.Mode == "compare" {
		if o.Mode == "compare" {
			r.broadcast("poll") // streams close, the same tickets poll
			for _, p := range r.procs {
				<-p.ack
			}
		}
		r.setRate(false)
		time.Sleep(min(2*time.Second, o.PollEvery*2)) // every poller has made its first call
		r.measure(fmt.Sprintf("poll: GET /status every %v, admitting %.0f/s", o.PollEvery, o.Rate), "poll", conn.OK, o.Duration)
		r.setRate(true)
	}
	r.broadcast("stop")
	results := r.collect()
	hard.Stop()
	rep := r.report(conn, mem, results, streamIssued)
	rep.MemoryIdle = memIdle
	var base, idle *window
	for i := range rep.Windows {
		switch rep.Windows[i].Kind {
		case "baseline":
			base = &rep.Windows[i]
		case "idle":
			idle = &rep.Windows[i]
		}
	}
	if base != nil && idle != nil && idle.Waiters > 0 {
		net := (idle.CPUCores - base.CPUCores) * 1e6 / float64(idle.Waiters)
		rep.IdleNet = &net
	}
	return rep.write(o)
}

// spawn starts the child processes, each with its share of waiters and a source address.
// With -probe, process 0 holds only the first -probe waiters and connects before the
// others: at the front of the line, its streams are admitted while the bulk behind them
// gets full position fan-outs, and its own process has almost nothing else to read — so
// its admission latency is the server's, not the load tool's.
func (r *run) spawn(deadline time.Time) error {
	o := r.o
	offset, index := 0, 0
	if o.Probe > 0 {
		p, err := r.spawnOne(deadline, index, o.Probe, offset, o.ConnectRate/float64(o.Procs+1), o.Src)
		if err != nil {
			return err
		}
		m := <-p.connected
		p.conn = &m
		r.logf("probe process: %d of %d front waiters connected", m.OK, o.Probe)
		offset, index = o.Probe, 1
	}
	rest := o.N - o.Probe
	for i := 0; i < o.Procs; i++ {
		n := rest / o.Procs
		if i < rest%o.Procs {
			n++
		}
		src := ""
		if o.Src != "" {
			src = srcAddr(o.Src, i%o.SrcCount)
		}
		if _, err := r.spawnOne(deadline, index, n, offset, o.ConnectRate/float64(o.Procs), src); err != nil {
			return err
		}
		offset += n
		index++
	}
	return nil
}

func (r *run) spawnOne(deadline time.Time, index, n, offset int, rate float64, src string) (*proc, error) {
	o := r.o
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	names := queueNames(o)
	cfg := childConfig{Index: index, Targets: o.Targets, Offset: offset, N: n, Rate: rate,
		Queue: names[index%len(names)], Mode: "stream", PollEvery: o.PollEvery, TTL: o.TTL, Front: o.Front, Deadline: deadline,
		Conc: max(1, o.ConnectConc/o.Procs), Src: src}
	switch o.Mode {
	case "poll":
		cfg.Mode = "poll"
	case "storm":
		cfg.Reconnect, cfg.LeaveAdmitted = true, o.LeaveAdmitted
		cfg.ArrivalRate, cfg.ArrivalFor = o.Arrivals/float64(o.Procs), o.ArrivalsFor
	case "flood":
		cfg.Mode, cfg.Partial, cfg.Redial = "flood", o.Partial, o.Redial
	case "draw", "soldout":
		cfg.DropDay = true
	}
	b, _ := json.Marshal(cfg)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "SWARM_CHILD="+string(b))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the parent
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start child %d: %w", index, err)
	}
	p := &proc{cmd: cmd, stdin: stdin, connected: make(chan connectedMsg, 1), ack: make(chan struct{}, 1), result: make(chan childResult, 1),
		status: make(chan statusMsg, 64), drop: make(chan dropMsg, 64)}
	go p.read(stdout)
	r.procs = append(r.procs, p)
	return p, nil
}

func (r *run) killAll() {
	for _, p := range r.procs {
		if p.cmd.Process != nil {
			_ = p.cmd.Process.Kill()
		}
	}
}

func (r *run) broadcast(cmd string) {
	for _, p := range r.procs {
		p.send(cmd)
	}
}

func (r *run) waitConnected() connectedMsg {
	var total connectedMsg
	for _, p := range r.procs {
		var m connectedMsg
		if p.conn != nil {
			m = *p.conn
		} else {
			m = <-p.connected
		}
		total.OK += m.OK
		total.Failed += m.Failed
		total.PrequeueFirst += m.PrequeueFirst
		total.JoinPrequeue += m.JoinPrequeue
		total.Seconds = max(total.Seconds, m.Seconds)
	}
	return total
}

func (r *run) collect() []childResult {
	var out []childResult
	for _, p := range r.procs {
		_ = p.stdin.Close()
		select {
		case res := <-p.result:
			out = append(out, res)
		case <-time.After(60 * time.Second):
			warnf("a child did not report within 60 s; killing it")
			_ = p.cmd.Process.Kill()
		}
		_ = p.cmd.Wait()
	}
	return out
}

// putQueue updates the run's queue through the admin API of the first target that answers
// (in a storm, the first may be the instance that was killed).
func (r *run) putQueue(body map[string]any) error {
	var err error
	for _, t := range r.o.Targets {
		if err = r.putQueueAt(t, body); err == nil {
			return nil
		}
	}
	return err
}

// putQueues updates every queue of the run (-queues) the same way.
func (r *run) putQueues(body map[string]any) error {
	for _, q := range queueNames(r.o) {
		if err := r.putNamed(r.o.Targets[0], q, body); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) putQueueAt(target string, body map[string]any) error {
	return r.putNamed(target, r.o.Queue, body)
}

func (r *run) putNamed(target, queue string, body map[string]any) error {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("PUT", target+"/admin/api/queues/"+queue, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+r.o.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		return fmt.Errorf("admin PUT queue: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("admin PUT queue: %s %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

func (r *run) setRate(paused bool) {
	if r.o.AdminToken == "" {
		return
	}
	if err := r.putQueues(map[string]any{"paused": paused, "rate_per_second": r.o.Rate}); err != nil {
		warnf("%v", err)
	}
}

// sample is one reading of every instance's metrics and of Redis.
type sample struct {
	at    time.Time
	busy  float64 // machine-wide busy CPU seconds
	swarm float64 // CPU seconds of the swarm's own processes
	// Scheduler: seconds of CPU pressure ("some", PSI), and the run-queue wait of the
	// swarm's processes and of the instances (-pids), summed over their threads.
	psi        float64
	swarmWait  float64
	serverRun  float64
	serverWait float64
	m          []metricsSample
	redis      redisStats
	hasR       bool
	repl       redisStats // -redis-replicas, summed
}

func (r *run) sample() sample {
	s := sample{at: time.Now(), busy: machineBusy(), swarm: procCPU(os.Getpid()), psi: cpuPressure()}
	_, s.swarmWait = procSched(os.Getpid())
	for _, p := range r.procs {
		if p.cmd.Process != nil {
			s.swarm += procCPU(p.cmd.Process.Pid)
			_, w := procSched(p.cmd.Process.Pid)
			s.swarmWait += w
		}
	}
	for _, pid := range r.o.PIDs {
		run, wait := procSched(pid)
		s.serverRun += run
		s.serverWait += wait
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.m = scrapeAll(r.o.Targets) }()
	if len(r.o.RedisAddrs) > 0 {
		st, err := redisInfoAll(r.o.RedisAddrs)
		if err != nil {
			warnf("redis INFO: %v", err)
		} else {
			s.redis, s.hasR = st, true
		}
	}
	if len(r.o.RedisRepl) > 0 {
		if st, err := redisInfoAll(r.o.RedisRepl); err == nil {
			s.repl = st
		}
	}
	wg.Wait()
	return s
}

// issued is the number of tokens the run's queue has issued so far.
func (r *run) issued() float64 {
	var n float64
	for _, v := range r.issuedBy() {
		n += v
	}
	return n
}

// issuedBy is the tokens issued so far by each queue of the run.
func (r *run) issuedBy() map[string]float64 {
	out := map[string]float64{}
	ms := scrapeAll(r.o.Targets)
	for _, q := range queueNames(r.o) {
		for _, m := range ms {
			out[q] += m[`queue_token_issued_total{queue="`+q+`"}`]
		}
	}
	return out
}

type measured struct{ start, end sample }

func (r *run) measure(name, kind string, waiters int, d time.Duration) measured {
	a := r.sample()
	r.logf("window %q for %v", name, d)
	time.Sleep(d)
	b := r.sample()
	w := windowOf(name, kind, waiters, a, b)
	r.windows = append(r.windows, w)
	r.logf("  server CPU %.4f cores (%.2f µs/waiter/s; Redis %.3f, swarm %.3f, whole machine %.2f cores busy), Redis %.1f cmds/s (%.1f script runs/s), %.2f cmds/tick",
		w.CPUCores, w.CPUMicrosPerWaiterSec, w.RedisCores, w.SwarmCores, w.MachineCores, w.RedisCallsPerSec, w.RedisScriptsPerSec, w.RedisCallsPerTick)
	return measured{a, b}
}

// waitGC waits until every instance reports a GC that ran after t, up to limit from now.
func (r *run) waitGC(t time.Time, limit time.Duration) (sample, bool) {
	end := time.Now().Add(limit)
	for {
		s := r.sample()
		ok := true
		for _, m := range s.m {
			if v, found := m.sum("go_memstats_last_gc_time_seconds"); !found || v < float64(t.UnixNano())/1e9 {
				ok = false
			}
		}
		if ok {
			return s, true
		}
		if time.Now().After(end) {
			return s, false
		}
		time.Sleep(2 * time.Second)
	}
}

// armHardStop sets o.HardStop (when not given: the planned run time plus 2 minutes) and arms
// it: past it the children are killed and the tool exits, so a stuck run stops by itself.
// It returns the deadline the children get and the timer to stop when the run ends.
func (r *run) armHardStop(o *options, planned time.Duration) (time.Time, *time.Timer) {
	if o.HardStop <= 0 {
		o.HardStop = planned + 2*time.Minute
	}
	hard := time.AfterFunc(o.HardStop, func() {
		warnf("hard stop after %v: killing the child processes and exiting", o.HardStop)
		r.killAll()
		os.Exit(3)
	})
	r.logf("mode=%s n=%d procs=%d sources=%d targets=%d queue=%s hard-stop=%v", o.Mode, o.N, o.Procs, o.SrcCount, len(o.Targets), o.Queue, o.HardStop)
	return r.start.Add(o.HardStop), hard
}
