package web

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
	"github.com/waitroom/waitroom/topology"
)

// The shared snapshot: the index page, GET /admin/api/stats and every /admin/api/stream of
// an instance read one view of every queue, refreshed at most once per snapshotEvery however
// many readers ask. A refresh reads only the queues that may have changed since the last:
//   - the queues named on the wake channel since (a join into a resting queue, a PUT of
//     its settings, a new queue) — the instance follows that channel, no command;
//   - the queues that are awake (their last read did not find them resting: their tick
//     may change them at any time);
//   - those of a slice of the resting queues whose probe (4 commands: settings hash, rest
//     flag, lease, logo) differs from the last read — every queue is probed once per probeEvery,
//     for the writes that publish no wake (a sold-out flag, a logo, the rest check of a
//     schedule instant, an edit in Redis).
//
// Everything is read again after the wake subscription was (re)established (wakes published
// meanwhile are lost), and the list of names every namesEvery (wakes add new names at once).
// With no reader there is no refresh: the snapshot's idle cost is zero.
const (
	snapshotEvery = time.Second
	// A reader answers from a view up to snapshotServeStale old while a newer one is read
	// (a refresh of many awake queues may take seconds; a request never waits for it); past
	// that — the first reader after a quiet while — it waits for the refresh.
	snapshotServeStale = 30 * time.Second
	// A view older than snapshotWaitOlder waits up to snapshotPatience for its refresh (a
	// refresh of what changed takes milliseconds; one of many awake queues may take seconds).
	snapshotWaitOlder = 3 * time.Second
	snapshotPatience  = 2 * time.Second
	probeEvery        = 30 * time.Second
	namesEvery        = time.Minute
	// snapshotTimeout bounds one refresh (a full read of 10,000 queues takes well under it).
	snapshotTimeout = 10 * time.Second
	// adminWantedFor: the admin part (instances, rejected counts, the stats JSON) is read
	// while an admin reader asked for it within this long.
	adminWantedFor = 5 * time.Second
)

// snapshot is the Server's shared view of every queue (the zero value is ready; it starts
// following the wake channel at its first reader and stops at Shutdown).
type snapshot struct {
	start sync.Once
	ready chan struct{} // closed at the wake channel's first subscription (or its timeout)
	wg    sync.WaitGroup

	mu          sync.Mutex
	view        *snapView
	err         error         // the last refresh's failure (nil after a success)
	busy        chan struct{} // closed when the running refresh ends; nil when none runs
	started     time.Time     // when the last refresh started
	dirty       map[string]bool
	all         bool // read every queue at the next refresh
	adminWanted time.Time
	refreshes   int // refreshes run (tests)
	// Writes answered by this instance (snapshotWrites): an admin reader after one waits for
	// a refresh that reads what they touched, so the admin API reads its own writes.
	local      map[string]bool // queues written
	localAwake bool            // an order or redeem: the awake queues' tokens changed
	localProbe bool            // a product changed: any queue's sold-out flag may have
	localSeq   int64           // +1 per write
	adminSeq   int64           // +1 per admin write (the index reads those at once too)

	// The refresher's own state: one refresh runs at a time.
	names    []string // every known queue name, sorted
	known    map[string]bool
	namesAt  time.Time
	queues   map[string]*queue.Overview
	pending  map[string]bool // names still to read in full (all of them after a resubscription)
	redoAll  bool            // a full read failed before it knew the names
	cursor   int             // the next name to probe
	probedAt time.Time

	streams adminStreams
}

// snapView is one refresh's result; it is never changed once published.
type snapView struct {
	at       time.Time // when its refresh started: nothing in it is older
	localSeq int64     // the local writes it has read (snapshot.localSeq at its start)
	adminSeq int64     // the local admin writes it has read
	entries  []snapEntry
	admin    bool // instances, rejected and the stats JSON were read
	ins      []topology.Instance
	sse      int64
	rej      map[string]int64

	statsOnce sync.Once
	stats     statsJSON
	statsBody []byte
}

type snapEntry struct {
	name string
	ov   *queue.Overview
}

// snapStart starts following the wake channel (once) and returns the snapshot.
func (s *Server) snapStart() *snapshot {
	sn := &s.snap
	sn.start.Do(func() {
		sn.ready = make(chan struct{})
		var readyOnce sync.Once
		ctx, cancel := context.WithCancel(context.Background())
		sn.wg.Add(2)
		go func() {
			defer sn.wg.Done()
			select {
			case <-s.closing:
			case <-ctx.Done():
			}
			cancel()
		}()
		go func() {
			defer sn.wg.Done()
			defer cancel()
			s.d.Wakes.WatchWakes(ctx, func(name string) {
				sn.mu.Lock()
				if sn.dirty == nil {
					sn.dirty = map[string]bool{}
				}
				sn.dirty[name] = true
				sn.mu.Unlock()
			}, func() {
				sn.mu.Lock()
				sn.all = true
				sn.mu.Unlock()
				readyOnce.Do(func() { close(sn.ready) })
			})
		}()
		// Without a subscription after a second the first refresh reads everything anyway.
		go func() {
			select {
			case <-sn.ready:
			case <-time.After(time.Second):
				readyOnce.Do(func() { close(sn.ready) })
			}
		}()
	})
	return sn
}

// wait ends with the snapshot's goroutines (after s.closing is closed).
func (sn *snapshot) wait() { sn.wg.Wait() }

// snapshotView returns a view at most snapshotEvery old, or up to snapshotServeStale old
// while the refresh runs; admin asks for the admin part too. A refresh starts at most once
// per snapshotEvery, whoever asks; a refresh that fails leaves the last view in use (an
// error only when there is none).
// ownWrites: ownAll (GET /admin/api/stats) waits for every write this instance answered
// before the read began; ownAdmin (the index) for its admin writes only; ownNone (admin
// streams) for none.
func (s *Server) snapshotView(ctx context.Context, admin bool, ownWrites int) (*snapView, error) {
	sn := s.snapStart()
	sn.mu.Lock()
	seen, seenAdmin := sn.localSeq, sn.adminSeq // the local writes answered before this read began
	sn.mu.Unlock()
	if ownWrites != ownAll {
		seen = 0
	}
	if ownWrites == ownNone {
		seenAdmin = 0
	}
	var patience <-chan time.Time // how long an old view's reader waits for the refresh
	for {
		sn.mu.Lock()
		if admin {
			sn.adminWanted = time.Now()
		}
		v := sn.view
		ok := v != nil && (!admin || v.admin)
		own := v != nil && (v.localSeq < seen || v.adminSeq < seenAdmin) // a reader of its own writes
		if ok && !own && time.Since(v.at) < snapshotEvery {
			sn.mu.Unlock()
			return v, nil
		}
		if sn.busy == nil && (own || time.Since(sn.started) >= snapshotEvery) {
			sn.busy = make(chan struct{})
			quick := time.Since(sn.started) < snapshotEvery // only what the local writes touched
			if !quick {
				sn.started = time.Now()
			}
			sn.refreshes++
			sn.wg.Add(1)
			go s.refreshSnapshot(sn.busy, quick)
		}
		busy, lastErr, next := sn.busy, sn.err, sn.started.Add(snapshotEvery)
		sn.mu.Unlock()
		if ok && !own && time.Since(v.at) < snapshotServeStale {
			// A view a little old (a refresh under way) is served at once. An older one — the
			// first reader after a quiet while, when the view is as old as the quiet — waits
			// up to snapshotPatience for the refresh it started, then is served as it is.
			if time.Since(v.at) < snapshotWaitOlder || busy == nil {
				return v, nil
			}
			if patience == nil {
				t := time.NewTimer(snapshotPatience)
				defer t.Stop()
				patience = t.C
			}
		}
		var wait <-chan time.Time
		switch {
		case busy != nil:
		case lastErr != nil: // the last refresh failed less than snapshotEvery ago
			if ok {
				return v, nil
			}
			return nil, lastErr
		default: // the last refresh was too recent and had no admin part: the next one has
			t := time.NewTimer(time.Until(next))
			defer t.Stop()
			wait = t.C
		}
		select {
		case <-busy: // nil while waiting for the timer
		case <-wait:
		case <-patience: // nil unless an old view waits
			return v, nil
		case <-ctx.Done():
			if ok {
				return v, nil
			}
			return nil, errSnapshotUnavailable
		}
	}
}

var errSnapshotUnavailable = errorf(503, "unavailable", "The list of queues cannot be read right now; try again.")

// refreshSnapshot runs one refresh and publishes its view; done is closed at the end.
func (s *Server) refreshSnapshot(done chan struct{}, quick bool) {
	sn := &s.snap
	defer sn.wg.Done()
	select {
	case <-sn.ready:
	case <-s.closing:
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-stop:
		}
	}()
	sn.mu.Lock()
	dirty, all := sn.dirty, sn.all
	sn.dirty, sn.all = nil, false
	for n := range sn.local {
		if dirty == nil {
			dirty = map[string]bool{}
		}
		dirty[n] = true
	}
	lw := localWrites{awake: sn.localAwake, probe: sn.localProbe, seq: sn.localSeq, adminSeq: sn.adminSeq, quick: quick}
	sn.local, sn.localAwake, sn.localProbe = nil, false, false
	admin := time.Since(sn.adminWanted) < adminWantedFor
	at := sn.started
	if quick && sn.view != nil {
		at = sn.view.at // the queues it does not read are that old
	}
	sn.mu.Unlock()
	v, unread, err := s.readSnapshot(ctx, at, dirty, all, admin, lw)
	sn.mu.Lock()
	if err != nil {
		// Nothing is lost: what was to be read is read by the next refresh.
		for _, n := range append(unread, slices.Collect(maps.Keys(dirty))...) {
			if sn.dirty == nil {
				sn.dirty = map[string]bool{}
			}
			sn.dirty[n] = true
		}
		sn.all = sn.all || sn.redoAll // else what a full read did not get to stays pending
		sn.redoAll = false
		sn.localAwake, sn.localProbe = sn.localAwake || lw.awake, sn.localProbe || lw.probe
		sn.err = err
	} else {
		sn.view, sn.err = v, nil
	}
	sn.busy = nil
	sn.mu.Unlock()
	close(done)
}

// readSnapshot reads what changed and builds the next view (only the refresher calls it).
// On a failure it also returns the names it did not get to, for the next refresh; what it
// read is kept (a full read of many queues makes progress even when a pipeline times out).
func (s *Server) readSnapshot(ctx context.Context, at time.Time, dirty map[string]bool, all, admin bool, lw localWrites) (v *snapView, unread []string, err error) {
	sn := &s.snap
	if sn.queues == nil {
		sn.queues = map[string]*queue.Overview{}
		all = true
	}
	want := map[string]bool{}
	if all || sn.names == nil || (!lw.quick && at.Sub(sn.namesAt) >= namesEvery) {
		if err := sn.rereadNames(ctx, s.d.Settings, at, all, want); err != nil {
			return nil, slices.Collect(maps.Keys(dirty)), err
		}
	}
	sn.addWanted(want, dirty, all, lw)
	if err := sn.probe(ctx, s.d.Line, at, lw, want); err != nil {
		return nil, slices.Collect(maps.Keys(want)), err
	}
	if unread, err := sn.readOverviews(ctx, s.d.Line, slices.Sorted(maps.Keys(want))); err != nil {
		return nil, unread, err
	}
	v = &snapView{at: at, localSeq: lw.seq, adminSeq: lw.adminSeq, entries: make([]snapEntry, 0, len(sn.queues))}
	for _, n := range sn.names {
		if o := sn.queues[n]; o != nil {
			v.entries = append(v.entries, snapEntry{name: n, ov: o})
		}
	}
	if admin {
		ins, err := s.d.Instances.Instances(ctx)
		if err != nil {
			return nil, nil, err
		}
		v.admin, v.ins = true, ins
		for _, in := range ins {
			v.sse += in.SSEConnections
		}
		if s.lim != nil {
			v.rej = s.lim.RejectedCounts(ctx)
		}
	}
	return v, nil, nil
}

// rereadNames reads the list of queues; a name it did not know goes into want. A failure
// while everything is to be read asks the next refresh to read everything again.
func (sn *snapshot) rereadNames(ctx context.Context, q QueueSettings, at time.Time, all bool, want map[string]bool) error {
	names, err := q.Names(ctx)
	if err != nil {
		if all {
			sn.redoAll = true
		}
		return err
	}
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[n] = true
		if !sn.known[n] {
			want[n] = true // a name the last re-read of the list brought
		}
	}
	sn.names, sn.namesAt, sn.known = names, at, known
	return nil
}

// addWanted adds to want what this refresh reads whatever the probes say: everything (read
// progressively: what a failed refresh did not get to stays pending), the queues changed here
// (dirty), those still pending, and the awake ones (their ticks change them).
func (sn *snapshot) addWanted(want, dirty map[string]bool, all bool, lw localWrites) {
	if all {
		sn.pending = make(map[string]bool, len(sn.names))
		for _, n := range sn.names {
			sn.pending[n] = true
		}
	}
	added := false
	for n := range dirty {
		want[n] = true
		if !sn.known[n] {
			sn.known[n], added = true, true
			sn.names = append(sn.names, n)
		}
	}
	if added {
		sort.Strings(sn.names)
	}
	for n := range sn.pending {
		want[n] = true
	}
	if !lw.quick || lw.awake {
		for n, o := range sn.queues {
			if !o.Resting {
				want[n] = true
			}
		}
	}
}

// probe looks at a share of the names so that each is probed once per probeEvery (all of
// them after a product changed here: any queue's sold-out flag may have); a probe that finds
// a queue changed puts it into want.
func (sn *snapshot) probe(ctx context.Context, q Line, at time.Time, lw localWrites, want map[string]bool) error {
	if len(sn.names) == 0 || len(sn.pending) >= len(sn.names) || (lw.quick && !lw.probe) {
		return nil
	}
	if sn.probedAt.IsZero() {
		sn.probedAt = at
	}
	k := min(len(sn.names), int(float64(len(sn.names))*at.Sub(sn.probedAt).Seconds()/probeEvery.Seconds()))
	if lw.probe {
		k = len(sn.names)
	}
	var probe []string
	for range k {
		sn.cursor %= len(sn.names)
		if n := sn.names[sn.cursor]; !want[n] {
			probe = append(probe, n)
		}
		sn.cursor++
	}
	if k > 0 && !lw.quick {
		sn.probedAt = at
	}
	if len(probe) == 0 {
		return nil
	}
	ps, err := q.Probes(ctx, probe)
	if err != nil {
		return err
	}
	for n, p := range ps {
		o, had := sn.queues[n]
		if (had && p.Changed(*o)) || (!had && p.Exists) {
			want[n] = true
		}
	}
	return nil
}

// readOverviews reads the overviews of read (sorted) into the snapshot and returns what a
// failure left unread.
func (sn *snapshot) readOverviews(ctx context.Context, q Line, read []string) (unread []string, err error) {
	ovs, done, err := q.Overviews(ctx, read)
	if sn.pending == nil {
		sn.pending = map[string]bool{}
	}
	for _, n := range read[:done] {
		o, ok := ovs[n]
		switch {
		case ok && o.Unread:
			// Its commands failed, the others' did not: it keeps what the view had and is
			// read again at the next refresh.
			sn.pending[n] = true
			continue
		case ok:
			sn.queues[n] = &o
		default:
			delete(sn.queues, n)
		}
		delete(sn.pending, n)
	}
	if err != nil {
		return read[done:], err
	}
	return nil, nil
}

// Whose writes a reader waits for (snapshotView).
const (
	ownNone = iota
	ownAdmin
	ownAll
)

// localWrites is what the writes answered by this instance ask of the next refresh.
type localWrites struct {
	awake, probe  bool
	seq, adminSeq int64
	quick         bool // less than snapshotEvery after the last refresh: read only what they touched
}

// snapshotWrites notes every write this instance answers (after it is answered), so that an
// admin reader that follows it reads it (snapshotView): a queue's own routes name it; an
// order or a redeem changes the tokens of an awake queue; a product may change any queue's
// sold-out flag. Buyers' index reads never wait for it.
func (s *Server) snapshotWrites(c *fiber.Ctx) error {
	err := c.Next()
	switch c.Method() {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions:
		return err
	}
	if err != nil || c.Response().StatusCode() >= 400 {
		return err
	}
	path := c.Path()
	name := ""
	awake, probe := false, false
	switch {
	case strings.HasPrefix(path, "/api/queues/"), strings.HasPrefix(path, "/admin/api/queues/"):
		rest := path[strings.Index(path, "/queues/")+len("/queues/"):]
		name, _, _ = strings.Cut(rest, "/")
		if !queue.ValidName(name) {
			return err
		}
	case path == "/api/orders", path == "/api/redeem":
		awake = true
	case strings.HasPrefix(path, "/admin/api/products/"):
		probe = true
	default:
		return err
	}
	sn := &s.snap
	sn.mu.Lock()
	if name != "" {
		if sn.local == nil {
			sn.local = map[string]bool{}
		}
		sn.local[name] = true
	}
	sn.localAwake = sn.localAwake || awake
	sn.localProbe = sn.localProbe || probe
	sn.localSeq++
	if strings.HasPrefix(path, "/admin/") {
		sn.adminSeq++
	}
	sn.mu.Unlock()
	return err
}

// statsOf is the admin stats object of a view (built once per view, shared by every reader).
func (s *Server) statsOf(v *snapView) (statsJSON, []byte) {
	v.statsOnce.Do(func() {
		out := statsJSON{Instances: []topology.Instance{}, Queues: make([]queueStatsJSON, 0, len(v.entries)),
			SSEConnections: v.sse, RateLimitRejected: v.rej, ServerTime: v.at.UTC().Format(stream.TimeFormat)}
		if v.ins != nil {
			out.Instances = v.ins
		}
		for _, e := range v.entries {
			out.Queues = append(out.Queues, queueStatsEntry(e.name, e.ov))
		}
		v.stats = out
		v.statsBody, _ = json.Marshal(out)
	})
	return v.stats, v.statsBody
}

// queueStatsEntry is one queue of the admin stats, from its overview.
func queueStatsEntry(n string, o *queue.Overview) queueStatsJSON {
	st := o.QueueStats
	leader := st.Leader
	if i := strings.LastIndexByte(leader, ':'); i > 0 {
		leader = leader[:i]
	}
	var logo *string
	if o.LogoETag != "" {
		u := logoURL(n, o.LogoETag)
		logo = &u
	}
	return queueStatsJSON{name: n, settings: st.Settings, queueLive: queueLive{
		Waiting: st.Waiting, WaitingPriority: st.WaitingPriority, WaitingBypass: st.WaitingBypass, AdmittedTotal: st.AdmittedTotal,
		ActiveTokens: st.ActiveTokens, AdmitRate: queue.RoundRate(st.AdmitRate), TickLagMs: st.TickLagMs, Leader: leader,
		AdmissionHeld:            o.Held,
		TokenTTLEffectiveSeconds: int64(st.EffectiveTTL(st.Waiting + st.WaitingPriority + st.WaitingBypass).Seconds()),
		queueState:               stateOf(st.Settings, st.Prequeue, logo),
	}}
}

// adminStreams counts the open admin streams per token (actor) and in all.
type adminStreams struct {
	mu      sync.Mutex
	total   int
	byActor map[string]int
}

// Default bounds of the admin streams (Config.AdminStreamsPerToken, AdminStreamsPerInstance).
const (
	DefaultAdminStreamsPerToken    = 4
	DefaultAdminStreamsPerInstance = 64
)

// acquire takes a stream slot for actor, or answers why not (429).
func (a *adminStreams) acquire(actor string, perToken, perInstance int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byActor == nil {
		a.byActor = map[string]int{}
	}
	switch {
	case a.byActor[actor] >= perToken:
		return &Error{Status: 429, Code: "too_many_streams", Scope: "admin_token", RetryAfter: 5,
			Message: "This admin token holds its most open admin streams on this instance; close one (another tab of the dashboard)."}
	case a.total >= perInstance:
		return &Error{Status: 429, Code: "too_many_streams", Scope: "instance", RetryAfter: 5,
			Message: "This instance holds its most open admin streams; try again later."}
	}
	a.byActor[actor]++
	a.total++
	return nil
}

func (a *adminStreams) release(actor string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.total--
	if a.byActor[actor]--; a.byActor[actor] <= 0 {
		delete(a.byActor, actor)
	}
}

// acquireAdminStream takes one of the configured admin stream slots for actor (defaults
// for zero bounds), or answers 429; releaseAdminStream gives it back when the stream ends.
func (s *Server) acquireAdminStream(actor string) error {
	perToken, perInstance := s.cfg.AdminStreamsPerToken, s.cfg.AdminStreamsPerInstance
	if perToken <= 0 {
		perToken = DefaultAdminStreamsPerToken
	}
	if perInstance <= 0 {
		perInstance = DefaultAdminStreamsPerInstance
	}
	return s.snap.streams.acquire(actor, perToken, perInstance)
}

func (s *Server) releaseAdminStream(actor string) { s.snap.streams.release(actor) }
