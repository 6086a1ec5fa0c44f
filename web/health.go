package web

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/topology"
)

// HealthStore is where the collector writes each second's window (implemented by
// *topology.Topology).
type HealthStore interface {
	ReportHealth(ctx context.Context, name, instance string, w topology.HealthWindow) error
}

// Health measures the handlers that Guard protects, per queue (the queue that admitted the
// caller): each guarded request's handler latency and whether it failed (a 5xx answer — the
// database pool busy, a timeout, a handler error). The guard's own refusals are not
// counted: they say nothing about the backend. Counting is a few atomic adds; once per
// second Run writes the second's window of each queue that had guarded requests to the
// store, where the auto rate controller (autorate.Controller) merges every instance's windows.
// A queue without guarded requests costs nothing.
type Health struct {
	store    HealthStore
	instance string
	log      zerolog.Logger

	mu     sync.RWMutex
	queues map[string]*queueHealth
}

// queueHealth holds the running totals of one queue; Run sends the difference since its
// last look.
type queueHealth struct {
	failures atomic.Int64
	buckets  [topology.HealthBuckets]atomic.Int64

	// Run's own.
	sentFailures int64
	sent         [topology.HealthBuckets]int64
	lastActive   time.Time
}

// healthForget is how long a queue without guarded requests keeps its counters.
const healthForget = 5 * time.Minute

// NewHealth returns a collector that writes to store as instance.
func NewHealth(store HealthStore, instance string, log zerolog.Logger) *Health {
	return &Health{store: store, instance: instance, log: log, queues: map[string]*queueHealth{}}
}

// Observe counts one guarded request of queue name that took d.
func (h *Health) Observe(name string, d time.Duration, failed bool) {
	if h == nil || name == "" {
		return
	}
	h.mu.RLock()
	qh := h.queues[name]
	if qh != nil {
		qh.add(d, failed)
		h.mu.RUnlock()
		return
	}
	h.mu.RUnlock()
	h.mu.Lock()
	if qh = h.queues[name]; qh == nil {
		qh = &queueHealth{lastActive: time.Now()}
		h.queues[name] = qh
	}
	qh.add(d, failed)
	h.mu.Unlock()
}

func (qh *queueHealth) add(d time.Duration, failed bool) {
	qh.buckets[topology.HealthBucket(d)].Add(1)
	if failed {
		qh.failures.Add(1)
	}
}

// Run writes each second's windows until ctx ends.
func (h *Health) Run(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			h.Flush(ctx, now)
		}
	}
}

// Flush writes the window ending at now of every queue with guarded requests since the
// last flush (Run calls it every second; tests call it directly).
func (h *Health) Flush(ctx context.Context, now time.Time) {
	type out struct {
		name string
		w    topology.HealthWindow
	}
	var outs []out
	h.mu.Lock()
	for name, qh := range h.queues {
		w := topology.HealthWindow{End: now}
		for i := range qh.buckets {
			n := qh.buckets[i].Load()
			w.Buckets[i] = n - qh.sent[i]
			w.Count += w.Buckets[i]
			qh.sent[i] = n
		}
		f := qh.failures.Load()
		w.Failures = min(f-qh.sentFailures, w.Count)
		qh.sentFailures += w.Failures
		switch {
		case w.Count > 0:
			qh.lastActive = now
			outs = append(outs, out{name, w})
		case now.Sub(qh.lastActive) > healthForget:
			delete(h.queues, name)
		}
	}
	h.mu.Unlock()
	for _, o := range outs {
		if err := h.store.ReportHealth(ctx, o.name, h.instance, o.w); err != nil && ctx.Err() == nil {
			h.log.Warn().Err(err).Str("queue", o.name).Msg("health: report")
		}
	}
}
