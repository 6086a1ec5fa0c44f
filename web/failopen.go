package web

import (
	"errors"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/queue"
)

// failOpen decides, for the guard, whether an order may pass unchecked because the token
// store (Redis) is unreachable. Only in fail-open mode, which is off by default: "no
// queue beats a dead queue" is a business choice. The order store still enforces stock,
// and failOpenAllow applies a local per-instance rate limit.
func (s *Server) failOpen(c *fiber.Ctx, err error) bool {
	if !s.cfg.FailOpen || !errors.Is(err, queue.ErrUnavailable) {
		return false
	}
	s.log.Warn().Str("request_id", requestID(c)).Msg("fail-open: order let through without a token check (Redis down)")
	return true
}

// localBucket is an in-process token bucket for fail-open mode.
type localBucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// failOpenAllow applies the global order rate as a local limit while Redis is down.
func (s *Server) failOpenAllow() bool {
	rate := s.lim.Get().OrderGlobal
	if rate <= 0 {
		return true
	}
	b := &s.fob
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if b.last.IsZero() {
		b.tokens = rate
	} else {
		b.tokens = min(rate, b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
