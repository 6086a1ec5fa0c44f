package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

// -mode storm: a reconnect storm. -n users join and stream over every -targets instance
// (user i on target i mod count) while the queue is paused; then admission runs at -rate,
// and after -before one instance (-kill: the queue's admission leader, or a target number)
// gets SIGKILL. Its users' streams end; each reconnects as a browser's EventSource would
// (waiter.streamLoop): after the server's retry hint, with back-off and jitter after
// failures, with the same ticket, on another live instance. Admitted users leave (they go
// to the order page), so capacity frees at the admission rate. The run measures how long
// until every user streams again, what was shed (200 + retry streams, 503 joins, closed
// connections), the admission rate through it, whether each reconnected stream's first
// position is exact, and — from Redis at the end — that every admitted ticket's user got
// exactly its one token.

type instanceFill struct {
	Target  string  `json:"target"`
	PID     int     `json:"pid,omitempty"`
	ID      string  `json:"instance_id,omitempty"`
	Streams float64 `json:"streams"`
	Budget  float64 `json:"stream_budget"`
	Conns   float64 `json:"connections"`
	ConnMax float64 `json:"connection_budget"`
	FillPct float64 `json:"fill_pct"`
}

type stormReport struct {
	Label   string         `json:"label,omitempty"`
	Date    string         `json:"date"`
	Queue   string         `json:"queue"`
	Targets []string       `json:"targets"`
	N       int            `json:"n"`
	Procs   int            `json:"procs"`
	Rate    float64        `json:"admission_rate_set"`
	Fill    []instanceFill `json:"fill_after_connect"`
	AtKill  []float64      `json:"streams_per_instance_at_kill"`

	Connected int     `json:"connected"`
	Failed    int     `json:"connect_failed"`
	ConnectS  float64 `json:"connect_seconds"`

	Killed struct {
		Target  int     `json:"target"` // 1-based
		URL     string  `json:"url"`
		PID     int     `json:"pid"`
		ID      string  `json:"instance_id,omitempty"`
		Leader  bool    `json:"was_admission_leader"`
		Streams float64 `json:"streams_held"`
	} `json:"killed"`
	LeaderAfter string `json:"admission_leader_at_end,omitempty"`
	Survivors   []struct {
		URL     string  `json:"url"`
		PID     int     `json:"pid"`
		Alive   bool    `json:"alive_at_end"`
		ExitedS float64 `json:"exited_after_kill_s,omitempty"`
		Healthz bool    `json:"healthz_ok_at_end"`
	} `json:"survivors"`

	Recovery struct {
		Recovered   bool    `json:"recovered"`
		Seconds     float64 `json:"seconds_until_every_user_streams_again"` // kill → the last user's first event again (or its token)
		MaxDown     int     `json:"most_users_without_a_stream"`
		UsersHit    int64   `json:"streams_ended"`
		Reconnects  int64   `json:"reconnect_attempts"`
		Arrived     int     `json:"arrivals"`
		FinalLive   int     `json:"live_at_end"`
		FinalDone   int     `json:"admitted_and_left_at_end"`
		FinalDown   int     `json:"without_a_stream_at_end"`
		FinalLost   int     `json:"places_lost"`
		WindowAfter float64 `json:"observed_seconds_after_kill"`
	} `json:"recovery"`

	Sheds struct {
		ClientStreams200Retry int64              `json:"client_streams_shed_200_retry"`
		ClientJoins503        int64              `json:"client_joins_503"`
		ClientConnFailures    int64              `json:"client_connection_failures"`
		Server                map[string]float64 `json:"server_survivors_delta"`
	} `json:"sheds"`

	Admission struct {
		BeforePerS  float64 `json:"before_kill_per_s"`
		StormPerS   float64 `json:"kill_to_recovered_per_s"`
		AfterPerS   float64 `json:"recovered_to_end_per_s"`
		LongestGapS float64 `json:"longest_gap_s"`
		GapAt       float64 `json:"longest_gap_starts_after_kill_s"`
		PerSecond   []int   `json:"per_second_from_kill_minus_5s"`
	} `json:"admission"`

	Tokens struct {
		AdmittedInRedis int   `json:"admitted_in_redis"`
		Delivered       int   `json:"delivered_to_their_user"`
		Lost            int   `json:"lost"`     // admitted in Redis, the user never saw the token
		Doubled         int   `json:"doubled"`  // a user saw two different tokens
		Mismatch        int   `json:"mismatch"` // the token seen is not the one Redis holds
		Unknown         int   `json:"unknown"`  // a token seen for a ticket Redis does not show admitted
		Resent          int64 `json:"admitted_resent_same_token"`
		UsersTotal      int   `json:"users"`
	} `json:"tokens"`

	Positions struct {
		ReconnectChecked int64 `json:"reconnects_checked"`
		ReconnectWrong   int64 `json:"reconnects_wrong_position"`
		Increases        int64 `json:"position_increases"`
		AfterAdmitted    int64 `json:"position_after_admitted"`
		FIFORecords      int   `json:"fifo_records"`
		FIFOViolations   int64 `json:"fifo_violations"`
		AdmittedTwice    int64 `json:"admitted_twice"`
	} `json:"positions"`

	// The survivors, from the kill to the end: request latency by route (server side),
	// their CPU and the whole machine's.
	ServerLatency map[string]serverQuantiles `json:"server_latency_survivors"`
	ServerCPU     float64                    `json:"server_cpu_cores_survivors"`
	MachineBusy   float64                    `json:"machine_busy_cores"`

	Latency map[string]summary `json:"latency"`
	Events  map[string]int64   `json:"events"`
	Errors  map[string]int64   `json:"errors"`
	Notes   []string           `json:"notes,omitempty"`
}

func runStorm(o options) error {
	r := &run{o: o, start: time.Now()}
	r.logf = func(f string, a ...any) {
		if !o.Quiet {
			fmt.Fprintf(os.Stderr, "[%6.1fs] "+f+"\n", append([]any{time.Since(r.start).Seconds()}, a...)...)
		}
	}
	planned := time.Duration(float64(o.N)/o.ConnectRate*float64(time.Second))*2 + o.Settle + o.Before + o.Duration + o.Hold + o.Drain + time.Minute
	_, hard := r.armHardStop(&o, planned)
	defer hard.Stop()
	rep := stormReport{Label: o.Label, Date: time.Now().UTC().Format(time.RFC3339), Queue: o.Queue, Targets: o.Targets,
		N: o.N, Procs: o.Procs, Rate: o.Rate, Latency: map[string]summary{}, Events: map[string]int64{}, Errors: map[string]int64{}}
	r.logf("storm: %d users over %d instances, %d procs, queue %s, admission %.0f/s, kill %s, hard-stop %v", o.N, len(o.Targets), o.Procs, o.Queue, o.Rate, o.Kill, o.HardStop)
	if o.AdminToken != "" {
		if err := r.putQueue(map[string]any{"paused": true, "rate_per_second": o.Rate, "max_active": 0,
			"token_ttl_seconds": int(o.TTL.Seconds()), "closed": false, "places_per_ip": 0}); err != nil {
			return err
		}
	}
	if err := r.spawn(r.start.Add(o.HardStop)); err != nil {
		r.killAll()
		return err
	}
	// Every process's latest counts.
	var smu sync.Mutex
	latest := map[int]statusMsg{}
	for _, p := range r.procs {
		go func() {
			for m := range p.status {
				smu.Lock()
				latest[m.Index] = m
				smu.Unlock()
			}
		}()
	}
	conn := r.waitConnected()
	rep.Connected, rep.Failed, rep.ConnectS = conn.OK, conn.Failed, round(conn.Seconds, 2)
	r.logf("connected %d/%d in %.1f s, %d failed", conn.OK, o.N, conn.Seconds, conn.Failed)
	time.Sleep(o.Settle)
	r.broadcast("storm")
	for i, m := range scrapeAll(o.Targets) {
		f := instanceFill{Target: o.Targets[i]}
		f.Streams, _ = m.sum("sse_connections")
		f.Budget, _ = m.sum("sse_streams_budget")
		f.Conns, _ = m.sum("http_connections")
		f.ConnMax, _ = m.sum("http_connections_budget")
		if f.Budget > 0 {
			f.FillPct = round(100*f.Streams/f.Budget, 1)
		}
		if i < len(o.PIDs) {
			f.PID = o.PIDs[i]
		}
		if i < len(o.InstanceIDs) {
			f.ID = o.InstanceIDs[i]
		}
		rep.Fill = append(rep.Fill, f)
		r.logf("  instance %d %s: %.0f streams of a budget of %.0f (%.1f %%), %.0f connections of %.0f", i+1, f.Target, f.Streams, f.Budget, f.FillPct, f.Conns, f.ConnMax)
	}

	r.setRate(false)
	r.logf("admitting %.0f/s for %v before the kill", o.Rate, o.Before)
	time.Sleep(o.Before)

	victim := -1
	leaderID := r.leader()
	switch o.Kill {
	case "none":
	case "leader":
		for i, id := range o.InstanceIDs {
			if id == leaderID {
				victim = i
			}
		}
		if victim < 0 {
			r.killAll()
			return fmt.Errorf("-kill leader: the lease holder %q is none of -instance-ids %v", leaderID, o.InstanceIDs)
		}
	default:
		victim, _ = strconv.Atoi(o.Kill)
		victim--
	}
	before := scrapeAll(o.Targets)
	busy0 := machineBusy()
	for i, m := range before {
		v, _ := m.sum("sse_connections")
		rep.AtKill = append(rep.AtKill, v)
		if len(rep.Fill) > i && rep.Fill[i].Budget > 0 {
			r.logf("  instance %d at the kill: %.0f streams (%.1f %% of its budget)", i+1, v, 100*v/rep.Fill[i].Budget)
		}
	}
	var killAt time.Time
	if victim >= 0 {
		rep.Killed.Target, rep.Killed.URL, rep.Killed.PID = victim+1, o.Targets[victim], o.PIDs[victim]
		if victim < len(o.InstanceIDs) {
			rep.Killed.ID = o.InstanceIDs[victim]
			rep.Killed.Leader = o.InstanceIDs[victim] == leaderID
		}
		rep.Killed.Streams, _ = before[victim].sum("sse_connections")
		killAt = time.Now()
		if err := syscall.Kill(o.PIDs[victim], syscall.SIGKILL); err != nil {
			r.killAll()
			return fmt.Errorf("SIGKILL pid %d: %w", o.PIDs[victim], err)
		}
		r.logf("SIGKILL to instance %d (%s, pid %d, %s; %.0f streams)", victim+1, o.Targets[victim], o.PIDs[victim],
			map[bool]string{true: "the admission leader", false: "not the leader"}[rep.Killed.Leader], rep.Killed.Streams)
	} else {
		killAt = time.Now()
	}
	r.broadcast("arrive")

	// Watch until every user streams again (or has its token), then -hold more; -duration
	// after the kill at most.
	type exit struct {
		at time.Time
	}
	exited := map[int]exit{}
	var recoveredAt time.Time
	deadline := killAt.Add(o.Duration)
	lastLog := time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		now := time.Now()
		for i, pid := range o.PIDs {
			if i == victim {
				continue
			}
			if _, gone := exited[i]; !gone && !pidAlive(pid) {
				exited[i] = exit{now}
				r.logf("instance %d (pid %d) has EXITED", i+1, pid)
			}
		}
		smu.Lock()
		var agg statusMsg
		fresh := len(latest) == len(r.procs)
		var lastUp int64
		for _, m := range latest {
			agg.Total += m.Total
			agg.New += m.New
			agg.Down += m.Down
			agg.Live += m.Live
			agg.Done += m.Done
			agg.Lost += m.Lost
			agg.Drops += m.Drops
			agg.Pending += m.Pending
			lastUp = max(lastUp, m.LastUp)
			if m.At < killAt.Add(500*time.Millisecond).UnixNano() {
				fresh = false
			}
		}
		smu.Unlock()
		rep.Recovery.MaxDown = max(rep.Recovery.MaxDown, agg.Down+agg.New)
		if now.Sub(lastLog) >= 2*time.Second {
			lastLog = now
			r.logf("  %.1f s after the kill: %d live, %d without a stream, %d joining, %d admitted and gone, %d lost (%d streams ended so far)",
				now.Sub(killAt).Seconds(), agg.Live, agg.Down, agg.New, agg.Done, agg.Lost, agg.Drops)
		}
		if recoveredAt.IsZero() && fresh && (victim < 0 || agg.Drops > 0) && agg.Down == 0 && agg.New == 0 && agg.Pending == 0 {
			recoveredAt = time.Unix(0, max(lastUp, killAt.UnixNano()))
			rep.Recovery.Recovered = true
			rep.Recovery.Seconds = round(recoveredAt.Sub(killAt).Seconds(), 2)
			r.logf("every user streams again (or has its token) %.2f s after the kill", rep.Recovery.Seconds)
			deadline = minTime(deadline, now.Add(o.Hold))
		}
	}
	rep.Recovery.WindowAfter = round(time.Since(killAt).Seconds(), 1)
	if !rep.Recovery.Recovered {
		r.logf("NOT every user streams again within %v of the kill", o.Duration)
		rep.Notes = append(rep.Notes, fmt.Sprintf("not every user streamed again within %v of the kill", o.Duration))
	}
	r.setRate(true)
	endAt := time.Now()
	time.Sleep(o.Drain)
	rep.LeaderAfter = r.leader()
	r.broadcast("stop")
	results := r.collect()
	hard.Stop()

	// Survivors.
	for i, t := range o.Targets {
		if i == victim {
			continue
		}
		s := struct {
			URL     string  `json:"url"`
			PID     int     `json:"pid"`
			Alive   bool    `json:"alive_at_end"`
			ExitedS float64 `json:"exited_after_kill_s,omitempty"`
			Healthz bool    `json:"healthz_ok_at_end"`
		}{URL: t}
		if i < len(o.PIDs) {
			s.PID = o.PIDs[i]
			s.Alive = pidAlive(s.PID)
		}
		if e, ok := exited[i]; ok {
			s.ExitedS = round(e.at.Sub(killAt).Seconds(), 1)
		}
		_, s.Healthz = probeHealthz(t, 2*time.Second)
		rep.Survivors = append(rep.Survivors, s)
	}
	rep.Sheds.Server = map[string]float64{}
	var survBefore, survAfter []metricsSample
	for i, t := range o.Targets {
		if i == victim {
			continue
		}
		after, err := scrape(t)
		if err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("metrics of %s at the end: %v", t, err))
			continue
		}
		survBefore, survAfter = append(survBefore, before[i]), append(survAfter, after)
		for k, v := range after {
			switch {
			case k == `sse_refused_total{reason="full"}`, k == "http_connections_shed_total", k == "stream_swept_total",
				strings.HasPrefix(k, "http_accept_errors_total"),
				strings.HasPrefix(k, "http_requests_total{") && strings.Contains(k, `status="503"`):
				rep.Sheds.Server[k] += v - before[i][k]
			}
		}
	}

	if secs := time.Since(killAt).Seconds(); secs > 0 {
		rep.MachineBusy = round((machineBusy()-busy0)/secs, 2)
		rep.ServerCPU = round((total(survAfter, "process_cpu_seconds_total")-total(survBefore, "process_cpu_seconds_total"))/secs, 2)
	}
	rep.ServerLatency = map[string]serverQuantiles{}
	for _, route := range []string{"/api/queues/:queue/join", "/api/queues/:queue/stream", "/healthz", "/readyz", "/metrics"} {
		if q := labelQuantiles(survBefore, survAfter, "http_request_duration_seconds", `route="`+route+`"`); q.N > 0 {
			rep.ServerLatency[route] = q
		}
	}

	// Client side.
	var admCounts = map[int64]int64{}
	var recs []admRecord
	var reconns []reconnRecord
	var tokens []tokenOut
	hists := map[string]histJSON{}
	for _, c := range results {
		for k, h := range c.Hist {
			m := hists[k]
			m.merge(h)
			hists[k] = m
		}
		for k, v := range c.Counts {
			rep.Events[k] += v
		}
		for k, v := range c.Errors {
			rep.Errors[k] += v
		}
		for k, v := range c.AdmCounts {
			admCounts[k] += v
		}
		recs = append(recs, c.AdmRecs...)
		reconns = append(reconns, c.Reconns...)
		tokens = append(tokens, c.Tokens...)
		rep.Recovery.Arrived += c.Arrived
		if f := c.Final; f != nil {
			rep.Recovery.FinalLive += f.Live
			rep.Recovery.FinalDone += f.Done
			rep.Recovery.FinalDown += f.Down + f.New
			rep.Recovery.FinalLost += f.Lost
		}
	}
	for k, h := range hists {
		if h.N > 0 {
			rep.Latency[k] = h.summary()
		}
	}
	ev := rep.Events
	rep.Recovery.UsersHit = ev["stream_drops"]
	rep.Recovery.Reconnects = ev["reconnects"]
	rep.Sheds.ClientStreams200Retry = ev["stream_sheds"]
	rep.Sheds.ClientJoins503 = ev["join_503"]
	rep.Sheds.ClientConnFailures = ev["stream_conn_failures"]
	rep.Tokens.Resent = ev["admitted_resent"]
	rep.Tokens.UsersTotal = len(tokens)

	// Redis: every ticket's row; the admitted ones carry their token, its expiry and tick.
	var redisAdm map[string]admittedRow
	if o.Redis != "" {
		rows, err := redisHash(o.Redis, "wr:{q:"+o.Queue+"}:tickets")
		if err != nil {
			rep.Notes = append(rep.Notes, "Redis tickets: "+err.Error())
		} else {
			redisAdm = admittedRows(rows, o.TTL)
		}
	}
	// Positions, checked against the admissions Redis holds (all of them, by tick).
	counts := admCounts
	if redisAdm != nil {
		counts = map[int64]int64{}
		for _, a := range redisAdm {
			counts[a.Tick]++
		}
	}
	rep.Positions.ReconnectWrong, rep.Positions.ReconnectChecked = reconnPositionErrors(reconns, counts)
	rep.Positions.FIFORecords = len(recs)
	rep.Positions.FIFOViolations = fifoViolations(recs, counts)
	rep.Positions.Increases = ev["position_increase"]
	rep.Positions.AfterAdmitted = ev["position_after_admitted"]
	rep.Positions.AdmittedTwice = ev["admitted_twice"]

	if redisAdm != nil {
		rep.Tokens.AdmittedInRedis = len(redisAdm)
		seen := map[string]tokenOut{}
		for _, t := range tokens {
			seen[t.Ticket] = t
			if t.Changed {
				rep.Tokens.Doubled++
			}
			if t.Token == "" {
				continue
			}
			a, ok := redisAdm[t.Ticket]
			switch {
			case !ok:
				rep.Tokens.Unknown++
			case a.Token != t.Token:
				rep.Tokens.Mismatch++
			default:
				rep.Tokens.Delivered++
			}
		}
		for id := range redisAdm {
			if t, ok := seen[id]; !ok || t.Token == "" {
				rep.Tokens.Lost++
			}
		}
		// Admission rate from the issuance times Redis holds.
		var issued []time.Time
		for _, a := range redisAdm {
			issued = append(issued, a.Issued)
		}
		sort.Slice(issued, func(i, j int) bool { return issued[i].Before(issued[j]) })
		endRec := endAt
		if !recoveredAt.IsZero() {
			endRec = recoveredAt
		}
		count := func(a, b time.Time) int {
			n := 0
			for _, t := range issued {
				if !t.Before(a) && t.Before(b) {
					n++
				}
			}
			return n
		}
		per := func(a, b time.Time) float64 {
			if s := b.Sub(a).Seconds(); s > 0.5 {
				return round(float64(count(a, b))/s, 2)
			}
			return 0
		}
		rep.Admission.BeforePerS = per(killAt.Add(-o.Before), killAt)
		rep.Admission.StormPerS = per(killAt, endRec)
		rep.Admission.AfterPerS = per(endRec, endAt)
		prev := killAt.Add(-o.Before)
		for _, t := range issued {
			if t.Before(prev) {
				continue
			}
			if g := t.Sub(prev).Seconds(); g > rep.Admission.LongestGapS {
				rep.Admission.LongestGapS = round(g, 2)
				rep.Admission.GapAt = round(prev.Sub(killAt).Seconds(), 2)
			}
			prev = t
		}
		for s := killAt.Add(-5 * time.Second); s.Before(endAt); s = s.Add(time.Second) {
			rep.Admission.PerSecond = append(rep.Admission.PerSecond, count(s, s.Add(time.Second)))
		}
	}
	rep.table(os.Stdout)
	if o.Out != "" {
		return writeJSON(o.Out, rep)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// leader is the instance id holding the run's queue's admission lease ("" if none).
func (r *run) leader() string {
	if r.o.Redis == "" {
		return ""
	}
	v, err := redisDo(r.o.Redis, "GET", "wr:{q:"+r.o.Queue+"}:lease")
	s, _ := v.(string)
	if err != nil || s == "" {
		return ""
	}
	if i := strings.LastIndexByte(s, ':'); i > 0 {
		return s[:i]
	}
	return s
}

// admittedRow is an admitted ticket as Redis holds it.
type admittedRow struct {
	Token  string
	Tick   int64
	Issued time.Time
}

// admittedRows picks the tickets that were given a token from the queue's tickets hash:
// "a:<seq>:<token>:<expiry ms>:<tick>" (admitted), "e:…" (token expired), "u:…" (used).
func admittedRows(rows map[string]string, ttl time.Duration) map[string]admittedRow {
	out := map[string]admittedRow{}
	for id, v := range rows {
		f := strings.Split(v, ":")
		if len(f) < 4 || (f[0] != "a" && f[0] != "e" && f[0] != "u") {
			continue
		}
		exp, _ := strconv.ParseInt(f[3], 10, 64)
		var tick int64
		if len(f) >= 5 && f[0] != "u" {
			tick, _ = strconv.ParseInt(f[4], 10, 64)
		}
		out[id] = admittedRow{Token: f[2], Tick: tick, Issued: time.UnixMilli(exp).Add(-ttl)}
	}
	return out
}

func (rep stormReport) table(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	p := func(f string, a ...any) { fmt.Fprintf(tw, f+"\n", a...) }
	p("== swarm storm: %d users over %d instances, %d procs, queue %s, admitting %.0f/s", rep.N, len(rep.Targets), rep.Procs, rep.Queue, rep.Rate)
	p("connected\t%d ok, %d failed, %.1f s", rep.Connected, rep.Failed, rep.ConnectS)
	for i, f := range rep.Fill {
		at := 0.0
		if i < len(rep.AtKill) {
			at = rep.AtKill[i]
		}
		p("instance %d\t%s pid %d: %.0f/%.0f streams after connecting (%.1f %% of the stream budget), %.0f/%.0f connections; %.0f streams at the kill (%.1f %%)",
			i+1, f.Target, f.PID, f.Streams, f.Budget, f.FillPct, f.Conns, f.ConnMax, at, 100*at/max(f.Budget, 1))
	}
	k := rep.Killed
	p("killed\tinstance %d (%s, pid %d, leader %v) holding %.0f streams; admission leader at the end: %s", k.Target, k.URL, k.PID, k.Leader, k.Streams, rep.LeaderAfter)
	for _, s := range rep.Survivors {
		p("survivor\t%s pid %d: alive %v, /healthz %v%s", s.URL, s.PID, s.Alive, s.Healthz, map[bool]string{true: fmt.Sprintf(", EXITED %.1f s after the kill", s.ExitedS), false: ""}[s.ExitedS > 0])
	}
	rc := rep.Recovery
	if rc.Recovered {
		p("recovery\tevery user streams again (or has its token) %.2f s after the kill", rc.Seconds)
	} else {
		p("recovery\tNOT within %.0f s of the kill", rc.WindowAfter)
	}
	p("\t%d streams ended, %d reconnect attempts, at most %d users without a stream; %d arrivals; at the end %d live, %d admitted and gone, %d without a stream, %d places lost",
		rc.UsersHit, rc.Reconnects, rc.MaxDown, rc.Arrived, rc.FinalLive, rc.FinalDone, rc.FinalDown, rc.FinalLost)
	sh := rep.Sheds
	p("sheds (client)\t%d streams answered 200 + retry, %d joins 503, %d connection failures", sh.ClientStreams200Retry, sh.ClientJoins503, sh.ClientConnFailures)
	keys := make([]string, 0, len(sh.Server))
	for k := range sh.Server {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p("  server: %s\t%.0f", k, sh.Server[k])
	}
	a := rep.Admission
	p("admission\t%.2f/s before the kill, %.2f/s from the kill to recovery, %.2f/s after; longest gap %.2f s (from %.2f s after the kill)", a.BeforePerS, a.StormPerS, a.AfterPerS, a.LongestGapS, a.GapAt)
	p("\tper second from 5 s before the kill: %v", a.PerSecond)
	t := rep.Tokens
	p("tokens\t%d admitted in Redis, %d delivered to their user; lost %d, doubled %d, mismatched %d, unknown %d (same token sent again on a new stream: %d)",
		t.AdmittedInRedis, t.Delivered, t.Lost, t.Doubled, t.Mismatch, t.Unknown, t.Resent)
	ps := rep.Positions
	p("positions\t%d/%d reconnected streams at a wrong first position; %d increases, %d after admitted, admitted twice %d; FIFO %d violations in %d",
		ps.ReconnectWrong, ps.ReconnectChecked, ps.Increases, ps.AfterAdmitted, ps.AdmittedTwice, ps.FIFOViolations, ps.FIFORecords)
	p("survivors, kill → end\tserver CPU %.2f cores (both), machine %.2f of 2 cores busy", rep.ServerCPU, rep.MachineBusy)
	routes := make([]string, 0, len(rep.ServerLatency))
	for k := range rep.ServerLatency {
		routes = append(routes, k)
	}
	sort.Strings(routes)
	for _, k := range routes {
		q := rep.ServerLatency[k]
		p("  server-side %s\t%.0f requests, p50 %.1f ms, p99 %.1f ms", k, q.N, q.P50MS, q.P99MS)
	}
	p("")
	p("latency (ms)\tn\tp50\tp90\tp99\tmax")
	names := make([]string, 0, len(rep.Latency))
	for k := range rep.Latency {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		s := rep.Latency[k]
		p("%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f", k, s.N, s.P50MS, s.P90MS, s.P99MS, s.MaxMS)
	}
	if len(rep.Errors) > 0 {
		p("client errors (counted per attempt)")
		ek := make([]string, 0, len(rep.Errors))
		for k := range rep.Errors {
			ek = append(ek, k)
		}
		sort.Strings(ek)
		for _, k := range ek {
			p("  %s\t%d", k, rep.Errors[k])
		}
	}
	for _, n := range rep.Notes {
		p("note\t%s", n)
	}
	_ = tw.Flush()
}
