package main

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/waitroom/waitroom/queue/redistest"
)

// otlpSpan is one received span with the name of the instrumentation scope that made it.
type otlpSpan struct {
	*tracepb.Span
	scope string
}

func (s otlpSpan) id() string     { return hex.EncodeToString(s.SpanId) }
func (s otlpSpan) parent() string { return hex.EncodeToString(s.ParentSpanId) }
func (s otlpSpan) trace() string  { return hex.EncodeToString(s.TraceId) }

// attr is the span's attribute key as text ("" when it has none).
func (s otlpSpan) attr(key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return anyText(kv.Value)
		}
	}
	return ""
}

// intAttr is the span's integer attribute key (-1 when it has none).
func (s otlpSpan) intAttr(key string) int64 {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return v.IntValue
			}
		}
	}
	return -1
}

func anyText(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	}
	return ""
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export request (protobuf,
// gzip'd or not) and keeps its spans.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
	bad   []string
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err == nil && req.Header.Get("Content-Encoding") == "gzip" {
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
				body, err = io.ReadAll(zr)
			}
		}
		var msg collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			r.bad = append(r.bad, req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type")+" "+errText(err))
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					r.spans = append(r.spans, otlpSpan{Span: sp, scope: ss.GetScope().GetName()})
				}
			}
		}
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (r *otlpReceiver) received() ([]otlpSpan, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...), append([]string(nil), r.bad...)
}

func hexID(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestTracesOfAJourney: with OTEL_EXPORTER_OTLP_ENDPOINT set, a join → admission → order
// journey, whose order carries a shop's W3C traceparent, arrives at an OTLP/HTTP receiver
// as connected spans: the join's server span says the ticket's sequence number and has Redis
// spans under it; the admission tick's span names the admitted range, which holds that
// number; the order's span is a child of the shop's span, links to the tick's span, and has
// Redis and PostgreSQL spans under it. No span attribute holds the ticket or the token.
func TestTracesOfAJourney(t *testing.T) {
	t.Parallel()
	recv := startOTLPReceiver(t)
	rs := redistest.Start(t)
	in := startInProcess(t, "traces", tolerantEnv(rs.URL(), testDB(t), map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.srv.URL}))
	admin(t, in, "PUT", "/admin/api/queues/tr", map[string]any{"rate_per_second": 50000, "places_per_ip": 0})
	admin(t, in, "PUT", "/admin/api/products/trp", map[string]any{"stock": 5, "queue": "tr"})

	var j joinResp
	if res := call(t, "POST", in.url+"/api/queues/tr/join", "", nil, &j); j.Ticket == "" {
		t.Fatalf("join: %d", res.StatusCode)
	}
	s := mustStream(t, in.url+"/api/queues/tr/stream", j.Ticket)
	ev, ok := s.next(t, 10*time.Second, "admitted")
	if !ok {
		t.Fatal("no admitted event")
	}
	token, _ := ev.Data["token"].(string)
	s.close()
	shopTrace, shopSpan := hexID(t, 16), hexID(t, 8)
	res := call(t, "POST", in.url+"/api/orders", j.Ticket, map[string]any{"product_id": "trp", "quantity": 1}, nil,
		"X-Admission-Token", token, "Idempotency-Key", "trace-1", "traceparent", "00-"+shopTrace+"-"+shopSpan+"-01")
	if res.StatusCode != 201 {
		t.Fatalf("order: %d %s", res.StatusCode, readAll(res))
	}
	in.stop() // the tracer provider's shutdown exports every buffered span

	spans, bad := recv.received()
	if len(bad) > 0 {
		t.Fatalf("the receiver refused exports: %v", bad)
	}
	names := map[string]int{}
	for _, sp := range spans {
		names[sp.Name]++
	}
	t.Logf("received %d spans: %v", len(spans), names)
	byID := map[string]otlpSpan{}
	for _, sp := range spans {
		byID[sp.id()] = sp
	}
	one := func(what string, match func(otlpSpan) bool) otlpSpan {
		t.Helper()
		var found []otlpSpan
		for _, sp := range spans {
			if match(sp) {
				found = append(found, sp)
			}
		}
		if len(found) != 1 {
			names := make([]string, len(spans))
			for i, sp := range spans {
				names[i] = sp.scope + ":" + sp.Name
			}
			t.Fatalf("%d spans for %s, want 1; received: %v", len(found), what, names)
		}
		return found[0]
	}
	// under reports whether sp descends from the span with id ancestor.
	under := func(sp otlpSpan, ancestor string) bool {
		for range 16 {
			if sp.parent() == ancestor {
				return true
			}
			p, ok := byID[sp.parent()]
			if !ok {
				return false
			}
			sp = p
		}
		return false
	}
	childrenOf := func(ancestor, scope string) int {
		n := 0
		for _, sp := range spans {
			if strings.HasPrefix(sp.scope, scope) && under(sp, ancestor) {
				n++
			}
		}
		return n
	}
	const redisScope, pgScope = "github.com/redis/go-redis/extra/redisotel", "github.com/exaring/otelpgx"

	join := one("the join", func(sp otlpSpan) bool { return sp.Name == "POST /api/queues/:queue/join" })
	seq := join.intAttr("waitroom.seq")
	if join.Kind != tracepb.Span_SPAN_KIND_SERVER || join.attr("waitroom.queue") != "tr" || seq < 1 ||
		join.intAttr("http.response.status_code") != 201 || len(join.ParentSpanId) != 0 {
		t.Errorf("join span: kind %v, attributes %v, parent %q", join.Kind, join.Attributes, join.parent())
	}
	if n := childrenOf(join.id(), redisScope); n == 0 {
		t.Error("no Redis span under the join's span")
	}

	tick := one("the tick that admitted the ticket", func(sp otlpSpan) bool {
		return sp.Name == "admission tick" && sp.attr("waitroom.queue") == "tr" &&
			sp.intAttr("waitroom.seq.first") <= seq && seq <= sp.intAttr("waitroom.seq.last")
	})
	if tick.intAttr("waitroom.admitted") < 1 || len(tick.ParentSpanId) != 0 {
		t.Errorf("tick span: attributes %v, parent %q", tick.Attributes, tick.parent())
	}

	order := one("the order", func(sp otlpSpan) bool { return sp.Name == "POST /api/orders" })
	if order.trace() != shopTrace || order.parent() != shopSpan {
		t.Errorf("order span in trace %s under %s, want the shop's %s under %s", order.trace(), order.parent(), shopTrace, shopSpan)
	}
	linked := false
	for _, l := range order.Links {
		if hex.EncodeToString(l.TraceId) == tick.trace() && hex.EncodeToString(l.SpanId) == tick.id() {
			linked = true
		}
	}
	t.Logf("join %s seq %d; tick %s/%s range %d…%d; order %s/%s under %s, links %d",
		join.trace(), seq, tick.trace(), tick.id(), tick.intAttr("waitroom.seq.first"), tick.intAttr("waitroom.seq.last"),
		order.trace(), order.id(), order.parent(), len(order.Links))
	if !linked || order.intAttr("waitroom.tick") != tick.intAttr("waitroom.tick") {
		t.Errorf("order span's links %v and tick %d do not name the tick's span %s/%s (tick %d)",
			order.Links, order.intAttr("waitroom.tick"), tick.trace(), tick.id(), tick.intAttr("waitroom.tick"))
	}
	if n := childrenOf(order.id(), redisScope); n == 0 {
		t.Error("no Redis span under the order's span")
	}
	if n := childrenOf(order.id(), pgScope); n == 0 {
		t.Error("no PostgreSQL span under the order's span")
	}
	stream := one("the stream's opening", func(sp otlpSpan) bool { return sp.Name == "GET /api/queues/:queue/stream" })
	if stream.intAttr("http.response.status_code") != 200 {
		t.Errorf("stream span: %v", stream.Attributes)
	}

	// Background calls (lease renewals, presence reports) make no traces of their own: every
	// Redis or PostgreSQL span has a parent.
	for _, sp := range spans {
		if (strings.HasPrefix(sp.scope, redisScope) || strings.HasPrefix(sp.scope, pgScope)) && len(sp.ParentSpanId) == 0 {
			t.Errorf("a %s span without a parent: %s", sp.scope, sp.Name)
		}
	}
	id := strings.Split(j.Ticket, ".")[1]
	for _, sp := range spans {
		text := sp.Name
		for _, kv := range sp.Attributes {
			text += " " + anyText(kv.Value)
		}
		for what, secret := range map[string]string{"ticket": j.Ticket, "ticket id": id, "token": token} {
			if strings.Contains(text, secret) {
				t.Errorf("span %s holds the %s", sp.Name, what)
			}
		}
	}
}
