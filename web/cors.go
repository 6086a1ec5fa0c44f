package web

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/singleflight"

	"github.com/waitroom/waitroom/queue"
)

// Cross-origin use (API.md, "Cross-origin requests"). A queue's allowed_origins may use its buyer API
// from their pages: join, challenge, status, stream, leave, the draw, and the orders and
// products of the shop. Those routes answer an allowed origin with exact CORS headers
// (credentials allowed) and a preflight for the methods and headers they take; every other
// origin gets no CORS header, and every other route (admin API, pages) stays same-origin.

// corsRoute is one route open to allowed origins.
type corsRoute struct {
	queue   string // the queue whose allowed_origins decide; "" = any queue's (shop routes)
	methods string // offered methods, for Access-Control-Allow-Methods
}

func (r corsRoute) offers(m string) bool {
	return slices.Contains(strings.Split(r.methods, ", "), m)
}

// corsRouteOf says whether path is open to allowed origins, and for which queue.
func corsRouteOf(path string) (corsRoute, bool) {
	switch {
	case path == "/api/orders":
		return corsRoute{methods: "POST"}, true
	case path == "/api/products" || strings.HasPrefix(path, "/api/products/"):
		return corsRoute{methods: "GET"}, true
	case !strings.HasPrefix(path, "/api/queues/"):
		return corsRoute{}, false
	}
	name, rest, ok := strings.Cut(strings.TrimPrefix(path, "/api/queues/"), "/")
	if !ok || !queue.ValidName(name) {
		return corsRoute{}, false
	}
	switch rest {
	case "join", "challenge":
		return corsRoute{queue: name, methods: "POST"}, true
	case "status", "draw", "draw/order":
		return corsRoute{queue: name, methods: "GET"}, true
	case "stream":
		return corsRoute{queue: name, methods: "GET, HEAD"}, true
	case "ticket":
		return corsRoute{queue: name, methods: "DELETE"}, true
	}
	return corsRoute{}, false
}

// corsRequestHeaders are the request headers a cross-origin page may send (preflight).
var corsRequestHeaders = []string{"authorization", "content-type", "x-admission-token", "idempotency-key", "last-event-id", "accept", "accept-language"}

// corsExposed are the response headers a cross-origin page may read.
const corsExposed = "Retry-After, X-Request-ID, X-RateLimit-Scope"

// corsMaxAge is how long a browser may cache a preflight.
const corsMaxAge = "600"

// localCORS marks a request from an allowed origin (the same-origin check lets it through).
const localCORS = "wr_cors"

func (s *Server) cors(c *fiber.Ctx) error {
	origin := c.Get(fiber.HeaderOrigin)
	route, ok := corsRouteOf(c.Path())
	if !ok || origin == "" {
		return c.Next()
	}
	c.Vary(fiber.HeaderOrigin)
	if s.isOwnOrigin(c, origin) {
		return c.Next()
	}
	allowed := s.originAllowed(c.UserContext(), route.queue, origin)
	if c.Method() == fiber.MethodOptions {
		if !allowed || !route.offers(c.Get(fiber.HeaderAccessControlRequestMethod)) || !corsHeadersOK(c.Get(fiber.HeaderAccessControlRequestHeaders)) {
			return errorf(403, "cors_refused", "Cross-origin use of this resource is not allowed for this origin, method or header.")
		}
		c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
		c.Set(fiber.HeaderAccessControlAllowCredentials, "true")
		c.Set(fiber.HeaderAccessControlAllowMethods, route.methods)
		c.Set(fiber.HeaderAccessControlAllowHeaders, strings.Join(corsRequestHeaders, ", "))
		c.Set(fiber.HeaderAccessControlMaxAge, corsMaxAge)
		return c.SendStatus(fiber.StatusNoContent)
	}
	if allowed {
		c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
		c.Set(fiber.HeaderAccessControlAllowCredentials, "true")
		c.Set(fiber.HeaderAccessControlExposeHeaders, corsExposed)
		c.Locals(localCORS, origin)
	}
	return c.Next()
}

// corsHeadersOK reports whether every header a preflight announces is one we take.
func corsHeadersOK(list string) bool {
	for _, h := range strings.Split(list, ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		if h != "" && !slices.Contains(corsRequestHeaders, h) {
			return false
		}
	}
	return true
}

// isOwnOrigin reports whether origin is this server's own (scheme and host as reached).
func (s *Server) isOwnOrigin(c *fiber.Ctx, origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, c.Get(fiber.HeaderHost)) && strings.EqualFold(u.Scheme, s.scheme(c))
}

// corsOrigin is the allowed origin of a cross-origin request ("" when it is not one).
func corsOrigin(c *fiber.Ctx) string {
	o, _ := c.Locals(localCORS).(string)
	return o
}

// originAllowed reports whether origin is in the allowed_origins of queue name ("" = of
// any queue: the shop's routes).
func (s *Server) originAllowed(ctx context.Context, name, origin string) bool {
	norm, err := queue.NormalizeOrigin(origin)
	if err != nil || norm != origin {
		return false // browsers send the canonical form; anything else is not a browser's
	}
	if name == "" {
		return slices.Contains(s.anyQueueOrigins(ctx), origin)
	}
	return slices.Contains(s.origins.get(ctx, s.d.Settings, name), origin)
}

// anyQueueOrigins is the union of every queue's allowed_origins (the shop's routes), taken
// from the shared snapshot (every queue's settings, refreshed at most once a second and
// reading only the queues that changed), so a cross-origin request costs no Redis command
// however many queues there are. Without a view (the first refresh failed) the last union
// known is used (none at all before the first).
func (s *Server) anyQueueOrigins(ctx context.Context) []string {
	v, err := s.snapshotView(ctx, false, ownNone)
	oc := &s.origins
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if err != nil || v == nil {
		return oc.union
	}
	if oc.unionOf != v {
		var all []string
		for _, e := range v.entries {
			if e.ov == nil {
				continue
			}
			for _, o := range e.ov.AllowedOrigins {
				if !slices.Contains(all, o) {
					all = append(all, o)
				}
			}
		}
		oc.unionOf, oc.union = v, all
	}
	return oc.union
}

// originCache keeps each queue's allowed_origins for originTTL, so a cross-origin request
// costs no Redis read most of the time; a change is seen within originTTL.
type originCache struct {
	mu    sync.Mutex
	m     map[string]originEntry // queue name → origins
	group singleflight.Group
	// The union of every queue's origins (anyQueueOrigins) and the snapshot view it is of.
	unionOf *snapView
	union   []string
}

type originEntry struct {
	origins []string
	at      time.Time
}

const originTTL = 2 * time.Second

// maxOriginEntries bounds the cache (unknown queue names are cached too).
const maxOriginEntries = 10000

func (oc *originCache) get(ctx context.Context, q QueueSettings, name string) []string {
	oc.mu.Lock()
	e, ok := oc.m[name]
	oc.mu.Unlock()
	if ok && time.Since(e.at) < originTTL {
		return e.origins
	}
	// One read per queue at a time, however many requests miss together.
	v, err, _ := oc.group.Do(name, func() (any, error) { return readOrigins(context.WithoutCancel(ctx), q, name) })
	if err != nil {
		return e.origins // Redis unreachable: the last known list (or none)
	}
	origins, _ := v.([]string)
	oc.mu.Lock()
	if oc.m == nil || len(oc.m) >= maxOriginEntries {
		oc.m = map[string]originEntry{}
	}
	oc.m[name] = originEntry{origins: origins, at: time.Now()}
	oc.mu.Unlock()
	return origins
}

// readOrigins reads one queue's allowed_origins (one command).
func readOrigins(ctx context.Context, q QueueSettings, name string) ([]string, error) {
	st, err := q.Settings(ctx, name)
	if errors.Is(err, queue.ErrQueueNotFound) {
		return nil, nil
	}
	return st.AllowedOrigins, err
}
