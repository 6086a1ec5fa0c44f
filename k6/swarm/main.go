// Command swarm holds many simulated waiting-room users against a local server: each one
// joins a queue and keeps a Server-Sent Events stream open (or, with -mode=poll, asks
// /status once a second), every event is parsed and timed, and the server's own metrics
// and Redis's command counters are read around measured windows. It spreads the
// connections over several processes (re-executing itself) and source addresses
// 127.0.0.2, 127.0.0.3, … so that the per-process file limit and the ephemeral ports of
// one address are not the limit. It only targets loopback, and it stops by itself.
//
// Usage: see k6/README.md, or swarm -h.
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// options are the command-line settings of a run.
type options struct {
	Targets     []string
	Queue       string
	N           int
	Procs       int
	PerProc     int
	Src         string
	SrcCount    int
	PerSrc      int
	ConnectRate float64
	Mode        string
	Idle        time.Duration
	Duration    time.Duration
	Settle      time.Duration
	Baseline    time.Duration
	Drain       time.Duration
	Rate        float64
	TTL         time.Duration
	AdminToken  string
	Redis       string   // the first of RedisAddrs (the storm reads its keys there)
	RedisAddrs  []string // -redis: every server whose INFO commandstats is summed (a cluster's masters)
	RedisRepl   []string // -redis-replicas: counted apart (a cluster's replicas apply the masters' writes)
	PollEvery   time.Duration
	Front       int64
	Out         string
	Label       string
	HardStop    time.Duration
	Quiet       bool
	JoinConns   int
	MemWait     time.Duration
	ConnectConc int
	Probe       int

	// -mode storm
	LeaveAdmitted bool
	Arrivals      float64
	ArrivalsFor   time.Duration
	Before        time.Duration
	Hold          time.Duration
	Kill          string
	PIDs          []int
	InstanceIDs   []string
	// -mode flood
	Partial   string
	Redial    time.Duration
	ServerPID int
	// -mode draw, soldout, idlecost (drop day)
	StartIn     time.Duration
	Wait        time.Duration
	Product     string
	Scheduled   bool
	JoinWorkers int
	// -mode idlequeues, spread (scale-out)
	Queues      int
	LeaderWait  time.Duration
	QueueWaiter int
}

func main() {
	if raw := os.Getenv("SWARM_CHILD"); raw != "" {
		if err := runChild(raw); err != nil {
			fmt.Fprintln(os.Stderr, "swarm child:", err)
			os.Exit(1)
		}
		return
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "swarm:", err)
		os.Exit(2)
	}
	run := runParent
	switch o.Mode {
	case "joins":
		run = runJoinRate
	case "storm":
		run = runStorm
	case "flood":
		run = runFlood
	case "draw", "soldout":
		run = runDropDay
	case "idlecost":
		run = runIdleCost
	case "idlequeues", "spread":
		run = runQueues
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "swarm:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("swarm", flag.ContinueOnError)
	targets := fs.String("targets", "http://127.0.0.1:8080", "comma-separated base URLs of the instances (loopback only); waiter i uses target i mod count")
	fs.StringVar(&o.Queue, "queue", "", "queue name (default: swarm-<unix time>, created through the admin API)")
	fs.IntVar(&o.N, "n", 1000, "waiters to hold")
	fs.IntVar(&o.Procs, "procs", 0, "processes (default: enough for -per-proc and one per source address)")
	fs.IntVar(&o.PerProc, "per-proc", 15000, "most connections per process (the file limit here is 20,000)")
	fs.StringVar(&o.Src, "src", "127.0.0.2", "first source address; process i uses src+(i mod src-count); empty = the kernel's choice")
	fs.IntVar(&o.SrcCount, "src-count", 0, "source addresses to use (default: one per -per-src waiters)")
	fs.IntVar(&o.PerSrc, "per-src", 20000, "most waiters per source address (ephemeral ports)")
	fs.Float64Var(&o.ConnectRate, "connect-rate", 2000, "joins+streams opened per second, all processes together")
	fs.IntVar(&o.ConnectConc, "connect-conc", 200, "most joins+stream handshakes in flight, all processes together (the pace slows when the server does)")
	fs.IntVar(&o.Probe, "probe", 0, "put the first N waiters in a process of their own that connects first (front of the line): its admission latency is reported apart as probe_* (the server's delay, without the load tool's own queueing)")
	fs.StringVar(&o.Mode, "mode", "stream", "stream (push), poll (GET /status every -poll-every), compare (push window, then poll window on the same tickets), joins (open-loop joins at -connect-rate for -duration), storm (reconnect storm: streams over every -targets, one instance SIGKILLed, streams reconnect like browsers), flood (descriptor flood: -n idle connections with a request never finished), draw (drop day: -n pre-queue streams, the start moved to now, time to every drawn position), soldout (-n waiting streams, the queue's product set to stock 0, time to every sold_out event) idlecost (Redis commands/s of an idle queue holding -n places, plain or -scheduled), idlequeues (Redis commands/s with -queues empty queues) or spread (-queues busy queues: how many each instance leads)")
	fs.BoolVar(&o.LeaveAdmitted, "leave-admitted", true, "storm: an admitted user closes its stream (it leaves for the order page)")
	fs.Float64Var(&o.Arrivals, "arrivals", 0, "storm: new users per second joining from the kill on (they meet the full instances' 503s)")
	fs.DurationVar(&o.ArrivalsFor, "arrivals-for", 10*time.Second, "storm: how long new users keep arriving")
	fs.DurationVar(&o.Before, "before", 10*time.Second, "storm: admission at -rate before the kill")
	fs.DurationVar(&o.Hold, "hold", 10*time.Second, "storm: admission goes on this long after every user streams again (or -duration after the kill at most)")
	fs.StringVar(&o.Kill, "kill", "leader", "storm: the instance to SIGKILL: leader (the queue's admission leader, read from Redis), or a target number 1…")
	pids := fs.String("pids", "", "process ids of the -targets instances, in the same order: storm: the one chosen by -kill gets SIGKILL; stream modes: their run-queue wait is reported per window (/proc/<pid>/task/*/schedstat)")
	ids := fs.String("instance-ids", "", "storm: WR_INSTANCE_ID of the -targets instances, in the same order (for -kill leader)")
	fs.StringVar(&o.Partial, "partial", "GET /healthz HTTP/1.", "flood: what each connection sends and never finishes: by default a request line cut short (\\r and \\n are read as escapes)")
	fs.DurationVar(&o.Redial, "redial", time.Second, "flood: a connection the server closed is opened again after this (jittered ×0.5–1.5; 0 = not)")
	fs.IntVar(&o.ServerPID, "server-pid", 0, "flood: process id of the instance, watched: the report says whether and when it exited")
	fs.DurationVar(&o.StartIn, "start-in", time.Hour, "draw, idlecost -scheduled: the queue's start is set this far ahead (draw: then moved to now by starts_at null)")
	fs.DurationVar(&o.Wait, "wait", 60*time.Second, "draw, soldout: how long after the admin call to wait for every stream's event (and the seed)")
	fs.StringVar(&o.Product, "product", "", "soldout: product id naming the queue (default: the queue's name)")
	fs.BoolVar(&o.Scheduled, "scheduled", false, "idlecost: a scheduled queue (starts -start-in ahead) whose -n members wait in the pre-queue; otherwise a plain queue, -n waiting; admission rate 0 either way")
	fs.IntVar(&o.JoinWorkers, "join-workers", 32, "idlecost: joins in flight (kept-alive connections)")
	fs.IntVar(&o.JoinConns, "join-conns", 512, "joins mode: most joins in flight (kept-alive connections); an arrival finding none free is dropped")
	fs.DurationVar(&o.Idle, "idle", 10*time.Second, "idle window (queue paused: heartbeats only) after connecting; 0 skips it")
	fs.DurationVar(&o.Duration, "duration", 30*time.Second, "measured window with admission running (per mode in compare)")
	fs.DurationVar(&o.MemWait, "mem-wait", 0, "after the idle window, wait up to this long for a server GC (≥ 25 s after connecting) and read memory again; 0 = don't (Go forces a GC every 2 min, so 150s suffices)")
	fs.DurationVar(&o.Settle, "settle", 3*time.Second, "wait after connecting before reading memory")
	fs.DurationVar(&o.Baseline, "baseline", 5*time.Second, "window with no waiters before connecting (the fixed cost idle CPU is measured against); 0 skips it")
	fs.DurationVar(&o.Drain, "drain", 2*time.Second, "after a window the queue is paused this long so in-flight events arrive")
	fs.Float64Var(&o.Rate, "rate", 10, "admission rate (users/s) during the measured window")
	fs.DurationVar(&o.TTL, "ttl", 300*time.Second, "token TTL set on the queue (admission latency from issuance = token_expires_at − TTL)")
	fs.StringVar(&o.AdminToken, "admin-token", os.Getenv("WR_ADMIN_TOKEN"), "admin bearer token (default $WR_ADMIN_TOKEN); without it the queue is used as it is")
	redisList := fs.String("redis", "", "host:port of the Redis to read INFO commandstats from (loopback only); on a Redis Cluster a comma-separated list of its masters, summed")
	replList := fs.String("redis-replicas", "", "comma-separated host:port of replicas whose commands are counted apart (a cluster's replicas apply every write of their masters)")
	fs.IntVar(&o.Queues, "queues", 0, "idlequeues, spread: how many queues to create through the admin API (<queue>-0001 …); idlequeues: nobody in them; spread: -queue-waiters places each, rate 0 so they never rest; stream modes: spread -n waiters over this many queues (one queue per process)")
	fs.IntVar(&o.QueueWaiter, "queue-waiters", 1, "spread: places joined in each queue (HTTP joins, no streams: run the instances with WR_GRACE long enough)")
	fs.DurationVar(&o.LeaderWait, "leader-wait", 60*time.Second, "idlequeues, spread: after -settle, how long to wait for the leaders (queue_leader gauges on every instance) to stay the same for 3 readings")
	fs.DurationVar(&o.PollEvery, "poll-every", time.Second, "poll interval per waiter")
	fs.Int64Var(&o.Front, "front", 5000, "positions up to this count as 'front of the line' for the update-gap figure")
	fs.StringVar(&o.Out, "out", "", "write the JSON summary to this file (- = stdout)")
	fs.StringVar(&o.Label, "label", "", "free text stored in the summary")
	fs.DurationVar(&o.HardStop, "hard-stop", 0, "kill everything after this long (default: the planned run time + 2 min)")
	fs.BoolVar(&o.Quiet, "quiet", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Partial = strings.NewReplacer(`\r`, "\r", `\n`, "\n").Replace(o.Partial)
	for _, f := range strings.Split(*pids, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 1 {
			return o, fmt.Errorf("-pids: bad process id %q", f)
		}
		o.PIDs = append(o.PIDs, pid)
	}
	for _, f := range strings.Split(*ids, ",") {
		if f = strings.TrimSpace(f); f != "" {
			o.InstanceIDs = append(o.InstanceIDs, f)
		}
	}
	for _, t := range strings.Split(*targets, ",") {
		t = strings.TrimRight(strings.TrimSpace(t), "/")
		if t == "" {
			continue
		}
		if err := checkLoopbackURL(t); err != nil {
			return o, err
		}
		o.Targets = append(o.Targets, t)
	}
	if len(o.Targets) == 0 {
		return o, errors.New("no -targets")
	}
	for _, l := range []struct {
		flag string
		raw  string
		out  *[]string
	}{{"-redis", *redisList, &o.RedisAddrs}, {"-redis-replicas", *replList, &o.RedisRepl}} {
		for _, a := range strings.Split(l.raw, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			h, _, err := net.SplitHostPort(a)
			if err != nil {
				return o, fmt.Errorf("%s %q: want host:port", l.flag, a)
			}
			if err := checkLoopbackHost(h); err != nil {
				return o, err
			}
			*l.out = append(*l.out, a)
		}
	}
	if len(o.RedisAddrs) > 0 {
		o.Redis = o.RedisAddrs[0]
	}
	if o.Src != "" {
		ip := net.ParseIP(o.Src).To4()
		if ip == nil || !ip.IsLoopback() {
			return o, fmt.Errorf("-src %q: want an IPv4 loopback address like 127.0.0.2", o.Src)
		}
	}
	switch o.Mode {
	case "stream", "poll", "compare", "joins":
		if o.Queues > 1 && o.Mode == "joins" {
			return o, errors.New("-queues is not for -mode joins")
		}
	case "idlequeues", "spread":
		if o.AdminToken == "" || o.Redis == "" {
			return o, fmt.Errorf("-mode %s needs -admin-token and -redis", o.Mode)
		}
		if o.Queues < 0 || o.Queues > 20000 || (o.Mode == "spread" && o.Queues < 1) {
			return o, errors.New("-queues must be 0…20000 (spread: at least 1)")
		}
		if o.QueueWaiter < 0 || o.QueueWaiter > 100 || o.JoinWorkers < 1 || o.JoinWorkers > 1000 {
			return o, errors.New("-queue-waiters must be 0…100 and -join-workers 1…1000")
		}
		if o.Queues*o.QueueWaiter > 200000 {
			return o, errors.New("-queues × -queue-waiters must be at most 200000")
		}
	case "storm":
		if len(o.Targets) < 2 {
			return o, errors.New("-mode storm needs at least two -targets")
		}
		if o.Kill != "none" && len(o.PIDs) != len(o.Targets) {
			return o, errors.New("-mode storm: -pids must name the process of every target, in order")
		}
		if o.Kill == "leader" && (len(o.InstanceIDs) != len(o.Targets) || o.Redis == "") {
			return o, errors.New("-kill leader needs -instance-ids (every target's, in order) and -redis")
		}
		if k, err := strconv.Atoi(o.Kill); o.Kill != "leader" && o.Kill != "none" && (err != nil || k < 1 || k > len(o.Targets)) {
			return o, fmt.Errorf("-kill %q: want leader, none or a target number 1…%d", o.Kill, len(o.Targets))
		}
		if o.Probe > 0 {
			return o, errors.New("-probe is not for -mode storm")
		}
	case "flood":
		if o.Partial == "" || strings.Contains(o.Partial, "\r\n\r\n") {
			return o, errors.New("-partial must be a request that is not finished")
		}
	case "draw", "soldout", "idlecost":
		if o.AdminToken == "" {
			return o, fmt.Errorf("-mode %s needs -admin-token", o.Mode)
		}
		if o.Probe > 0 {
			return o, fmt.Errorf("-probe is not for -mode %s", o.Mode)
		}
		if o.Mode == "idlecost" && o.Redis == "" {
			return o, errors.New("-mode idlecost needs -redis (it counts Redis commands)")
		}
		if o.Wait <= 0 || o.StartIn < time.Minute {
			return o, errors.New("-wait must be positive and -start-in at least 1m")
		}
		if o.JoinWorkers < 1 || o.JoinWorkers > 1000 {
			return o, errors.New("-join-workers must be 1…1000")
		}
	default:
		return o, fmt.Errorf("-mode %q: want stream, poll, compare, joins, storm, flood, draw, soldout, idlecost, idlequeues or spread", o.Mode)
	}
	// idlecost -n 0: an idle queue with nobody in it, the fixed cost the others are
	// compared with.
	if o.Mode == "idlequeues" || o.Mode == "spread" {
		o.N = 0 // the queues, not -n, say what is joined
	}
	if (o.N < 1 && ((o.Mode != "idlecost" && o.Mode != "idlequeues" && o.Mode != "spread") || o.N < 0)) || o.N > 200000 {
		return o, errors.New("-n must be 1…200000")
	}
	if o.PerProc < 1 || o.PerProc > 18000 {
		return o, errors.New("-per-proc must be 1…18000 (file limit)")
	}
	if o.ConnectRate <= 0 || o.PollEvery < 10*time.Millisecond || o.Duration <= 0 {
		return o, errors.New("-connect-rate, -duration and -poll-every must be positive")
	}
	if o.SrcCount <= 0 {
		o.SrcCount = 1
		if o.Src != "" {
			o.SrcCount = max(1, int(math.Ceil(float64(o.N)/float64(o.PerSrc))))
		}
	}
	if o.Procs <= 0 {
		o.Procs = max(1, int(math.Ceil(float64(o.N)/float64(o.PerProc))))
		if o.Src != "" {
			o.Procs = max(o.Procs, o.SrcCount)
		}
	}
	if o.Queues > 1 && (o.Mode == "stream" || o.Mode == "compare" || o.Mode == "poll") {
		// One queue per process, so each process's join order and FIFO records concern one
		// queue: the process count is rounded up to a multiple of the queues.
		if o.Probe > 0 {
			return o, errors.New("-probe is not for several -queues")
		}
		o.Procs = (o.Procs + o.Queues - 1) / o.Queues * o.Queues
	}
	if int(math.Ceil(float64(o.N)/float64(o.Procs))) > o.PerProc {
		return o, fmt.Errorf("%d waiters over %d processes exceeds -per-proc %d", o.N, o.Procs, o.PerProc)
	}
	if o.Probe < 0 || (o.Probe > 0 && (o.Probe >= o.N || o.Probe > o.PerProc)) {
		return o, errors.New("-probe must be below -n and -per-proc")
	}
	if o.Queue == "" {
		o.Queue = fmt.Sprintf("swarm-%d", time.Now().Unix())
	}
	return o, nil
}

// queueNames are the queues of a run: -queue itself, or with -queues N > 1 in a stream mode
// (and always in idlequeues and spread) <queue>-0001 … <queue>-N.
func queueNames(o options) []string {
	if o.Queues <= 1 && o.Mode != "idlequeues" && o.Mode != "spread" {
		return []string{o.Queue}
	}
	out := make([]string, o.Queues)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", o.Queue, i+1)
	}
	return out
}

// srcAddr returns the i-th source address after base.
func srcAddr(base string, i int) string {
	ip := net.ParseIP(base).To4()
	v := uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
	v += uint32(i)
	return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)).String()
}

func warnf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "swarm: "+format+"\n", a...)
}
