// Command server runs one instance of the waiting room. It only wires: configuration from
// the environment, Redis and PostgreSQL (or local stand-ins for a zero-config run), the
// queue, the admission loops, the stream hub, the order store and the HTTP server, and
// the shutdown order.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/exaring/otelpgx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/analytics"
	"github.com/waitroom/waitroom/autorate"
	"github.com/waitroom/waitroom/branding"
	"github.com/waitroom/waitroom/crowd"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/telemetry"
	"github.com/waitroom/waitroom/notify"
	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/orders/pglocal"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/static"
	"github.com/waitroom/waitroom/stream"
	"github.com/waitroom/waitroom/topology"
	"github.com/waitroom/waitroom/trust"
	"github.com/waitroom/waitroom/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr) // cli.go
	stop()
	os.Exit(code)
}

// run runs the server until ctx ends; strays are the environment's WR_ names that are no
// setting, warned about in the log.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer, strays ...strayVariable) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stdout)
	bi := telemetry.ReadBuild(version)
	cfg.logFields(log.Info()).Str("version", bi.Version).Str("revision", bi.Revision).Str("go_version", bi.GoVersion).Msg("starting")
	for _, v := range strays {
		log.Warn().Str("variable", v.name).Str("did_you_mean", v.closest).Msg(v.String())
	}
	if cfg.SecretGenerated {
		log.Warn().Msg("WR_SECRET is not set: using a random one; tickets die with this process and several instances must share one WR_SECRET")
	}
	// Listen first: a taken port fails before anything else starts.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on WR_ADDR=%s: %w", cfg.Addr, err)
	}
	defer ln.Close()
	a, closeApp, err := build(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeApp()
	return a.serve(ctx, cfg, log, ln)
}

func newLogger(cfg config, stdout io.Writer) zerolog.Logger {
	var out io.Writer = stdout
	if cfg.LogPretty {
		out = zerolog.ConsoleWriter{Out: stdout, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(out).Level(cfg.LogLevel).With().Timestamp().Str("instance", cfg.InstanceID).Logger()
}

// app is one wired instance: what serve starts and stops.
type app struct {
	admitter *queue.Admitter
	autoRate *autorate.Controller // the auto rate controller, fed by the admitter's ticks
	history  *analytics.Recorder  // records the led queues' history, fed by the admitter's ticks
	health   *web.Health          // the guarded handlers' latency and failures, per queue
	hub      *stream.Hub
	keys     *admission.KeyRing
	limits   *queue.LiveLimits
	srv      *web.Server
	notifier *notify.Notifier    // the e-mail reminders' scan and sender (nil: WR_SMTP_URL is empty)
	profiler *telemetry.Profiler // the Go profiler on its loopback address (nil: WR_PPROF_ADDR is empty)
}

// build opens the backends and wires the parts; the returned func closes the backends.
func build(ctx context.Context, cfg config, log zerolog.Logger) (a app, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	setRedisLog(log)
	tracing, err := telemetry.NewTracing(ctx, telemetry.TraceConfig{Endpoint: cfg.OTLPEndpoint, TracesEndpoint: cfg.OTLPTraces,
		Instance: cfg.InstanceID, Build: telemetry.ReadBuild(version), LinkKey: []byte(cfg.Secret)})
	if err != nil {
		return a, closeAll, err
	}
	// First in, so closed last: the spans of everything that closes before are exported.
	closers = append(closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
		defer cancel()
		if err := tracing.Shutdown(sctx); err != nil {
			log.Warn().Err(err).Msg("tracing: spans not exported at shutdown")
		}
	})
	if tracing.Enabled() {
		log.Info().Msg("tracing on: spans exported over OTLP/HTTP")
	}
	if cfg.PprofAddr != "" {
		if a.profiler, err = telemetry.NewProfiler(cfg.PprofAddr); err != nil {
			return a, closeAll, fmt.Errorf("listen on WR_PPROF_ADDR=%s: %w", cfg.PprofAddr, err)
		}
		closers = append(closers, a.profiler.Close)
	}
	messages, err := loadMessages(cfg.MessagesDir, log)
	if err != nil {
		return a, closeAll, err
	}
	rdb, admitRDB, closeRedis, err := openRedis(cfg, log, tracing)
	if err != nil {
		return a, closeAll, err
	}
	closers = append(closers, closeRedis)
	dbURL, pgDataDir, stopPG, err := openPostgres(ctx, cfg, log)
	if err != nil {
		return a, closeAll, err
	}
	closers = append(closers, stopPG)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	telemetry.RegisterBuildInfo(reg, telemetry.ReadBuild(version))
	acks := cfg.ReplicaAcks
	if acks < 0 {
		acks = 0
		switch c := rdb.(type) {
		case *redis.ClusterClient:
			// 1 when the masters have replicas; a cluster without any would make every WAIT
			// run into its timeout.
			acks = clusterReplicaAcks(ctx, c, log)
		case *redis.Client:
			if strings.Contains(cfg.RedisURL, "master_name=") {
				acks = 1 // Sentinel: the failover client is a *redis.Client
			}
		}
	}
	qcfg := queue.Config{Grace: cfg.Grace, OpTimeout: cfg.RedisTimeout, PubSub: cfg.PubSub,
		ReplicaAcks: acks, AckTimeout: cfg.AckTimeout, PrequeueShards: cfg.PrequeueShards}
	if tracing.Enabled() {
		qcfg.Claimed = tracing.LinkTick // an order's span links to the tick that admitted its token
		qcfg.NewNode = func(c *redis.Client) { _ = traceRedis(c, tracing) }
	}
	q := queue.New(rdb, qcfg, reg)
	// The nouns beside the queue share its client and per-call deadline.
	rst := rstore.New(rdb, q.OpTimeout())
	// Invites and signing keys.
	tr := trust.New(rst)
	// The instance registry, the wakes and the health windows.
	topo := topology.New(rst)
	// One bound for connecting and for both packages' migrations.
	octx, cancelOpen := context.WithTimeout(ctx, pgOpenTimeout)
	defer cancelOpen()
	ocfg := orders.Config{URL: dbURL, MaxConns: int32(cfg.PGMaxConns), AcquireTimeout: cfg.PGAcquire}
	if tracing.Enabled() {
		// Statements with their $n placeholders, never their parameters (otelpgx's default).
		ocfg.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(tracing.Children()), otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()))
	}
	store, err := orders.Open(octx, ocfg, reg)
	if err != nil {
		return a, closeAll, fmt.Errorf("open PostgreSQL: %w", err)
	}
	closers = append(closers, store.Close)
	// The history has a small pool of its own: a long report never takes an order's connection.
	histPool, err := analytics.OpenPool(ctx, dbURL, 4)
	if err != nil {
		return a, closeAll, fmt.Errorf("open PostgreSQL for the history: %w", err)
	}
	closers = append(closers, histPool.Close)
	if _, err = analytics.Migrate(octx, histPool); err != nil {
		return a, closeAll, fmt.Errorf("migrate PostgreSQL for the history and audit log: %w", err)
	}
	cancelOpen()
	history := analytics.New(histPool, q, topo, analytics.Config{Log: log})
	a.history = analytics.NewRecorder(history)
	if cfg.Demo {
		stopCrowd, err := seedDemo(ctx, cfg, q, store, log)
		if err != nil {
			return a, closeAll, fmt.Errorf("demo data: %w", err)
		}
		closers = append(closers, stopCrowd) // stopped before the backends close
	}
	auditLog, closeAudit, err := openAudit(ctx, dbURL, log)
	if err != nil {
		return a, closeAll, err
	}
	closers = append(closers, closeAudit)
	if cfg.AdminToken == "" {
		if cfg.AdminToken, err = generatedAdminToken(cfg, pgDataDir, os.Stderr, log); err != nil {
			return a, closeAll, err
		}
	}

	// The key ring always runs, so every instance verifies signed tokens whatever it hands
	// out (WR_TOKEN_FORMAT only chooses that: the two-step upgrade mixes both).
	keys, err := openKeys(ctx, cfg, tr, log)
	if err != nil {
		return a, closeAll, err
	}
	a.keys = keys
	handOutKeys := keys
	if cfg.TokenFormat == "uuid" {
		handOutKeys = nil
	}
	maxConns, maxStreams := budgets(cfg, log)
	var srv *web.Server // set below, before anything runs
	a.hub = stream.NewHub(q, topo, stream.Config{
		MaxStreams: maxStreams, MaxConns: maxConns, Connections: func() int64 { return srv.Connections() },
		Instance: cfg.InstanceID, UpdateInterval: cfg.UpdateInterval, Heartbeat: cfg.Heartbeat,
		UpdateFront: int64(cfg.UpdateFront), BackEvery: int64(cfg.BackEvery),
		WriteTimeout: cfg.StreamWrite, MaxPerIP: cfg.StreamsPerIP, PresenceEvery: cfg.Grace / 3, Log: log,
		HandOut: web.HandOut(handOutKeys, log),
	}, reg)
	a.autoRate = autorate.New(rst, autorate.Config{Log: log})
	a.health = web.NewHealth(topo, cfg.InstanceID, log)
	observers := []queue.TickObserver{a.autoRate, a.history}
	var reminders web.Reminders // nil: no e-mail
	if cfg.SMTPURL != "" {
		smtpSender, err := notify.ParseSMTP(cfg.SMTPURL) // checked by loadConfig
		if err != nil {
			return a, closeAll, fmt.Errorf("WR_SMTP_URL: %v", err)
		}
		mailStore := notify.NewStore(rdb, notify.Hold, cfg.RedisTimeout)
		a.notifier = notify.New(mailStore, smtpSender, notify.Config{BaseURL: cfg.PublicURL, Near: cfg.NotifyNear, Registry: reg, Log: log})
		observers = append(observers, a.notifier)
		reminders = mailStore
	}
	if tracing.Enabled() {
		observers = append(observers, tracing.TickObserver())
	}
	a.admitter = queue.NewAdmitter(q.WithClient(admitRDB), queue.AdmitConfig{
		Owner: cfg.InstanceID, Tick: cfg.Tick, Jitter: cfg.TickJitter, LeaseTTL: cfg.LeaseTTL, DrawBatch: cfg.DrawBatch, Log: log,
		Observers: observers,
	})
	lim := queue.DefaultLimits()
	lim.OrderPerTicket, lim.OrderGlobal, lim.JoinPerIP, lim.StatusPerTicket = cfg.OrderPerTicket, cfg.OrderGlobal, cfg.JoinPerIP, cfg.StatusPerTicket
	a.limits = q.LiveLimits(lim)
	var tracer trace.Tracer // nil: requests are not traced
	if tracing.Enabled() {
		tracer = tracing.Tracer()
	}
	srv, err = web.New(web.Config{
		MaxConns: maxConns, MaxStreams: maxStreams,
		AdminStreamsPerToken: cfg.AdminStreamsTok, AdminStreamsPerInstance: cfg.AdminStreamsInst,
		AdminToken: cfg.AdminToken, AdminTokens: cfg.webAdminTokens(), ProxyHeader: cfg.ProxyHeader, TrustedProxies: cfg.TrustedProxies, FailOpen: cfg.FailOpen,
		UnboundQueue: cfg.UnboundQueue, Messages: messages,
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, JWKSMaxAge: cfg.JWKSMaxAge,
		AccessLog: cfg.AccessLog, Grace: cfg.Grace,
	}, web.Deps{
		Line:      q,
		Tokens:    q,
		Settings:  q,
		Invites:   tr,
		Logos:     branding.New(rst),
		Wakes:     topo,
		Instances: topo,
		SoldOut:   q,

		Signer: queue.NewSigner([]byte(cfg.Secret)), Keys: keys, BareTokens: cfg.TokenFormat == "uuid",
		AcceptBareTokens: cfg.AcceptBareTokens, Hub: a.hub, Orders: store,
		Limiter: queue.NewLimiter(rdb, "wr:"), Limits: a.limits, Gatherer: reg, Registry: reg, Log: log, Audit: auditLog,
		Health: a.health, Analytics: history, Tracer: tracer, Reminders: reminders,
	})
	a.srv = srv
	if err == nil {
		// Sold-out flags follow the products' stock; stock changed while no instance ran
		// (or by hand in PostgreSQL) is picked up here.
		sctx, cancel := context.WithTimeout(ctx, soldOutSyncTimeout)
		if serr := srv.SyncSoldOut(sctx); serr != nil {
			log.Warn().Err(serr).Msg("sold out: could not check every queue at start")
		}
		cancel()
	}
	return a, closeAll, err
}

// openAudit starts the audit log of admin changes on a small pool of its own (table
// audit_log, migrated by analytics.Migrate). Its closer, run after the HTTP server has
// stopped, writes the entries still waiting (auditCloseTimeout) and closes the pool.
func openAudit(ctx context.Context, dbURL string, log zerolog.Logger) (*analytics.AuditLog, func(), error) {
	pool, err := analytics.OpenPool(ctx, dbURL, 2)
	if err != nil {
		return nil, nil, fmt.Errorf("open PostgreSQL for the audit log: %w", err)
	}
	audit := analytics.NewAuditLog(pool, log)
	return audit, func() {
		cctx, cancel := context.WithTimeout(context.Background(), auditCloseTimeout)
		audit.Close(cctx)
		cancel()
		pool.Close()
	}, nil
}

// traceFlushTimeout bounds exporting the spans still buffered at shutdown.
const traceFlushTimeout = 5 * time.Second

// auditCloseTimeout bounds writing the audit entries still waiting at shutdown.
const auditCloseTimeout = 5 * time.Second

// soldOutSyncTimeout bounds the sold-out check of every queue at start.
const soldOutSyncTimeout = 10 * time.Second

// openKeys loads the token-signing keys from Redis (making the first one on a new
// deployment). The secret that seals them is WR_SECRET.
func openKeys(ctx context.Context, cfg config, ks *trust.Store, log zerolog.Logger) (*admission.KeyRing, error) {
	keys, err := admission.NewKeyRing(ks, admission.Config{Secret: []byte(cfg.Secret), Issuer: cfg.Issuer,
		PublishDelay: cfg.KeyPublishDelay, Refresh: cfg.KeyRefresh, Log: log})
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, keysLoadTimeout)
	defer cancel()
	if err := keys.Load(lctx); err != nil {
		return nil, fmt.Errorf("load signing keys: %w", err)
	}
	return keys, nil
}

// keysLoadTimeout bounds reading (or making) the signing keys at start.
const keysLoadTimeout = 10 * time.Second

// pgOpenTimeout bounds connecting to PostgreSQL and migrating at start.
const pgOpenTimeout = 30 * time.Second

// serve runs the instance until ctx ends or the listener fails, then shuts down in order:
// stop admitting (leases released so another instance leads at once) → close the hub
// (ends every stream with a jittered retry) → let Fiber finish in-flight requests. The
// backends are closed by build's closer afterwards.
func (a app) serve(ctx context.Context, cfg config, log zerolog.Logger, ln net.Listener) error {
	admitCtx, stopAdmitting := context.WithCancel(context.WithoutCancel(ctx))
	bgCtx, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	admitDone, bgDone, serveDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(admitDone)
		var g errgroup.Group
		g.Go(func() error { return a.admitter.Run(admitCtx) })
		g.Go(func() error { return a.autoRate.Run(admitCtx) })
		_ = g.Wait()
	}()
	go func() {
		defer close(bgDone)
		var g errgroup.Group
		g.Go(func() error { return a.hub.Run(bgCtx) })
		g.Go(func() error { return a.limits.Run(bgCtx) })
		g.Go(func() error { return a.keys.Run(bgCtx) })
		g.Go(func() error { return a.health.Run(bgCtx) })
		g.Go(func() error { return a.history.Run(bgCtx) })
		if a.notifier != nil {
			g.Go(func() error { return a.notifier.Run(bgCtx) })
		}
		_ = g.Wait()
	}()
	go func() { serveDone <- a.srv.Serve(ln) }()
	profDone := make(chan struct{})
	if a.profiler != nil {
		go func() {
			defer close(profDone)
			if err := a.profiler.Serve(); err != nil {
				log.Error().Err(err).Msg("pprof server stopped")
			}
		}()
		log.Info().Str("addr", a.profiler.Addr().String()).Msg("pprof listening")
	} else {
		close(profDone)
	}
	log.Info().Str("addr", ln.Addr().String()).Msg("listening")

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down")
	case serveErr = <-serveDone:
		log.Error().Err(serveErr).Msg("server stopped")
	}
	deadline, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	stopAdmitting()
	waitOr(deadline, admitDone)
	_ = a.hub.Close(deadline)
	stopBackground()
	waitOr(deadline, bgDone)
	if err := a.srv.Shutdown(deadline); err != nil {
		log.Warn().Err(err).Msg("http shutdown")
	}
	if a.profiler != nil {
		_ = a.profiler.Shutdown(deadline)
	}
	<-profDone
	log.Info().Msg("stopped")
	return serveErr
}

func waitOr(ctx context.Context, ch <-chan struct{}) {
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// admitPoolSize is the admission loops' own Redis pool: request traffic exhausting the main
// pool must not slow admission down (a shared pool exhausted by pollers stalls the ticks;
// measured here with 5,000 pollers).
const admitPoolSize = 4

// openRedis connects to REDIS_URL — a Sentinel URL (master_name=…), a Cluster URL (addr=…
// seeds) or a plain redis:// URL — or starts an in-process Redis (miniredis) for a
// zero-config single-instance run. It returns the main client and the admission loops'.
func openRedis(cfg config, log zerolog.Logger, tracing *telemetry.Tracing) (rdb, admitRDB redis.UniversalClient, closeAll func(), err error) {
	var newClient func(pool int) redis.UniversalClient
	stop := func() {}
	if cfg.RedisURL == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, nil, nil, fmt.Errorf("in-process Redis: %w", err)
		}
		log.Warn().Str("addr", mr.Addr()).Msg("REDIS_URL is not set: using an in-process Redis (miniredis) on loopback; single instance only, the line is lost at exit")
		newClient = func(pool int) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: pool, ContextTimeoutEnabled: true})
		}
		stop = mr.Close
	} else if newClient, err = redisClients(cfg.RedisURL); err != nil {
		return nil, nil, nil, fmt.Errorf("invalid REDIS_URL: %w", err)
	}
	rdb, admitRDB = newClient(0), newClient(admitPoolSize) // 0: go-redis's default pool
	if cfg.redisTap != nil {
		cfg.redisTap(rdb)
		cfg.redisTap(admitRDB)
	}
	if tracing.Enabled() {
		// Commands as spans under the request that made them; their arguments (tickets,
		// tokens) are never recorded, nor the calling line (a runtime.Caller per command).
		for _, c := range []redis.UniversalClient{rdb, admitRDB} {
			if err := traceRedis(c, tracing); err != nil {
				return nil, nil, nil, fmt.Errorf("trace Redis: %w", err)
			}
		}
	}
	queue.WatchTopology(rdb)
	queue.WatchTopology(admitRDB)
	if cfg.RedisURL != "" {
		// Fail fast with one clear line: a REDIS_URL that names nothing reachable is a
		// configuration error at start (once running, an outage is answered with 503s).
		if err := pingRedis(rdb, 5*time.Second); err != nil {
			_ = admitRDB.Close()
			_ = rdb.Close()
			return nil, nil, nil, fmt.Errorf("Redis does not answer at REDIS_URL (%s) within 5 s: %w", redisTarget(cfg.RedisURL), err)
		}
	}
	return rdb, admitRDB, func() { _ = admitRDB.Close(); _ = rdb.Close(); stop() }, nil
}

// redisClients parses a REDIS_URL once and returns a constructor of clients with a pool
// of the given size. Every client honours context deadlines on its reads and writes
// (ContextTimeoutEnabled), so a stalled Redis costs a request its WR_REDIS_TIMEOUT, not
// go-redis's 3 s read timeout plus its pool timeout.
func redisClients(url string) (func(pool int) redis.UniversalClient, error) {
	switch {
	case strings.Contains(url, "master_name="):
		o, err := redis.ParseFailoverURL(url)
		return func(pool int) redis.UniversalClient {
			c := *o
			c.PoolSize, c.ContextTimeoutEnabled = pool, true
			return redis.NewFailoverClient(&c)
		}, err
	case strings.Contains(url, "addr="):
		o, err := redis.ParseClusterURL(url)
		return func(pool int) redis.UniversalClient {
			c := *o
			c.PoolSize, c.ContextTimeoutEnabled = pool, true
			return redis.NewClusterClient(&c)
		}, err
	default:
		o, err := redis.ParseURL(url)
		return func(pool int) redis.UniversalClient {
			c := *o
			c.PoolSize, c.ContextTimeoutEnabled = pool, true
			return redis.NewClient(&c)
		}, err
	}
}

// openPostgres returns DATABASE_URL once PostgreSQL there accepts connections (it may be
// starting beside the server: waitPostgres), or starts a local PostgreSQL from the
// machine's binaries with its data in a directory kept between runs (dataDir; "" for
// DATABASE_URL).
func openPostgres(ctx context.Context, cfg config, log zerolog.Logger) (dbURL, dataDir string, stop func(), err error) {
	if cfg.DatabaseURL != "" {
		if err := waitPostgres(ctx, cfg.DatabaseURL, pgStartWait, log); err != nil {
			return "", "", nil, err
		}
		return cfg.DatabaseURL, "", func() {}, nil
	}
	opts := pglocal.Options{DataDir: cfg.DataDir, BinDir: cfg.PGBinDir}
	if cfg.LogLevel <= zerolog.DebugLevel {
		opts.Log = log.With().Str("component", "postgres").Logger() // its own log lines; quoted in start errors anyway
	}
	in, err := pglocal.Start(ctx, opts)
	if err != nil {
		return "", "", nil, fmt.Errorf("DATABASE_URL is not set and the local PostgreSQL did not start: %w", err)
	}
	log.Warn().Str("data_dir", in.DataDir()).Int("port", in.Port()).Msg("DATABASE_URL is not set: started a local PostgreSQL on loopback (data kept between runs)")
	return in.URL(), in.DataDir(), func() {
		if err := in.Stop(); err != nil {
			log.Warn().Err(err).Msg("stop local PostgreSQL")
		}
	}, nil
}

// seedDemo makes the demo's queues and products if they are missing: queue demo, an empty
// line, and with WR_DEMO_CROWD > 0 queue demo-crowd, where a simulated crowd waits (package
// crowd) so a visitor sees a line move. The crowd runs on every instance until ctx ends or
// the returned func is called (it waits for the crowd to stop); the crowds of several
// instances on one Redis keep one crowd between them.
func seedDemo(ctx context.Context, cfg config, q *queue.Queue, store *orders.Store, log zerolog.Logger) (stop func(), err error) {
	s := queue.DefaultSettings(web.DemoQueue)
	s.RatePerSecond = cfg.DemoRate
	if err := q.Ensure(ctx, s); err != nil {
		return nil, err
	}
	if _, err := store.EnsureProduct(ctx, orders.Product{ID: "demo", Name: "Limited sneaker drop", Price: 129000,
		Stock: cfg.DemoStock, Queue: web.DemoQueue}); err != nil {
		return nil, err
	}
	if cfg.DemoCrowd == 0 {
		return func() {}, nil
	}
	s = queue.DefaultSettings(web.CrowdQueue)
	s.RatePerSecond = demoCrowdRate
	if err := q.Ensure(ctx, s); err != nil {
		return nil, err
	}
	// Its own product, so the crowd line's visitors reach an order page of their own and
	// the demo product's stock is not shared between the two lines.
	if _, err := store.EnsureProduct(ctx, orders.Product{ID: "demo-crowd", Name: "Limited sneaker drop (crowd demo)", Price: 129000,
		Stock: cfg.DemoStock, Queue: web.CrowdQueue}); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c := crowd.New(q, crowd.Config{Queue: web.CrowdQueue, Size: cfg.DemoCrowd, Log: log})
	go func() { defer close(done); _ = c.Run(cctx) }()
	return func() { cancel(); <-done }, nil
}

// demoCrowdRate is the admission rate queue demo-crowd is made with (users/s): the default
// crowd of 200 goes through in about a minute, quick enough to watch to the turn.
const demoCrowdRate = 3

// loadMessages makes the pages' message tables: the built-in ones with WR_MESSAGES_DIR
// (the operator's page messages) applied, logging what each file added, lacks or had
// that is unknown.
func loadMessages(dir string, log zerolog.Logger) (*static.Catalog, error) {
	if dir == "" {
		return static.Builtin(), nil
	}
	messages, notes, err := static.LoadMessagesDir(dir)
	if err != nil {
		return nil, fmt.Errorf("WR_MESSAGES_DIR=%s: %w", dir, err)
	}
	for _, n := range notes {
		ev := log.Info()
		if strings.Contains(n, "missing") || strings.Contains(n, "unknown") || strings.Contains(n, "skipped") {
			ev = log.Warn()
		}
		ev.Str("messages_dir", dir).Msg(n)
	}
	log.Info().Str("messages_dir", dir).Strs("languages", messages.Languages()).Msg("page messages loaded")
	return messages, nil
}

// clusterReplicaAcks is WR_REDIS_REPLICA_ACKS=auto on a Redis Cluster: 1 when every master
// that answers has a replica, else 0 (logged: the failover guarantee needs replicas).
func clusterReplicaAcks(ctx context.Context, c *redis.ClusterClient, log zerolog.Logger) int {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var mu sync.Mutex
	masters, without := 0, 0
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		masters++
		if strings.Contains(info, "connected_slaves:0") {
			without++
		}
		return nil
	})
	switch {
	case err != nil:
		log.Warn().Err(err).Msg("Redis Cluster: could not read the replicas; WR_REDIS_REPLICA_ACKS=auto waits for 1")
		return 1
	case without > 0:
		log.Warn().Int("masters", masters).Int("without_replica", without).Msg("Redis Cluster: a master has no replica; WR_REDIS_REPLICA_ACKS=auto is 0 (a failover may forget admissions; add replicas and restart, or set it to 1)")
		return 0
	}
	return 1
}

// pingRedis pings rdb until it answers or timeout passes (Redis may be starting beside us).
func pingRedis(rdb redis.UniversalClient, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// redisTarget describes a REDIS_URL without its password: the kind and the addresses.
func redisTarget(url string) string {
	kind := "a single Redis"
	switch {
	case strings.Contains(url, "master_name="):
		kind = "Sentinel"
	case strings.Contains(url, "addr="):
		kind = "a Redis Cluster"
	}
	var addrs []string
	if o, err := redis.ParseURL(strings.SplitN(url, "?", 2)[0]); err == nil {
		addrs = append(addrs, o.Addr)
	}
	if i := strings.Index(url, "?"); i >= 0 {
		for _, kv := range strings.Split(url[i+1:], "&") {
			if a, ok := strings.CutPrefix(kv, "addr="); ok {
				addrs = append(addrs, a)
			}
		}
	}
	return kind + ": " + strings.Join(addrs, ", ")
}

// redisLog sends go-redis's own log lines (one per failed dial, and so on) to zerolog at
// debug level, so an outage is told once by our lines instead of many times by its.
// go-redis has one process-wide logger and no per-client one: redis.SetLogger stores into
// a package variable (internal.Logger) that every client's pools and background loops read,
// and redis.Options, ClusterOptions and the rest have no logger field (checked in go-redis
// v9.23.0). So this is the one package-level state here that cannot become a value passed
// where it is used. It is set once, to a forwarder that reads the logger of the instance
// started last through an atomic pointer, so several instances in one process — the tests
// run them in parallel — never race on it.
var (
	redisLogOnce sync.Once
	redisLogTo   atomic.Pointer[zerolog.Logger]
)

func setRedisLog(log zerolog.Logger) {
	redisLogTo.Store(&log)
	redisLogOnce.Do(func() { redis.SetLogger(redisLog{}) })
}

type redisLog struct{}

func (redisLog) Printf(_ context.Context, format string, v ...any) {
	if l := redisLogTo.Load(); l != nil {
		l.Debug().Str("component", "go-redis").Msgf(format, v...)
	}
}

// traceRedis makes c's commands spans under the request that made them; their arguments
// (tickets, tokens) are never recorded, nor the calling line (a runtime.Caller per command).
func traceRedis(c redis.UniversalClient, tracing *telemetry.Tracing) error {
	return redisotel.InstrumentTracing(c, redisotel.WithTracerProvider(tracing.Children()),
		redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false))
}
