package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/internal/telemetry"
	"github.com/waitroom/waitroom/notify"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/web"
)

// config is every setting of the server, parsed and validated once from the environment.
type config struct {
	Addr             string
	RedisURL         string
	DatabaseURL      string
	DataDir          string
	MessagesDir      string
	PGBinDir         string
	Secret           string
	SecretGenerated  bool
	AdminToken       string
	AdminViewerToken string
	AdminTokens      []web.AdminToken // WR_ADMIN_TOKENS: named tokens with roles
	InstanceID       string
	InstanceIDUnset  bool // WR_INSTANCE_ID was not given: InstanceID is hostname-pid, new every run
	LogLevel         zerolog.Level
	LogPretty        bool
	Demo             bool
	DemoRate         float64
	DemoStock        int
	DemoCrowd        int
	Tick             time.Duration
	TickJitter       time.Duration
	DrawBatch        int
	LeaseTTL         time.Duration
	Grace            time.Duration
	SMTPURL          string // WR_SMTP_URL: e-mail reminders ("" = off)
	PublicURL        string // WR_PUBLIC_URL: the origin reminder links start with
	NotifyNear       int    // WR_NOTIFY_NEAR
	UpdateInterval   time.Duration
	UpdateFront      int
	BackEvery        int
	Heartbeat        time.Duration
	StreamsPerIP     int
	StreamWrite      time.Duration
	PGMaxConns       int
	PGAcquire        time.Duration
	OrderPerTicket   float64
	OrderGlobal      float64
	JoinPerIP        float64
	StatusPerTicket  float64
	RedisTimeout     time.Duration
	UnboundQueue     string
	MaxConns         int
	MaxStreams       int
	AdminStreamsTok  int
	AdminStreamsInst int
	FailOpen         bool
	Issuer           string
	KeyPublishDelay  time.Duration
	KeyRefresh       time.Duration
	JWKSMaxAge       time.Duration
	TokenFormat      string
	AcceptBareTokens bool
	ProxyHeader      string
	TrustedProxies   []string
	ShutdownTimeout  time.Duration
	ReadTimeout      time.Duration
	WriteTimeout     time.Duration
	PubSub           string
	ReplicaAcks      int // -1: auto
	PrequeueShards   int // 0: auto
	AckTimeout       time.Duration
	AccessLog        bool
	PprofAddr        string
	OTLPEndpoint     string // OTEL_EXPORTER_OTLP_ENDPOINT
	OTLPTraces       string // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// texts is each setting's text as read, in the order of settings: what the start log
	// and `waitroom config` show (masked).
	texts []settingText
	// redisTap, when set, is given each Redis client (the request path's and the admission
	// loops') before its first command: the cost test counts the commands of requests with it
	// (server/cost_test.go). Never set from the environment.
	redisTap func(redis.UniversalClient)
}

// setting is one environment variable: -h, `waitroom config`, the start log and
// docs/CONFIGURATION.md are made from these rows.
type setting struct {
	name, def, help string
	value
}

// value is how a setting's text becomes part of the config: what it accepts, as data (for
// -h, the configuration page and the test that holds parse to it), and the parse that
// enforces exactly that.
type value struct {
	accepts accepts
	parse   func(c *config, v string) error
}

// accepts is the values a setting takes: its kind, inclusive bounds (empty: unbounded) and,
// for a choice, the words it takes (a kind with choices takes either).
type accepts struct {
	Kind     string // duration, number, integer, boolean, text, secret, address, list
	Min, Max string
	Choices  []string
	Rule     string // what else a value must be, in words ("" when the kind says it all)
}

// String is the accepted values in a few words: "duration ≥ 10ms", "integer 1–7000",
// "auto, or integer 0–5".
func (a accepts) String() string {
	var b strings.Builder
	if len(a.Choices) > 0 {
		b.WriteString(strings.Join(a.Choices, ", "))
		if a.Kind == "" {
			return b.String()
		}
		b.WriteString(", or ")
	}
	b.WriteString(a.Kind)
	switch {
	case a.Min != "" && a.Max != "":
		b.WriteString(" " + a.Min + "–" + a.Max)
	case a.Min != "":
		b.WriteString(" ≥ " + a.Min)
	case a.Max != "":
		b.WriteString(" ≤ " + a.Max)
	}
	if a.Rule != "" {
		b.WriteString(" (" + a.Rule + ")")
	}
	return b.String()
}

// custom is a setting parsed by its own function, which must accept what a says.
func custom(a accepts, parse func(c *config, v string) error) value {
	return value{accepts: a, parse: parse}
}

func durSetting(dst func(*config) *time.Duration, min time.Duration) value {
	return value{accepts{Kind: "duration", Min: min.String()}, func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration like 100ms or 2s")
		}
		if d < min {
			return fmt.Errorf("must be at least %v", min)
		}
		*dst(c) = d
		return nil
	}}
}

func floatSetting(dst func(*config) *float64, min, max float64) value {
	return value{accepts{Kind: "number", Min: strconv.FormatFloat(min, 'g', -1, 64), Max: strconv.FormatFloat(max, 'g', -1, 64)}, func(c *config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < min || f > max || f != f {
			return fmt.Errorf("must be a number from %v to %v", min, max)
		}
		*dst(c) = f
		return nil
	}}
}

func intSetting(dst func(*config) *int, min, max int) value {
	return value{accepts{Kind: "integer", Min: strconv.Itoa(min), Max: strconv.Itoa(max)}, func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < min || n > max {
			return fmt.Errorf("must be a whole number from %d to %d", min, max)
		}
		*dst(c) = n
		return nil
	}}
}

func boolSetting(dst func(*config) *bool) value {
	return value{accepts{Choices: []string{"true", "false"}}, func(c *config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false")
		}
		*dst(c) = b
		return nil
	}}
}

func strSetting(dst func(*config) *string, a accepts) value {
	return value{a, func(c *config, v string) error { *dst(c) = v; return nil }}
}

var settings = []setting{
	{"WR_ADDR", ":8080", "listen address (host:port)", custom(accepts{Kind: "address", Rule: "host:port or :port"}, func(c *config, v string) error {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return fmt.Errorf("must be host:port or :port")
		}
		c.Addr = v
		return nil
	})},
	{"REDIS_URL", "", "redis://[user:pass@]host:port/db; a Cluster: redis://seed1?addr=seed2&addr=seed3; Sentinel: redis://sentinel1?addr=sentinel2&master_name=mymaster; empty = in-process Redis (single instance only)", strSetting(func(c *config) *string { return &c.RedisURL }, accepts{Kind: "text", Rule: "a redis:// URL"})},
	{"DATABASE_URL", "", "postgres://…; empty = a local PostgreSQL the server starts itself", strSetting(func(c *config) *string { return &c.DatabaseURL }, accepts{Kind: "text", Rule: "a postgres:// URL"})},
	{"WR_DATA_DIR", "", "data directory of the local PostgreSQL, also where the server keeps its admin token when WR_ADMIN_TOKEN is empty (default: a per-user cache directory)", strSetting(func(c *config) *string { return &c.DataDir }, accepts{Kind: "text", Rule: "a directory"})},
	{"WR_MESSAGES_DIR", "", "directory of page messages read at start, to add or override text without a rebuild: files <code>.json named by a BCP 47 tag in canonical case (a built-in code such as en.json, fr.json, pt-BR.json, zh-Hant.json, or a new one such as sv.json), each one JSON object {\"key\": \"text\"} with keys of the built-in English files (static/i18n/*/en.json) and their plural variants (stock_left.one); a built-in language takes the keys given; a new language is added to the switcher and shows English for each key it lacks (the buyer keys it lacks are logged); unknown keys are logged and ignored; a file that is not such an object stops the start", strSetting(func(c *config) *string { return &c.MessagesDir }, accepts{Kind: "text", Rule: "a directory"})},
	{"PG_BINDIR", "", "folder with initdb and postgres for the local PostgreSQL (default: searched)", strSetting(func(c *config) *string { return &c.PGBinDir }, accepts{Kind: "text", Rule: "a directory"})},
	{"WR_SECRET", "", "HMAC key for tickets, ≥ 16 bytes, the same on every instance; empty = random (single instance only)", custom(accepts{Kind: "secret", Rule: "at least 16 bytes"}, func(c *config, v string) error {
		if len(v) < 16 {
			return fmt.Errorf("must be at least 16 bytes")
		}
		c.Secret = v
		return nil
	})},
	{"WR_ADMIN_TOKEN", "", "bearer token of the admin API and dashboard; empty = one the server makes once and keeps in waitroom-admin-token-<instance> (default: waitroom-admin-token-default) in its data directory, reused at every start, with a sign-in link printed on the terminal", custom(accepts{Kind: "secret", Rule: "at least 8 characters"}, func(c *config, v string) error {
		if len(v) < 8 {
			return fmt.Errorf("must be at least 8 characters")
		}
		c.AdminToken = v
		return nil
	})},
	{"WR_ADMIN_VIEWER_TOKEN", "", "bearer token of the admin API with role viewer (actor \"viewer\"): every GET, no change (403 forbidden); at least 16 characters", custom(accepts{Kind: "secret", Rule: "at least 16 characters"}, func(c *config, v string) error {
		if len(v) < web.MinAdminTokenLen {
			return fmt.Errorf("must be at least %d characters", web.MinAdminTokenLen)
		}
		c.AdminViewerToken = v
		return nil
	})},
	{"WR_ADMIN_TOKENS", "", "named admin tokens, comma-separated name:role:token (name 1-32 of A-Z a-z 0-9 _ -, the audit log's actor; role operator or viewer; token at least 16 characters); a bad entry stops the start naming its position, never the token", custom(accepts{Kind: "list", Rule: "comma-separated name:role:token"}, func(c *config, v string) (err error) {
		c.AdminTokens, err = web.ParseAdminTokens(v)
		return err
	})},
	{"WR_INSTANCE_ID", "", "name of this instance in the admin view (default: hostname-pid)", custom(accepts{Kind: "text", Rule: "at most 64 characters, no spaces or colons"}, func(c *config, v string) error {
		if len(v) > 64 || strings.ContainsAny(v, " :\t\n") {
			return fmt.Errorf("must be at most 64 characters without spaces or colons")
		}
		c.InstanceID = v
		return nil
	})},
	{"WR_LOG_LEVEL", "info", "debug, info, warn or error", custom(accepts{Choices: []string{"debug", "info", "warn", "error"}}, func(c *config, v string) error {
		l, err := zerolog.ParseLevel(v)
		if err != nil || v == "" {
			return fmt.Errorf("must be debug, info, warn or error")
		}
		c.LogLevel = l
		return nil
	})},
	{"WR_LOG_PRETTY", "false", "human-readable console logs instead of JSON", boolSetting(func(c *config) *bool { return &c.LogPretty })},
	{"WR_DEMO", "true", "create queue demo and product demo at start if missing", boolSetting(func(c *config) *bool { return &c.Demo })},
	{"WR_DEMO_RATE", "5", "admission rate of the demo queue (users/s)", floatSetting(func(c *config) *float64 { return &c.DemoRate }, 0, 100000)},
	{"WR_DEMO_STOCK", "100", "stock of the demo product", intSetting(func(c *config) *int { return &c.DemoStock }, 0, 1_000_000_000)},
	{"WR_DEMO_CROWD", "200", "with WR_DEMO: queue demo-crowd (and its product) with a simulated crowd of about this many waiting, admitted at 3/s, so a visitor sees a line move (0 = no such queue)", intSetting(func(c *config) *int { return &c.DemoCrowd }, 0, 1000)},
	{"WR_TICK", "100ms", "admission tick (fixed delay)", durSetting(func(c *config) *time.Duration { return &c.Tick }, 10*time.Millisecond)},
	{"WR_TICK_JITTER", "0s", "random extra delay per tick, 0..value", durSetting(func(c *config) *time.Duration { return &c.TickJitter }, 0)},
	{"WR_DRAW_BATCH", "5000", "pre-queue members placed per Redis script call of a draw (smaller: shorter Redis pauses, a longer draw)", intSetting(func(c *config) *int { return &c.DrawBatch }, 1, 7000)},
	{"WR_LEASE_TTL", "2s", "admission lease; a dead leader is replaced within it", durSetting(func(c *config) *time.Duration { return &c.LeaseTTL }, 500*time.Millisecond)},
	{"WR_GRACE", "60s", "a waiting place with no open stream and no status call for this long is abandoned", durSetting(func(c *config) *time.Duration { return &c.Grace }, 5*time.Second)},
	{"WR_SMTP_URL", "", "e-mail reminders on the waiting page, sent through this SMTP server: smtp://[user:pass@]host[:port]?from=rooms@example.com (port 587, STARTTLS when offered; add &starttls=required to insist) or smtps://… (TLS, port 465); a secret, never shown; empty = no reminders, no address field, POST /api/queues/{queue}/notify answers 404 notify_unavailable", custom(accepts{Kind: "secret", Rule: "an smtp:// or smtps:// URL with from="}, func(c *config, v string) error {
		if _, err := notify.ParseSMTP(v); err != nil {
			return err
		}
		c.SMTPURL = v
		return nil
	})},
	{"WR_PUBLIC_URL", "", "the public origin of the waiting room (https://rooms.example.com), which the reminders' links start with; required with WR_SMTP_URL (a link is never made from a request's Host header)", custom(accepts{Kind: "text", Rule: "an http:// or https:// origin without a path"}, func(c *config, v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("must be an http:// or https:// origin without a path")
		}
		c.PublicURL = strings.TrimRight(v, "/")
		return nil
	})},
	{"WR_NOTIFY_NEAR", "20", "with WR_SMTP_URL: a place this close to the door (position) gets its \"nearly your turn\" e-mail; one value for every queue", intSetting(func(c *config) *int { return &c.NotifyNear }, 1, 1_000_000)},
	{"WR_UPDATE_INTERVAL", "1s", "at most one position event per stream per interval", durSetting(func(c *config) *time.Duration { return &c.UpdateInterval }, 100*time.Millisecond)},
	{"WR_UPDATE_FRONT", "5000", "positions 1…N get a position event every interval (when it changed)", intSetting(func(c *config) *int { return &c.UpdateFront }, 1, 100_000_000)},
	{"WR_UPDATE_BACK_EVERY", "3", "waiters behind the front get one every N-th interval, spread evenly (1 = every interval)", intSetting(func(c *config) *int { return &c.BackEvery }, 1, 3600)},
	{"WR_HEARTBEAT", "15s", "SSE heartbeat (event: ping) and dead-client check", durSetting(func(c *config) *time.Duration { return &c.Heartbeat }, time.Second)},
	{"WR_STREAMS_PER_IP", "50", "concurrent streams per client address on each instance", intSetting(func(c *config) *int { return &c.StreamsPerIP }, 1, 1_000_000)},
	{"WR_STREAM_WRITE_TIMEOUT", "250ms", "a stream write blocked this long drops the (non-reading) client", durSetting(func(c *config) *time.Duration { return &c.StreamWrite }, 10*time.Millisecond)},
	{"WR_PG_MAX_CONNS", "20", "PostgreSQL pool size", intSetting(func(c *config) *int { return &c.PGMaxConns }, 1, 10000)},
	{"WR_PG_ACQUIRE_TIMEOUT", "500ms", "wait for a pooled connection before answering 503", durSetting(func(c *config) *time.Duration { return &c.PGAcquire }, time.Millisecond)},
	{"WR_ORDER_RATE_PER_TICKET", "5", "orders per second per ticket (0 = off); live-changeable via PUT /admin/api/limits", floatSetting(func(c *config) *float64 { return &c.OrderPerTicket }, 0, 1e6)},
	{"WR_ORDER_RATE_GLOBAL", "100", "orders per second overall (0 = off)", floatSetting(func(c *config) *float64 { return &c.OrderGlobal }, 0, 1e6)},
	{"WR_JOIN_RATE_PER_IP", "50", "joins per second per client address (0 = off)", floatSetting(func(c *config) *float64 { return &c.JoinPerIP }, 0, 1e6)},
	{"WR_UNBOUND_PRODUCTS_QUEUE", "", "upgrade aid: products that name no queue are sold through this queue (empty: not on sale)", custom(accepts{Kind: "text", Rule: "a queue name: 1-64 of A-Z a-z 0-9 _ -"}, func(c *config, v string) error {
		if v != "" && !queue.ValidName(v) {
			return fmt.Errorf("must be a queue name (1-64 of A-Z a-z 0-9 _ -) or empty")
		}
		c.UnboundQueue = v
		return nil
	})},
	{"WR_MAX_CONNS", "0", "most open client connections, streams included; past it a new connection is closed at accept (0 = the open-file limit minus a reserve for the Redis and PostgreSQL pools and files: 19,807 at 20,000)", intSetting(func(c *config) *int { return &c.MaxConns }, 0, 10_000_000)},
	{"WR_MAX_STREAMS", "0", "most open streams; past it a stream gets a jittered retry: and ends, joins answer 503 instance_full, /readyz 503 full (0 = WR_MAX_CONNS minus room for joins and health checks: 19,295 at 20,000)", intSetting(func(c *config) *int { return &c.MaxStreams }, 0, 10_000_000)},
	{"WR_ADMIN_STREAMS_PER_TOKEN", "4", "most open /admin/api/stream connections of one admin token on an instance; past it 429 too_many_streams (X-RateLimit-Scope: admin_token, Retry-After)", intSetting(func(c *config) *int { return &c.AdminStreamsTok }, 1, 10_000)},
	{"WR_ADMIN_STREAMS_PER_INSTANCE", "64", "most open /admin/api/stream connections on an instance, every token together; past it 429 too_many_streams (X-RateLimit-Scope: instance)", intSetting(func(c *config) *int { return &c.AdminStreamsInst }, 1, 100_000)},
	{"WR_PUBSUB", "auto", "how tick messages travel: auto (sharded SPUBLISH/SSUBSCRIBE on a Redis Cluster, plain otherwise), plain, sharded, or both (publish and listen both ways: the rolling deploy from plain to sharded)", custom(accepts{Choices: []string{"auto", "plain", "sharded", "both"}}, func(c *config, v string) error {
		if !queue.ValidPubSub(v) {
			return fmt.Errorf("must be auto, plain, sharded or both")
		}
		c.PubSub = v
		return nil
	})},
	{"WR_REDIS_REPLICA_ACKS", "auto", "replicas that must hold an admission before anyone is told of it (WAIT after each tick and before a status or stream hands out a token; docs/OPERATIONS.md \"Failover\"); auto = 1 on a Redis Cluster or Sentinel, 0 on a single Redis", custom(accepts{Kind: "integer", Min: "0", Max: "5", Choices: []string{"auto"}}, func(c *config, v string) error {
		if v == "auto" {
			c.ReplicaAcks = -1
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 5 {
			return fmt.Errorf("must be auto or a whole number from 0 to 5")
		}
		c.ReplicaAcks = n
		return nil
	})},
	{"WR_PREQUEUE_SHARDS", "auto", "how many shards a scheduled queue's pre-queue spreads over, fixed when its start is first set, so the joins before a drop's start spread over a Redis Cluster's masters (docs/SCALING.md, docs/DRAW.md); auto = one per master of a Redis Cluster, 1 on a single Redis; a pre-queue is sharded only while every live instance runs a release that knows shards (docs/UPGRADING.md)", custom(accepts{Kind: "integer", Min: "1", Max: "16", Choices: []string{"auto"}}, func(c *config, v string) error {
		if v == "auto" {
			c.PrequeueShards = 0
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 16 {
			return fmt.Errorf("must be auto or a whole number from 1 to 16")
		}
		c.PrequeueShards = n
		return nil
	})},
	{"WR_REDIS_ACK_TIMEOUT", "250ms", "longest WAIT for the replicas; when it falls short while a replica is attached the tick is held (no token told) and confirmed again each tick; with no replica attached admissions go out unconfirmed (counted in queue_replication_unconfirmed_total)", durSetting(func(c *config) *time.Duration { return &c.AckTimeout }, time.Millisecond)},
	{"WR_REDIS_TIMEOUT", "1s", "deadline of every Redis call made for a request (pool wait included); a stalled Redis is answered 503 within it", durSetting(func(c *config) *time.Duration { return &c.RedisTimeout }, 50*time.Millisecond)},
	{"WR_STATUS_RATE_PER_TICKET", "2", "status calls per second per ticket, burst 10 (0 = off); live-changeable via PUT /admin/api/limits", floatSetting(func(c *config) *float64 { return &c.StatusPerTicket }, 0, 1e6)},
	{"WR_TOKEN_FORMAT", "jws", "admission tokens handed out: jws (signed, verifiable with /.well-known/jwks.json) or uuid (bare; only for the first step of the upgrade to signed tokens, docs/UPGRADING.md — guards accept both either way)", custom(accepts{Choices: []string{"jws", "uuid"}}, func(c *config, v string) error {
		if v != "jws" && v != "uuid" {
			return fmt.Errorf("must be jws or uuid")
		}
		c.TokenFormat = v
		return nil
	})},
	{"WR_ACCEPT_BARE_TOKENS", "true", "guards also accept a token's bare UUID (the unsigned form, still checked in Redis: live, this ticket, this queue); set false once every instance hands out jws and one token lifetime has passed", boolSetting(func(c *config) *bool { return &c.AcceptBareTokens })},
	{"WR_ISSUER", "waitroom", "the iss claim of admission tokens (guards and verifiers require it)", custom(accepts{Kind: "text", Rule: "1-200 characters"}, func(c *config, v string) error {
		if v == "" || len(v) > 200 {
			return fmt.Errorf("must be 1-200 characters")
		}
		c.Issuer = v
		return nil
	})},
	{"WR_KEY_PUBLISH_DELAY", "60s", "a rotated signing key is in the JWKS this long before it signs; must be longer than WR_KEY_REFRESH + WR_JWKS_MAX_AGE (every instance has re-read the keys, then every verifier's cached JWKS has expired), else the server does not start", durSetting(func(c *config) *time.Duration { return &c.KeyPublishDelay }, 100*time.Millisecond)},
	{"WR_KEY_REFRESH", "30s", "how often each instance re-reads the signing keys from Redis (and at once on an unknown kid)", durSetting(func(c *config) *time.Duration { return &c.KeyRefresh }, 50*time.Millisecond)},
	{"WR_JWKS_MAX_AGE", "15s", "how long verifiers may cache /.well-known/jwks.json (its Cache-Control max-age, whole seconds); shorter lets WR_KEY_PUBLISH_DELAY be shorter, for more JWKS fetches", durSetting(func(c *config) *time.Duration { return &c.JWKSMaxAge }, 0)},
	{"WR_FAIL_OPEN", "false", "with Redis down, let orders through without a token (stock and a local rate limit still apply)", boolSetting(func(c *config) *bool { return &c.FailOpen })},
	{"WR_PROXY_HEADER", "", "client address header your proxies set, e.g. X-Forwarded-For, appended to (nginx $proxy_add_x_forwarded_for, most load balancers) or overwritten (as deploy/nginx.conf does); the client is the rightmost entry that is not a trusted proxy", strSetting(func(c *config) *string { return &c.ProxyHeader }, accepts{Kind: "text", Rule: "a header name"})},
	{"WR_TRUSTED_PROXIES", "", "comma-separated proxy addresses/CIDRs: WR_PROXY_HEADER is read only from these peers, and its entries from the right that are in the list are skipped as proxies; empty = every peer's header, its rightmost entry only (only safe when clients cannot reach the instances directly)", custom(accepts{Kind: "list", Rule: "comma-separated IP addresses or CIDRs"}, func(c *config, v string) error {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			if net.ParseIP(p) == nil {
				if _, _, err := net.ParseCIDR(p); err != nil {
					return fmt.Errorf("%q is not an IP address or CIDR", p)
				}
			}
			c.TrustedProxies = append(c.TrustedProxies, p)
		}
		return nil
	})},
	{"WR_READ_TIMEOUT", "10s", "a whole request (headers and body) must arrive within this: slowloris guard", durSetting(func(c *config) *time.Duration { return &c.ReadTimeout }, 100*time.Millisecond)},
	{"WR_WRITE_TIMEOUT", "15s", "deadline for writing one response (streams move theirs per write)", durSetting(func(c *config) *time.Duration { return &c.WriteTimeout }, 100*time.Millisecond)},
	{"WR_SHUTDOWN_TIMEOUT", "10s", "deadline for a graceful shutdown", durSetting(func(c *config) *time.Duration { return &c.ShutdownTimeout }, 100*time.Millisecond)},
	{"WR_ACCESS_LOG", "true", "one log line per request at info level (a stream's when it ends, with its duration); false: at debug. Never a ticket, token or query string", boolSetting(func(c *config) *bool { return &c.AccessLog })},
	{"WR_PPROF_ADDR", "", "serve the Go profiler (/debug/pprof/) on this loopback host:port, apart from the public port; empty = off. It has no authentication: reach it from the host or through a tunnel", custom(accepts{Kind: "address", Rule: "a loopback host:port, e.g. 127.0.0.1:6060"}, func(c *config, v string) error {
		if err := telemetry.CheckLoopback(v); err != nil {
			return err
		}
		c.PprofAddr = v
		return nil
	})},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "", "OpenTelemetry collector (OTLP/HTTP) base URL, e.g. http://127.0.0.1:4318: traces of requests, Redis, PostgreSQL and admission ticks are sent to <url>/v1/traces; empty = tracing off. The SDK's other OTEL_* variables apply (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_EXPORTER_OTLP_HEADERS, …)", custom(accepts{Kind: "text", Rule: "an http:// or https:// URL"}, func(c *config, v string) (err error) {
		c.OTLPEndpoint, err = otlpURL(v)
		return err
	})},
	{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "", "the collector's full OTLP/HTTP traces URL (e.g. http://127.0.0.1:4318/v1/traces), used as it is; wins over OTEL_EXPORTER_OTLP_ENDPOINT", custom(accepts{Kind: "text", Rule: "an http:// or https:// URL"}, func(c *config, v string) (err error) {
		c.OTLPTraces, err = otlpURL(v)
		return err
	})},
}

// otlpURL checks an OTLP/HTTP endpoint: an http or https URL with a host.
func otlpURL(v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("must be an http:// or https:// URL")
	}
	return v, nil
}

// loadConfig reads every setting; the first bad value is returned as one line naming
// the variable.
func loadConfig(getenv func(string) string) (config, error) {
	var c config
	for _, s := range settings {
		v, set := getenv(s.name), true
		if v == "" {
			v, set = s.def, false
		}
		c.texts = append(c.texts, settingText{name: s.name, text: v, set: set})
		if v == "" {
			continue
		}
		if err := s.parse(&c, v); err != nil {
			if !set {
				panic("default of " + s.name + " is invalid: " + err.Error())
			}
			if secretSettings[s.name] { // the value is a secret: never printed
				return config{}, fmt.Errorf("invalid %s: %v", s.name, err)
			}
			return config{}, fmt.Errorf("invalid %s=%q: %v", s.name, v, err)
		}
	}
	if c.Tick > c.LeaseTTL/4 {
		return config{}, fmt.Errorf("invalid WR_TICK=%v: must be at most a quarter of WR_LEASE_TTL (%v), or the lease lapses between renewals", c.Tick, c.LeaseTTL)
	}
	if c.KeyPublishDelay <= c.KeyRefresh+c.JWKSMaxAge {
		return config{}, fmt.Errorf("invalid WR_KEY_PUBLISH_DELAY=%v: must be longer than WR_KEY_REFRESH (%v) + WR_JWKS_MAX_AGE (%v) = %v, or a verifier may meet a token signed by a key it has not seen yet",
			c.KeyPublishDelay, c.KeyRefresh, c.JWKSMaxAge, c.KeyRefresh+c.JWKSMaxAge)
	}
	if c.SMTPURL != "" && c.PublicURL == "" {
		return config{}, fmt.Errorf("invalid WR_SMTP_URL: WR_PUBLIC_URL must be set too (the reminders' links start with it)")
	}
	if err := web.CheckAdminTokens(c.AdminToken, c.AdminViewerToken, c.AdminTokens); err != nil {
		return config{}, fmt.Errorf("invalid admin tokens: %v", err)
	}
	if c.Secret == "" {
		c.Secret, c.SecretGenerated = randomHex(32), true
	}
	if c.InstanceID == "" {
		h, _ := os.Hostname()
		if h == "" {
			h = "host"
		}
		c.InstanceID, c.InstanceIDUnset = fmt.Sprintf("%s-%d", strings.ReplaceAll(h, ":", "-"), os.Getpid()), true
	}
	return c, nil
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// settingText is a setting's text as read: the environment's, else the default.
type settingText struct {
	name, text string
	set        bool // from the environment
}

// logFields renders every setting for the start-up log, secrets masked, under the
// variables' own names, and names those set in the environment.
func (c config) logFields(e *zerolog.Event) *zerolog.Event {
	d := zerolog.Dict()
	var set []string
	for _, t := range c.texts {
		d.Str(t.name, shown(t.name, t.text))
		if t.set {
			set = append(set, t.name)
		}
	}
	return e.Dict("settings", d).Strs("set", set)
}

// shown is a setting's text as the start log and `waitroom config` show it: a secret as
// ***, the named admin tokens as name:role:***, and any other value without the password
// of a URL in it.
func shown(name, v string) string {
	switch {
	case v == "":
		return ""
	case name == "WR_ADMIN_TOKENS":
		entries := strings.Split(v, ",")
		for i, e := range entries {
			// name:role:token; the token may hold colons, the name and role do not.
			if parts := strings.SplitN(e, ":", 3); len(parts) == 3 {
				entries[i] = parts[0] + ":" + parts[1] + ":***"
			} else {
				entries[i] = "***"
			}
		}
		return strings.Join(entries, ",")
	case secretSettings[name]:
		return "***"
	}
	return maskURL(v)
}

// secretSettings are the settings whose value an error never shows.
var secretSettings = map[string]bool{"WR_SECRET": true, "WR_ADMIN_TOKEN": true, "WR_ADMIN_VIEWER_TOKEN": true, "WR_ADMIN_TOKENS": true, "WR_SMTP_URL": true}

var passwordParam = regexp.MustCompile(`(?i)(password=)[^&\s]*`)

// maskURL hides the password of a URL (user:pass@, password= in a query or in a
// key=value connection string).
func maskURL(s string) string {
	s = passwordParam.ReplaceAllString(s, "${1}***")
	at := strings.LastIndex(s, "@")
	scheme := strings.Index(s, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return s
	}
	user := s[scheme+3 : at]
	if i := strings.IndexByte(user, ':'); i >= 0 {
		user = user[:i] + ":***"
	}
	return s[:scheme+3] + user + s[at:]
}

// webAdminTokens are the admin tokens besides WR_ADMIN_TOKEN, as web takes them.
func (c config) webAdminTokens() []web.AdminToken {
	var out []web.AdminToken
	if c.AdminViewerToken != "" {
		out = append(out, web.AdminToken{Name: web.ActorViewer, Role: web.RoleViewer, Token: c.AdminViewerToken})
	}
	return append(out, c.AdminTokens...)
}
