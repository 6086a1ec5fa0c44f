package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// runJoinRate is -mode=joins: an open-loop join generator, the same measurement as
// k6/join-rate.js with a much lighter client. Arrivals are scheduled at a constant rate;
// each takes a kept-alive connection from a pool (at most -join-conns in flight) or is
// counted as dropped, like k6's dropped_iterations. Latency is taken from the scheduled
// arrival time, so a late start counts against the server (no coordinated omission).
func runJoinRate(o options) error {
	hard := time.AfterFunc(o.Duration+2*time.Minute, func() {
		warnf("hard stop")
		os.Exit(3)
	})
	defer hard.Stop()
	r := &run{o: o, start: time.Now(), logf: func(f string, a ...any) {
		if !o.Quiet {
			fmt.Fprintf(os.Stderr, f+"\n", a...)
		}
	}}
	if o.AdminToken != "" {
		if err := r.putQueue(map[string]any{"paused": true, "rate_per_second": 0, "closed": false, "places_per_ip": 0}); err != nil {
			return err
		}
	}
	var src net.IP
	if o.Src != "" {
		src = net.ParseIP(o.Src)
	}
	hp := hostPort(o.Targets[0])
	pool := make(chan *rawConn, o.JoinConns)
	sem := make(chan struct{}, o.JoinConns)
	var lat, svc hist
	var created, okN, dropped, sent atomic.Int64
	errs := newClientStats()
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), o.Duration+30*time.Second)
	defer cancel()

	one := func(due time.Time) {
		defer wg.Done()
		defer func() { <-sem }()
		var rc *rawConn
		select {
		case rc = <-pool:
		default:
			var err error
			if rc, err = dialRaw(ctx, src, hp); err != nil {
				errs.err(errorKind("join", response{}, err))
				return
			}
		}
		t0 := time.Now()
		resp, err := rc.do("POST", "/api/queues/"+o.Queue+"/join", "", 10*time.Second)
		now := time.Now()
		if err != nil || (resp.status != 201 && resp.status != 200) {
			errs.err(errorKind("join", resp, err))
			rc.close()
			return
		}
		okN.Add(1)
		if resp.status == 201 {
			created.Add(1)
		}
		lat.add(now.Sub(due))
		svc.add(now.Sub(t0))
		if resp.keepAlive {
			pool <- rc
		} else {
			rc.close()
		}
	}

	before := r.sample()
	start := time.Now()
	end := start.Add(o.Duration)
	interval := time.Duration(float64(time.Second) / o.ConnectRate)
	next := start
	for next.Before(end) {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		// Launch every arrival that is due (the sleep granularity is coarser than the
		// interval at thousands per second).
		for now := time.Now(); !next.After(now) && next.Before(end); next = next.Add(interval) {
			sent.Add(1)
			select {
			case sem <- struct{}{}:
				wg.Add(1)
				go one(next)
			default:
				dropped.Add(1)
			}
		}
	}
	wg.Wait()
	after := r.sample()
	close(pool)
	for rc := range pool {
		rc.close()
	}
	secs := o.Duration.Seconds()
	w := windowOf("joins", "joins", 0, before, after)
	l, s := lat.snapshot().summary(), svc.snapshot().summary()
	fmt.Printf("== swarm joins: open loop %.0f/s for %v against %s (at most %d in flight), queue %s\n", o.ConnectRate, o.Duration, o.Targets[0], o.JoinConns, o.Queue)
	fmt.Printf("arrivals %d, ok %d (%.0f/s, %d new places), dropped %d, errors %v\n", sent.Load(), okN.Load(), float64(okN.Load())/secs, created.Load(), dropped.Load(), errs.errs)
	fmt.Printf("latency from scheduled arrival: p50 %.2f ms, p90 %.2f, p99 %.2f, max %.2f\n", l.P50MS, l.P90MS, l.P99MS, l.MaxMS)
	fmt.Printf("round trip (send → answer):     p50 %.2f ms, p90 %.2f, p99 %.2f, max %.2f\n", s.P50MS, s.P90MS, s.P99MS, s.MaxMS)
	fmt.Printf("CPU: server %.2f cores, Redis %.2f, this client %.2f, whole machine %.2f cores busy (the rest is anything else on the box)\n", w.CPUCores, w.RedisCores, w.SwarmCores, w.MachineCores)
	if ok := float64(okN.Load()); ok > 0 && w.HasRedis {
		fmt.Printf("Redis: %.0f cmds/s = %.1f commands per join (%.2f script runs per join); top: %v\n", w.RedisCallsPerSec, w.RedisCallsPerSec*secs/ok, w.RedisScriptsPerSec*secs/ok, w.TopCallsPerSec)
	}
	if o.Out != "" {
		rep := map[string]any{"mode": "joins", "rate": o.ConnectRate, "seconds": secs, "arrivals": sent.Load(), "ok": okN.Load(),
			"ok_per_s": float64(okN.Load()) / secs, "created": created.Load(), "dropped": dropped.Load(), "errors": errs.errs,
			"latency": l, "round_trip": s, "window": w, "label": o.Label}
		return writeJSON(o.Out, rep)
	}
	return nil
}
