package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Drop day: a scheduled sale and its pre-queue, the draw at the start, sold out.
//
// -mode draw: the queue is scheduled -start-in ahead; -n users join (state "prequeue") and
// hold streams until each has had its prequeue event; then the start is moved to now
// (admin PUT starts_at: null) and every stream's first position event is timed from that
// call. The positions must be a permutation of 1…N (the drawn places), each equal to the
// user's rank in the published order (GET …/draw/order, by draw_id), and GET …/draw must
// show the seed (whose SHA-256 is the commitment published before the start).
//
// -mode soldout: -n users hold waiting streams (admission rate 0: nobody is admitted), and a
// product naming the queue has stock 1; its stock is set to 0 through the admin API and
// every stream's sold_out event is timed from that call. A join afterwards must answer 423
// sold_out.
//
// -mode idlecost: a queue holding -n places and no streams (plain, rate 0, or
// -scheduled with the places in its pre-queue), measured for -duration: Redis commands per
// second and per admission tick, server CPU. The cost must not grow with -n.

// First event kinds of a stream.
const (
	evNone uint8 = iota
	evPrequeue
	evPosition
	evOther
)

func eventKind(ev []byte) uint8 {
	switch string(ev) {
	case "prequeue":
		return evPrequeue
	case "position":
		return evPosition
	}
	return evOther
}

// dropRec is one waiter's drop-day record: its first event's kind, prequeue events,
// position events before the parent's "watch" (the start), its first position event after it
// (receipt and server_time, Unix ns) and first sold_out event, and its draw_id from the join
// answer.
type dropRec struct {
	Index   int    `json:"i"`
	First   uint8  `json:"f,omitempty"`
	Pre     int32  `json:"pq,omitempty"`
	Early   int32  `json:"e,omitempty"`
	Pos     int64  `json:"p,omitempty"`
	PosNull bool   `json:"pn,omitempty"`
	PosAt   int64  `json:"pa,omitempty"`
	PosSrv  int64  `json:"ps,omitempty"`
	SoldAt  int64  `json:"sa,omitempty"`
	SoldSrv int64  `json:"ss,omitempty"`
	EndAt   int64  `json:"x,omitempty"` // the stream ended without the swarm closing it
	DrawID  string `json:"d,omitempty"`
}

// permCheck: are the drawn positions a permutation of 1…Expected?
type permCheck struct {
	Expected        int64   `json:"expected_n"`
	Received        int     `json:"positions_received"`
	Distinct        int     `json:"distinct"`
	Duplicates      int     `json:"duplicates"`
	Missing         int     `json:"missing"`
	OutOfRange      int     `json:"out_of_range"`
	Null            int     `json:"null_positions"`
	OK              bool    `json:"ok"`
	DuplicateSample []int64 `json:"duplicate_sample,omitempty"`
	MissingSample   []int64 `json:"missing_sample,omitempty"`
	// Missing places, by their user (found through the published order and the join's
	// draw_id): without an open stream at the call (its stream had ended, or never opened),
	// with one (a real miss), or unknown.
	MissingNoStream int `json:"missing_user_had_no_stream"`
	MissingOpen     int `json:"missing_user_had_a_stream"`
	MissingUnknown  int `json:"missing_user_unknown"`
	// OKOpen: no duplicate, out-of-range or null position, and every missing place is that
	// of a user without an open stream at the call.
	OKOpen  bool    `json:"ok_for_open_streams"`
	missing []int64 // every missing place
}

// explain sorts the missing places by whether their user had an open stream at the call.
func (pc *permCheck) explain(recs []dropRec, t0ns int64, order []string) {
	byID := make(map[string]*dropRec, len(recs))
	for i := range recs {
		if recs[i].DrawID != "" {
			byID[strings.ToLower(recs[i].DrawID)] = &recs[i]
		}
	}
	for _, p := range pc.missing {
		var d *dropRec
		if p >= 1 && int(p) <= len(order) {
			d = byID[strings.ToLower(order[p-1])]
		}
		switch {
		case d == nil:
			pc.MissingUnknown++
		case d.First == evNone || (d.EndAt > 0 && d.EndAt < t0ns):
			pc.MissingNoStream++
		default:
			pc.MissingOpen++
		}
	}
	pc.OKOpen = pc.Duplicates == 0 && pc.OutOfRange == 0 && pc.Null == 0 && pc.MissingOpen == 0 && pc.MissingUnknown == 0
}

// orderCheck compares each user's drawn position with its draw_id's rank in GET …/draw/order.
type orderCheck struct {
	Lines      int    `json:"order_lines"`
	Checked    int    `json:"checked"`
	Mismatched int    `json:"mismatched"`
	Unknown    int    `json:"draw_id_not_in_order"`
	Note       string `json:"note,omitempty"`
}

// dropDay is the drop-day part of a draw or soldout report.
type dropDay struct {
	Kind              string  `json:"kind"`
	ScheduledStartsAt string  `json:"scheduled_starts_at,omitempty"`
	Product           string  `json:"product,omitempty"`
	Joined            int     `json:"joined"`
	JoinPrequeue      int     `json:"join_answers_prequeue"`
	Streams           int     `json:"streams"`
	PrequeueFirst     int     `json:"streams_first_event_prequeue"`
	AdminCall         string  `json:"admin_call"`
	AdminCallAt       string  `json:"admin_call_at"`
	AdminCallMS       float64 `json:"admin_call_ms"`
	AdminCallError    string  `json:"admin_call_error,omitempty"`
	PrequeueEvents    int64   `json:"prequeue_events"`
	EarlyPositions    int     `json:"streams_with_a_position_before_the_start,omitempty"`
	// Streams open at the call (those that had ended before it cannot get the event).
	EndedBeforeCall       int `json:"streams_ended_before_the_call"`
	EndedAfterCallWithout int `json:"streams_ended_after_the_call_without_the_event,omitempty"`
	Expected              int `json:"expected"`
	Received              int `json:"received"`
	Within5s              int `json:"received_within_5s"`
	BeforeCall            int `json:"received_before_the_call"`
	// From the admin call to the event parsed by the client, to the event's server_time, and
	// from server_time to parsed (the fan-out's delivery).
	Latency       summary  `json:"latency_from_admin_call"`
	ServerLatency summary  `json:"server_time_from_admin_call"`
	Delivery      summary  `json:"delivery_server_time_to_parsed"`
	AllOpenMS     *float64 `json:"all_open_streams_ms,omitempty"` // the wait loop's view (50 ms progress reports)
	TargetMS      float64  `json:"target_ms,omitempty"`
	TargetMet     *bool    `json:"target_met,omitempty"`

	// draw
	Permutation   *permCheck     `json:"permutation,omitempty"`
	SeedVisibleMS *float64       `json:"seed_visible_ms,omitempty"` // GET …/draw showed the seed
	Draw          map[string]any `json:"draw,omitempty"`            // GET …/draw afterwards
	CommitmentOK  *bool          `json:"commitment_matches_seed,omitempty"`
	Order         *orderCheck    `json:"order,omitempty"`

	// soldout
	SoldOutTwice int64  `json:"sold_out_twice,omitempty"`
	JoinAfter    string `json:"join_after_sold_out,omitempty"`
}

type dropReport struct {
	reportT
	Drop    dropDay `json:"drop_day"`
	Summary string  `json:"summary"`
}

// putProduct creates or updates a product through the admin API of the first target that
// answers.
func (r *run) putProduct(id string, body map[string]any) error {
	b, _ := json.Marshal(body)
	var err error
	for _, t := range r.o.Targets {
		req, _ := http.NewRequest("PUT", t+"/admin/api/products/"+id, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+r.o.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, e := httpc.Do(req)
		if e != nil {
			err = fmt.Errorf("admin PUT product: %w", e)
			continue
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("admin PUT product: %s %s", resp.Status, strings.TrimSpace(string(msg)))
		}
		return nil
	}
	return err
}

// getJSON GETs path from the first target and decodes a JSON object (status, object).
func (r *run) getJSON(path string, bearer bool) (int, map[string]any, error) {
	req, _ := http.NewRequest("GET", r.o.Targets[0]+path, nil)
	if bearer {
		req.Header.Set("Authorization", "Bearer "+r.o.AdminToken)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("GET %s: %s: %v", path, resp.Status, err)
	}
	return resp.StatusCode, m, nil
}

func runDropDay(o options) error {
	draw := o.Mode == "draw"
	r := &run{o: o, start: time.Now()}
	r.logf = func(f string, a ...any) {
		if !o.Quiet {
			fmt.Fprintf(os.Stderr, "[%6.1fs] "+f+"\n", append([]any{time.Since(r.start).Seconds()}, a...)...)
		}
	}
	// The connect phase may take several times its planned pace: every pre-queue stream gets
	// a prequeue event whenever the size changes (100,000 streams: 357/s, not 1,500/s).
	planned := time.Duration(float64(o.N)/o.ConnectRate*float64(time.Second))*5 + o.Baseline + o.Settle + o.Idle +
		o.Wait + o.Drain + time.Minute
	deadline, hard := r.armHardStop(&o, planned)
	defer hard.Stop()

	dd := dropDay{Kind: o.Mode}
	// Admission rate 0 throughout: nobody is admitted, so a stream's first position after
	// the start is its drawn place, and waiting streams stay waiting until sold out.
	body := map[string]any{"paused": false, "rate_per_second": 0, "max_active": 0,
		"token_ttl_seconds": int(o.TTL.Seconds()), "closed": false, "places_per_ip": 0}
	product := o.Product
	if draw {
		at := time.Now().Add(o.StartIn).UTC().Truncate(time.Second)
		dd.ScheduledStartsAt = at.Format(time.RFC3339)
		body["method"] = "fifo"
		body["starts_at"] = dd.ScheduledStartsAt
	}
	if err := r.putQueue(body); err != nil {
		return err
	}
	if !draw {
		if product == "" {
			product = o.Queue
		}
		dd.Product = product
		if err := r.putProduct(product, map[string]any{"name": "swarm " + o.Queue, "price": 100, "stock": 1, "queue": o.Queue}); err != nil {
			return err
		}
	}
	before := r.sample()
	if o.Baseline > 0 {
		r.measure("baseline (no waiters)", "baseline", 0, o.Baseline)
		before = r.sample()
	}
	if err := r.spawn(deadline); err != nil {
		r.killAll()
		return err
	}
	var pmu sync.Mutex
	latest := map[int]dropMsg{}
	for _, p := range r.procs {
		go func() {
			for m := range p.drop {
				pmu.Lock()
				latest[m.Index] = m
				pmu.Unlock()
			}
		}()
	}
	counts := func() (pos, sold, ended int64) {
		pmu.Lock()
		defer pmu.Unlock()
		for _, m := range latest {
			pos += m.Pos
			sold += m.Sold
			ended += m.Ended
		}
		return pos, sold, ended
	}

	conn := r.waitConnected()
	dd.Streams = conn.OK
	r.logf("connected %d/%d in %.1fs (%.0f/s), %d failed; %d joins answered prequeue, %d streams began with a prequeue event",
		conn.OK, o.N, conn.Seconds, float64(conn.OK)/max(conn.Seconds, 1e-9), conn.Failed, conn.JoinPrequeue, conn.PrequeueFirst)
	if draw && conn.PrequeueFirst < conn.OK {
		warnf("%d of %d streams did not begin with a prequeue event", conn.OK-conn.PrequeueFirst, conn.OK)
	}
	time.Sleep(o.Settle)
	afterConnect := r.sample()
	mem := memoryOf(fmt.Sprintf("%v after connecting", o.Settle), before, afterConnect, conn.OK)
	r.logf("server memory per stream: RSS %.2f KB, heap in use %.2f KB, goroutines %.3f", mem.RSSPerWaiterKB, mem.HeapInusePerWaiterKB, mem.GoroutinesPerWaiter)
	if o.Idle > 0 {
		name := "idle: waiting streams, rate 0"
		if draw {
			name = "idle: pre-queue streams before the start"
		}
		r.measure(name, "idle", conn.OK, o.Idle)
	}

	r.broadcast("watch")
	time.Sleep(300 * time.Millisecond) // every process's first count is in
	pos0, sold0, _ := counts()
	a := r.sample()
	t0 := time.Now()
	var callErr error
	if draw {
		dd.AdminCall = "PUT /admin/api/queues/" + o.Queue + ` {"starts_at":null}`
		callErr = r.putQueue(map[string]any{"starts_at": nil})
	} else {
		dd.AdminCall = "PUT /admin/api/products/" + product + ` {"stock":0}`
		callErr = r.putProduct(product, map[string]any{"stock": 0})
	}
	dd.AdminCallMS = round(float64(time.Since(t0))/1e6, 2)
	dd.AdminCallAt = t0.UTC().Format(time.RFC3339Nano)
	if callErr != nil {
		dd.AdminCallError = callErr.Error()
		warnf("%v", callErr)
	}
	r.logf("%s answered in %.1f ms", dd.AdminCall, dd.AdminCallMS)

	// The seed: GET …/draw every 20 ms until it shows one.
	seedCh := make(chan float64, 1)
	if draw {
		go func() {
			end := t0.Add(o.Wait)
			for time.Now().Before(end) {
				if _, m, err := r.getJSON("/api/queues/"+o.Queue+"/draw", false); err == nil {
					if s, _ := m["seed"].(string); s != "" {
						seedCh <- float64(time.Since(t0)) / 1e6
						return
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			seedCh <- -1
		}()
	}
	var seedMS *float64
	seedDone := !draw
	allAt := -1.0
	var mid sample // when every open stream had its event (or at -wait)
	for end := t0.Add(o.Wait); ; time.Sleep(20 * time.Millisecond) {
		if !time.Now().Before(end) {
			if allAt < 0 {
				mid = r.sample()
			}
			break
		}
		if !seedDone {
			select {
			case ms := <-seedCh:
				seedDone = true
				if ms >= 0 {
					seedMS = &ms
					r.logf("GET /draw shows the seed %.0f ms after the call", ms)
				} else {
					r.logf("GET /draw showed no seed within %v", o.Wait)
				}
			default:
			}
		}
		p, s, ended := counts()
		got := p - pos0
		if !draw {
			got = s - sold0
		}
		// Every stream still open: those that ended (the server or the network closed them)
		// cannot get it.
		if want := int64(conn.OK) - ended; got >= want && allAt < 0 {
			mid = r.sample()
			allAt = float64(time.Since(t0)) / 1e6
			r.logf("every open stream (%d; %d ended) had its event within ~%.0f ms (progress reports every 50 ms; exact figures below)", want, ended, allAt)
		}
		if allAt >= 0 && seedDone {
			break
		}
	}
	if allAt < 0 {
		p, s, ended := counts()
		r.logf("after %v: %d position, %d sold_out events of %d streams (%d ended)", o.Wait, p-pos0, s-sold0, conn.OK, ended)
	}
	// The window from the call until every open stream had its event: is the machine the
	// limit while the events go out?
	kind := "soldout"
	wname := "sold out: admin call → every sold_out event"
	if draw {
		kind, wname = "draw", "start: admin call → every drawn position"
	}
	r.windows = append(r.windows, windowOf(wname, kind, conn.OK, a, mid))
	w := r.windows[len(r.windows)-1]
	r.logf("  %.2f s: server CPU %.3f cores, Redis %.1f cmds/s (%.1f script runs/s), swarm %.2f cores, machine %.2f cores busy", w.Seconds, w.CPUCores, w.RedisCallsPerSec, w.RedisScriptsPerSec, w.SwarmCores, w.MachineCores)
	time.Sleep(o.Drain) // late and repeated events

	var order []string
	var orderErr string
	if draw {
		dd.SeedVisibleMS = seedMS
		if _, m, err := r.getJSON("/api/queues/"+o.Queue+"/draw", false); err == nil {
			dd.Draw = m
		} else {
			warnf("GET /draw: %v", err)
		}
		order, orderErr = r.drawOrder()
	} else {
		dd.JoinAfter = r.joinOnceStatus()
	}

	r.broadcast("stop")
	results := r.collect()
	hard.Stop()
	rep := dropReport{reportT: r.report(conn, mem, results, nil)}
	var recs []dropRec
	for _, c := range results {
		recs = append(recs, c.Drop...)
	}
	dd.Joined = len(recs)
	dd.JoinPrequeue = int(rep.Events["join_prequeue"])
	dd.PrequeueEvents = rep.Events["prequeue"]
	for _, d := range recs {
		if d.First == evPrequeue {
			dd.PrequeueFirst++
		}
		if draw && d.Early > 0 {
			dd.EarlyPositions++
		}
	}
	var lat, srv, dlv hist
	t0ns := t0.UnixNano()
	for _, d := range recs {
		if d.EndAt > 0 && d.EndAt < t0ns {
			dd.EndedBeforeCall++
		}
		at, sv := d.PosAt, d.PosSrv
		if !draw {
			at, sv = d.SoldAt, d.SoldSrv
		}
		switch {
		case at == 0:
			if d.EndAt >= t0ns {
				dd.EndedAfterCallWithout++
			}
			continue
		case at < t0ns:
			dd.BeforeCall++
			continue
		}
		dd.Received++
		lat.add(time.Duration(at - t0ns))
		if at-t0ns <= 5e9 {
			dd.Within5s++
		}
		if sv > 0 {
			srv.add(time.Duration(sv - t0ns))
			dlv.add(time.Duration(at - sv))
		}
	}
	dd.Expected = conn.OK - dd.EndedBeforeCall
	dd.Latency, dd.ServerLatency, dd.Delivery = lat.snapshot().summary(), srv.snapshot().summary(), dlv.snapshot().summary()
	if allAt >= 0 {
		dd.AllOpenMS = &allAt
	}
	if draw {
		dd.TargetMS = 5000
		met := dd.Received == dd.Expected && dd.Expected > 0 && dd.Latency.MaxMS <= dd.TargetMS
		dd.TargetMet = &met
		participants := int64(dd.Joined)
		if v, ok := dd.Draw["participants"].(float64); ok && v > 0 {
			participants = int64(v)
		}
		dd.Permutation = permutationOf(recs, t0ns, participants)
		dd.Permutation.explain(recs, t0ns, order)
		if seed, _ := dd.Draw["seed"].(string); seed != "" {
			com, _ := dd.Draw["commitment"].(string)
			raw, err := hex.DecodeString(seed)
			sum := sha256.Sum256(raw)
			ok := err == nil && hex.EncodeToString(sum[:]) == strings.ToLower(com)
			dd.CommitmentOK = &ok
		}
		dd.Order = orderCheckOf(recs, t0ns, order, orderErr)
	} else {
		dd.SoldOutTwice = rep.Events["sold_out_twice"]
	}
	rep.Drop = dd
	rep.Summary = dropSummary(o, dd)
	rep.table(os.Stdout)
	dropTable(os.Stdout, dd)
	fmt.Println(rep.Summary)
	if o.Out == "" {
		return nil
	}
	return writeJSON(o.Out, rep)
}

// drawOrder reads GET …/draw/order: the draw_ids in drawn order.
func (r *run) drawOrder() ([]string, string) {
	resp, err := httpc.Get(r.o.Targets[0] + "/api/queues/" + r.o.Queue + "/draw/order")
	if err != nil {
		return nil, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Sprintf("GET /draw/order: %s %s", resp.Status, strings.TrimSpace(string(b[:min(len(b), 200)])))
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, ""
}

// joinOnceStatus joins once after the sale ended and tells the answer ("423 sold_out").
func (r *run) joinOnceStatus() string {
	resp, err := httpc.Post(r.o.Targets[0]+"/api/queues/"+r.o.Queue+"/join", "application/json", nil)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	code, _ := jsonStr(b, "code")
	return strings.TrimSpace(fmt.Sprintf("%d %s", resp.StatusCode, code))
}

// permutationOf checks the first positions received after the start (t0ns) against 1…n.
func permutationOf(recs []dropRec, t0ns, n int64) *permCheck {
	pc := &permCheck{Expected: n}
	seen := map[int64]int{}
	for _, d := range recs {
		if d.PosAt == 0 || d.PosAt < t0ns {
			continue
		}
		pc.Received++
		if d.PosNull {
			pc.Null++
			continue
		}
		if d.Pos < 1 || d.Pos > n {
			pc.OutOfRange++
			continue
		}
		seen[d.Pos]++
	}
	pc.Distinct = len(seen)
	var dups []int64
	for p, k := range seen {
		if k > 1 {
			pc.Duplicates += k - 1
			dups = append(dups, p)
		}
	}
	sort.Slice(dups, func(i, j int) bool { return dups[i] < dups[j] })
	pc.DuplicateSample = dups[:min(len(dups), 20)]
	for p := int64(1); p <= n; p++ {
		if seen[p] == 0 {
			pc.Missing++
			pc.missing = append(pc.missing, p)
			if len(pc.MissingSample) < 20 {
				pc.MissingSample = append(pc.MissingSample, p)
			}
		}
	}
	pc.OK = pc.Missing == 0 && pc.Duplicates == 0 && pc.OutOfRange == 0 && pc.Null == 0 && int64(pc.Received) == n
	return pc
}

// orderCheckOf compares each drawn position with the user's rank in the published order
// (the queue was empty when scheduled, so the drawn places are 1…N).
func orderCheckOf(recs []dropRec, t0ns int64, order []string, orderErr string) *orderCheck {
	oc := &orderCheck{Lines: len(order)}
	if orderErr != "" {
		oc.Note = orderErr
		return oc
	}
	rank := make(map[string]int64, len(order))
	for i, id := range order {
		rank[strings.ToLower(id)] = int64(i) + 1
	}
	noID := 0
	for _, d := range recs {
		if d.PosAt == 0 || d.PosAt < t0ns || d.PosNull {
			continue
		}
		if d.DrawID == "" {
			noID++
			continue
		}
		k, ok := rank[strings.ToLower(d.DrawID)]
		if !ok {
			oc.Unknown++
			continue
		}
		oc.Checked++
		if k != d.Pos {
			oc.Mismatched++
		}
	}
	if noID > 0 {
		oc.Note = fmt.Sprintf("%d join answers had no draw_id", noID)
	}
	return oc
}

func dropSummary(o options, dd dropDay) string {
	if dd.Kind == "draw" {
		perm := "not checked"
		if p := dd.Permutation; p != nil {
			switch {
			case p.OK:
				perm = "a permutation of 1…N"
			case p.OKOpen:
				perm = fmt.Sprintf("a permutation of 1…N but for the %d places of users without an open stream at the start (0 duplicates)", p.Missing)
			default:
				perm = fmt.Sprintf("NOT a permutation (%d received of %d, %d duplicates, %d missing of which %d with an open stream, %d out of range, %d null)",
					p.Received, p.Expected, p.Duplicates, p.Missing, p.MissingOpen, p.OutOfRange, p.Null)
			}
		}
		seed := "seed never shown"
		if dd.SeedVisibleMS != nil {
			seed = fmt.Sprintf("seed shown after %.0f ms", *dd.SeedVisibleMS)
		}
		order := ""
		if dd.Order != nil && dd.Order.Checked > 0 {
			order = fmt.Sprintf(", %d/%d positions match the published order", dd.Order.Checked-dd.Order.Mismatched, dd.Order.Checked)
		}
		target := "NOT met"
		if dd.TargetMet != nil && *dd.TargetMet {
			target = "met"
		}
		return fmt.Sprintf("SUMMARY draw n=%d: %d/%d open streams got their drawn position (%d streams had ended before the start), from the start call p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d within 5 s; server_time p50 %.0f ms); %s; %s%s; target (every position ≤ 5 s) %s",
			o.N, dd.Received, dd.Expected, dd.EndedBeforeCall, dd.Latency.P50MS, dd.Latency.P99MS, dd.Latency.MaxMS, dd.Within5s, dd.ServerLatency.P50MS, perm, seed, order, target)
	}
	return fmt.Sprintf("SUMMARY soldout n=%d: %d/%d open streams got sold_out (%d streams had ended before the call), from the stock-0 call p50 %.0f ms, p99 %.0f ms, max %.0f ms (server_time p50 %.0f ms); %d repeated; join afterwards %s",
		o.N, dd.Received, dd.Expected, dd.EndedBeforeCall, dd.Latency.P50MS, dd.Latency.P99MS, dd.Latency.MaxMS, dd.ServerLatency.P50MS, dd.SoldOutTwice, dd.JoinAfter)
}

func dropTable(out io.Writer, dd dropDay) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	p := func(f string, a ...any) { fmt.Fprintf(tw, f+"\n", a...) }
	p("")
	p("== drop day: %s", dd.Kind)
	if dd.ScheduledStartsAt != "" {
		p("scheduled start\t%s", dd.ScheduledStartsAt)
	}
	if dd.Product != "" {
		p("product\t%s", dd.Product)
	}
	p("joined\t%d (%d answered state prequeue); %d streams, %d with prequeue as first event; %d prequeue events", dd.Joined, dd.JoinPrequeue, dd.Streams, dd.PrequeueFirst, dd.PrequeueEvents)
	if dd.EarlyPositions > 0 {
		p("position before the start\t%d streams had one (should be none)", dd.EarlyPositions)
	}
	p("admin call\t%s at %s: %.1f ms%s", dd.AdminCall, dd.AdminCallAt, dd.AdminCallMS, map[bool]string{true: ", ERROR " + dd.AdminCallError, false: ""}[dd.AdminCallError != ""])
	ev := "sold_out"
	if dd.Kind == "draw" {
		ev = "first position"
	}
	p("%s events\t%d of %d streams open at the call (%d within 5 s; %d before the call); %d streams had ended before the call, %d ended after it without the event",
		ev, dd.Received, dd.Expected, dd.Within5s, dd.BeforeCall, dd.EndedBeforeCall, dd.EndedAfterCallWithout)
	l, s, d := dd.Latency, dd.ServerLatency, dd.Delivery
	p("  call → parsed (ms)\tp50 %.1f, p90 %.1f, p99 %.1f, max %.1f (n %d)", l.P50MS, l.P90MS, l.P99MS, l.MaxMS, l.N)
	p("  call → server_time (ms)\tp50 %.1f, p90 %.1f, p99 %.1f, max %.1f (n %d)", s.P50MS, s.P90MS, s.P99MS, s.MaxMS, s.N)
	p("  server_time → parsed (ms)\tp50 %.1f, p90 %.1f, p99 %.1f, max %.1f (n %d)", d.P50MS, d.P90MS, d.P99MS, d.MaxMS, d.N)
	if dd.TargetMet != nil {
		p("target\tevery position within %.0f ms: %v", dd.TargetMS, *dd.TargetMet)
	}
	if pc := dd.Permutation; pc != nil {
		p("permutation of 1…%d\tok %v (ok for the open streams %v): received %d, distinct %d, duplicates %d %v, missing %d %v (user without a stream at the call %d, with one %d, unknown %d), out of range %d, null %d",
			pc.Expected, pc.OK, pc.OKOpen, pc.Received, pc.Distinct, pc.Duplicates, pc.DuplicateSample, pc.Missing, pc.MissingSample,
			pc.MissingNoStream, pc.MissingOpen, pc.MissingUnknown, pc.OutOfRange, pc.Null)
	}
	if dd.Kind == "draw" {
		if dd.SeedVisibleMS != nil {
			p("seed\tGET /draw showed it %.0f ms after the call", *dd.SeedVisibleMS)
		} else {
			p("seed\tnever shown by GET /draw")
		}
		if dd.CommitmentOK != nil {
			p("commitment\tSHA-256(seed) = commitment: %v", *dd.CommitmentOK)
		}
		if oc := dd.Order; oc != nil {
			p("published order\t%d lines; %d positions checked, %d mismatched, %d draw_ids not in it %s", oc.Lines, oc.Checked, oc.Mismatched, oc.Unknown, oc.Note)
		}
	} else {
		p("sold_out repeated\t%d", dd.SoldOutTwice)
		p("join after sold out\t%s (want 423 sold_out)", dd.JoinAfter)
	}
	_ = tw.Flush()
}
