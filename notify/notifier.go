// Package notify sends the e-mail reminders of the waiting room: a buyer who gives an
// address on the waiting page gets one message when the place is near the door and one at
// the turn, each with a single-use, expiring link back to the place (or the token) on any
// device. Addresses live in Redis beside the place (store.go) and are never logged.
//
// One scan per queue runs on the instance that leads the queue's admission (it is a
// queue.TickObserver); each due message is claimed in the scan's one atomic script, so two
// instances never send the same message. Sending is asynchronous: a bounded queue and one
// worker with timeouts and retries, never on the admission loop.
package notify

import (
	"context"
	"errors"
	"net/mail"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/internal/backoff"
	"github.com/waitroom/waitroom/queue"
)

// Sender delivers one message (implemented by *SMTP).
type Sender interface {
	Send(ctx context.Context, to string, msg []byte) error
}

// Config tunes the Notifier. Zero fields take the documented defaults.
type Config struct {
	// BaseURL is the public origin the links start with (https://rooms.example.com).
	BaseURL string
	// Near is the position at which the near-door message goes (default 20).
	Near int
	// ScanEvery is the least time between two scans of one queue (default 1 s).
	ScanEvery time.Duration
	// Timeout bounds one delivery attempt (default 20 s); Retries is how many more attempts
	// a failed delivery gets (default 3), RetryMin and RetryMax the back-off between them
	// (default 2 s doubling up to 30 s).
	Timeout            time.Duration
	Retries            int
	RetryMin, RetryMax time.Duration
	// QueueLen is the most messages waiting for the worker (default 1,000); past it a
	// message is dropped and counted failed (reason queue_full).
	QueueLen int
	// ScanLimit is the most tickets one scan looks at per index (default 200).
	ScanLimit int
	Registry  prometheus.Registerer
	Log       zerolog.Logger
}

func (c Config) withDefaults() Config {
	if c.Near <= 0 {
		c.Near = 20
	}
	if c.ScanEvery <= 0 {
		c.ScanEvery = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 20 * time.Second
	}
	if c.Retries < 0 {
		c.Retries = 0
	} else if c.Retries == 0 {
		c.Retries = 3
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 2 * time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 30 * time.Second
	}
	if c.QueueLen <= 0 {
		c.QueueLen = 1000
	}
	if c.ScanLimit <= 0 {
		c.ScanLimit = 200
	}
	return c
}

// Notifier finds due reminders and sends them.
type Notifier struct {
	store  *Store
	send   Sender
	from   fromer
	cfg    Config
	wakes  chan string
	jobs   chan message
	m      metrics
	mu     sync.Mutex
	lastAt map[string]time.Time // last scan per queue (the scan goroutine's, and ObserveTick's)
}

// fromer is what the message needs of the sender: its From address.
type fromer interface {
	From() *mail.Address
}

// New returns a Notifier that sends through s, reading and claiming in store.
func New(store *Store, s *SMTP, cfg Config) *Notifier {
	return newNotifier(store, s, s, cfg)
}

func newNotifier(store *Store, send Sender, from fromer, cfg Config) *Notifier {
	cfg = cfg.withDefaults()
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Notifier{store: store, send: send, from: from, cfg: cfg, wakes: make(chan string, 256),
		jobs: make(chan message, cfg.QueueLen), m: newMetrics(cfg.Registry), lastAt: map[string]time.Time{}}
}

// ObserveTick is called by the admission loop of each queue this instance leads, after
// every tick: at most once per ScanEvery per queue it asks the scan goroutine to look,
// without waiting (a full wake queue drops the wake; the next tick asks again).
func (n *Notifier) ObserveTick(name string, at time.Time, _ queue.TickResult) {
	n.mu.Lock()
	due := at.Sub(n.lastAt[name]) >= n.cfg.ScanEvery
	if due {
		n.lastAt[name] = at
	}
	n.mu.Unlock()
	if !due {
		return
	}
	select {
	case n.wakes <- name:
	default:
	}
}

// Run scans and sends until ctx ends.
func (n *Notifier) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.deliver(ctx)
	}()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case name := <-n.wakes:
			if err := n.Scan(ctx, name); err != nil && ctx.Err() == nil {
				n.cfg.Log.Warn().Err(err).Str("queue", name).Msg("notify: scan")
			}
		}
	}
}

// Scan claims the reminders due in queue name and queues their messages (Run calls it; tests
// may too).
func (n *Notifier) Scan(ctx context.Context, name string) error {
	a, err := n.store.scan(ctx, name, n.cfg.Near, n.cfg.ScanLimit)
	if err != nil {
		return err
	}
	ids := append([]string{}, a.Near...)
	for _, t := range a.Turn {
		ids = append(ids, t.Ticket)
	}
	regs, err := n.store.registrations(ctx, name, ids)
	if err != nil {
		return err
	}
	now := time.Now()
	var done []string
	for _, id := range a.Near {
		if r, ok := regs[id]; ok {
			n.queueMessage(ctx, name, r, Near, now.Add(n.store.hold))
		}
	}
	for _, t := range a.Turn {
		if r, ok := regs[t.Ticket]; ok && t.Exp > now.UnixMilli() {
			n.queueMessage(ctx, name, r, Turn, time.UnixMilli(t.Exp))
		}
		done = append(done, t.Ticket) // the last message is claimed: the address goes
	}
	return n.store.Forget(ctx, name, append(done, a.Gone...)...)
}

// queueMessage makes the message's link and hands it to the worker without waiting.
func (n *Notifier) queueMessage(ctx context.Context, name string, r registration, kind Kind, until time.Time) {
	code, err := n.store.newLink(ctx, name, r.Ticket, kind, time.Until(until))
	if err != nil {
		n.m.failed.WithLabelValues(string(kind), "redis").Inc()
		n.cfg.Log.Warn().Err(err).Str("queue", name).Str("kind", string(kind)).Msg("notify: link not made; message not sent")
		return
	}
	m := message{kind: kind, queue: name, to: r.Addr, until: until,
		link: n.cfg.BaseURL + "/q/" + url.PathEscape(name) + "/back/" + code}
	select {
	case n.jobs <- m:
		n.m.queued.Set(float64(len(n.jobs)))
	default:
		n.m.failed.WithLabelValues(string(kind), "queue_full").Inc()
		n.cfg.Log.Warn().Str("queue", name).Str("kind", string(kind)).Msg("notify: send queue full; message dropped")
	}
}

// deliver is the one worker: each message gets 1 + Retries attempts, each within Timeout,
// with back-off between them. Its log lines name the queue and kind, never the address.
func (n *Notifier) deliver(ctx context.Context) {
	domain := "waitroom"
	if u, err := url.Parse(n.cfg.BaseURL); err == nil && u.Hostname() != "" {
		domain = u.Hostname()
	}
	for {
		var m message
		select {
		case <-ctx.Done():
			return
		case m = <-n.jobs:
		}
		n.m.queued.Set(float64(len(n.jobs)))
		msg := compose(m, n.from.From(), domain, time.Now())
		b := backoff.Backoff{Min: n.cfg.RetryMin, Max: n.cfg.RetryMax}
		var err error
		for attempt := 0; attempt <= n.cfg.Retries; attempt++ {
			if attempt > 0 && !b.Wait(ctx) {
				break
			}
			actx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
			t0 := time.Now()
			err = n.send.Send(actx, m.to, msg)
			cancel()
			if err == nil || permanent(err) {
				break
			}
			if attempt < n.cfg.Retries {
				// A passing failure says so at once (the last one is the warning below): a
				// message that arrives late shows why.
				n.cfg.Log.Info().Err(redact(err, m.to)).Str("queue", m.queue).Str("kind", string(m.kind)).
					Int("attempt", attempt+1).Dur("took", time.Since(t0)).Msg("notify: delivery attempt failed; trying again")
			}
		}
		switch {
		case err == nil:
			n.m.sent.WithLabelValues(string(m.kind)).Inc()
		default:
			n.m.failed.WithLabelValues(string(m.kind), "smtp").Inc()
			n.cfg.Log.Warn().Err(redact(err, m.to)).Str("queue", m.queue).Str("kind", string(m.kind)).Msg("notify: message not sent")
		}
	}
}

// permanent tells an SMTP refusal that a retry cannot change (5xx) from a passing one.
func permanent(err error) bool {
	var pe *textproto.Error
	return errors.As(err, &pe) && pe.Code >= 500
}

type metrics struct {
	sent   *prometheus.CounterVec
	failed *prometheus.CounterVec
	queued prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "waitroom_notify_sent_total",
			Help: "E-mail reminders delivered to the SMTP server, by kind (near, turn)."}, []string{"kind"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "waitroom_notify_failed_total",
			Help: "E-mail reminders not delivered, by kind and reason (smtp: refused or unreachable after the retries; queue_full; redis)."}, []string{"kind", "reason"}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "waitroom_notify_queue_length",
			Help: "E-mail reminders waiting for the sender."}),
	}
	if reg != nil {
		reg.MustRegister(m.sent, m.failed, m.queued)
	}
	return m
}
