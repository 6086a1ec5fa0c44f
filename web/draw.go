package web

import (
	"context"
	"sync"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/singleflight"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/draw"
	"github.com/waitroom/waitroom/stream"
)

// The draw of a scheduled queue is public (API.md, "The draw"): anyone may check that the
// order of the pre-queue was fixed by the seed committed to before the start and the list
// frozen at the start. Both routes need no ticket and no admin token.

// drawJSON is GET /api/queues/{queue}/draw. Before the start only the start and the
// commitment are known; the participants are published once the list is frozen, the seed
// and the algorithm once the draw is done.
type drawJSON struct {
	StartsAt         string `json:"starts_at"`
	Commitment       string `json:"commitment"`
	Seed             string `json:"seed,omitempty"`
	ParticipantsHash string `json:"participants_hash,omitempty"`
	Participants     *int64 `json:"participants,omitempty"`
	Algorithm        string `json:"algorithm,omitempty"`
}

func (s *Server) drawInfo(c *fiber.Ctx) error {
	name, err := queueParam(c)
	if err != nil {
		return err
	}
	d, err := s.d.Line.Draw(c.UserContext(), name)
	if err != nil {
		return err
	}
	out := drawJSON{StartsAt: d.StartsAt.UTC().Format(stream.TimeFormat), Commitment: d.Commitment}
	if d.ParticipantsHash != "" {
		out.ParticipantsHash, out.Participants = d.ParticipantsHash, &d.Participants
	}
	if d.Phase == queue.DrawDone {
		out.Seed, out.Algorithm = d.Seed, draw.Algorithm
	}
	// It changes at the start and at the end of the draw: never cached.
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(out)
}

func (s *Server) drawOrder(c *fiber.Ctx) error {
	name, err := queueParam(c)
	if err != nil {
		return err
	}
	d, err := s.d.Line.Draw(c.UserContext(), name)
	if err != nil {
		return err
	}
	if d.Phase != queue.DrawDone {
		return errorf(404, "no_draw", "The draw has not been done yet: the order is published once it is.")
	}
	body, err := s.drawCache.get(c.UserContext(), s.d.Line, name, d.Commitment)
	if err != nil {
		return err
	}
	// Immutable once done (a new schedule has a new commitment, and a new cache entry).
	c.Set(fiber.HeaderCacheControl, "public, max-age=60")
	c.Set(fiber.HeaderContentType, "text/plain; charset=utf-8")
	return c.SendString(body)
}

// drawOrders caches the published orders. One is up to 6.5 MB for 100,000 participants
// and never changes once the draw is done, so each instance reads it from Redis once
// (one reader at a time per queue) instead of on every request: a crowd checking the draw
// at the start cannot turn into gigabytes of Redis traffic.
type drawOrders struct {
	mu      sync.Mutex
	entries map[string]drawOrderEntry // queue name → its order
	size    int
	flight  singleflight.Group
}

type drawOrderEntry struct {
	commitment string // the draw it belongs to
	body       string
}

// drawOrderCacheBytes bounds the cache; past it the entries are dropped (queues with a
// drawn order are few, and a dropped one is read again).
const drawOrderCacheBytes = 64 << 20

func (o *drawOrders) get(ctx context.Context, q Line, name, commitment string) (string, error) {
	o.mu.Lock()
	e, ok := o.entries[name]
	o.mu.Unlock()
	if ok && e.commitment == commitment {
		return e.body, nil
	}
	v, err, _ := o.flight.Do(name+"\x00"+commitment, func() (any, error) {
		body, err := q.DrawOrder(context.WithoutCancel(ctx), name)
		if err != nil {
			return "", err
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if old, ok := o.entries[name]; ok {
			o.size -= len(old.body)
		}
		if o.entries == nil || o.size+len(body) > drawOrderCacheBytes {
			o.entries, o.size = map[string]drawOrderEntry{}, 0
		}
		o.entries[name] = drawOrderEntry{commitment: commitment, body: body}
		o.size += len(body)
		return body, nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}
