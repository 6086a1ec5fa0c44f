package web

import (
	"context"
	"errors"
	"math"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/queue"
)

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
	ctx, cancel := context.WithTimeout(c.UserContext(), s.d.Line.OpTimeout()) // the same budget as every request-path Redis call
	defer cancel()
	res, err := s.d.Limiter.AllowChain(ctx, chain)
	if err != nil {
		return err
	}
	if res.Allowed {
		return nil
	}
	s.m.rejected.WithLabelValues(res.Scope, path).Inc()
	s.lim.CountRejected(c.UserContext(), res.Scope)
	retry := int(math.Ceil(res.RetryAfter.Seconds()))
	return &Error{Status: 429, Code: "rate_limited", Scope: res.Scope, RetryAfter: max(1, retry),
		Message: "Too many requests; retry after " + strconv.Itoa(max(1, retry)) + " s."}
}

func (s *Server) joinLimit(c *fiber.Ctx) error {
	l := s.lim.Get()
	var chain []queue.Limit
	if l.JoinPerIP > 0 {
		chain = append(chain, queue.Limit{Scope: "ip", Key: "join:ip:" + clientKey(c), Rate: l.JoinPerIP, Burst: burst(l.JoinPerIP, l.JoinPerIPBurst)})
	}
	if l.JoinGlobal > 0 {
		chain = append(chain, queue.Limit{Scope: "global", Key: "join:global", Rate: l.JoinGlobal, Burst: burst(l.JoinGlobal, l.JoinGlobalBurst)})
	}
	return s.check(c, "/api/queues/join", chain)
}

// orderLimit limits orders per ticket (per address when the request has no valid
// ticket), then globally, before the token guard runs.
func (s *Server) orderLimit(c *fiber.Ctx) error {
	l := s.lim.Get()
	var chain []queue.Limit
	if l.OrderPerTicket > 0 {
		key, scope := "order:ip:"+clientKey(c), "ip"
		if t, ok := anyTicket(c, s.d.Signer); ok {
			key, scope = "order:ticket:"+t.ID, "user"
		}
		chain = append(chain, queue.Limit{Scope: scope, Key: key, Rate: l.OrderPerTicket, Burst: burst(l.OrderPerTicket, l.OrderPerTicketBurst)})
	}
	if l.OrderGlobal > 0 {
		chain = append(chain, queue.Limit{Scope: "global", Key: "order:global", Rate: l.OrderGlobal, Burst: burst(l.OrderGlobal, l.OrderGlobalBurst)})
	}
	if err := s.check(c, "/api/orders", chain); err != nil {
		if errors.Is(err, queue.ErrUnavailable) && s.cfg.FailOpen {
			return c.Next() // fail-open: the guard and the local limit take over
		}
		return err
	}
	return c.Next()
}

// statusLimit limits status calls per ticket: a client that cannot stream polls at most
// this often, and one script cannot keep many places alive by hammering status.
func (s *Server) statusLimit(c *fiber.Ctx, t queue.Ticket) error {
	l := s.lim.Get()
	if l.StatusPerTicket <= 0 {
		return nil
	}
	return s.check(c, "/api/queues/status", []queue.Limit{{Scope: "user", Key: "status:ticket:" + t.ID,
		Rate: l.StatusPerTicket, Burst: burst(l.StatusPerTicket, l.StatusPerTicketBurst)}})
}

func (s *Server) getLimits(c *fiber.Ctx) error { return c.JSON(s.lim.Get()) }

func (s *Server) putLimits(c *fiber.Ctx) error {
	// A partial body: the keys it names change, the others keep their values.
	v := s.lim.Get()
	if err := decodeStrict(c.Body(), &v); err != nil {
		return err
	}
	v, err := s.lim.Put(c.UserContext(), v)
	if err != nil {
		if errors.Is(err, queue.ErrInvalid) {
			return invalidError("invalid_limits", err)
		}
		return err
	}
	return c.JSON(v)
}
