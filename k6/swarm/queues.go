package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// queuesReport is the result of -mode idlequeues and -mode spread (scale-out: many queues).
type queuesReport struct {
	Label           string           `json:"label,omitempty"`
	Date            string           `json:"date"`
	Mode            string           `json:"mode"`
	Prefix          string           `json:"queue_prefix"`
	Targets         []string         `json:"targets"`
	Queues          int              `json:"queues"`
	WaitersPerQueue int              `json:"waiters_per_queue"`
	CreateSeconds   float64          `json:"create_seconds"`
	CreateErrors    int64            `json:"create_errors"`
	Joined          int64            `json:"joined"`
	JoinStates      map[string]int64 `json:"join_states,omitempty"`
	JoinErrors      map[string]int64 `json:"join_errors,omitempty"`
	JoinSeconds     float64          `json:"join_seconds"`
	Settle          float64          `json:"settle_seconds"`
	// Leaders: every reading of the queue_leader gauges after -settle until they stayed the
	// same for 3 readings (or -leader-wait ran out), then once more after the window.
	Readings     []leaderCount `json:"leader_readings"`
	Settled      bool          `json:"leaders_settled"`
	Leaders      leaderCount   `json:"leaders"`     // the settled reading, before the window
	LeadersAfter leaderCount   `json:"leaders_end"` // after the window
	Window       window        `json:"window"`
	TicksPerSec  float64       `json:"admission_ticks_per_s"`
	// Every command Redis ran in the window, per second (INFO commandstats delta; commands
	// inside scripts included), by name.
	CallsPerSec     map[string]float64 `json:"redis_calls_per_s_by_command"`
	RestsInWindow   float64            `json:"queue_rests_in_window"`
	LeaderChanges   float64            `json:"leader_changes_in_window"`
	PerQueuePerSec  float64            `json:"redis_commands_per_queue_per_s_gross"` // total / queues (fixed cost included)
	SpreadTarget    string             `json:"spread_target,omitempty"`
	SpreadTargetMet *bool              `json:"spread_target_met,omitempty"`
	Summary         string             `json:"summary"`
}

// leaderCount is one reading of who leads the run's queues (queue_leader == 1 on an
// instance's /metrics).
type leaderCount struct {
	At          float64 `json:"at_s"` // since the run started
	PerInstance []int   `json:"per_instance"`
	Led         int     `json:"led"`     // queues with exactly one leader
	Doubled     int     `json:"doubled"` // queues two instances both say they lead
	Unled       int     `json:"unled"`   // queues no instance leads (a resting queue has none)
	Min         int     `json:"min"`
	Max         int     `json:"max"`
	Share       float64 `json:"share"`                  // queues / instances
	MaxDevPct   float64 `json:"max_deviation_pct"`      // the farthest instance from the share, in %
	Scrape      string  `json:"scrape_error,omitempty"` // an instance that did not answer
	key         string
}

// readLeaders scrapes every instance's queue_leader gauges for the queues named prefix-….
func (r *run) readLeaders(names []string) leaderCount {
	lc := leaderCount{At: round(time.Since(r.start).Seconds(), 1), PerInstance: make([]int, len(r.o.Targets))}
	by := make(map[string][]int, len(names))
	for i, t := range r.o.Targets {
		m, err := scrape(t)
		if err != nil {
			lc.Scrape = err.Error()
			continue
		}
		for k, v := range m {
			q, ok := strings.CutPrefix(k, `queue_leader{queue="`)
			if !ok || v != 1 {
				continue
			}
			q = strings.TrimSuffix(q, `"}`)
			if !strings.HasPrefix(q, r.o.Queue+"-") {
				continue
			}
			by[q] = append(by[q], i)
			lc.PerInstance[i]++
		}
	}
	var key strings.Builder
	for _, q := range names {
		switch len(by[q]) {
		case 0:
			lc.Unled++
		case 1:
			lc.Led++
		default:
			lc.Doubled++
		}
		fmt.Fprintf(&key, "%s=%v;", q, by[q])
	}
	lc.key = key.String()
	if n := len(r.o.Targets); n > 0 {
		lc.Share = float64(len(names)) / float64(n)
		lc.Min, lc.Max = math.MaxInt, 0
		for _, c := range lc.PerInstance {
			lc.Min, lc.Max = min(lc.Min, c), max(lc.Max, c)
			if lc.Share > 0 {
				lc.MaxDevPct = max(lc.MaxDevPct, round(100*math.Abs(float64(c)-lc.Share)/lc.Share, 1))
			}
		}
	}
	return lc
}

// runQueues is -mode idlequeues and -mode spread.
//
// idlequeues: -queues empty queues (admission rate -rate, not paused, nobody in them) are
// created through the admin API; after -settle, and once the leaders stop moving, one window
// of -duration measures Redis commands/s (everything, commands inside scripts included),
// per command and per admission tick, server and Redis CPU. Run with -queues 0 for the
// instances' fixed cost: (total − fixed) / N is the cost of one idle queue.
//
// spread: -queues queues at admission rate 0 with -queue-waiters places each (joined over
// HTTP, no streams), so none of them rests; after -settle the leaders are read until they stay
// the same for 3 readings 2 s apart (at most -leader-wait): how many queues each instance
// leads, against the even share ± 15 %; then the same window.
func runQueues(o options) error {
	names := queueNames(o)
	planned := time.Duration(len(names))*20*time.Millisecond + time.Duration(len(names)*o.QueueWaiter)*10*time.Millisecond +
		o.Settle + o.LeaderWait + o.Duration + time.Minute
	hard := time.AfterFunc(planned+2*time.Minute, func() {
		warnf("hard stop after %v", planned+2*time.Minute)
		os.Exit(3)
	})
	defer hard.Stop()
	r := &run{o: o, start: time.Now()}
	r.logf = func(f string, a ...any) {
		if !o.Quiet {
			fmt.Fprintf(os.Stderr, "[%6.1fs] "+f+"\n", append([]any{time.Since(r.start).Seconds()}, a...)...)
		}
	}
	rep := queuesReport{Label: o.Label, Date: time.Now().UTC().Format(time.RFC3339), Mode: o.Mode, Prefix: o.Queue,
		Targets: o.Targets, Queues: len(names), Settle: o.Settle.Seconds()}
	body := map[string]any{"paused": false, "rate_per_second": o.Rate, "max_active": 0,
		"token_ttl_seconds": int(o.TTL.Seconds()), "closed": false, "places_per_ip": 0}
	if o.Mode == "spread" {
		rep.WaitersPerQueue = o.QueueWaiter
		body["rate_per_second"] = 0 // the places stay waiting: the queues never rest
	}
	r.logf("%s: creating %d queues %s-0001… through the admin API of %s", o.Mode, len(names), o.Queue, o.Targets[0])
	t0 := time.Now()
	rep.CreateErrors = r.createQueues(names, body, 8)
	rep.CreateSeconds = round(time.Since(t0).Seconds(), 2)
	r.logf("created %d queues in %.1f s (%d errors)", len(names), rep.CreateSeconds, rep.CreateErrors)
	if o.Mode == "spread" && o.QueueWaiter > 0 {
		t0 = time.Now()
		rep.Joined, rep.JoinStates, rep.JoinErrors = r.joinQueues(names, o.QueueWaiter, o.JoinWorkers)
		rep.JoinSeconds = round(time.Since(t0).Seconds(), 2)
		r.logf("joined %d places in %.1f s: states %v, errors %v", rep.Joined, rep.JoinSeconds, rep.JoinStates, rep.JoinErrors)
	}
	time.Sleep(o.Settle)
	// The leaders, until they stay the same for 3 readings.
	end := time.Now().Add(o.LeaderWait)
	same := 0
	var last leaderCount
	for {
		lc := r.readLeaders(names)
		rep.Readings = append(rep.Readings, lc)
		r.logf("leaders: per instance %v (one leader %d, two %d, none %d)", lc.PerInstance, lc.Led, lc.Doubled, lc.Unled)
		if len(rep.Readings) > 1 && lc.key == last.key && lc.Scrape == "" {
			same++
		} else {
			same = 0
		}
		last = lc
		if same >= 2 {
			rep.Settled = true
			break
		}
		if time.Now().After(end) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	rep.Leaders = last
	kind := fmt.Sprintf("%d empty queues", len(names))
	if o.Mode == "spread" {
		kind = fmt.Sprintf("%d queues with %d place(s) each, rate 0", len(names), o.QueueWaiter)
	}
	m := r.measure(kind, "idle", 0, o.Duration)
	rep.Window = r.windows[0]
	w := rep.Window
	rep.TicksPerSec = round(w.Ticks/w.Seconds, 2)
	rep.RestsInWindow = delta(m.start, m.end, "queue_rests_total")
	rep.LeaderChanges = delta(m.start, m.end, "queue_leader_changes_total")
	rep.CallsPerSec = map[string]float64{}
	if w.HasRedis {
		for k, v := range m.end.redis.Calls {
			if d := v - m.start.redis.Calls[k]; d > 0 && k != "info" {
				rep.CallsPerSec[k] = round(d/w.Seconds, 2)
			}
		}
	}
	if len(names) > 0 {
		rep.PerQueuePerSec = round(w.RedisCallsPerSec/float64(len(names)), 3)
	}
	rep.LeadersAfter = r.readLeaders(names)
	top := topCalls(rep.CallsPerSec, 6)
	if o.Mode == "spread" {
		rep.SpreadTarget = "every instance leads the even share ± 15 %, every queue exactly one leader"
		met := rep.Settled && rep.Leaders.Doubled == 0 && rep.Leaders.Unled == 0 && rep.Leaders.MaxDevPct <= 15
		rep.SpreadTargetMet = &met
		rep.Summary = fmt.Sprintf("SUMMARY spread %d queues over %d instances: leaders per instance %v (share %.1f, max deviation %.1f %%, settled %v at %.0f s; one leader %d, two %d, none %d; after the window %v), leader changes in the window %.0f; target met %v; Redis %.0f commands/s (%.1f per tick, %.0f ticks/s), Redis CPU %.3f cores, server CPU %.3f cores, machine %.2f cores; top %s",
			len(names), len(o.Targets), rep.Leaders.PerInstance, rep.Leaders.Share, rep.Leaders.MaxDevPct, rep.Settled, rep.Leaders.At,
			rep.Leaders.Led, rep.Leaders.Doubled, rep.Leaders.Unled, rep.LeadersAfter.PerInstance, rep.LeaderChanges, met,
			w.RedisCallsPerSec, w.RedisCallsPerTick, rep.TicksPerSec, w.RedisCores, w.CPUCores, w.MachineCores, top)
	} else {
		rep.Summary = fmt.Sprintf("SUMMARY idlequeues %d empty queues on %d instances: Redis %.1f commands/s (%.3f per queue gross), %.1f ticks/s, %.1f script runs/s, rests %.0f, leaders %v; Redis CPU %.4f cores, server CPU %.4f cores; top %s",
			len(names), len(o.Targets), w.RedisCallsPerSec, rep.PerQueuePerSec, rep.TicksPerSec, w.RedisScriptsPerSec, rep.RestsInWindow,
			rep.Leaders.PerInstance, w.RedisCores, w.CPUCores, top)
	}
	fmt.Println(rep.Summary)
	if o.Out == "" {
		return nil
	}
	return writeJSON(o.Out, rep)
}

func topCalls(m map[string]float64, n int) string {
	type kv struct {
		k string
		v float64
	}
	var all []kv
	for k, v := range m {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || (all[i].v == all[j].v && all[i].k < all[j].k) })
	var parts []string
	for i := 0; i < len(all) && i < n; i++ {
		parts = append(parts, fmt.Sprintf("%s %.1f/s", all[i].k, all[i].v))
	}
	return strings.Join(parts, ", ")
}

// createQueues PUTs body to every queue name through the admin API, workers at a time; it
// returns how many failed (each is warned about).
func (r *run) createQueues(names []string, body map[string]any, workers int) int64 {
	var next atomic.Int64
	var bad atomic.Int64
	var wg sync.WaitGroup
	for w := range min(workers, max(len(names), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target := r.o.Targets[w%len(r.o.Targets)]
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				if err := r.putNamed(target, names[i], body); err != nil {
					if bad.Add(1) <= 5 {
						warnf("create %s: %v", names[i], err)
					}
				}
			}
		}()
	}
	wg.Wait()
	return bad.Load()
}

// joinQueues takes per places in each queue over HTTP (kept-alive connections, workers at a
// time, spread over the targets and the source address -src), and counts the answers' states
// and the errors.
func (r *run) joinQueues(names []string, per, workers int) (int64, map[string]int64, map[string]int64) {
	total := len(names) * per
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(float64(total)/100*float64(time.Second))+time.Minute)
	defer cancel()
	var next, ok atomic.Int64
	var mu sync.Mutex
	states, errs := map[string]int64{}, map[string]int64{}
	var wg sync.WaitGroup
	for w := range min(workers, max(total, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hp := hostPort(r.o.Targets[w%len(r.o.Targets)])
			var rc *rawConn
			defer func() {
				if rc != nil {
					rc.close()
				}
			}()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				q := names[i%len(names)]
				if rc == nil {
					var err error
					if rc, err = dialRaw(ctx, srcIP(r.o.Src), hp); err != nil {
						mu.Lock()
						errs[errorKind("join", response{}, err)]++
						mu.Unlock()
						time.Sleep(100 * time.Millisecond)
						continue
					}
				}
				resp, err := rc.do("POST", "/api/queues/"+q+"/join", "", 10*time.Second)
				if err != nil || (resp.status != 201 && resp.status != 200) {
					mu.Lock()
					errs[errorKind("join", resp, err)]++
					mu.Unlock()
					rc.close()
					rc = nil
					continue
				}
				ok.Add(1)
				st, _ := jsonStr(resp.body, "state")
				mu.Lock()
				states[string(st)]++
				mu.Unlock()
				if !resp.keepAlive {
					rc.close()
					rc = nil
				}
			}
		}()
	}
	wg.Wait()
	return ok.Load(), states, errs
}

// srcIP is -src as an address (nil: the kernel's choice).
func srcIP(s string) net.IP {
	if s == "" {
		return nil
	}
	return net.ParseIP(s)
}
