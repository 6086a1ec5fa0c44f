package stream

import (
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
	tickDelay     prometheus.Histogram
	admitDelivery prometheus.Histogram
	tickHandle    prometheus.Histogram
	priorityWait  prometheus.Histogram
	writeDur      prometheus.Histogram
	sweeps        prometheus.Counter
	swept         prometheus.Counter
}

// Why a stream ends: the reason label of sse_disconnects_total and End.Reason.
const (
	endClientClosed = "client_closed" // the peer closed the socket (found by a heartbeat or a sweep)
	endWriteError   = "write_error"   // a write failed
	endSlowClient   = "slow_client"   // a write stayed blocked past Config.WriteTimeout
	endShutdown     = "shutdown"      // the hub closed (the instance is stopping)
	endNoPlace      = "no_place"      // the ticket's place is gone (left, abandoned, revoked)
	endEnded        = "ended"         // the queue's sale ended: the closed event was the last frame
)

// endReasons are every reason, so each series of sse_disconnects_total exists from the
// start (a rate() over a series that appears at its first event misses that event).
var endReasons = []string{endClientClosed, endWriteError, endSlowClient, endShutdown, endNoPlace, endEnded}

// latencyBuckets resolve the admission path's milliseconds (the target is a p99 of 25 ms
// from issuance to the client) and still place a starved second.
var latencyBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.035, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5}

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
		tickDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "stream_tick_delay_seconds",
			Help:    "From the admission tick in Redis (its TIME) to this instance handling the tick message (pub/sub transit and scheduling; includes clock skew between hosts).",
			Buckets: latencyBuckets}),
		admitDelivery: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sse_admitted_delivery_seconds",
			Help:    "From the admission in Redis (its TIME) to the admitted event written to the client's socket, for streams open when the tick message arrived (not reconnects or the missed-message fallback; includes clock skew between hosts).",
			Buckets: latencyBuckets}),
	}
	m.tickHandle = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "stream_tick_handle_seconds",
		Help:    "From a tick message taken by the hub to its admitted and expired frames queued to their writers (the queue's lock and the tokens' signatures).",
		Buckets: latencyBuckets})
	m.priorityWait = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "stream_priority_wait_seconds",
		Help:    "From a priority frame (admitted, expired, announcements) queued to its writer to the writer taking it (the oldest of those it takes at once).",
		Buckets: latencyBuckets})
	m.writeDur = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sse_write_seconds",
		Help:    "One write of frames to a stream's socket (the system call, or a blocked write up to the write timeout).",
		Buckets: prometheus.ExponentialBuckets(0.00001, 4, 8)})
	m.sweeps = prometheus.NewCounter(prometheus.CounterOpts{Name: "stream_sweeps_total", Help: "Looks at every stream for a gone peer, made because the instance was at its stream budget."})
	m.swept = prometheus.NewCounter(prometheus.CounterOpts{Name: "stream_swept_total", Help: "Streams dropped by those looks (their peer had gone)."})
	for _, r := range endReasons {
		m.drops.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.conns, m.connects, m.drops, m.bytes, m.ticks, m.gaps, m.resyncs, m.subErrors, m.silences, m.admittedSent, m.positionsSent, m.fanout, m.tickDelay, m.admitDelivery, m.tickHandle, m.priorityWait, m.writeDur, m.sweeps, m.swept)
	}
	return m
}
