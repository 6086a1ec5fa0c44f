package web

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/queue"
)

// Limits are the request-rate limits (per second; 0 turns a limit off). They live in
// Redis so a change through the admin API reaches every instance within a second.
type Limits struct {
	OrderPerTicket      float64 `json:"order_per_ticket_per_second"`
	OrderPerTicketBurst int     `json:"order_per_ticket_burst"`
	OrderGlobal         float64 `json:"order_global_per_second"`
	OrderGlobalBurst    int     `json:"order_global_burst"`
	JoinPerIP           float64 `json:"join_per_ip_per_second"`
	JoinPerIPBurst      int     `json:"join_per_ip_burst"`
	JoinGlobal          float64 `json:"join_global_per_second"`
	JoinGlobalBurst     int     `json:"join_global_burst"`
}

// DefaultLimits are the seeds' numbers: 5/s per user and 100/s overall on orders (seed
// 003); joins are limited per address only, generously, since queueing is the point.
func DefaultLimits() Limits {
	return Limits{OrderPerTicket: 5, OrderPerTicketBurst: 5, OrderGlobal: 100, OrderGlobalBurst: 100,
		JoinPerIP: 50, JoinPerIPBurst: 100}
}

func (l Limits) validate() error {
	for _, r := range []float64{l.OrderPerTicket, l.OrderGlobal, l.JoinPerIP, l.JoinGlobal} {
		if r < 0 || r > 1e6 || math.IsNaN(r) {
			return errorf(422, "invalid_limits", "Rates must be between 0 (off) and 1000000 per second.")
		}
	}
	for _, b := range []int{l.OrderPerTicketBurst, l.OrderGlobalBurst, l.JoinPerIPBurst, l.JoinGlobalBurst} {
		if b < 0 || b > 1e7 {
			return errorf(422, "invalid_limits", "Bursts must be between 0 (= the rate) and 10000000.")
		}
	}
	return nil
}

const limitsKey = "wr:limits"
const rejectedKey = "wr:stats:ratelimit"

// limits caches the live Limits, re-read from Redis at most once a second.
type limits struct {
	rdb redis.UniversalClient
	log zerolog.Logger

	mu     sync.Mutex
	cur    Limits
	loaded time.Time
}

func newLimits(rdb redis.UniversalClient, initial Limits, log zerolog.Logger) *limits {
	return &limits{rdb: rdb, cur: initial, log: log}
}

func (l *limits) get(ctx context.Context) Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.loaded) < time.Second {
		return l.cur
	}
	l.loaded = time.Now()
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	b, err := l.rdb.Get(ctx, limitsKey).Bytes()
	if err == nil {
		var v Limits
		if json.Unmarshal(b, &v) == nil {
			l.cur = v
		}
	}
	return l.cur
}

func (l *limits) put(ctx context.Context, v Limits) error {
	b, _ := json.Marshal(v)
	if err := l.rdb.Set(ctx, limitsKey, b, 0).Err(); err != nil {
		return err
	}
	l.mu.Lock()
	l.cur, l.loaded = v, time.Now()
	l.mu.Unlock()
	return nil
}

func (l *limits) countRejected(ctx context.Context, scope string) {
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_ = l.rdb.HIncrBy(ctx, rejectedKey, scope, 1).Err()
}

func (l *limits) rejectedCounts(ctx context.Context) map[string]int64 {
	out := map[string]int64{"user": 0, "ip": 0, "global": 0}
	m, err := l.rdb.HGetAll(ctx, rejectedKey).Result()
	if err != nil {
		return out
	}
	for k, v := range m {
		n, _ := strconv.ParseInt(v, 10, 64)
		out[k] = n
	}
	return out
}

func burst(rate float64, b int) int {
	if b > 0 {
		return b
	}
	return max(1, int(math.Ceil(rate)))
}

// check runs a chain of limits in order (one Redis call); a request refused by an
// earlier limit does not spend the later ones.
func (s *Server) check(c *fiber.Ctx, path string, chain []queue.Limit) error {
	if len(chain) == 0 || s.d.Limiter == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), time.Second)
	defer cancel()
	res, err := s.d.Limiter.AllowChain(ctx, chain)
	if err != nil {
		return err
	}
	if res.Allowed {
		return nil
	}
	s.m.rejected.WithLabelValues(res.Scope, path).Inc()
	s.lim.countRejected(c.UserContext(), res.Scope)
	retry := int(math.Ceil(res.RetryAfter.Seconds()))
	return &Error{Status: 429, Code: "rate_limited", Scope: res.Scope, RetryAfter: max(1, retry),
		Message: "Too many requests; retry after " + strconv.Itoa(max(1, retry)) + " s."}
}

func (s *Server) joinLimit(c *fiber.Ctx) error {
	l := s.lim.get(c.UserContext())
	var chain []queue.Limit
	if l.JoinPerIP > 0 {
		chain = append(chain, queue.Limit{Scope: "ip", Key: "join:ip:" + c.IP(), Rate: l.JoinPerIP, Burst: burst(l.JoinPerIP, l.JoinPerIPBurst)})
	}
	if l.JoinGlobal > 0 {
		chain = append(chain, queue.Limit{Scope: "global", Key: "join:global", Rate: l.JoinGlobal, Burst: burst(l.JoinGlobal, l.JoinGlobalBurst)})
	}
	return s.check(c, "/api/queues/join", chain)
}

// orderLimit limits orders per ticket (per address when the request has no valid
// ticket), then globally, before the token guard runs.
func (s *Server) orderLimit(c *fiber.Ctx) error {
	l := s.lim.get(c.UserContext())
	var chain []queue.Limit
	if l.OrderPerTicket > 0 {
		key, scope := "order:ip:"+c.IP(), "ip"
		if raw, _ := presented(c); raw != "" {
			if t, err := s.d.Signer.Parse(raw); err == nil {
				key, scope = "order:ticket:"+t.ID, "user"
			}
		}
		chain = append(chain, queue.Limit{Scope: scope, Key: key, Rate: l.OrderPerTicket, Burst: burst(l.OrderPerTicket, l.OrderPerTicketBurst)})
	}
	if l.OrderGlobal > 0 {
		chain = append(chain, queue.Limit{Scope: "global", Key: "order:global", Rate: l.OrderGlobal, Burst: burst(l.OrderGlobal, l.OrderGlobalBurst)})
	}
	if err := s.check(c, "/api/orders", chain); err != nil {
		if isRedisDown(err) && s.cfg.FailOpen {
			return c.Next() // fail-open: the guard and the local limit take over
		}
		return err
	}
	return c.Next()
}

func (s *Server) getLimits(c *fiber.Ctx) error { return c.JSON(s.lim.get(c.UserContext())) }

func (s *Server) putLimits(c *fiber.Ctx) error {
	v := s.lim.get(c.UserContext())
	if err := decodeJSON(c, &v); err != nil {
		return err
	}
	if err := v.validate(); err != nil {
		return err
	}
	if err := s.lim.put(c.UserContext(), v); err != nil {
		return err
	}
	return c.JSON(v)
}
