package telemetry

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/waitroom/waitroom/queue"
)

// Tracing. Spans are exported over OTLP/HTTP when an endpoint is configured
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); otherwise every
// tracer is OpenTelemetry's no-op and nothing is instrumented, so tracing off costs nothing.
// The SDK reads the other standard variables itself (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER[_ARG], OTEL_EXPORTER_OTLP_HEADERS,
// …_TIMEOUT, …_COMPRESSION, OTEL_BSP_*).
//
// What is traced: each HTTP request (web), the Redis commands and PostgreSQL statements made
// under it (Children: never a span without a parent, so the background loops' many calls
// make no traces of their own), and each admission tick that admitted someone (TickObserver).
//
// How a buyer's spans connect, without any trace data stored per waiter:
//   - the join's span says where the ticket stands: waitroom.queue, waitroom.lane and
//     waitroom.seq (its sequence number in its lane);
//   - the tick's span says which sequences it admitted (waitroom.seq.first … .last of the
//     normal line, waitroom.admitted.priority and .bypass for the invite lanes);
//   - the tick's span has a span context derived from (queue, tick number) with a key
//     (TickSpanContext), and the order's span gets a link to it (LinkTick): the token store
//     knows the admitting tick of a claimed token from the ticket's state that it reads
//     anyway, so the link costs no Redis command.
//
// So from an order one follows the link to the tick, and from the tick its range leads to
// the joins (a search on waitroom.queue and waitroom.seq).

// TraceConfig is the tracing part of the configuration.
type TraceConfig struct {
	// Endpoint is OTEL_EXPORTER_OTLP_ENDPOINT, the collector's base URL (/v1/traces is
	// appended); TracesEndpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, used as it is and
	// preferred. Both empty: tracing is off.
	Endpoint, TracesEndpoint string
	Instance                 string // service.instance.id
	Build                    Build  // service.version
	// LinkKey keys the tick span contexts (TickSpanContext), so that they cannot be guessed
	// and two deployments sharing a trace backend and a queue name do not share trace ids.
	// Every instance must have the same (the server uses WR_SECRET).
	LinkKey []byte
}

// Tracing holds the tracer provider of an instance.
type Tracing struct {
	sdk      *sdktrace.TracerProvider // nil when off
	provider trace.TracerProvider
	linkKey  []byte
}

// tracerName is the instrumentation scope of this program's own spans.
const tracerName = "github.com/waitroom/waitroom"

// NewTracing starts the exporter when an endpoint is configured; else it returns a Tracing
// whose providers are no-op.
func NewTracing(ctx context.Context, cfg TraceConfig) (*Tracing, error) {
	t := &Tracing{provider: noop.NewTracerProvider(), linkKey: linkKey(cfg.LinkKey)}
	endpoint := cfg.TracesEndpoint
	if endpoint == "" && cfg.Endpoint != "" {
		endpoint = strings.TrimRight(cfg.Endpoint, "/") + "/v1/traces"
	}
	if endpoint == "" {
		return t, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName("waitroom"), semconv.ServiceVersion(cfg.Build.Version),
			semconv.ServiceInstanceID(cfg.Instance), attribute.String("vcs.ref.head.revision", cfg.Build.Revision)),
		resource.WithFromEnv()) // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	t.sdk = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}))
	t.provider = t.sdk
	return t, nil
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t.sdk != nil }

// Provider is the tracer provider (no-op when off).
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Tracer is this program's own tracer.
func (t *Tracing) Tracer() trace.Tracer { return t.provider.Tracer(tracerName) }

// Children is a provider whose tracers start a span only under a recording parent (for the
// Redis and PostgreSQL instrumentation): a call made outside a request — a lease renewal,
// a presence report — makes no trace.
func (t *Tracing) Children() trace.TracerProvider { return childOnly{p: t.provider} }

// Shutdown exports the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// TickObserver makes a span for each tick that admitted someone (queue.TickObserver). The
// span is made when the tick has run, back-dated to its start: only then is it known
// whether it admitted anyone.
func (t *Tracing) TickObserver() queue.TickObserver {
	return tickSpans{tracer: t.Tracer(), key: t.linkKey, on: t.Enabled()}
}

type tickSpans struct {
	tracer trace.Tracer
	key    []byte
	on     bool
}

func (o tickSpans) ObserveTick(name string, at time.Time, r queue.TickResult) {
	if !o.on || r.Admitted == 0 {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("waitroom.queue", name), attribute.Int64("waitroom.tick", r.Tick),
		attribute.Int64("waitroom.event", r.Ev), attribute.Int64("waitroom.admitted", r.Admitted),
		attribute.Int64("waitroom.admitted.priority", r.AdmittedPriority), attribute.Int64("waitroom.admitted.bypass", r.AdmittedBypass),
		attribute.Int64("waitroom.waiting", r.Waiting),
	}
	if len(r.Seqs) > 0 {
		lo, hi := r.Seqs[0], r.Seqs[0]
		for _, s := range r.Seqs {
			lo, hi = min(lo, s), max(hi, s)
		}
		attrs = append(attrs, attribute.Int64("waitroom.seq.first", lo), attribute.Int64("waitroom.seq.last", hi))
	}
	sc := TickSpanContext(o.key, name, r.Tick)
	ctx := context.WithValue(context.Background(), fixedIDs{}, sc)
	_, span := o.tracer.Start(ctx, "admission tick", trace.WithNewRoot(), trace.WithTimestamp(at),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	span.End()
}

// LinkTick links the span in ctx (a request's) to the span of the tick that admitted its
// token. Nothing happens when the span is not recording.
func (t *Tracing) LinkTick(ctx context.Context, queueName string, tick int64) {
	span := trace.SpanFromContext(ctx)
	if tick <= 0 || !span.IsRecording() {
		return
	}
	span.AddLink(trace.Link{SpanContext: TickSpanContext(t.linkKey, queueName, tick),
		Attributes: []attribute.KeyValue{attribute.String("waitroom.link", "admitted by")}})
	span.SetAttributes(attribute.Int64("waitroom.tick", tick))
}

// TickSpanContext is the span context of the span of tick number tick of a queue: its trace
// and span ids are an HMAC of the queue name and the tick number under key.
func TickSpanContext(key []byte, queueName string, tick int64) trace.SpanContext {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("tick\x00" + queueName + "\x00" + strconv.FormatInt(tick, 10)))
	sum := m.Sum(nil)
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// linkKey derives the key of the tick span contexts from the configured one, so the secret
// it comes from is used for nothing else as it is.
func linkKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("waitroom trace links"))
	return m.Sum(nil)
}

// fixedIDs is the context key under which a span about to start finds the span context
// whose ids it must take (a tick's span).
type fixedIDs struct{}

// idGenerator makes random ids, except for a span started with fixedIDs in its context.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if sc, ok := ctx.Value(fixedIDs{}).(trace.SpanContext); ok {
		return sc.TraceID(), sc.SpanID()
	}
	var tid trace.TraceID
	binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
	binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	return tid, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for sid == (trace.SpanID{}) {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// childOnly wraps a provider so that its tracers start spans only under a recording parent.
type childOnly struct {
	embedded.TracerProvider
	p trace.TracerProvider
}

func (c childOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{t: c.p.Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (c childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, trace.SpanFromContext(ctx) // the non-recording span already there (or the no-op one)
	}
	return c.t.Start(ctx, name, opts...)
}
