package stream

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	conns         prometheus.Gauge
	connects      prometheus.Counter
	drops         *prometheus.CounterVec
	bytes         prometheus.Counter
	ticks         prometheus.Counter
	gaps          prometheus.Counter
	resyncs       prometheus.Counter
	subErrors     prometheus.Counter
	silences      prometheus.Counter
	admittedSent  prometheus.Counter
	positionsSent prometheus.Counter
	fanout        prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		conns:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "sse_connections", Help: "Open SSE streams on this instance."}),
		connects:      prometheus.NewCounter(prometheus.CounterOpts{Name: "sse_connects_total", Help: "SSE streams opened."}),
		drops:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sse_disconnects_total", Help: "SSE streams closed, by reason."}, []string{"reason"}),
		bytes:         prometheus.NewCounter(prometheus.CounterOpts{Name: "sse_bytes_written_total", Help: "Bytes written to SSE streams."}),
		ticks:         prometheus.NewCounter(prometheus.CounterOpts{Name: "stream_tick_messages_total", Help: "Tick messages received from Redis pub/sub."}),
		gaps:          prometheus.NewCounter(prometheus.CounterOpts{Name: "stream_event_gaps_total", Help: "Gaps in event numbers that forced a resync."}),
		resyncs:       prometheus.NewCounter(prometheus.CounterOpts{Name: "stream_resyncs_total", Help: "Resyncs from the Redis snapshot."}),
		subErrors:     prometheus.NewCounter(prometheus.CounterOpts{Name: "stream_pubsub_errors_total", Help: "Pub/sub receive errors (the connection is re-established)."}),
		silences:      prometheus.NewCounter(prometheus.CounterOpts{Name: "stream_pubsub_silences_total", Help: "Times no tick message arrived for 3 s (resync from Redis, connection probed)."}),
		admittedSent:  prometheus.NewCounter(prometheus.CounterOpts{Name: "sse_admitted_events_total", Help: "admitted events queued to streams."}),
		positionsSent: prometheus.NewCounter(prometheus.CounterOpts{Name: "sse_position_events_total", Help: "position events queued to streams."}),
		fanout: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "stream_fanout_seconds", Help: "Time to compute one queue's position fan-out.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 8)}),
	}
	if reg != nil {
		reg.MustRegister(m.conns, m.connects, m.drops, m.bytes, m.ticks, m.gaps, m.resyncs, m.subErrors, m.silences, m.admittedSent, m.positionsSent, m.fanout)
	}
	return m
}

func sortInstances(s []Instance) { sort.Slice(s, func(i, j int) bool { return s[i].ID < s[j].ID }) }
