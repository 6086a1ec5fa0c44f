package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
	"github.com/waitroom/waitroom/topology"
)

// TestAutoRateFindsTheKnee: the auto rate controller (rate_mode "auto") end to end, against
// an order backend whose service time the test sets (PostgreSQL whose order INSERT sleeps,
// a trigger). In the test command it is a functional test whose verdict does not depend on
// the machine's speed (autoRateEndToEnd); with WR_AIMD_KNEE=1 — or the settings k6/aimd.sh
// passes (WR_AIMD_CSV, WR_AIMD_AUTO_SECONDS) — it is the benchmark that measures the knee
// and how closely the controller settles on it (measureKnee; BENCHMARKS.md, "Adaptive
// admission").
func TestAutoRateFindsTheKnee(t *testing.T) {
	if os.Getenv("WR_AIMD_KNEE") != "" || os.Getenv("WR_AIMD_CSV") != "" || os.Getenv("WR_AIMD_AUTO_SECONDS") != "" {
		// Not parallel: it measures this machine's capacity.
		measureKnee(t)
		return
	}
	t.Parallel()
	autoRateEndToEnd(t)
}

// autoRateEndToEnd drives the controller through its three moves with a backend whose
// latency is far from the target either way, so no machine's speed can change the verdict:
// a fast backend (an INSERT of a row, against a 3 s target) → the rate is raised, step by
// step, while the line uses it; a backend slower than the target (4 s per order on a pool of
// 6: slow answers, and fail-fast 503s once the pool is full) → the rate is cut; fast again →
// raised again once the cut's cool-down is over. Each move is read where an operator reads
// it: the queue's rate and rate_reason in GET /admin/api/stats.
func autoRateEndToEnd(t *testing.T) {
	const (
		pool     = 6
		targetMs = 3000
		slowMs   = 4000 // over the target whatever the machine: the INSERT alone sleeps this long
		line     = 40   // buyers kept waiting
	)
	rs := redistest.Start(t)
	db := testDB(t)
	in := startInProcess(t, "auto", baseEnv(rs.URL(), db, map[string]string{
		"WR_PG_MAX_CONNS": strconv.Itoa(pool), "WR_LOG_LEVEL": "info"}))
	svc := slowBackend(t, db, 0)
	mustAdmin(t, in, "PUT", "/admin/api/queues/aimd", map[string]any{"rate_per_second": 4, "places_per_ip": 0})
	mustAdmin(t, in, "PUT", "/admin/api/products/p", map[string]any{"name": "P", "price": 100, "stock": 10_000_000, "queue": "aimd"})
	b := newAimdBuyers(t, in, "aimd")
	defer b.stop()
	go b.feed(line)
	testwait.For(t, 60*time.Second, "a full line and a few orders", func() bool {
		return b.open.Load() >= line && b.admittedOrders() >= 5
	})

	type rateNow struct {
		rate   float64
		reason string
	}
	read := func() rateNow {
		st := statsOf[struct {
			Rate   float64 `json:"rate_per_second"`
			Reason string  `json:"rate_reason"`
		}](t, in, "aimd")
		return rateNow{st.Rate, st.Reason}
	}
	var seen []string // the rates and reasons as they changed, for the log
	var last rateNow
	waitFor := func(what string, cond func(r rateNow) bool) rateNow {
		t.Helper()
		var r rateNow
		testwait.For(t, 90*time.Second, what, func() bool {
			r = read()
			if r != last {
				seen = append(seen, fmt.Sprintf("%.2f/s %s", r.rate, r.reason))
				last = r
			}
			return cond(r)
		})
		return r
	}
	defer func() { t.Logf("rate reasons seen:\n%s", strings.Join(seen, "\n")) }()

	// 1. Healthy: raised from 4/s, one step (auto_max/100 = 1 user/s) per period.
	mustAdmin(t, in, "PUT", "/admin/api/queues/aimd", map[string]any{"rate_mode": "auto", "rate_per_second": 4,
		"auto_min": 2, "auto_max": 100, "auto_target_p95_ms": targetMs})
	waitFor("the rate raised to 6/s or more", func(r rateNow) bool {
		return r.rate >= 6 && strings.HasPrefix(r.reason, "raised to")
	})

	// 2. The backend slows past the target: the rate is cut.
	svc.set(t, slowMs)
	cut := waitFor("a cut", func(r rateNow) bool { return strings.HasPrefix(r.reason, "cut to") })
	if cut.rate < 2 || !(strings.Contains(cut.reason, fmt.Sprintf("over the %d ms target", targetMs)) || strings.Contains(cut.reason, "failures")) {
		t.Fatalf("cut: %.2f/s, %q; want a rate of auto_min 2/s or more, cut for a p95 over the target or for failures", cut.rate, cut.reason)
	}

	// 3. Fast again: once the cut's cool-down is over and the slow orders have drained, raised.
	svc.set(t, 0)
	waitFor("raised again after the cut", func(r rateNow) bool { return strings.HasPrefix(r.reason, "raised to") })
	if n := b.admittedOrders(); n == 0 {
		t.Fatal("no buyer ordered")
	}
}

// measureKnee is the benchmark: the knee measured with an open-loop rate step in fixed mode
// (admitted buyers order at once, so the backend sees the rate); then the auto mode, with a
// long line of buyers each ordering right after its admission, must settle within ±20 % of
// the knee with the backend's p95 under the target; then the service time doubles and the
// rate must drop below the new knee × 1.2 within a few seconds. Its verdict depends on the
// machine staying as fast through the run as while the knee was measured, so it runs in
// k6/aimd.sh (or with WR_AIMD_KNEE=1), not in the test command.
//
// The backend's latency is the order handler's as the guard measures it (the health
// windows in Redis, read here with topology.Health); the buyers' own latency is printed too.
// WR_AIMD_CSV=<file> writes the rate-vs-time series (k6/aimd.sh runs it longer with
// WR_AIMD_AUTO_SECONDS and WR_AIMD_AFTER_SECONDS and draws screenshots/aimd-rate.png).
func measureKnee(t *testing.T) {
	const (
		aimdPool  = 6
		serviceMs = 300 // capacity 6 / 0.3 s = 20 orders/s
		// The target leaves room for this machine's noise (a test run shares 2 cores with
		// others): the backend's own latency is 300 ms; past the knee its p95 climbs by seconds.
		targetMs = 1000
		line     = 150 // buyers kept waiting
	)
	autoFor := envSeconds("WR_AIMD_AUTO_SECONDS", 40)
	afterFor := envSeconds("WR_AIMD_AFTER_SECONDS", 10)
	rs := redistest.Start(t)
	db := testDB(t)
	in := startInProcess(t, "auto", baseEnv(rs.URL(), db, map[string]string{
		"WR_PG_MAX_CONNS": strconv.Itoa(aimdPool), "WR_LOG_LEVEL": "info"}))
	svc := slowBackend(t, db, serviceMs)
	topo := topology.New(rstore.New(redistest.ClientURL(t, rs.URL()), time.Second))
	mustAdmin(t, in, "PUT", "/admin/api/queues/aimd", map[string]any{"rate_per_second": 12, "places_per_ip": 0})
	mustAdmin(t, in, "PUT", "/admin/api/products/p", map[string]any{"name": "P", "price": 100, "stock": 10_000_000, "queue": "aimd"})

	b := newAimdBuyers(t, in, "aimd")
	defer b.stop()
	go b.feed(line)
	target := time.Duration(targetMs) * time.Millisecond
	// Warm up at a low rate until the line is full and its streams are open (the joins'
	// burst is not the backend's load), and a few orders went through.
	mustAdmin(t, in, "PUT", "/admin/api/queues/aimd", map[string]any{"rate_per_second": 6})
	testwait.For(t, 30*time.Second, "a full line and a few orders", func() bool {
		return b.open.Load() >= line && b.admittedOrders() >= 10
	})

	// 1. The knee: fixed rates stepping up, 3 s each; a step passes when the backend's p95
	// over its last 2 s stays under the target with failures ≤ 1 %.
	var knee float64
	for rate := 12.0; rate <= 30; rate += 2 {
		mustAdmin(t, in, "PUT", "/admin/api/queues/aimd", map[string]any{"rate_per_second": rate})
		time.Sleep(time.Second) // the open-loop step runs for its time: nothing to wait for
		from := time.Now()
		time.Sleep(2 * time.Second)
		w, err := topo.Health(context.Background(), "aimd", from)
		if err != nil {
			t.Fatal(err)
		}
		p95 := w.Quantile(0.95)
		ok := w.Count >= 5 && p95 <= target && w.FailureRatio() <= 0.01
		t.Logf("knee step %4.0f/s: %3d orders, p95 %4d ms, %d failures, buyers' p95 %4d ms → %v",
			rate, w.Count, p95.Milliseconds(), w.Failures, b.clientP95(from, time.Now()).Milliseconds(), map[bool]string{true: "under", false: "over"}[ok])
		if !ok {
			break
		}
		knee = rate
	}
	if knee == 0 {
		t.Fatal("no step kept the backend under the target: the test's backend is too slow for this machine")
	}
	formula := float64(aimdPool) * (1000.0 / serviceMs) * (1 - 0.3)
	t.Logf("measured knee %.0f/s (capacity %d connections / %d ms = %.0f/s; the seeds' formula pool × (1000 ms / service time) × 0.7 = %.1f/s)",
		knee, aimdPool, serviceMs, float64(aimdPool)*1000/serviceMs, formula)

	// The last step's backlog drains at a low rate before the auto mode starts.
	mustAdmin(t, in, "PUT", "/admin/api/queues/aimd", map[string]any{"rate_per_second": 6})
	testwait.For(t, 20*time.Second, "the backlog drained", func() bool {
		w, err := topo.Health(context.Background(), "aimd", time.Now().Add(-time.Second))
		return err == nil && w.Count > 0 && w.Quantile(0.95) < 2*time.Duration(serviceMs)*time.Millisecond
	})

	// 2. Auto mode from 14/s.
	mustAdmin(t, in, "PUT", "/admin/api/queues/aimd", map[string]any{"rate_mode": "auto", "rate_per_second": 14,
		"auto_min": 4, "auto_max": 60, "auto_target_p95_ms": targetMs})
	start := time.Now()
	rec := newAimdRecorder(t, in, topo, b, start)
	go rec.run()
	halveAt := start.Add(autoFor)
	time.Sleep(time.Until(halveAt))
	// Settled: the controller found the knee (its first cut) and that overshoot's backlog
	// had its 5 s to drain (the controller's CutHold).
	settleAt := rec.firstCut()
	if settleAt.IsZero() {
		t.Fatalf("the controller never cut in %v: it did not reach the knee (rate %.1f/s)", autoFor, rec.last().rate)
	}
	settleAt = settleAt.Add(5 * time.Second)
	settled := rec.between(settleAt, halveAt)
	svc.set(t, 2*serviceMs)
	newKnee := knee / 2
	backedOff := time.Duration(-1)
	deadline := halveAt.Add(8 * time.Second)
	for time.Now().Before(deadline) && backedOff < 0 {
		time.Sleep(250 * time.Millisecond)
		if r := rec.last(); r.rate < newKnee*1.2 {
			backedOff = r.at.Sub(halveAt)
		}
	}
	time.Sleep(time.Until(halveAt.Add(afterFor)))
	rec.stop()
	b.stop()

	rates := make([]float64, 0, len(settled))
	var sw topology.HealthWindow
	for _, r := range settled {
		rates = append(rates, r.rate)
		sw.Merge(r.w)
	}
	if len(rates) < 5 {
		t.Fatalf("only %d samples in the settled window", len(rates))
	}
	slices.Sort(rates)
	median := rates[len(rates)/2]
	t.Logf("settled (%.0f–%.0f s after auto on: its first cut + 5 s): median rate %.1f/s (min %.1f, max %.1f) vs knee %.0f/s (%+.0f %%); backend p95 %d ms over %d orders, %d failures; buyers' p95 %d ms",
		settleAt.Sub(start).Seconds(), autoFor.Seconds(), median, rates[0], rates[len(rates)-1], knee, 100*(median/knee-1),
		sw.Quantile(0.95).Milliseconds(), sw.Count, sw.Failures, b.clientP95(settleAt, halveAt).Milliseconds())
	t.Logf("service time doubled: new knee %.0f/s; rate below %.1f/s after %v; rate at the end %.1f/s (%s)",
		newKnee, newKnee*1.2, backedOff.Round(100*time.Millisecond), rec.last().rate, rec.last().reason)
	rec.writeCSV(t, fmt.Sprintf("knee %g\ntarget %d\nhalve %.1f\nsettled_median %.2f\nsettled_p95_ms %d\nbackoff_seconds %.1f\n",
		knee, targetMs, halveAt.Sub(start).Seconds(), median, sw.Quantile(0.95).Milliseconds(), backedOff.Seconds()))
	if median < 0.8*knee || median > 1.2*knee {
		t.Errorf("settled median rate %.1f/s is not within ±20 %% of the knee %.0f/s", median, knee)
	}
	if p95 := sw.Quantile(0.95); sw.Count < 50 || p95 > target {
		t.Errorf("settled backend p95 %v over %d orders; want under the %v target", p95, sw.Count, target)
	}
	if backedOff < 0 {
		t.Errorf("the rate did not drop below %.1f/s within 8 s of the service time doubling (now %.1f/s)", newKnee*1.2, rec.last().rate)
	}
	if n := b.admittedOrders(); n == 0 {
		t.Fatal("no buyer ordered")
	}
}

func envSeconds(name string, def int) time.Duration {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return time.Duration(def) * time.Second
}

// aimdBackend is the order database's service time, set by a trigger on orders.
type aimdBackend struct{ db string }

func slowBackend(t *testing.T, db string, ms int) aimdBackend {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, stmt := range []string{
		`CREATE TABLE aimd_service (ms integer NOT NULL)`,
		`INSERT INTO aimd_service VALUES (` + strconv.Itoa(ms) + `)`,
		`CREATE FUNCTION aimd_sleep() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN PERFORM pg_sleep((SELECT ms FROM aimd_service) / 1000.0); RETURN NEW; END $$`,
		`CREATE TRIGGER aimd_sleep BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION aimd_sleep()`,
	} {
		if _, err := conn.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return aimdBackend{db: db}
}

func (b aimdBackend) set(t *testing.T, ms int) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), b.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE aimd_service SET ms = $1`, ms); err != nil {
		t.Fatal(err)
	}
}

// aimdBuyers keeps a line of buyers: each joins, watches its stream and orders once at
// admission.
type aimdBuyers struct {
	t       *testing.T
	in      *instance
	queue   string
	ctx     context.Context
	cancel  context.CancelFunc
	client  *http.Client
	waiting atomic.Int64
	open    atomic.Int64 // streams open, waiting for admission
	seq     atomic.Int64
	wg      sync.WaitGroup
	once    sync.Once

	mu     sync.Mutex
	orders []aimdOrder
}

type aimdOrder struct {
	done    time.Time
	latency time.Duration
	status  int
}

func newAimdBuyers(t *testing.T, in *instance, name string) *aimdBuyers {
	ctx, cancel := context.WithCancel(testContext(t))
	return &aimdBuyers{t: t, in: in, queue: name, ctx: ctx, cancel: cancel,
		client: &http.Client{Transport: specTransport{base: &http.Transport{MaxIdleConnsPerHost: 64}}, Timeout: 10 * time.Second}}
}

func (b *aimdBuyers) stop() {
	b.once.Do(func() {
		b.cancel()
		b.wg.Wait()
	})
}

// feed tops the line up to n waiting buyers every 50 ms.
func (b *aimdBuyers) feed(n int) {
	tk := time.NewTicker(50 * time.Millisecond)
	defer tk.Stop()
	for {
		for b.waiting.Load() < int64(n) && b.ctx.Err() == nil {
			b.waiting.Add(1)
			b.wg.Add(1)
			go b.buyer()
		}
		select {
		case <-b.ctx.Done():
			return
		case <-tk.C:
		}
	}
}

func (b *aimdBuyers) buyer() {
	defer b.wg.Done()
	admitted := false
	defer func() {
		if !admitted {
			b.waiting.Add(-1)
		}
	}()
	var j joinResp
	if st := b.do("POST", "/api/queues/"+b.queue+"/join", "", nil, &j); (st != 200 && st != 201) || j.Ticket == "" {
		return
	}
	s, _ := openStreamWith(b.t, streamClient, b.in.url+"/api/queues/"+b.queue+"/stream", j.Ticket, "")
	if s == nil {
		return
	}
	defer s.close()
	b.open.Add(1)
	defer func() {
		if !admitted {
			b.open.Add(-1)
		}
	}()
	for {
		select {
		case <-b.ctx.Done():
			return
		case ev, ok := <-s.events:
			if !ok {
				return
			}
			if ev.Name != "admitted" {
				continue
			}
			admitted = true
			b.waiting.Add(-1)
			b.open.Add(-1)
			token, _ := ev.Data["token"].(string)
			start := time.Now()
			st := b.do("POST", "/api/orders", j.Ticket, `{"product_id":"p","quantity":1}`, nil,
				"X-Admission-Token", token, "Idempotency-Key", "k-"+strconv.FormatInt(b.seq.Add(1), 10))
			if st == 0 {
				return // the test is ending
			}
			b.mu.Lock()
			b.orders = append(b.orders, aimdOrder{done: time.Now(), latency: time.Since(start), status: st})
			b.mu.Unlock()
			return
		}
	}
}

// do sends one request; 0 when it could not be made (the test is ending).
func (b *aimdBuyers) do(method, path, bearer string, body any, out any, hdr ...string) int {
	var r io.Reader
	if s, ok := body.(string); ok {
		r = strings.NewReader(s)
	}
	req, _ := http.NewRequestWithContext(b.ctx, method, b.in.url+path, r)
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.client.Do(req)
	if err != nil {
		if b.ctx.Err() == nil {
			b.t.Errorf("%s %s: %v", method, path, err)
		}
		return 0
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if out != nil {
		_ = json.Unmarshal(data, out)
	}
	if res.StatusCode >= 400 && res.StatusCode != 503 && b.ctx.Err() == nil {
		b.t.Errorf("%s %s: %d %s", method, path, res.StatusCode, data)
	}
	return res.StatusCode
}

// clientP95 is the buyers' own order latency p95 for orders finished within [from, to).
func (b *aimdBuyers) clientP95(from, to time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var l []time.Duration
	for _, o := range b.orders {
		if !o.done.Before(from) && o.done.Before(to) {
			l = append(l, o.latency)
		}
	}
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return l[len(l)*95/100]
}

func (b *aimdBuyers) admittedOrders() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.orders)
}

// aimdRecorder samples the controller's rate (admin stats) and the backend's windows once
// per second.
type aimdRecorder struct {
	t     *testing.T
	in    *instance
	topo  *topology.Topology
	b     *aimdBuyers
	start time.Time
	done  chan struct{}
	ended chan struct{}

	mu      sync.Mutex
	samples []aimdSample
}

type aimdSample struct {
	at     time.Time
	rate   float64
	reason string
	w      topology.HealthWindow // the backend's windows new since the sample before
	client time.Duration         // the buyers' p95 of orders finished since the sample before
}

func newAimdRecorder(t *testing.T, in *instance, topo *topology.Topology, b *aimdBuyers, start time.Time) *aimdRecorder {
	return &aimdRecorder{t: t, in: in, topo: topo, b: b, start: start, done: make(chan struct{}), ended: make(chan struct{})}
}

func (r *aimdRecorder) run() {
	defer close(r.ended)
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	lastEnd, prev := r.start, r.start
	for {
		select {
		case <-r.done:
			return
		case now := <-tk.C:
			var st struct {
				Queues []struct {
					Name          string  `json:"name"`
					RatePerSecond float64 `json:"rate_per_second"`
					RateReason    string  `json:"rate_reason"`
				} `json:"queues"`
			}
			if r.b.do("GET", "/admin/api/stats", adminToken, nil, &st) != 200 {
				continue
			}
			s := aimdSample{at: now, client: r.b.clientP95(prev, now)}
			prev = now
			for _, qs := range st.Queues {
				if qs.Name == "aimd" {
					s.rate, s.reason = qs.RatePerSecond, qs.RateReason
				}
			}
			if w, err := r.topo.Health(context.Background(), "aimd", lastEnd); err == nil && w.Count > 0 {
				s.w, lastEnd = w, w.End
			}
			r.mu.Lock()
			r.samples = append(r.samples, s)
			r.mu.Unlock()
		}
	}
}

func (r *aimdRecorder) stop() {
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	<-r.ended
}

func (r *aimdRecorder) last() aimdSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == 0 {
		return aimdSample{rate: 1e9}
	}
	return r.samples[len(r.samples)-1]
}

// firstCut is when the controller first cut the rate (zero: never).
func (r *aimdRecorder) firstCut() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		if strings.HasPrefix(s.reason, "cut to") {
			return s.at
		}
	}
	return time.Time{}
}

func (r *aimdRecorder) between(from, to time.Time) []aimdSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []aimdSample
	for _, s := range r.samples {
		if !s.at.Before(from) && s.at.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

// writeCSV logs the series and, with WR_AIMD_CSV set, writes it there (and the run's
// numbers, "name value" lines, next to it in <file>.meta for k6/aimdchart).
func (r *aimdRecorder) writeCSV(t *testing.T, meta string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sb strings.Builder
	sb.WriteString("seconds,rate_per_second,backend_p95_ms,orders,failures,buyers_p95_ms,rate_reason\n")
	for _, s := range r.samples {
		fmt.Fprintf(&sb, "%.1f,%.2f,%d,%d,%d,%d,%q\n", s.at.Sub(r.start).Seconds(), s.rate, s.w.Quantile(0.95).Milliseconds(),
			s.w.Count, s.w.Failures, s.client.Milliseconds(), s.reason)
	}
	t.Logf("rate-vs-time series:\n%s", sb.String())
	if path := os.Getenv("WR_AIMD_CSV"); path != "" {
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(path+".meta", []byte(meta), 0o644); err != nil {
			t.Error(err)
		}
	}
}
