package orders

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// outcomes are the result label values of order_outcomes_total.
var outcomes = []string{"created", "replayed", "sold_out", "not_found", "invalid", "conflict", "token_used", "unavailable", "error"}

type metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector

	outcomes *prometheus.CounterVec
	duration prometheus.Histogram
	retries  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, pool *pgxpool.Pool) (*metrics, error) {
	m := &metrics{
		reg: reg,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "order_outcomes_total",
			Help: "PlaceOrder results by outcome.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "order_duration_seconds",
			Help:    "Time PlaceOrder took, all outcomes, retries included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "order_retries_total",
			Help: "PlaceOrder transaction retries: deadlock/serialization failures, and lookups after a COMMIT with unknown outcome.",
		}, []string{"reason"}),
	}
	for _, o := range outcomes {
		m.outcomes.WithLabelValues(o)
	}
	m.retries.WithLabelValues("deadlock")
	m.retries.WithLabelValues("unknown_outcome")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.outcomes, m.duration, m.retries, poolCollector{pool}} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, fmt.Errorf("orders: register metrics (one Store per registry): %w", err)
		}
		m.collectors = append(m.collectors, c)
	}
	return m, nil
}

func (m *metrics) observe(start time.Time, replayed bool, err error) {
	m.outcomes.WithLabelValues(outcome(replayed, err)).Inc()
	m.duration.Observe(time.Since(start).Seconds())
}

func (m *metrics) retry(err error) {
	reason := "deadlock"
	if errors.Is(err, errUnknownOutcome) {
		reason = "unknown_outcome"
	}
	m.retries.WithLabelValues(reason).Inc()
}

func (m *metrics) unregister() {
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
	m.collectors = nil
}

// poolCollector reports pgxpool.Stat at scrape time.
type poolCollector struct{ pool *pgxpool.Pool }

var (
	poolAcquired = prometheus.NewDesc("orders_pool_acquired_conns", "Connections currently in use.", nil, nil)
	poolIdle     = prometheus.NewDesc("orders_pool_idle_conns", "Idle connections in the pool.", nil, nil)
	poolTotal    = prometheus.NewDesc("orders_pool_total_conns", "Connections in the pool (in use, idle and being opened).", nil, nil)
	poolMax      = prometheus.NewDesc("orders_pool_max_conns", "Maximum pool size.", nil, nil)
	poolAcquire  = prometheus.NewDesc("orders_pool_acquire_total", "Successful acquires from the pool.", nil, nil)
	poolEmpty    = prometheus.NewDesc("orders_pool_empty_acquire_total",
		"Acquires that had to wait for a connection (the pool had none idle).", nil, nil)
	poolCanceled = prometheus.NewDesc("orders_pool_canceled_acquire_total",
		"Acquires given up by their context (AcquireTimeout): answered ErrUnavailable.", nil, nil)
)

func (poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolAcquired, poolIdle, poolTotal, poolMax, poolAcquire, poolEmpty, poolCanceled} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(poolAcquired, prometheus.GaugeValue, float64(st.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(poolIdle, prometheus.GaugeValue, float64(st.IdleConns()))
	ch <- prometheus.MustNewConstMetric(poolTotal, prometheus.GaugeValue, float64(st.TotalConns()))
	ch <- prometheus.MustNewConstMetric(poolMax, prometheus.GaugeValue, float64(st.MaxConns()))
	ch <- prometheus.MustNewConstMetric(poolAcquire, prometheus.CounterValue, float64(st.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolEmpty, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolCanceled, prometheus.CounterValue, float64(st.CanceledAcquireCount()))
}
