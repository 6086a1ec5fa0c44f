package main

import (
	"fmt"
	"os"
	"time"
)

// idleReport is the result of -mode idlecost.
type idleReport struct {
	Label       string           `json:"label,omitempty"`
	Date        string           `json:"date"`
	Mode        string           `json:"mode"`
	Queue       string           `json:"queue"`
	Targets     []string         `json:"targets"`
	Scheduled   bool             `json:"scheduled"`
	StartsAt    string           `json:"starts_at,omitempty"`
	N           int              `json:"n"`
	Joined      int64            `json:"joined"`
	JoinStates  map[string]int64 `json:"join_states"`
	JoinErrors  map[string]int64 `json:"join_errors"`
	JoinSeconds float64          `json:"join_seconds"`
	Settle      float64          `json:"settle_seconds"`
	Window      window           `json:"window"`
	TicksPerSec float64          `json:"admission_ticks_per_s"`
	QueueStats  map[string]any   `json:"queue_stats,omitempty"` // the queue's entry in GET /admin/api/stats, after the window
	Summary     string           `json:"summary"`
}

// runIdleCost is -mode idlecost: a queue holding -n places and no streams — plain (rate 0,
// so the places stay waiting) or -scheduled (starting -start-in ahead: the places are its
// pre-queue) — left alone for -settle, then measured for -duration: Redis commands per
// second (INFO commandstats delta, every command including those inside scripts) and per
// admission tick, server CPU. Run for several -n, it shows whether an idle queue's cost
// grows with its size.
func runIdleCost(o options) error {
	hard := time.AfterFunc(time.Duration(float64(o.N)/500*float64(time.Second))+o.Settle+o.Duration+2*time.Minute, func() {
		warnf("hard stop")
		os.Exit(3)
	})
	defer hard.Stop()
	r := &run{o: o, start: time.Now()}
	r.logf = func(f string, a ...any) {
		if !o.Quiet {
			fmt.Fprintf(os.Stderr, "[%6.1fs] "+f+"\n", append([]any{time.Since(r.start).Seconds()}, a...)...)
		}
	}
	rep := idleReport{Label: o.Label, Date: time.Now().UTC().Format(time.RFC3339), Mode: "idlecost", Queue: o.Queue,
		Targets: o.Targets, Scheduled: o.Scheduled, N: o.N, Settle: o.Settle.Seconds()}
	// Admission rate 0, not paused: a plain queue's places stay waiting, and the two kinds
	// differ only in the schedule (a scheduled queue admits nobody before its start anyway).
	body := map[string]any{"paused": false, "rate_per_second": 0, "max_active": 0,
		"token_ttl_seconds": int(o.TTL.Seconds()), "closed": false, "places_per_ip": 0}
	if o.Scheduled {
		rep.StartsAt = time.Now().Add(o.StartIn).UTC().Truncate(time.Second).Format(time.RFC3339)
		body["method"] = "fifo"
		body["starts_at"] = rep.StartsAt
	}
	if err := r.putQueue(body); err != nil {
		return err
	}
	kind := "plain queue (rate 0)"
	if o.Scheduled {
		kind = "scheduled queue (pre-queue)"
	}
	r.logf("idlecost: %s %s, joining %d places with %d connections", kind, o.Queue, o.N, o.JoinWorkers)
	t0 := time.Now()
	rep.Joined, rep.JoinStates, rep.JoinErrors = r.joinMany(o.N, o.JoinWorkers)
	rep.JoinSeconds = round(time.Since(t0).Seconds(), 2)
	r.logf("joined %d/%d in %.1f s: states %v, errors %v", rep.Joined, o.N, rep.JoinSeconds, rep.JoinStates, rep.JoinErrors)
	want := "waiting"
	if o.Scheduled {
		want = "prequeue"
	}
	if rep.JoinStates[want] != rep.Joined {
		warnf("only %d of %d joins answered state %q: %v", rep.JoinStates[want], rep.Joined, want, rep.JoinStates)
	}
	time.Sleep(o.Settle)
	name := fmt.Sprintf("idle %s, %d places, no streams", kind, rep.Joined)
	r.measure(name, "idle", 0, o.Duration)
	rep.Window = r.windows[0]
	rep.TicksPerSec = round(rep.Window.Ticks/rep.Window.Seconds, 2)
	if _, m, err := r.getJSON("/admin/api/stats", true); err == nil {
		rep.QueueStats = findNamed(m, o.Queue)
	}
	w := rep.Window
	rep.Summary = fmt.Sprintf("SUMMARY idlecost %s, %d places: Redis %.1f commands/s (%.2f per tick, %.1f ticks/s; %.1f script runs/s), server CPU %.4f cores, Redis CPU %.4f cores; top %v",
		kind, rep.Joined, w.RedisCallsPerSec, w.RedisCallsPerTick, rep.TicksPerSec, w.RedisScriptsPerSec, w.CPUCores, w.RedisCores, w.TopCallsPerSec)
	fmt.Println(rep.Summary)
	if o.Out == "" {
		return nil
	}
	return writeJSON(o.Out, rep)
}

// joinMany takes n places in the run's queue (joinQueues with one queue: kept-alive
// connections spread over the targets, from -src when set) and counts the answers' states and
// the errors.
func (r *run) joinMany(n, workers int) (int64, map[string]int64, map[string]int64) {
	return r.joinQueues([]string{r.o.Queue}, n, workers)
}

// findNamed returns the first object under v whose "name" (or "queue") is name.
func findNamed(v any, name string) map[string]any {
	switch x := v.(type) {
	case map[string]any:
		if x["name"] == name || x["queue"] == name {
			return x
		}
		for _, c := range x {
			if m := findNamed(c, name); m != nil {
				return m
			}
		}
	case []any:
		for _, c := range x {
			if m := findNamed(c, name); m != nil {
				return m
			}
		}
	}
	return nil
}
