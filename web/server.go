// Package web is the HTTP face of the waiting room and the only package that imports
// Fiber: routes, middleware (request ids, logging, admin auth, the order token guard,
// rate limits), the error mapping and the server-rendered pages.
package web

import (
	"context"
	"html/template"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/branding"
	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/soldout"
	"github.com/waitroom/waitroom/static"
	"github.com/waitroom/waitroom/stream"
)

// OrderStore is what web needs of the order store (implemented by *orders.Store).
type OrderStore interface {
	Ping(ctx context.Context) error
	Products(ctx context.Context) ([]orders.Product, error)
	Product(ctx context.Context, id string) (orders.Product, error)
	PutProduct(ctx context.Context, id string, p orders.ProductPatch) (orders.Product, bool, error)
	PlaceOrder(ctx context.Context, r orders.OrderRequest) (orders.Order, bool, error)
	QueueSoldOut(ctx context.Context, queueName string) (orders.QueueStock, error)
}

// Config tunes the HTTP server. Zero fields take the documented defaults.
type Config struct {
	AdminToken     string        // bearer for /admin/api; empty disables the admin API
	ProxyHeader    string        // e.g. X-Forwarded-For when behind proxies; empty = peer address
	TrustedProxies []string      // proxies whose ProxyHeader is believed (addresses, CIDRs); empty = every peer's rightmost entry
	ReadTimeout    time.Duration // whole request must arrive within (10 s): slowloris guard
	WriteTimeout   time.Duration // per response (15 s); user streams are hijacked, the admin stream moves its deadline per write
	IdleTimeout    time.Duration // keep-alive idle (60 s)
	FailOpen       bool          // let orders through without a token while Redis is down
	// UnboundQueue, when set, sells the products that name no queue through this queue: an
	// upgrade aid for products an older release stored without one (docs/UPGRADING.md,
	// mixed versions), empty by default.
	UnboundQueue string
	ReadyTimeout time.Duration // per-dependency ping in /readyz (1 s)
	// MaxConns is the most client connections open at once (streams included); past it a
	// new connection is closed at accept. 0 = no budget.
	MaxConns int64
	// MaxStreams is the most streams open at once; past it a stream answers 200 with a
	// jittered retry and ends, joins answer 503, /readyz says "full". 0 = no budget.
	MaxStreams int64
	// AdminTokens are the admin tokens besides AdminToken (role operator, actor "admin"):
	// WR_ADMIN_VIEWER_TOKEN and WR_ADMIN_TOKENS, each with its name and role (roles.go).
	AdminTokens []AdminToken
	// JWKSMaxAge is how long a verifier may cache /.well-known/jwks.json (WR_JWKS_MAX_AGE;
	// 0: max-age=0, not kept).
	JWKSMaxAge time.Duration
	// AdminStreamsPerToken and AdminStreamsPerInstance bound the open /admin/api/stream
	// connections of one admin token and of the instance (defaults 4 and 64; past them 429).
	AdminStreamsPerToken    int
	AdminStreamsPerInstance int
	// Messages are the pages' message tables (WR_MESSAGES_DIR, static.LoadMessagesDir);
	// nil: the built-in ones (static.Builtin).
	Messages *static.Catalog
	// Grace is the presence grace (WR_GRACE, 60 s when 0): the no-script page refreshes
	// well within it (nojs.go).
	Grace time.Duration
	// AccessLog writes each request's access-log line at info level (WR_ACCESS_LOG);
	// false: at debug (accesslog.go).
	AccessLog bool
}

// Deps are the parts the server is wired to.
type Deps struct {
	// Line is the waiting line: joins, places, stats, overviews, draws (deps.go).
	Line Line
	// Tokens are the admission tokens that the guards check and the admin API revokes.
	Tokens Tokens
	// Settings are the queues' settings and the list of queues.
	Settings QueueSettings
	// Invites are the queues' invite codes.
	Invites Invites
	// Logos are the queues' logos.
	Logos Logos
	// Wakes tells the shared snapshot which queues changed.
	Wakes Wakes
	// Instances lists the deployment's live instances (the admin stats).
	Instances Instances
	// SoldOut is where the queues' sold-out flags live: web hands it to its soldout.Keeper
	// (soldout.go), which declares what it needs.
	SoldOut soldout.Flags
	Signer  *queue.Signer
	// Keys signs the admission tokens handed out and verifies signed ones.
	Keys *admission.KeyRing
	// BareTokens hands out bare UUID tokens instead of signed ones (WR_TOKEN_FORMAT=uuid,
	// the first step of the upgrade); signed tokens are still verified.
	BareTokens bool
	// AcceptBareTokens lets the guards accept a token's bare UUID (docs/UPGRADING.md, mixed
	// versions).
	AcceptBareTokens bool
	Hub              *stream.Hub
	Orders           OrderStore
	Limiter          *queue.Limiter
	Limits           *queue.LiveLimits // the live rate limits (the owner runs its refresh loop)
	Audit            AuditLog          // the audit log of admin changes (audit.go; nil: not recorded)
	Health           *Health           // measures the order route for the auto rate controller (nil: off)
	Analytics        HistoryStore      // the queues' history and reports (history.go; nil: answered 503)
	// Reminders are the e-mail reminders (notify.go); nil: e-mail is not configured.
	Reminders Reminders
	// Tracer makes the requests' spans (trace.go); nil: requests are not traced.
	Tracer   trace.Tracer
	Gatherer prometheus.Gatherer
	Registry prometheus.Registerer
	Log      zerolog.Logger
}

// Server is the waiting room's HTTP server.
type Server struct {
	app   *fiber.App
	cfg   Config
	d     Deps
	log   zerolog.Logger
	pages *template.Template
	// messages are the pages' message tables (cfg.Messages, or the built-in ones).
	messages *static.Catalog
	m        *metrics
	lim      *queue.LiveLimits
	// origins caches each queue's allowed_origins for the CORS check.
	origins originCache
	// hand renders the token handed out in join and status answers (see HandOut).
	hand func(queueName, ticket, jti string, iatMs, expMs int64) string
	fob  localBucket
	// drawCache holds the published draw orders (draw.go).
	drawCache drawOrders
	// sold writes the queues' sold-out flags (soldout.go).
	sold *soldout.Keeper
	// snap is the shared view of every queue that the index and the admin stats read (snapshot.go).
	snap snapshot

	closing   chan struct{}
	closeOnce sync.Once
	conns     atomic.Int64 // open client connections (the listener's count)
	proxies   proxyTrust   // how the client address is found (client.go)
}

// New builds the server and its routes.
func New(cfg Config, d Deps) (*Server, error) {
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 10 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 15 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 60 * time.Second
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = time.Second
	}
	pages, err := static.Templates()
	if err != nil {
		return nil, err
	}
	proxies, err := newProxyTrust(cfg.ProxyHeader, cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	messages := cfg.Messages
	if messages == nil {
		messages = static.Builtin()
	}
	s := &Server{cfg: cfg, d: d, log: d.Log, pages: pages, messages: messages, m: newMetrics(d.Registry), closing: make(chan struct{}), proxies: proxies,
		sold: soldout.New(d.SoldOut, d.Orders)}
	handKeys := d.Keys
	if d.BareTokens {
		handKeys = nil
	}
	s.hand = HandOut(handKeys, d.Log)
	if d.Registry != nil {
		d.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "http_connections",
			Help: "Open client connections (streams included)."}, func() float64 { return float64(s.conns.Load()) }))
	}
	s.lim = d.Limits
	s.app = fiber.New(fiber.Config{
		AppName:                 "waitroom",
		DisableStartupMessage:   true,
		BodyLimit:               branding.MaxLogoBytes, // the logo upload; every other route: maxBody (bodyLimit)
		ReadBufferSize:          8 << 10,               // request line + headers; beyond → 431
		ReadTimeout:             cfg.ReadTimeout,
		WriteTimeout:            cfg.WriteTimeout,
		IdleTimeout:             cfg.IdleTimeout,
		Immutable:               true, // params and headers outlive the handler in stream set-up
		ErrorHandler:            handleError(d.Log),
		EnableTrustedProxyCheck: len(cfg.TrustedProxies) > 0,
		TrustedProxies:          cfg.TrustedProxies,
		// No ProxyHeader: c.IP() would believe the leftmost forwarded entry. The client
		// address is clientIP (client.go); Fiber's trust list only guards what it reads
		// itself (X-Forwarded-Proto and -Host).
		// Nothing here reads multipart forms: fasthttp need not parse one before the
		// handler refuses it.
		DisablePreParseMultipartForm: true,
		// A stream's connection is hijacked and then written by the hub's workers, so
		// fasthttp must not close it when the hijack handler returns.
	})
	s.app.Server().KeepHijackedConns = true
	s.routes()
	return s, nil
}

// App exposes the Fiber app (tests use app.Test for plain requests).
func (s *Server) App() *fiber.App { return s.app }

// Serve serves on ln (a plain TCP listener) until Shutdown. Every connection goes through
// the framing guard (framing.go), which refuses ambiguous HTTP framing with 400 and closes.
func (s *Server) Serve(ln net.Listener) error {
	s.m.connsBudget.Set(float64(s.cfg.MaxConns))
	s.m.streamsBudget.Set(float64(s.cfg.MaxStreams))
	return s.app.Listener(guardFraming(budgetListener(ln, s.cfg.MaxConns, &s.conns, s.m, s.log)))
}

// Connections is the number of open client connections (for the instance report).
func (s *Server) Connections() int64 { return s.conns.Load() }

// full reports whether the instance holds its stream budget.
func (s *Server) full() bool { return s.cfg.MaxStreams > 0 && s.d.Hub.Count() >= s.cfg.MaxStreams }

// Shutdown stops the server: admin streams end, then Fiber finishes in-flight requests
// within ctx. Close the hub (the user streams) before calling it.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.closing) })
	err := s.app.ShutdownWithContext(ctx)
	s.snap.wait() // the snapshot's wake watcher and refresh end at closing
	return err
}

func (s *Server) routes() {
	app := s.app
	app.Use(s.clientAddress)
	app.Use(noStore) // every answer, errors included, unless its handler allows a cache (nostore.go)
	if s.d.Tracer != nil {
		app.Use(s.traceRequest) // outside requestLog: the span ends with the answer's final status
	}
	app.Use(s.requestLog)
	app.Use(bodyLimit)
	// A panic in one handler must not take down the process and every stream on it.
	app.Use(recover.New())
	app.Use(noSniff)
	app.Use(notModified)
	app.Use(s.cors)
	app.Use(s.sameOrigin)
	app.Use(s.snapshotWrites) // snapshot.go: the admin API reads the writes this instance answered
	app.Get("/healthz", s.healthz)
	app.Get("/readyz", s.readyz)
	app.Get("/metrics", s.metricsHandler())
	app.Get("/.well-known/jwks.json", s.jwksCache, s.jwks)

	api := app.Group("/api")
	api.Post("/queues/:queue/join", s.join)
	api.Post("/queues/:queue/challenge", s.challenge)
	api.Get("/queues/:queue/status", s.status)
	api.Delete("/queues/:queue/ticket", s.leave)
	api.Get("/queues/:queue/stream", s.stream)
	api.Post("/queues/:queue/notify", s.notifyMe)
	api.Get("/queues/:queue/draw", s.drawInfo)
	api.Get("/queues/:queue/draw/order", s.drawOrder)
	api.Get("/products", s.products)
	api.Get("/products/:id", s.product)
	api.Post("/orders", s.orderLimit, Guard(GuardConfig{Tokens: s.d.Tokens, Signer: s.d.Signer, Keys: s.d.Keys, RejectBare: !s.d.AcceptBareTokens, QueuesFor: s.orderQueues, FailOpen: s.failOpen, Health: s.d.Health}), s.placeOrder)
	api.Get("/verify", s.verify)
	api.Post("/redeem", s.redeem)
	api.Get("/openapi.json", s.openAPI)
	api.Use(notFound)

	admin := app.Group("/admin/api", s.adminAuth)
	admin.Get("/stats", s.stats)
	admin.Get("/stream", s.adminStream)
	// Every changing route goes through s.audit (audit.go); adminAuth has refused viewers.
	admin.Put("/queues/:queue", s.audit(auditQueue), s.putQueue)
	admin.Put("/queues/:queue/logo", s.audit(auditLogo), s.putLogo)
	admin.Delete("/queues/:queue/logo", s.audit(auditLogo), s.deleteLogo)
	admin.Get("/queues/:queue/template", s.getPageTemplate)
	admin.Put("/queues/:queue/template", s.audit(auditPage), s.putPageTemplate)
	admin.Delete("/queues/:queue/template", s.audit(auditPage), s.deletePageTemplate)
	admin.Post("/queues/:queue/template/preview", s.previewPageTemplate)
	admin.Put("/products/:id", s.audit(auditProduct), s.putProduct)
	admin.Post("/queues/:queue/invites", s.audit(auditInvites), s.createInvites)
	admin.Get("/queues/:queue/invites", s.listInvites)
	admin.Delete("/queues/:queue/invites/:code", s.audit(auditInviteCode), s.revokeInvite)
	admin.Get("/keys", s.listKeys)
	admin.Post("/keys/rotate", s.audit(auditKeys), s.rotateKeys)
	admin.Delete("/keys/:kid", s.revokeKey)            // audited in revoke.go
	admin.Post("/queues/:queue/revoke", s.revokeToken) // audited in revoke.go
	admin.Get("/limits", s.getLimits)
	admin.Put("/limits", s.audit(auditLimits), s.putLimits)
	admin.Get("/queues/:queue/history", s.history)
	admin.Get("/queues/:queue/report", s.report)
	admin.Get("/audit", s.auditList)
	admin.Get("/whoami", s.whoami)
	admin.Use(notFound)

	s.pageRoutes()
}

func notFound(c *fiber.Ctx) error { return errorf(404, "not_found", "No such resource.") }

// noSniff keeps browsers from reading any answer as another content type than it says.
func noSniff(c *fiber.Ctx) error {
	c.Set("X-Content-Type-Options", "nosniff")
	return c.Next()
}

// sameOrigin refuses state-changing requests sent by another site's page (a form that
// would join or leave on the visitor's behalf and overwrite their ticket cookie): the
// Origin must be this server's scheme and host. Clients that send no Origin (curl,
// servers, the k6 scripts) are not affected.
func (s *Server) sameOrigin(c *fiber.Ctx) error {
	switch c.Method() {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions:
		return c.Next()
	}
	if corsOrigin(c) != "" {
		return c.Next() // an allowed origin on a route open to it (cors)
	}
	if isPageForm(c) {
		return c.Next() // the no-script forms check the same, stricter, and answer with a page (nojs.go)
	}
	if c.Get("Sec-Fetch-Site") == "cross-site" {
		return errorf(403, "cross_origin", "Requests from other sites are not accepted.")
	}
	if o := c.Get(fiber.HeaderOrigin); o != "" { // "null" (sandboxed frames) has no host: refused
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, c.Get(fiber.HeaderHost)) || !strings.EqualFold(u.Scheme, s.scheme(c)) {
			return errorf(403, "cross_origin", "Requests from other sites are not accepted.")
		}
	}
	return c.Next()
}

// scheme is how the client reached us: https on a TLS connection, or when a configured
// trusted proxy (WR_TRUSTED_PROXIES) says X-Forwarded-Proto: https; else http. Without a
// trusted proxy list the header is not believed: any client could send it.
func (s *Server) scheme(c *fiber.Ctx) string {
	if c.Context().IsTLS() {
		return "https"
	}
	if len(s.proxies.nets) > 0 && s.proxies.trusts(peerAddr(c)) && strings.EqualFold(c.Get("X-Forwarded-Proto"), "https") {
		return "https"
	}
	return "http"
}

// maxBody is the request body limit of every route but the logo upload (which may take
// branding.MaxLogoBytes, the server's own limit): 64 KiB.
const maxBody = 64 << 10

// bodyLimit answers 413 body_too_large for a body over maxBody, except on the logo upload.
func bodyLimit(c *fiber.Ctx) error {
	if len(c.Request().Body()) > maxBody && !isLogoUpload(c) {
		return errorf(413, "body_too_large", "The request body is larger than 64 KiB.")
	}
	return c.Next()
}

// isLogoUpload tells whether the request is the logo upload (PUT /admin/api/queues/{q}/logo),
// the one route whose body may reach branding.MaxLogoBytes.
func isLogoUpload(c *fiber.Ctx) bool {
	return c.Method() == fiber.MethodPut && strings.HasPrefix(c.Path(), "/admin/api/queues/") && strings.HasSuffix(c.Path(), "/logo")
}

// errLogoTooLarge is the answer to a logo over branding.MaxLogoBytes (100 KiB), whichever check
// sees it first: Fiber's body limit or putLogo.
func errLogoTooLarge() *Error {
	return errorf(413, "body_too_large", "The logo is larger than 100 KiB (102,400 bytes).")
}
