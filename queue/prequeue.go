package queue

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue/draw"
)

// A sharded pre-queue. Every key of a queue shares one hash tag, so a queue lives on one
// Redis Cluster slot, and one master does all of a drop's work. Before the start, though,
// the pre-queue is an unordered set (the draw orders it), so its entries may live anywhere:
// when the start is first set, the queue's pre-queue gets N shards (Config.PrequeueShards;
// by default one per master of a cluster, 1 on a single Redis), each with its own hash tag
// {q:<name>~<tag>}, the tags chosen so that the shards spread evenly over the masters
// (pickTags); the queue's own slot (shard 0 below) keeps its pre-queue for entries made
// before the shards had their settings, and the line,
// and its own keys (rstore.ShardKeys): a copy of the settings a join reads (pcfg, copied by
// the leader: syncShards), the entries' rows, its pre-queue, the per-address place sets
// and the proof-of-work records.
//
// Which shard: a ticket's shard is a function of its id (shardOfID), so a reload finds its
// entry on any instance without a lookup. A new ticket is minted so that its shard is the
// one of the client's address (shardOfAddr), or of the proof-of-work challenge it presents
// (whose id is minted the same way), so an address's places before the start are all in one
// shard and its cap (places_per_ip) holds exactly across shards, and a challenge is spent
// in one shard only. With no cap (places_per_ip 0) a new ticket's shard is random: the
// entries of one address (a carrier's NAT, a load test) spread too. A join with an invite code goes to the queue's own slot (the code's
// lane is there).
//
// The start: joins in shard i stop when the shard is frozen (pfreeze.lua), or when its
// copy of starts_ms has passed on its master's clock; such a join, and every join after,
// goes to the queue's own slot (pjoin.lua answers QUEUE_SLOT). join.lua and admit.lua do not
// freeze a sharded pre-queue (freeze.lua); the instance that sees the start first — the
// leader's tick, or a join that join.lua refused as STARTING — runs freezeShards: every
// other shard is frozen and counted, then freezeall.lua freezes the queue's own pre-queue
// and reserves sequences for all of them. A join that races the start therefore either
// entered a shard before it was frozen (and is counted and drawn) or finds it frozen and
// queues behind the draw; it is never lost.
//
// The draw (schedule.go, runDraw) reads every shard's frozen entries, orders them all
// (the participants hash is over all of them: docs/DRAW.md), and places each batch: the
// members of other shards are first marked moved on their shard (ptake.lua, which gives
// their address), then placed on the queue's slot (drawplace.lua), with their address's
// place set there. Positions after the draw cost what they cost today.

// shardCacheTTL is how long an instance trusts what it read of a queue's shards. Stale is
// safe either way: a join routed to a shard that no longer takes entries is sent to the
// queue's own slot (QUEUE_SLOT), and one sent to the queue's own slot while the pre-queue is
// sharded is refused there (SHARDED; an unknown ticket's NO_PLACE likewise) and read again.
const shardCacheTTL = 5 * time.Second

// maxPrequeueShards bounds Config.PrequeueShards.
const maxPrequeueShards = 16

// preShards is what a join's routing needs to know of a queue's pre-queue shards.
type preShards struct {
	tags  []string // tags[0] "" (the queue's own slot), then the other shards' tags; nil: one shard
	phase DrawPhase
	// uncapped: places_per_ip is 0, so no address has a cap to keep and a new ticket may
	// land in any shard.
	uncapped bool
}

// routed reports whether joins go to the shards: sharded, and before the draw is done.
func (s preShards) routed() bool {
	return len(s.tags) > 1 && (s.phase == DrawScheduled || s.phase == DrawFrozen)
}

type shardEntry struct {
	v  preShards
	at time.Time
}

// preShardsOf is queue name's shards as read at most shardCacheTTL ago. A failed read
// answers one shard: the queue's own slot, where join.lua answers (or refuses) as for any
// queue.
func (q *Queue) preShardsOf(ctx context.Context, name string) preShards {
	if v, ok := q.shards.Load(name); ok {
		if e := v.(*shardEntry); time.Since(e.at) < shardCacheTTL {
			return e.v
		}
	}
	// The Queue's per-call deadline: a stalled Redis costs a join no more here than anywhere.
	ctx, cancel := q.bound(ctx)
	defer cancel()
	vals, err := q.rdb.HMGet(ctx, rstore.KeysFor(name).Cfg(), "pq_tags", "draw", "places_per_ip").Result()
	if err != nil {
		return preShards{}
	}
	s := preShards{phase: DrawPhase(toString(vals[1])), tags: shardTags(toString(vals[0])), uncapped: toString(vals[2]) == "0"}
	q.shards.Store(name, &shardEntry{v: s, at: time.Now()})
	return s
}

// shardTags is the tags of cfg pq_tags, with the queue's own slot first (nil for none).
func shardTags(s string) []string {
	if s == "" {
		return nil
	}
	return append([]string{""}, strings.Split(s, ",")...)
}

// forgetShards drops what this instance read of queue name's shards.
func (q *Queue) forgetShards(name string) { q.shards.Delete(name) }

func fnv32(prefix, s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(prefix))
	h.Write([]byte(s))
	return h.Sum32()
}

// shardOfID is the shard of the ticket (or proof-of-work challenge) with id, n being
// len(tags): one of the shards 1…n-1. Shard 0, the queue's own slot, takes no entry while
// the shards take joins (its join.lua is the heavier script, and its master leads the
// queue); it holds only entries made before the shards had their settings.
func shardOfID(id string, n int) int {
	if n < 2 {
		return 0
	}
	return 1 + int(fnv32("t\x00", id)%uint32(n-1))
}

// shardOfAddr is the shard of a client address key, as shardOfID's.
func shardOfAddr(client string, n int) int {
	if n < 2 {
		return 0
	}
	return 1 + int(fnv32("a\x00", client)%uint32(n-1))
}

// IDFits returns, for a new ticket (or challenge) of queue name joined from client address
// key client (with the presented challenge id powID, "" for none), which ids fit: those of
// the shard the join must land in. Nil when any id fits (the queue is not sharded now).
func (q *Queue) IDFits(ctx context.Context, name, client, powID string) func(id string) bool {
	s := q.preShardsOf(ctx, name)
	if !s.routed() || s.phase != DrawScheduled {
		return nil
	}
	n := len(s.tags)
	want := -1
	switch {
	case powID != "":
		want = shardOfID(powID, n)
	case client != "" && !s.uncapped:
		want = shardOfAddr(client, n)
	}
	if want < 0 {
		return nil
	}
	return func(id string) bool { return shardOfID(id, n) == want }
}

// errMoved: a shard does not answer for the ticket; the queue's own slot does.
// errMovedLine: the draw took the ticket's entry to the line; the queue's own slot has its
// place, or will have it in a moment (the draw marks a batch on the shard, then places it).
var (
	errMoved     = errors.New("the queue's own slot answers")
	errMovedLine = errors.New("the draw moved the entry to the line")
)

// placeInShard is place (join.lua) for a ticket whose entry is (or goes) in shard tag. It
// returns errMoved when the queue's own slot answers for it.
func (q *Queue) placeInShard(ctx context.Context, t Ticket, tag string, mode joinMode, o JoinOptions, powDiff string, powExp int64) (joinAnswer, error) {
	sk := rstore.ShardKeysFor(t.Queue, tag)
	keys := []string{sk.Cfg(), sk.Tickets(), sk.Pre(), sk.Places(o.Client), sk.Pow(o.Pow.ID)}
	args := []any{t.ID, string(mode), o.Client, powDiff, powExp}
	var text string
	var err error
	acks, want := int64(0), 0
	if mode == joinPlace {
		want = q.cfg.ReplicaAcks
	}
	if want > 0 {
		// As join.lua's places: on a replica of the shard's master before the answer, or
		// counted unconfirmed (the page's join retry finds a lost entry again).
		text, acks, err = q.evalWait(ctx, want, rstore.PJoin, keys, args...)
	} else {
		text, err = rstore.PJoin.Run(ctx, q.rdb, keys, args...).Text()
	}
	if err != nil {
		return joinAnswer{}, fail("join "+t.Queue, err) // QUEUE_SLOT, IN_LINE: errMoved, errMovedLine
	}
	var a joinAnswer
	if err := decodeAnswer("join "+t.Queue, text, &a); err != nil {
		return joinAnswer{}, err
	}
	if want > 0 && acks < int64(want) && a.Created {
		q.m.placesUnconf.WithLabelValues(t.Queue).Inc()
	}
	return a, nil
}

// shardPlace is what placeSharded answers.
type shardPlace struct {
	p       Place
	created bool
}

// placeSharded answers a join or status read of ticket t in its shard of a sharded
// pre-queue; handled false: the queue's own slot answers (not sharded, shard 0, an invite,
// or the shard said QUEUE_SLOT).
func (q *Queue) placeSharded(ctx context.Context, t Ticket, mode joinMode, o JoinOptions, powDiff string, powExp int64, invite string) (shardPlace, bool, error) {
	if invite != "" {
		return shardPlace{}, false, nil
	}
	s := q.preShardsOf(ctx, t.Queue)
	if !s.routed() {
		return shardPlace{}, false, nil
	}
	i := shardOfID(t.ID, len(s.tags))
	if i == 0 {
		return shardPlace{}, false, nil
	}
	a, err := q.placeInShard(ctx, t, s.tags[i], mode, o, powDiff, powExp)
	if errors.Is(err, errMoved) {
		return shardPlace{}, false, nil
	}
	if errors.Is(err, errMovedLine) {
		// Read the place the draw gives it; never make another. Between the draw's two steps
		// (a few milliseconds, or until the next leader resumes a draw whose leader died)
		// there is none yet: the caller tries again (503, Retry-After).
		p, _, err := q.placeOwn(ctx, t, false, joinStatus, o, "", 0, "")
		if errors.Is(err, ErrNoPlace) {
			err = fmt.Errorf("join %s: %w: the draw is placing this entry", t.Queue, ErrUnavailable)
		}
		return shardPlace{p: p}, true, err
	}
	if err != nil {
		return shardPlace{}, false, err
	}
	p := a.place(t.Queue)
	p.DrawID = draw.ID(t.ID)
	return shardPlace{p: p, created: a.Created}, true, nil
}

// leaveShard gives up ticket t's entry in its shard, when the queue is sharded. done: the
// entry was there and is given up (nothing else to do).
func (q *Queue) leaveShard(ctx context.Context, t Ticket) (done bool, err error) {
	s := q.preShardsOf(ctx, t.Queue)
	if !s.routed() {
		return false, nil
	}
	i := shardOfID(t.ID, len(s.tags))
	if i == 0 {
		return false, nil
	}
	sk := rstore.ShardKeysFor(t.Queue, s.tags[i])
	n, err := rstore.PLeave.Run(ctx, q.rdb, []string{sk.Tickets(), sk.Pre()}, t.ID).Int64()
	if err != nil {
		return false, fail("leave "+t.Queue, err)
	}
	return n == 1, nil
}

// inShard reports whether ticket t holds an entry in its shard of a sharded pre-queue (read
// again when this instance's copy says the queue is not sharded: the ticket is unknown on
// the queue's slot, a rare path).
func (q *Queue) inShard(ctx context.Context, t Ticket) (bool, error) {
	s := q.preShardsOf(ctx, t.Queue)
	if !s.routed() {
		q.forgetShards(t.Queue)
		if s = q.preShardsOf(ctx, t.Queue); !s.routed() {
			return false, nil
		}
	}
	i := shardOfID(t.ID, len(s.tags))
	if i == 0 {
		return false, nil
	}
	n, err := q.rdb.HExists(ctx, rstore.ShardKeysFor(t.Queue, s.tags[i]).Tickets(), t.ID).Result()
	if err != nil {
		return false, fail("ticket state", err)
	}
	return n, nil
}

// freezeShards starts the draw of a sharded pre-queue whose start has come (on the queue
// slot's clock): every other shard is frozen and counted (pfreeze.lua), then the queue's
// own slot (freezeall.lua). Any instance may run it, at once with others: each step is
// idempotent and the counts do not change once a shard is frozen. It does nothing before
// the start, or once frozen; frozen reports that the list is frozen (now or before).
func (q *Queue) freezeShards(ctx context.Context, name string) (frozen bool, err error) {
	k := rstore.KeysFor(name)
	pipe := q.rdb.Pipeline()
	cf := pipe.HMGet(ctx, k.Cfg(), "draw", "starts_ms", "pq_tags")
	tm := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fail("freeze "+name, err)
	}
	v := cf.Val()
	tags := shardTags(toString(v[2]))
	if ph := DrawPhase(toString(v[0])); ph != DrawScheduled || len(tags) < 2 || tm.Val().UnixMilli() < toInt(v[1]) {
		return ph == DrawFrozen, nil
	}
	var total, joins int64
	per := make([]string, 0, len(tags)-1)
	for _, tag := range tags[1:] {
		sk := rstore.ShardKeysFor(name, tag)
		r, err := rstore.PFreeze.Run(ctx, q.rdb, []string{sk.Cfg(), sk.Pre(), sk.DrawSet()}).Int64Slice()
		if err != nil || len(r) != 2 {
			return false, fail("freeze "+name, err)
		}
		total += r[0]
		joins += r[1]
		per = append(per, tag+"="+strconv.FormatInt(r[0], 10))
	}
	if _, err := rstore.FreezeAll.Run(ctx, q.rdb, []string{k.Cfg(), k.Seq(), k.Pre(), k.DrawSet(), k.Draw(), k.Clock()},
		total, joins, strings.Join(per, ",")).Int64(); err != nil {
		return false, fail("freeze "+name, err)
	}
	q.forgetShards(name)
	return true, nil
}

// shardedPrequeue is the other shards' entries of a scheduled queue with settings hash cfg,
// as its leader last counted them (cfg pq_other; 0 when not sharded or not scheduled).
func shardedPrequeue(cfg map[string]string) int64 {
	if DrawPhase(cfg["draw"]) != DrawScheduled {
		return 0
	}
	n, _ := strconv.ParseInt(cfg["pq_other"], 10, 64)
	return n
}

// shardEntries counts the other shards' entries of a scheduled queue with settings hash
// cfg now (one ZCARD per shard; the admin's stats, where the count is exact), or answers
// the leader's last count when a shard cannot be read.
func (q *Queue) shardEntries(ctx context.Context, name string, cfg map[string]string) int64 {
	tags := shardTags(cfg["pq_tags"])
	if DrawPhase(cfg["draw"]) != DrawScheduled || len(tags) < 2 {
		return 0
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, 0, len(tags)-1)
	for _, tag := range tags[1:] {
		cmds = append(cmds, pipe.ZCard(ctx, rstore.ShardKeysFor(name, tag).Pre()))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return shardedPrequeue(cfg)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n
}

// shardMirror is what a shard keeps of its queue's settings (pjoin.lua reads them).
var shardMirror = []string{"closed", "rate", "paused", "places_per_ip", "pow_difficulty", "priority_share", "method",
	"sold_out", "ended", "starts_ms", "max_active", "ends_ms", "max_active_share_per_ip", "draw"}

// shardSync is the leader's record of what it last copied to a queue's shards.
type shardSync struct {
	mu   sync.Mutex
	last map[string]string // queue -> the copied settings, joined
	at   map[string]time.Time
}

// shardSyncEvery is how often the leader copies the settings and counts the shards.
const shardSyncEvery = time.Second

// syncShards copies queue name's settings to its shards where they changed, and counts the
// shards' entries into cfg pq_other (the pre-queue's size the line shows) and each shard's
// pq_total. The leader runs it while the queue is scheduled, at most every shardSyncEvery
// (force: now, as after the start is first set).
func (q *Queue) syncShards(ctx context.Context, name string, force bool) error {
	rec := q.ssync
	s := q.preShardsOf(ctx, name)
	if len(s.tags) < 2 || s.phase != DrawScheduled {
		return nil
	}
	rec.mu.Lock()
	if rec.last == nil {
		rec.last, rec.at = map[string]string{}, map[string]time.Time{}
	}
	if !force && time.Since(rec.at[name]) < shardSyncEvery {
		rec.mu.Unlock()
		return nil
	}
	if !force {
		rec.at[name] = time.Now()
	}
	prev := rec.last[name]
	rec.mu.Unlock()
	k := rstore.KeysFor(name)
	pipe := q.rdb.Pipeline()
	cf := pipe.HMGet(ctx, k.Cfg(), shardMirror...)
	own := pipe.ZCard(ctx, k.Pre())
	if _, err := pipe.Exec(ctx); err != nil {
		return fail("shards "+name, err)
	}
	vals := cf.Val()
	strs := make([]string, len(vals))
	for i, v := range vals {
		strs[i] = toString(v)
	}
	cur := strings.Join(strs, "\x00")
	// The shards' own counts (one command on each shard's master).
	counts := make([]*redis.IntCmd, len(s.tags))
	pipe = q.rdb.Pipeline()
	for i, tag := range s.tags[1:] {
		counts[i+1] = pipe.ZCard(ctx, rstore.ShardKeysFor(name, tag).Pre())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fail("shards "+name, err)
	}
	var other int64
	for _, c := range counts[1:] {
		other += c.Val()
	}
	total := other + own.Val()
	pipe = q.rdb.Pipeline()
	pipe.HSet(ctx, k.Cfg(), "pq_other", other)
	for _, tag := range s.tags[1:] {
		sk := rstore.ShardKeysFor(name, tag)
		fields := []any{"pq_total", total}
		if cur != prev || force {
			var drop []string
			for i, f := range shardMirror {
				if vals[i] == nil {
					drop = append(drop, f)
				} else {
					fields = append(fields, f, strs[i])
				}
			}
			if len(drop) > 0 {
				pipe.HDel(ctx, sk.Cfg(), drop...)
			}
		}
		pipe.HSet(ctx, sk.Cfg(), fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fail("shards "+name, err)
	}
	rec.mu.Lock()
	rec.last[name] = cur
	rec.mu.Unlock()
	return nil
}

// resetShards empties the shards of a pre-queue whose start was just first set (what a
// queue of the same name left there before). Put then gives them their copy of the
// settings (syncShards); until then their joins go to the queue's own slot.
func (q *Queue) resetShards(ctx context.Context, name string, tags []string) error {
	pipe := q.rdb.Pipeline()
	for _, tag := range tags {
		sk := rstore.ShardKeysFor(name, tag)
		pipe.Del(ctx, sk.Cfg(), sk.Tickets(), sk.Pre(), sk.DrawSet())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fail("shards "+name, err)
	}
	q.forgetShards(name)
	return nil
}

// dropShards deletes a drawn (or ended) pre-queue's shards: their entries are in the line.
// The settings copy stays (frozen), so a join routed there by an instance that has not read
// the phase yet is sent to the queue's own slot.
func (q *Queue) dropShards(ctx context.Context, name string) error {
	vals, err := q.rdb.HGet(ctx, rstore.KeysFor(name).Cfg(), "pq_tags").Result()
	if err != nil && err != redis.Nil {
		return fail("shards "+name, err)
	}
	tags := shardTags(vals)
	if len(tags) < 2 {
		return nil
	}
	pipe := q.rdb.Pipeline()
	for _, tag := range tags[1:] {
		sk := rstore.ShardKeysFor(name, tag)
		pipe.HSet(ctx, sk.Cfg(), "frozen", "1")
		// UNLINK: a shard's rows of a big draw are freed off Redis's main thread.
		pipe.Unlink(ctx, sk.Tickets(), sk.Pre(), sk.DrawSet())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fail("shards "+name, err)
	}
	return nil
}

// pickTags chooses the tags of a new pre-queue's shards: n of them (Config.PrequeueShards;
// 0 = one per master of a cluster, 1 on a single Redis), on a cluster spread evenly over the
// masters (the queue's own master takes one like the others). "" when the pre-queue is not
// sharded (n = 1).
func (q *Queue) pickTags(ctx context.Context, name string) (string, error) {
	n := q.cfg.PrequeueShards
	cc, cluster := q.rdb.(*redis.ClusterClient)
	var slots []redis.ClusterSlot
	masters := map[string]bool{}
	if cluster {
		var err error
		if slots, err = cc.ClusterSlots(ctx).Result(); err != nil {
			return "", fail("shards "+name, err)
		}
		for _, s := range slots {
			if len(s.Nodes) > 0 {
				masters[s.Nodes[0].Addr] = true
			}
		}
	}
	if n == 0 {
		n = max(len(masters), 1)
	}
	n = min(n, maxPrequeueShards)
	if n < 2 {
		return "", nil
	}
	tags := make([]string, 0, n)
	if !cluster {
		for i := range n {
			tags = append(tags, strconv.Itoa(i+1))
		}
		return strings.Join(tags, ","), nil
	}
	owner := func(slot int64) string {
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
				return s.Nodes[0].Addr
			}
		}
		return ""
	}
	used := map[string]int{}
	// Each next shard goes to a master with the fewest shards so far: the first candidate
	// tag (1, 2, …) whose slot is on such a master; 64 candidates per shard at most.
	cand := 1
	for len(tags) < n {
		least := -1
		for m := range masters {
			if least < 0 || used[m] < least {
				least = used[m]
			}
		}
		found := false
		for tries := 0; tries < 64 && !found; tries++ {
			tag := strconv.Itoa(cand)
			cand++
			slot, err := cc.ClusterKeySlot(ctx, "{"+rstore.ShardKeysFor(name, tag).Tag()+"}").Result()
			if err != nil {
				return "", fail("shards "+name, err)
			}
			if m := owner(slot); used[m] == least {
				used[m]++
				tags = append(tags, tag)
				found = true
			}
		}
		if !found { // a lopsided slot map: take the next tag as it comes
			tags = append(tags, strconv.Itoa(cand))
			cand++
		}
	}
	return strings.Join(tags, ","), nil
}
