package queue

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	enter         *prometheus.CounterVec
	issued        *prometheus.CounterVec
	waiting       *prometheus.GaugeVec
	active        *prometheus.GaugeVec
	tickLag       *prometheus.HistogramVec
	tickDur       *prometheus.HistogramVec
	leaderChanges *prometheus.CounterVec
	leader        *prometheus.GaugeVec
	expired       *prometheus.CounterVec
	abandoned     *prometheus.CounterVec
	draws         *prometheus.CounterVec
	unconfirmed   *prometheus.CounterVec
	withheld      *prometheus.CounterVec
	placesUnconf  *prometheus.CounterVec
	held          *prometheus.GaugeVec
	heldSeconds   *prometheus.CounterVec
	heldTicks     *prometheus.CounterVec
	rests         *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		enter: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_enter_total", Help: "New places taken in a queue.",
		}, []string{"queue"}),
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_token_issued_total", Help: "Admission tokens issued by this instance's loops.",
		}, []string{"queue"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "queue_waiting_size", Help: "Users waiting, as of the last tick run here.",
		}, []string{"queue"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "queue_active_tokens", Help: "Admitted users whose token is live, as of the last tick run here.",
		}, []string{"queue"}),
		tickLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "queue_admission_tick_lag_seconds",
			Help:    "How late an admission tick started compared with its schedule.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"queue"}),
		tickDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "queue_admission_tick_duration_seconds",
			Help:    "How long one admission tick took (lease renewal and admit script).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"queue"}),
		leaderChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_leader_changes_total", Help: "Times this instance took the admission lease of a queue.",
		}, []string{"queue"}),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "queue_leader", Help: "1 while this instance runs the admission loop of the queue.",
		}, []string{"queue"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_token_expired_total", Help: "Tokens that lapsed unused (swept by this instance's loops).",
		}, []string{"queue"}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_abandoned_total", Help: "Places removed after the abandonment grace.",
		}, []string{"queue"}),
		draws: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_draws_total", Help: "Pre-queue draws completed by this instance's loops.",
		}, []string{"queue"}),
		unconfirmed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_replication_unconfirmed_total",
			Help: "Admissions (ticks, token reads) handed out before a replica acknowledged them: the master had no replica attached.",
		}, []string{"queue"}),
		withheld: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_replication_withheld_total",
			Help: "Token reads (join, status, stream connect) answered 'not yet' because an attached replica had not acknowledged the admission.",
		}, []string{"queue"}),
		placesUnconf: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_replication_unconfirmed_places_total",
			Help: "New places answered before the wanted replicas acknowledged them (a lost place is found again by the page's join retry).",
		}, []string{"queue"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "queue_admission_held",
			Help: "1 while this instance's admission loop holds a tick of the queue until a replica acknowledges it (no further tick runs meanwhile).",
		}, []string{"queue"}),
		heldSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_admission_held_seconds_total", Help: "Time admission of the queue was held waiting for a replica's acknowledgement.",
		}, []string{"queue"}),
		heldTicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_admission_held_ticks_total", Help: "Ticks whose message was held until a replica acknowledged them.",
		}, []string{"queue"}),
		rests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_rests_total", Help: "Times a queue's admission loop went to rest here (idle: nobody waiting, no live token).",
		}, []string{"queue"}),
	}
	if reg != nil {
		reg.MustRegister(m.enter, m.issued, m.waiting, m.active, m.tickLag, m.tickDur, m.leaderChanges, m.leader, m.expired, m.abandoned, m.draws, m.unconfirmed, m.withheld, m.placesUnconf, m.held, m.heldSeconds, m.heldTicks, m.rests)
	}
	return m
}
