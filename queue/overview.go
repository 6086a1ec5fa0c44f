package queue

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/rstore"
)

// Overview is one queue as the pages that list every queue show it (the index, the admin
// stats): its stats, its logo's ETag, whether it rests, and a fingerprint of its settings.
// Overviews reads many queues in one pipeline; Probes tells cheaply which of them changed.
type Overview struct {
	QueueStats
	LogoETag string
	// Resting: no tick runs, and nothing of it changes until a join or a settings change
	// wakes it — or a write that publishes no wake (a sold-out flag, a logo, a leader taking
	// it, an edit in Redis), which Probes finds. That is: its last tick put it to rest (Idle,
	// clock idle), or nobody leads it and nobody waits or holds a live token (a queue no loop
	// has ticked yet).
	Resting bool
	Idle    bool
	// Held: its leader holds a tick until a replica acknowledges it (admission paused; no
	// token handed out meanwhile — ackhold.go).
	Held bool
	// Sum fingerprints the settings hash (Probe.Sum of the same hash is equal).
	Sum uint64
	// Unread: a command of this queue failed while others of its pipeline did not (a key of
	// the wrong type, a Cluster node down): nothing else of it is set, and the caller keeps
	// what it had rather than losing the queue or every other queue of the pipeline.
	Unread bool
}

// cmdFailed reports whether a pipelined command failed (a missing key is no failure).
func cmdFailed(c redis.Cmder) bool {
	return c.Err() != nil && c.Err() != redis.Nil
}

// Probe is what Probes reads of a queue: enough to tell that a resting queue changed
// without a wake.
type Probe struct {
	Exists   bool
	Sum      uint64
	Idle     bool
	Leader   string
	LogoETag string
}

// Changed reports whether the queue p probes differs from what o read.
func (p Probe) Changed(o Overview) bool {
	return !p.Exists || p.Sum != o.Sum || p.Idle != o.Idle || p.Leader != o.Leader || p.LogoETag != o.LogoETag
}

// overviewBatch is how many queues one pipeline reads: it bounds a pipeline's memory and
// keeps each pipeline well inside the per-call deadline (OpTimeout) on a busy server.
const overviewBatch = 100

// Overviews reads the named queues, 7 commands each in pipelines of overviewBatch queues
// (plus one ZCARD per invite lane that has waiters): the settings, the normal line, the
// live tokens, the clock (totals, rates, lag, rest), the lease, the pre-queue, the logo.
// A queue that does not exist is left out of the map. On an error the map holds what the
// pipelines before it read, and read says how many of names (from the first) were read.
func (q *Queue) Overviews(ctx context.Context, names []string) (out map[string]Overview, read int, err error) {
	out = make(map[string]Overview, len(names))
	for read < len(names) {
		n := min(len(names)-read, overviewBatch)
		if err := q.overviews(ctx, names[read:read+n], out); err != nil {
			return out, read, err
		}
		read += n
	}
	return out, read, nil
}

func (q *Queue) overviews(ctx context.Context, names []string, out map[string]Overview) error {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	type reads struct {
		cfg       *redis.MapStringStringCmd
		w, a, pq  *redis.IntCmd
		c         *redis.SliceCmd
		l, logo   *redis.StringCmd
		wp, wb    *redis.IntCmd
		laneReads bool
	}
	rs := make([]reads, len(names))
	now := fmt.Sprint(time.Now().UnixMilli())
	pipe := q.rdb.Pipeline()
	for i, n := range names {
		k := rstore.KeysFor(n)
		rs[i] = reads{cfg: pipe.HGetAll(ctx, k.Cfg()), w: pipe.ZCard(ctx, k.Waiting()),
			a: pipe.ZCount(ctx, k.Active(), now, "+inf"),
			c: pipe.HMGet(ctx, k.Clock(), "total", "real_shown", "lag_ms", "seq_p", "head_p", "seq_b", "head_b", "arate", "idle", heldField),
			l: pipe.Get(ctx, k.Lease()), pq: pipe.ZCard(ctx, k.Pre()), logo: pipe.HGet(ctx, rstore.KeysFor(n).Logo(), "etag")}
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		// One queue's failure (a reply error, a node down) is that queue's; a pipeline where
		// every queue failed (a timeout, Redis unreachable) fails the whole read.
		failed := 0
		for _, r := range rs {
			if cmdFailed(r.cfg) || cmdFailed(r.w) || cmdFailed(r.a) || cmdFailed(r.c) || cmdFailed(r.l) || cmdFailed(r.pq) || cmdFailed(r.logo) {
				failed++
			}
		}
		if failed == len(rs) {
			return fail("overviews", err)
		}
	}
	// A lane whose counter has not passed its head is empty: its length is only asked for
	// when it may have waiters (as Stats does).
	pipe = q.rdb.Pipeline()
	lanes := false
	for i, n := range names {
		v := rs[i].c.Val()
		if len(v) != 10 {
			continue
		}
		k := rstore.KeysFor(n)
		if toInt(v[3]) > toInt(v[4]) {
			rs[i].wp, lanes = pipe.ZCard(ctx, k.LaneWaiting(laneP)), true
		}
		if toInt(v[5]) > toInt(v[6]) {
			rs[i].wb, lanes = pipe.ZCard(ctx, k.LaneWaiting(laneB)), true
		}
	}
	if lanes {
		_, _ = pipe.Exec(ctx) // a failed lane read marks its queue unread below
	}
	for i, n := range names {
		r := rs[i]
		if cmdFailed(r.cfg) || cmdFailed(r.w) || cmdFailed(r.a) || cmdFailed(r.c) || cmdFailed(r.l) || cmdFailed(r.pq) || cmdFailed(r.logo) ||
			(r.wp != nil && cmdFailed(r.wp)) || (r.wb != nil && cmdFailed(r.wb)) {
			out[n] = Overview{Unread: true}
			continue
		}
		cfg := r.cfg.Val()
		if len(cfg) == 0 {
			continue
		}
		o := Overview{QueueStats: QueueStats{Settings: ParseSettings(n, cfg), Waiting: r.w.Val(), ActiveTokens: r.a.Val(),
			Leader: r.l.Val(), Prequeue: r.pq.Val() + shardedPrequeue(cfg)}, LogoETag: r.logo.Val(), Sum: settingsSum(cfg)}
		if v := r.c.Val(); len(v) == 10 {
			o.AdmittedTotal = toInt(v[0])
			o.AdmitRate = toFloat(v[1])
			if v[1] == nil {
				o.AdmitRate = toFloat(v[7]) // an older leader keeps only the estimate (docs/UPGRADING.md)
			}
			o.TickLagMs = toFloat(v[2])
			o.Idle = toString(v[8]) == "1"
			if ms := toInt(v[9]); ms > 0 && time.Since(time.UnixMilli(ms)) < heldStale {
				o.Held = true
			}
		}
		if r.wp != nil {
			o.WaitingPriority = r.wp.Val()
		}
		if r.wb != nil {
			o.WaitingBypass = r.wb.Val()
		}
		o.Resting = o.Idle || (o.Leader == "" && o.Waiting+o.WaitingPriority+o.WaitingBypass+o.Prequeue+o.ActiveTokens == 0)
		out[n] = o
	}
	return nil
}

// Probes reads 4 commands per named queue (the settings hash, the rest flag, the lease, the
// logo's ETag), in pipelines of overviewBatch queues: what changes a resting queue without a
// wake.
func (q *Queue) Probes(ctx context.Context, names []string) (map[string]Probe, error) {
	out := make(map[string]Probe, len(names))
	for len(names) > 0 {
		n := min(len(names), overviewBatch)
		if err := q.probes(ctx, names[:n], out); err != nil {
			return nil, err
		}
		names = names[n:]
	}
	return out, nil
}

func (q *Queue) probes(ctx context.Context, names []string, out map[string]Probe) error {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	cfgs := make([]*redis.MapStringStringCmd, len(names))
	idle := make([]*redis.StringCmd, len(names))
	logo := make([]*redis.StringCmd, len(names))
	lease := make([]*redis.StringCmd, len(names))
	pipe := q.rdb.Pipeline()
	for i, n := range names {
		k := rstore.KeysFor(n)
		cfgs[i], idle[i], logo[i] = pipe.HGetAll(ctx, k.Cfg()), pipe.HGet(ctx, k.Clock(), "idle"), pipe.HGet(ctx, rstore.KeysFor(n).Logo(), "etag")
		lease[i] = pipe.Get(ctx, k.Lease())
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		failed := 0
		for i := range names {
			if cmdFailed(cfgs[i]) || cmdFailed(idle[i]) || cmdFailed(logo[i]) || cmdFailed(lease[i]) {
				failed++
			}
		}
		if failed == len(names) {
			return fail("probes", err)
		}
	}
	for i, n := range names {
		if cmdFailed(cfgs[i]) || cmdFailed(idle[i]) || cmdFailed(logo[i]) || cmdFailed(lease[i]) {
			continue // left out: not probed this time (its next probe or wake reads it)
		}
		cfg := cfgs[i].Val()
		out[n] = Probe{Exists: len(cfg) > 0, Sum: settingsSum(cfg), Idle: idle[i].Val() == "1", Leader: lease[i].Val(), LogoETag: logo[i].Val()}
	}
	return nil
}

// settingsSum fingerprints a settings hash (FNV-1a over its sorted fields).
func settingsSum(m map[string]string) uint64 {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "pq_other" { // a count the leader refreshes every second (prequeue.go), not a setting
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := fnv.New64a()
	for _, k := range keys {
		_, _ = h.Write([]byte(k))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(m[k]))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}
