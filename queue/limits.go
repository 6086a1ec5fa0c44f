package queue

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limits are the deployment's request-rate limits (per second; 0 turns a limit off),
// changeable live through the admin API.
type Limits struct {
	OrderPerTicket       float64 `json:"order_per_ticket_per_second"`
	OrderPerTicketBurst  int     `json:"order_per_ticket_burst"`
	OrderGlobal          float64 `json:"order_global_per_second"`
	OrderGlobalBurst     int     `json:"order_global_burst"`
	JoinPerIP            float64 `json:"join_per_ip_per_second"`
	JoinPerIPBurst       int     `json:"join_per_ip_burst"`
	JoinGlobal           float64 `json:"join_global_per_second"`
	JoinGlobalBurst      int     `json:"join_global_burst"`
	StatusPerTicket      float64 `json:"status_per_ticket_per_second"`
	StatusPerTicketBurst int     `json:"status_per_ticket_burst"`
}

// DefaultLimits are the seeds' numbers: 5/s per user and 100/s overall on orders (seed
// 003); joins are limited per address only, generously, since queueing is the point;
// status (the polling fallback) 2/s per ticket with a burst of 10.
func DefaultLimits() Limits {
	return Limits{OrderPerTicket: 5, OrderPerTicketBurst: 5, OrderGlobal: 100, OrderGlobalBurst: 100,
		JoinPerIP: 50, JoinPerIPBurst: 100, StatusPerTicket: 2, StatusPerTicketBurst: 10}
}

// Ranges of Limits' fields.
const (
	MaxLimitRate  = 1_000_000
	MaxLimitBurst = 10_000_000
)

// Validate refuses a rate outside 0…MaxLimitRate or a burst outside 0…MaxLimitBurst with an
// *InvalidError naming the field.
func (l Limits) Validate() error {
	rates := []struct {
		f string
		v float64
	}{{"order_per_ticket_per_second", l.OrderPerTicket}, {"order_global_per_second", l.OrderGlobal},
		{"join_per_ip_per_second", l.JoinPerIP}, {"join_global_per_second", l.JoinGlobal},
		{"status_per_ticket_per_second", l.StatusPerTicket}}
	for _, r := range rates {
		if r.v < 0 || r.v > MaxLimitRate || math.IsNaN(r.v) {
			return invalid(r.f, "%s must be between 0 (off) and %d per second.", r.f, MaxLimitRate)
		}
	}
	bursts := []struct {
		f string
		v int
	}{{"order_per_ticket_burst", l.OrderPerTicketBurst}, {"order_global_burst", l.OrderGlobalBurst},
		{"join_per_ip_burst", l.JoinPerIPBurst}, {"join_global_burst", l.JoinGlobalBurst},
		{"status_per_ticket_burst", l.StatusPerTicketBurst}}
	for _, b := range bursts {
		if b.v < 0 || b.v > MaxLimitBurst {
			return invalid(b.f, "%s must be between 0 (= the rate) and %d.", b.f, MaxLimitBurst)
		}
	}
	return nil
}

const (
	limitsKey   = "wr:limits"          // STRING: the live Limits as JSON
	rejectedKey = "wr:stats:ratelimit" // HASH: scope -> requests refused by a rate limit
)

// LiveLimits holds the live Limits. Requests read an atomically swapped snapshot and never
// wait for Redis; a read of a snapshot older than the refresh interval asks the owner's Run
// loop to re-read Redis, so a change made on any instance is seen everywhere within about
// a second of traffic, and an idle deployment spends no Redis command on it.
type LiveLimits struct {
	q       *Queue
	initial Limits // the configuration: fields the stored JSON lacks keep these
	every   time.Duration
	cur     atomic.Pointer[Limits]
	loaded  atomic.Int64 // UnixNano of the last refresh attempt
	want    chan struct{}
}

// limitsRefresh is how stale a snapshot may be before a read asks for a new one.
const limitsRefresh = time.Second

// LiveLimits returns the live-limits store, starting from initial (the configuration)
// until Redis says otherwise. Call Run to keep it fresh.
func (q *Queue) LiveLimits(initial Limits) *LiveLimits {
	l := &LiveLimits{q: q, initial: initial, every: limitsRefresh, want: make(chan struct{}, 1)}
	l.cur.Store(&initial)
	return l
}

// Get returns the current limits without touching Redis.
func (l *LiveLimits) Get() Limits {
	if time.Since(time.Unix(0, l.loaded.Load())) >= l.every {
		select {
		case l.want <- struct{}{}:
		default: // a refresh is already asked for
		}
	}
	return *l.cur.Load()
}

// Run refreshes the snapshot once at start and then whenever a read found it stale, until
// ctx ends.
func (l *LiveLimits) Run(ctx context.Context) error {
	l.refresh(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.want:
			if time.Since(time.Unix(0, l.loaded.Load())) >= l.every {
				l.refresh(ctx)
			}
		}
	}
}

// limitsReadTimeout bounds one refresh; a stalled Redis leaves the old snapshot in place.
const limitsReadTimeout = 500 * time.Millisecond

func (l *LiveLimits) refresh(ctx context.Context) {
	l.loaded.Store(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(ctx, limitsReadTimeout)
	defer cancel()
	b, err := l.q.rdb.Get(ctx, limitsKey).Bytes()
	if err != nil {
		return // not set yet (the configured limits hold) or Redis away: keep what we have
	}
	// Decoded over the configuration, so a field that the stored JSON lacks (written by an
	// older release: docs/UPGRADING.md, mixed versions) keeps its configured value, not 0
	// ("off").
	v := l.initial
	if json.Unmarshal(b, &v) == nil {
		l.cur.Store(&v)
	}
}

// Put validates v, stores it for every instance and uses it here at once; it returns what
// it stored (a rate of -0 is stored as 0).
func (l *LiveLimits) Put(ctx context.Context, v Limits) (Limits, error) {
	ctx, cancel := l.q.bound(ctx)
	defer cancel()
	if err := v.Validate(); err != nil {
		return Limits{}, err
	}
	for _, r := range []*float64{&v.OrderPerTicket, &v.OrderGlobal, &v.JoinPerIP, &v.JoinGlobal, &v.StatusPerTicket} {
		*r = positiveZero(*r)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Limits{}, err
	}
	if err := l.q.rdb.Set(ctx, limitsKey, b, 0).Err(); err != nil {
		return Limits{}, fail("put limits", err)
	}
	l.cur.Store(&v)
	l.loaded.Store(time.Now().UnixNano())
	return v, nil
}

// rejectCountTimeout bounds the best-effort count of a refused request.
const rejectCountTimeout = 200 * time.Millisecond

// CountRejected adds one refused request of scope to the deployment-wide count (best
// effort: a refusal is never delayed by more than rejectCountTimeout).
func (l *LiveLimits) CountRejected(ctx context.Context, scope string) {
	ctx, cancel := context.WithTimeout(ctx, rejectCountTimeout)
	defer cancel()
	_ = l.q.rdb.HIncrBy(ctx, rejectedKey, scope, 1).Err()
}

// RejectedCounts returns the deployment-wide counts of refused requests by scope (zeros
// when Redis cannot say).
func (l *LiveLimits) RejectedCounts(ctx context.Context) map[string]int64 {
	ctx, cancel := l.q.bound(ctx)
	defer cancel()
	out := map[string]int64{"user": 0, "ip": 0, "global": 0}
	m, err := l.q.rdb.HGetAll(ctx, rejectedKey).Result()
	if err != nil && err != redis.Nil {
		return out
	}
	for k, v := range m {
		n, _ := strconv.ParseInt(v, 10, 64)
		out[k] = n
	}
	return out
}
