package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// window is one measured stretch of server-side cost.
type window struct {
	Name                  string             `json:"name"`
	Kind                  string             `json:"kind"`
	Waiters               int                `json:"waiters"`
	Seconds               float64            `json:"seconds"`
	CPUSeconds            float64            `json:"server_cpu_seconds"`
	CPUCores              float64            `json:"server_cpu_cores"`
	CPUMicrosPerWaiterSec float64            `json:"server_cpu_us_per_waiter_per_s"`
	MachineCores          float64            `json:"machine_busy_cores"`
	RedisCores            float64            `json:"redis_cpu_cores"`
	SwarmCores            float64            `json:"swarm_cpu_cores"`
	RedisCallsPerSec      float64            `json:"redis_commands_per_s"`
	RedisScriptsPerSec    float64            `json:"redis_script_runs_per_s"`
	Ticks                 float64            `json:"admission_ticks"`
	RedisCallsPerTick     float64            `json:"redis_commands_per_tick"`
	RedisScriptsPerTick   float64            `json:"redis_script_runs_per_tick"`
	TopCallsPerSec        map[string]float64 `json:"top_redis_calls_per_s,omitempty"`
	AllCallsPerSec        map[string]float64 `json:"redis_calls_per_s_by_command,omitempty"`
	// -redis-replicas: what the replicas ran (the masters' writes, applied) and their CPU.
	ReplicaCallsPerSec float64 `json:"replica_commands_per_s,omitempty"`
	ReplicaCores       float64 `json:"replica_cpu_cores,omitempty"`
	PositionEvents     float64 `json:"server_position_events"`
	AdmittedEvents     float64 `json:"server_admitted_events"`
	TokensIssued       float64 `json:"tokens_issued"`
	SSEBytesPerSec     float64 `json:"sse_bytes_per_s"`
	EventGaps          float64 `json:"stream_event_gaps"`
	Resyncs            float64 `json:"stream_resyncs"`
	Disconnects        float64 `json:"sse_disconnects"`
	TickLagSum         float64 `json:"tick_lag_seconds_sum"`
	// Server-side admission path (from the instances' histograms, all instances together):
	// Redis admission → tick message handled, and → admitted frame written to the socket.
	ServerTickDelay    serverQuantiles `json:"server_tick_delay"`
	ServerAdmitWritten serverQuantiles `json:"server_admitted_written"`
	// The leaders' admission ticks (queue_admission_tick_duration_seconds, every queue): lease
	// renewal, admit script (and WAIT with replica acks), publish.
	ServerTickDuration serverQuantiles `json:"server_tick_duration"`
	// The leaders' tick lag (queue_admission_tick_lag_seconds), one queue's fan-out
	// computation (stream_fanout_seconds), and, where the build has them, a tick message's
	// handling (stream_tick_handle_seconds), a priority frame's wait for its writer
	// (stream_priority_wait_seconds) and one write to a socket (sse_write_seconds).
	ServerTickLag      serverQuantiles `json:"server_tick_lag"`
	ServerFanout       serverQuantiles `json:"server_fanout"`
	ServerTickHandle   serverQuantiles `json:"server_tick_handle"`
	ServerPriorityWait serverQuantiles `json:"server_priority_wait"`
	ServerWrite        serverQuantiles `json:"server_write"`
	// The scheduler: the fraction of the window during which some runnable task waited for
	// a CPU (PSI "some"), and the run-queue wait of the instances (-pids) and of the swarm's
	// processes, in seconds per second (threads waiting, on average); ServerRunqPerCPU is
	// the instances' wait per second they ran.
	CPUPressure      float64 `json:"cpu_pressure_some"`
	ServerRunqWait   float64 `json:"server_runq_wait_per_s,omitempty"`
	ServerRunqPerCPU float64 `json:"server_runq_wait_per_cpu_s,omitempty"`
	SwarmRunqWait    float64 `json:"swarm_runq_wait_per_s"`
	AdmittedPerSec   float64 `json:"admitted_per_s"`
	Unconfirmed      float64 `json:"replication_unconfirmed"` // queue_replication_unconfirmed_total delta
	HasRedis         bool    `json:"has_redis"`
}

func delta(a, b sample, names ...string) float64 { return total(b.m, names...) - total(a.m, names...) }

func windowOf(name, kind string, waiters int, a, b sample) window {
	secs := b.at.Sub(a.at).Seconds()
	w := window{Name: name, Kind: kind, Waiters: waiters, Seconds: secs, HasRedis: a.hasR && b.hasR}
	w.CPUSeconds = delta(a, b, "process_cpu_seconds_total")
	w.CPUCores = w.CPUSeconds / secs
	w.MachineCores = (b.busy - a.busy) / secs
	w.SwarmCores = (b.swarm - a.swarm) / secs
	if waiters > 0 {
		w.CPUMicrosPerWaiterSec = w.CPUSeconds * 1e6 / float64(waiters) / secs
	}
	w.Ticks = delta(a, b, "queue_admission_tick_lag_seconds_count")
	w.PositionEvents = delta(a, b, "sse_position_events_total")
	w.AdmittedEvents = delta(a, b, "sse_admitted_events_total")
	w.TokensIssued = delta(a, b, "queue_token_issued_total")
	w.SSEBytesPerSec = delta(a, b, "sse_bytes_written_total") / secs
	w.EventGaps = delta(a, b, "stream_event_gaps_total")
	w.Resyncs = delta(a, b, "stream_resyncs_total")
	w.Disconnects = delta(a, b, "sse_disconnects_total")
	w.TickLagSum = delta(a, b, "queue_admission_tick_lag_seconds_sum")
	w.ServerTickDelay = histQuantiles(a, b, "stream_tick_delay_seconds")
	w.ServerAdmitWritten = histQuantiles(a, b, "sse_admitted_delivery_seconds")
	w.ServerTickDuration = labelQuantiles(a.m, b.m, "queue_admission_tick_duration_seconds", `queue="`)
	w.ServerTickLag = labelQuantiles(a.m, b.m, "queue_admission_tick_lag_seconds", `queue="`)
	w.ServerFanout = histQuantiles(a, b, "stream_fanout_seconds")
	w.ServerTickHandle = histQuantiles(a, b, "stream_tick_handle_seconds")
	w.ServerPriorityWait = histQuantiles(a, b, "stream_priority_wait_seconds")
	w.ServerWrite = histQuantiles(a, b, "sse_write_seconds")
	w.CPUPressure = (b.psi - a.psi) / secs
	w.SwarmRunqWait = (b.swarmWait - a.swarmWait) / secs
	if run := b.serverRun - a.serverRun; run > 0 {
		w.ServerRunqWait = (b.serverWait - a.serverWait) / secs
		w.ServerRunqPerCPU = (b.serverWait - a.serverWait) / run
	}
	w.AdmittedPerSec = w.TokensIssued / secs
	w.Unconfirmed = delta(a, b, "queue_replication_unconfirmed_total")
	if w.HasRedis {
		ca, sa := a.redis.calls()
		cb, sb := b.redis.calls()
		w.RedisCores = (b.redis.CPU - a.redis.CPU) / secs
		w.RedisCallsPerSec = (cb - ca) / secs
		w.RedisScriptsPerSec = (sb - sa) / secs
		if w.Ticks > 0 {
			w.RedisCallsPerTick = (cb - ca) / w.Ticks
			w.RedisScriptsPerTick = (sb - sa) / w.Ticks
		}
		type kv struct {
			k string
			v float64
		}
		var all []kv
		for k, v := range b.redis.Calls {
			if d := v - a.redis.Calls[k]; d > 0 && k != "info" {
				all = append(all, kv{k, d / secs})
			}
		}
		sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
		w.TopCallsPerSec = map[string]float64{}
		w.AllCallsPerSec = map[string]float64{}
		for i := range all {
			if i < 8 {
				w.TopCallsPerSec[all[i].k] = round(all[i].v, 2)
			}
			w.AllCallsPerSec[all[i].k] = round(all[i].v, 2)
		}
	}
	if a.repl.Calls != nil && b.repl.Calls != nil {
		ra, _ := a.repl.calls()
		rb, _ := b.repl.calls()
		w.ReplicaCallsPerSec = (rb - ra) / secs
		w.ReplicaCores = (b.repl.CPU - a.repl.CPU) / secs
	}
	return w
}

// memory is the server's memory growth from before connecting to after.
type memory struct {
	When                 string  `json:"when"`
	Waiters              int     `json:"waiters"`
	RSSBefore            float64 `json:"rss_before_bytes"`
	RSSAfter             float64 `json:"rss_after_bytes"`
	HeapInuseBefore      float64 `json:"heap_inuse_before_bytes"`
	HeapInuseAfter       float64 `json:"heap_inuse_after_bytes"`
	HeapAllocBefore      float64 `json:"heap_alloc_before_bytes"`
	HeapAllocAfter       float64 `json:"heap_alloc_after_bytes"`
	StackBefore          float64 `json:"stack_inuse_before_bytes"`
	StackAfter           float64 `json:"stack_inuse_after_bytes"`
	GoroutinesBefore     float64 `json:"goroutines_before"`
	GoroutinesAfter      float64 `json:"goroutines_after"`
	SSEConnections       float64 `json:"sse_connections_after"`
	RSSPerWaiterKB       float64 `json:"rss_per_waiter_kb"`
	HeapInusePerWaiterKB float64 `json:"heap_inuse_per_waiter_kb"`
	HeapAllocPerWaiterKB float64 `json:"heap_alloc_per_waiter_kb"`
	StackPerWaiterKB     float64 `json:"stack_per_waiter_kb"`
	GoroutinesPerWaiter  float64 `json:"goroutines_per_waiter"`
}

func memoryOf(when string, a, b sample, waiters int) memory {
	m := memory{When: when, Waiters: waiters}
	get := func(s sample, names ...string) float64 { return total(s.m, names...) }
	m.RSSBefore, m.RSSAfter = get(a, "process_resident_memory_bytes"), get(b, "process_resident_memory_bytes")
	m.HeapInuseBefore, m.HeapInuseAfter = get(a, "go_memstats_heap_inuse_bytes"), get(b, "go_memstats_heap_inuse_bytes")
	m.HeapAllocBefore, m.HeapAllocAfter = get(a, "go_memstats_heap_alloc_bytes"), get(b, "go_memstats_heap_alloc_bytes")
	m.StackBefore, m.StackAfter = get(a, "go_memstats_stack_inuse_bytes"), get(b, "go_memstats_stack_inuse_bytes")
	m.GoroutinesBefore, m.GoroutinesAfter = get(a, "go_goroutines"), get(b, "go_goroutines")
	m.SSEConnections = get(b, "sse_connections")
	if waiters > 0 {
		n := float64(waiters)
		m.RSSPerWaiterKB = round((m.RSSAfter-m.RSSBefore)/n/1024, 3)
		m.HeapInusePerWaiterKB = round((m.HeapInuseAfter-m.HeapInuseBefore)/n/1024, 3)
		m.HeapAllocPerWaiterKB = round((m.HeapAllocAfter-m.HeapAllocBefore)/n/1024, 3)
		m.StackPerWaiterKB = round((m.StackAfter-m.StackBefore)/n/1024, 3)
		m.GoroutinesPerWaiter = round((m.GoroutinesAfter-m.GoroutinesBefore)/n, 4)
	}
	return m
}

func round(f float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(f*p) / p
}

// refresh describes the fan-out rounds: from the first position frame a round rendered to
// the last one parsed by a client.
type refresh struct {
	Rounds      int     `json:"rounds"`
	MeanStreams float64 `json:"mean_streams_per_round"`
	P50MS       float64 `json:"p50_ms"`
	MaxMS       float64 `json:"max_ms"`
}

// checks are the correctness results.
type checks struct {
	PositionIncreases      int64  `json:"position_increases"`
	JoinToStreamIncreases  int64  `json:"join_answer_to_first_event_increases"`
	PollPositionIncreases  int64  `json:"poll_position_increases"`
	PositionAfterAdmitted  int64  `json:"position_events_after_admitted"`
	AdmittedTwice          int64  `json:"admitted_twice"`
	FIFORecords            int    `json:"fifo_records"`
	FIFOViolations         int64  `json:"fifo_violations"`
	FIFOComplete           bool   `json:"fifo_complete"`
	FIFONote               string `json:"fifo_note"`
	JoinOrderWrong         int64  `json:"join_order_wrong"`
	JoinOrderSkipped       int64  `json:"join_order_skipped"`
	AdmittedObserved       int64  `json:"admitted_observed_by_streams"`
	TokensIssuedForStreams int64  `json:"tokens_issued_during_streams"`
}

// reportT is the whole summary.
type reportT struct {
	Label      string              `json:"label,omitempty"`
	Date       string              `json:"date"`
	Mode       string              `json:"mode"`
	Queue      string              `json:"queue"`
	Targets    []string            `json:"targets"`
	N          int                 `json:"n"`
	Procs      int                 `json:"procs"`
	Sources    int                 `json:"sources"`
	Host       string              `json:"host"`
	Connected  int                 `json:"connected"`
	Failed     int                 `json:"failed"`
	ConnectS   float64             `json:"connect_seconds"`
	ConnectPS  float64             `json:"connects_per_second"`
	Memory     memory              `json:"memory"`
	MemoryIdle *memory             `json:"memory_after_idle,omitempty"`
	IdleNet    *float64            `json:"idle_cpu_us_per_waiter_per_s_net_of_baseline,omitempty"`
	Windows    []window            `json:"windows"`
	Latency    map[string]summary  `json:"latency"`
	Events     map[string]int64    `json:"events"`
	Errors     map[string]int64    `json:"errors"`
	ErrorClass map[string]int64    `json:"error_classes"`
	Refresh    refresh             `json:"fanout_refresh"`
	Checks     checks              `json:"checks"`
	Healthy    int                 `json:"streams_healthy_at_stop"`
	hist       map[string]histJSON `json:"-"`
}

func (r *run) report(conn connectedMsg, mem memory, res []childResult, streamIssued map[string]float64) reportT {
	o := r.o
	rep := reportT{Label: o.Label, Date: time.Now().UTC().Format(time.RFC3339), Mode: o.Mode, Queue: o.Queue,
		Targets: o.Targets, N: o.N, Procs: o.Procs, Sources: o.SrcCount,
		Host:      fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		Connected: conn.OK, Failed: conn.Failed, ConnectS: round(conn.Seconds, 2), Memory: mem, Windows: r.windows,
		Latency: map[string]summary{}, Events: map[string]int64{}, Errors: map[string]int64{}, ErrorClass: map[string]int64{},
		hist: map[string]histJSON{}}
	if conn.Seconds > 0 {
		rep.ConnectPS = round(float64(conn.OK)/conn.Seconds, 1)
	}
	// Ticks are numbered per queue: the FIFO check runs queue by queue (one queue per
	// process with -queues).
	admCounts := map[string]map[int64]int64{}
	recs := map[string][]admRecord{}
	groups := map[groupKey]*groupOut{}
	for _, c := range res {
		for k, h := range c.Hist {
			m := rep.hist[k]
			m.merge(h)
			rep.hist[k] = m
			if o.Probe > 0 && c.Index == 0 && (k == "admitted" || k == "admitted_from_issue" || k == "position") {
				rep.hist["probe_"+k] = h
			}
		}
		for k, v := range c.Counts {
			rep.Events[k] += v
		}
		for k, v := range c.Errors {
			rep.Errors[k] += v
		}
		if admCounts[c.Queue] == nil {
			admCounts[c.Queue] = map[int64]int64{}
		}
		for k, v := range c.AdmCounts {
			admCounts[c.Queue][k] += v
		}
		recs[c.Queue] = append(recs[c.Queue], c.AdmRecs...)
		for _, g := range c.Groups {
			k := groupKey{g.Target, g.Tick}
			if x := groups[k]; x == nil {
				gg := g
				groups[k] = &gg
			} else {
				x.FirstServer = min(x.FirstServer, g.FirstServer)
				x.LastParsed = max(x.LastParsed, g.LastParsed)
				x.N += g.N
			}
		}
		rep.Checks.JoinOrderWrong += c.JoinWrong
		rep.Checks.JoinOrderSkipped += c.JoinSkipped
		rep.Healthy += c.HealthyAtStop
	}
	for k, h := range rep.hist {
		if h.N > 0 {
			rep.Latency[k] = h.summary()
		}
	}
	for k, v := range rep.Errors {
		class := "other"
		switch {
		case strings.Contains(k, "_status0"):
			class = "status0 (no HTTP response)"
		case strings.Contains(k, "_4xx"):
			class = "4xx"
		case strings.Contains(k, "_5xx"):
			class = "5xx"
		case strings.Contains(k, "dropped"), strings.Contains(k, "timeout"):
			class = "stream ended early"
		}
		rep.ErrorClass[class] += v
	}
	rep.Refresh = refreshOf(groups)
	ch := &rep.Checks
	ch.PositionIncreases = rep.Events["position_increase"]
	ch.JoinToStreamIncreases = rep.Events["join_to_stream_increase"]
	ch.PollPositionIncreases = rep.Events["poll_position_increase"]
	ch.PositionAfterAdmitted = rep.Events["position_after_admitted"]
	ch.AdmittedTwice = rep.Events["admitted_twice"]
	complete, incomplete := 0, 0
	for q, counts := range admCounts {
		ch.FIFORecords += len(recs[q])
		ch.FIFOViolations += fifoViolations(recs[q], counts)
		var seen int64
		for _, v := range counts {
			seen += v
		}
		ch.AdmittedObserved += seen
		ch.TokensIssuedForStreams += int64(streamIssued[q])
		if seen == int64(streamIssued[q]) {
			complete++
		} else {
			incomplete++
		}
	}
	ch.FIFOComplete = o.Mode != "poll" && incomplete == 0
	switch {
	case o.Mode == "poll":
		ch.FIFONote = "not checked in poll mode (status answers carry no tick)"
	case ch.FIFOComplete && complete > 1:
		ch.FIFONote = fmt.Sprintf("exact: every admission of each of the %d queues was observed", complete)
	case ch.FIFOComplete:
		ch.FIFONote = "exact: every admission of the queue was observed"
	default:
		ch.FIFONote = fmt.Sprintf("incomplete: %d admitted events seen for %d tokens issued (streams lost?); violations may be false alarms", ch.AdmittedObserved, ch.TokensIssuedForStreams)
	}
	return rep
}

// refreshOf takes the rounds that reached at least 80 % of their instance's largest round.
func refreshOf(groups map[groupKey]*groupOut) refresh {
	largest := map[int]int64{}
	for _, g := range groups {
		largest[g.Target] = max(largest[g.Target], g.N)
	}
	var spreads []float64
	var streams int64
	for _, g := range groups {
		if g.N < 100 || float64(g.N) < 0.8*float64(largest[g.Target]) {
			continue
		}
		spreads = append(spreads, float64(g.LastParsed-g.FirstServer)/1000)
		streams += g.N
	}
	if len(spreads) == 0 {
		return refresh{}
	}
	sort.Float64s(spreads)
	return refresh{Rounds: len(spreads), MeanStreams: round(float64(streams)/float64(len(spreads)), 1),
		P50MS: round(spreads[len(spreads)/2], 1), MaxMS: round(spreads[len(spreads)-1], 1)}
}

func (rep reportT) write(o options) error {
	rep.table(os.Stdout)
	if o.Out == "" {
		return nil
	}
	return writeJSON(o.Out, rep)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if path == "-" {
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func (rep reportT) table(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	p := func(f string, a ...any) { fmt.Fprintf(tw, f+"\n", a...) }
	p("== swarm %s: %d waiters, %d procs, %d source addrs, %d instance(s), queue %s", rep.Mode, rep.N, rep.Procs, rep.Sources, len(rep.Targets), rep.Queue)
	p("connected\t%d ok, %d failed, %.1f s (%.0f/s)", rep.Connected, rep.Failed, rep.ConnectS, rep.ConnectPS)
	for _, m := range []*memory{&rep.Memory, rep.MemoryIdle} {
		if m == nil {
			continue
		}
		p("server memory / waiter (%s)\tRSS %.2f KB, heap in use %.2f KB, heap alloc %.2f KB, stacks %.2f KB, goroutines %.3f (sse_connections %.0f)",
			m.When, m.RSSPerWaiterKB, m.HeapInusePerWaiterKB, m.HeapAllocPerWaiterKB, m.StackPerWaiterKB, m.GoroutinesPerWaiter, m.SSEConnections)
	}
	p("")
	p("window\tseconds\twaiters\tserver CPU cores\tµs/waiter/s\tRedis CPU cores\tswarm CPU cores\tmachine busy cores\tRedis cmds/s\tscripts/s\tticks\tcmds/tick\tscripts/tick\tposition ev\tadmitted ev")
	for _, w := range rep.Windows {
		p("%s\t%.1f\t%d\t%.4f\t%.3f\t%.3f\t%.3f\t%.2f\t%.1f\t%.1f\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f", w.Name, w.Seconds, w.Waiters, w.CPUCores, w.CPUMicrosPerWaiterSec,
			w.RedisCores, w.SwarmCores, w.MachineCores, w.RedisCallsPerSec, w.RedisScriptsPerSec, w.Ticks, w.RedisCallsPerTick, w.RedisScriptsPerTick, w.PositionEvents, w.AdmittedEvents)
	}
	for _, w := range rep.Windows {
		if w.ServerAdmitWritten.N > 0 || w.ServerTickDelay.N > 0 {
			p("  %s	server side, from the admission in Redis: tick message handled p50/p99 %.1f/%.1f ms (n %.0f); admitted written to the socket p50/p99 %.1f/%.1f ms (n %.0f)",
				w.Name, w.ServerTickDelay.P50MS, w.ServerTickDelay.P99MS, w.ServerTickDelay.N, w.ServerAdmitWritten.P50MS, w.ServerAdmitWritten.P99MS, w.ServerAdmitWritten.N)
		}
	}
	for _, w := range rep.Windows {
		if w.ServerTickDuration.N > 0 && w.Ticks > 0 {
			p("  %s\tadmission ticks: duration p50/p99 %.2f/%.2f ms (n %.0f), %.1f admitted/s, %.0f unconfirmed", w.Name, w.ServerTickDuration.P50MS, w.ServerTickDuration.P99MS, w.ServerTickDuration.N, w.AdmittedPerSec, w.Unconfirmed)
		}
		if w.ReplicaCallsPerSec > 0 {
			p("  %s\treplicas: %.1f commands/s applied, %.3f CPU cores", w.Name, w.ReplicaCallsPerSec, w.ReplicaCores)
		}
	}
	for _, w := range rep.Windows {
		if w.Kind != "stream" && w.Kind != "poll" {
			continue
		}
		p("  %s\tserver histograms p50/p99 ms: tick lag %.2f/%.2f, fan-out %.2f/%.2f, tick handled %.2f/%.2f, priority frame wait %.2f/%.2f, socket write %.3f/%.3f",
			w.Name, w.ServerTickLag.P50MS, w.ServerTickLag.P99MS, w.ServerFanout.P50MS, w.ServerFanout.P99MS, w.ServerTickHandle.P50MS, w.ServerTickHandle.P99MS,
			w.ServerPriorityWait.P50MS, w.ServerPriorityWait.P99MS, w.ServerWrite.P50MS, w.ServerWrite.P99MS)
		p("  %s\tscheduler: CPU pressure (some) %.1f %%, run-queue wait: instances %.3f s/s (%.3f per CPU-second they ran), swarm %.3f s/s",
			w.Name, 100*w.CPUPressure, w.ServerRunqWait, w.ServerRunqPerCPU, w.SwarmRunqWait)
	}
	for _, w := range rep.Windows {
		if w.EventGaps+w.Resyncs+w.Disconnects > 0 || (w.Ticks > 0 && w.TickLagSum/w.Ticks > 0.01) {
			p("  %s\tserver: %.0f event gaps, %.0f resyncs, %.0f stream disconnects, mean tick lag %.1f ms", w.Name, w.EventGaps, w.Resyncs, w.Disconnects, 1000*w.TickLagSum/max(w.Ticks, 1))
		}
	}
	if rep.IdleNet != nil {
		p("idle CPU net of the no-waiter baseline\t%.3f µs/waiter/s", *rep.IdleNet)
	}
	var push, poll *window
	for i := range rep.Windows {
		switch rep.Windows[i].Kind {
		case "stream":
			push = &rep.Windows[i]
		case "poll":
			poll = &rep.Windows[i]
		}
	}
	if push != nil && poll != nil && push.HasRedis {
		p("push vs poll\tRedis commands %.1f× fewer, server CPU %.1f× less",
			ratio(poll.RedisCallsPerSec, push.RedisCallsPerSec), ratio(poll.CPUCores, push.CPUCores))
	}
	p("")
	p("latency (ms)\tn\tp50\tp90\tp99\tmax")
	keys := make([]string, 0, len(rep.Latency))
	for k := range rep.Latency {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := rep.Latency[k]
		p("%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f", k, s.N, s.P50MS, s.P90MS, s.P99MS, s.MaxMS)
	}
	if rep.Refresh.Rounds > 0 {
		p("fan-out round (first frame rendered → last parsed)\t%d rounds of ~%.0f streams: p50 %.1f ms, max %.1f ms", rep.Refresh.Rounds, rep.Refresh.MeanStreams, rep.Refresh.P50MS, rep.Refresh.MaxMS)
	}
	p("")
	ev := rep.Events
	p("events\tposition %d, admitted %d, expired %d, pings %d, polls %d (admitted seen by polling %d)", ev["position"], ev["admitted"], ev["expired"], ev["ping"], ev["polls"], ev["poll_admitted"])
	c := rep.Checks
	p("checks\tposition increases %d (join→first event %d, polling %d), position after admitted %d, admitted twice %d", c.PositionIncreases, c.JoinToStreamIncreases, c.PollPositionIncreases, c.PositionAfterAdmitted, c.AdmittedTwice)
	p("FIFO\t%d violations in %d admissions checked; %s", c.FIFOViolations, c.FIFORecords, c.FIFONote)
	p("join order\t%d admitted before a certainly-earlier joiner, %d overtook a still-waiting healthy earlier joiner", c.JoinOrderWrong, c.JoinOrderSkipped)
	if len(rep.Errors) == 0 {
		p("errors\t0")
	} else {
		p("errors\t%v", rep.ErrorClass)
		for k, v := range rep.Errors {
			p("  %s\t%d", k, v)
		}
	}
	p("streams healthy at stop\t%d", rep.Healthy)
	_ = tw.Flush()
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return a / b
}
