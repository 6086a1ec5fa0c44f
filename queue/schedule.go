package queue

import (
	"context"
	_ "embed"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue/draw"
	"github.com/waitroom/waitroom/topology"
)

// A scheduled queue (starts_at) holds a pre-queue before its start. At the start the
// pre-queue is frozen (by the first admission tick or join after it: admit.lua, join.lua)
// and the next n sequences of the normal line are reserved for its n members, so that
// anyone joining later queues FIFO behind them; the leader then draws their order
// (queue/draw: from the seed committed to when the start was set and the hash of the frozen
// list), gives each member its reserved sequence (drawplace.lua, in batches, idempotent) and
// finishes (drawdone.lua), which reveals the seed and lets admission start. Positions are
// then computed as for any waiter — the draw only assigns sequence numbers, nothing runs per
// waiter per tick. A leader that dies mid-draw leaves the phase at "frozen"; the next
// leader's first tick sees it and runs the whole draw again, which places nobody twice.

// schedule sets (or clears, with nil) the start of queue name, with the contract's rules.
func (q *Queue) schedule(ctx context.Context, name string, at *time.Time) (DrawPhase, error) {
	k := rstore.KeysFor(name)
	seed := draw.NewSeed()
	commitment, err := draw.Commitment(seed)
	if err != nil {
		return "", err
	}
	v := ""
	if at != nil {
		v = strconv.FormatInt(at.UnixMilli(), 10)
	}
	// The pre-queue's shards are chosen when the start is first set (prequeue.go); a later
	// change of the start keeps them (schedule.lua ignores tags then).
	tags := ""
	if at != nil {
		prev, err := q.rdb.HGet(ctx, k.Cfg(), "draw").Result()
		if err != nil && err != redis.Nil {
			return "", fail("schedule "+name, err)
		}
		if prev == "" {
			if tags, err = q.shardTagsFor(ctx, name); err != nil {
				return "", err
			}
		}
	}
	res, err := rstore.Schedule.Run(ctx, q.rdb,
		[]string{k.Cfg(), k.Waiting(), k.LaneWaiting(laneP), k.LaneWaiting(laneB), k.Draw(), k.Pre(), k.DrawSet(), k.DrawOrder()},
		v, seed, commitment, tags).Slice()
	if err != nil {
		return "", fail("schedule "+name, err)
	}
	switch toInt(res[0]) {
	case -1:
		return "", ErrDrawDone
	case -2:
		return "", ErrQueueNotEmpty
	}
	q.forgetShards(name)
	if tags != "" && toInt(res[0]) == 1 {
		// Until the shards have their copy of the settings, their joins go to the queue's
		// own slot (pjoin.lua answers QUEUE_SLOT): nothing is lost meanwhile.
		if err := q.resetShards(ctx, name, strings.Split(tags, ",")); err != nil {
			return "", err
		}
	}
	return DrawPhase(toString(res[1])), nil
}

// shardTagsFor is the tags of a new pre-queue's other shards (pickTags), or "" while an
// instance of a release that does not know shards is alive (it would freeze the queue's
// own pre-queue alone at the start: docs/UPGRADING.md).
func (q *Queue) shardTagsFor(ctx context.Context, name string) (string, error) {
	tags, err := q.pickTags(ctx, name)
	if err != nil || tags == "" {
		return "", err
	}
	ins, err := q.topo.Instances(ctx)
	if err != nil {
		return "", fail("schedule "+name, err)
	}
	for _, in := range ins {
		if !slices.Contains(in.Features, topology.FeaturePrequeueShards) {
			return "", nil
		}
	}
	return tags, nil
}

// afterTick runs what a tick said is due: the draw at the start, the end at ends_at. The
// end waits for the draw: ending a sale drops the frozen list, which the draw needs to
// finish and reveal its seed. drew: a draw ran to its end.
func (a *Admitter) afterTick(ctx context.Context, name, owner string, fence int64, res TickResult, log zerolog.Logger) (drew bool) {
	if res.Phase == DrawScheduled && !res.StartsAt.IsZero() {
		// A sharded pre-queue (prequeue.go): its shards get the settings' changes and their
		// counts are summed; at the start the leader freezes them (unless a join did) and
		// draws at once, as admit.lua's own freeze lets an unsharded queue do.
		var err error
		if time.Now().Before(res.StartsAt) {
			err = a.q.syncShards(ctx, name, false)
		} else {
			var frozen bool
			if frozen, err = a.q.freezeShards(ctx, name); frozen {
				res.Phase = DrawFrozen
			}
		}
		if err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Msg("pre-queue shards: will try again at the next tick")
		}
	}
	if res.Phase == DrawFrozen {
		start := time.Now()
		var dt drawTimes
		n, err := a.runDraw(ctx, name, owner, fence, &dt)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn().Err(err).Msg("draw: will try again at the next tick")
			}
			return false
		}
		drew = true
		a.q.m.draws.WithLabelValues(name).Inc()
		log.Info().Int("participants", n).Dur("took", time.Since(start)).Dur("read", dt.read).Dur("order", dt.order).
			Dur("shards", dt.shards).Dur("place", dt.place).Int("shard_count", dt.shardN).Msg("draw: done")
	}
	if res.EndDue {
		if err := a.runEnd(ctx, name, owner, fence); err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Msg("end: will try again at the next tick")
		}
	}
	return drew
}

// drawTimes is where a draw's time went (the "draw: done" log line): reading the frozen
// lists, ordering them, waiting for the shards' marks (ptake.lua, beyond what overlapped the
// placing), and placing (drawplace.lua).
type drawTimes struct {
	read, order, shards, place time.Duration
	shardN                     int
}

// runDraw orders and places every member of the frozen participant list; it returns their
// number and says in dt where the time went. It keeps the lease alive between batches (a big
// draw outlasts the lease time), and a leader that takes over resumes where the last one's
// progress mark says (the order is a function of the frozen list and the seed, so it
// recomputes the same one).
func (a *Admitter) runDraw(ctx context.Context, name, owner string, fence int64, dt *drawTimes) (int, error) {
	t0 := time.Now()
	k := rstore.KeysFor(name)
	pipe := a.q.rdb.Pipeline()
	recCmd := pipe.HMGet(ctx, k.Draw(), "seed", "base", "n", "placed")
	tagsCmd := pipe.HGet(ctx, k.Cfg(), "pq_tags")
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return 0, fail("draw "+name, err)
	}
	rec := recCmd.Val()
	seed, base, resume := toString(rec[0]), toInt(rec[1]), int(toInt(rec[3]))
	// Every shard's frozen entries (prequeue.go): the queue's own slot first, then each
	// other shard's; shard[i] says where tickets[i] is (0: the queue's own slot).
	tags := shardTags(tagsCmd.Val())
	if len(tags) == 0 {
		tags = []string{""}
	}
	var tickets []string
	var shard []int
	// One pipeline: on a cluster each master reads its shards beside the others.
	rp := a.q.rdb.Pipeline()
	reads := make([]*redis.StringSliceCmd, len(tags))
	for si, tag := range tags {
		key := k.DrawSet()
		if si > 0 {
			key = rstore.ShardKeysFor(name, tag).DrawSet()
		}
		reads[si] = rp.ZRange(ctx, key, 0, -1)
	}
	if _, err := rp.Exec(ctx); err != nil && err != redis.Nil {
		return 0, fail("draw "+name, err)
	}
	for si, rd := range reads {
		ts := rd.Val()
		tickets = append(tickets, ts...)
		for range ts {
			shard = append(shard, si)
		}
	}
	dt.read, dt.shardN = time.Since(t0), len(tags)
	t0 = time.Now()
	if int64(len(tickets)) != toInt(rec[2]) {
		return 0, fmt.Errorf("draw %s: the frozen list holds %d members, the freeze counted %d", name, len(tickets), toInt(rec[2]))
	}
	ids := make([]string, len(tickets))
	for i, t := range tickets {
		ids[i] = draw.ID(t)
	}
	phash := draw.ParticipantsHash(ids)
	key, err := draw.Key(seed, phash)
	if err != nil {
		return 0, fmt.Errorf("draw %s: %w", name, err)
	}
	// The participants hash is published as soon as it is known (GET …/draw).
	if err := a.q.rdb.HSet(ctx, k.Draw(), "phash", phash).Err(); err != nil {
		return 0, fail("draw "+name, err)
	}
	perm := draw.OrderIndex(key, ids)
	dt.order = time.Since(t0)
	order := make([]byte, 0, 32*len(perm))
	batch := a.cfg.DrawBatch
	fixed := []string{k.Lease(), k.Fence(), k.Tickets(), k.Waiting(), k.Seen(), k.Gone(), k.GoneNew(), k.Draw()}
	// The lease is renewed before the first batch (reading and ordering the frozen list may
	// have taken longer than the lease on a big draw or a busy machine), then every
	// LeaseRenew, and once more before the order is stored.
	var renewed time.Time
	renew := func() error {
		if !renewed.IsZero() && time.Since(renewed) < a.cfg.LeaseRenew {
			return nil
		}
		f, err := rstore.Lease.Run(ctx, a.q.rdb, []string{k.Lease(), k.Fence(), k.Clock()}, owner, a.cfg.LeaseTTL.Milliseconds(), string(leaseTake)).Int64()
		if err != nil {
			return fail("draw "+name, err)
		}
		if f != fence {
			return errFenced
		}
		renewed = time.Now()
		return nil
	}
	// Members of other shards are marked moved there first (ptake.lua, which says who is
	// still there and from which address), then placed here. The next batch's marks are
	// taken while this batch is placed: on a cluster the shards' masters work beside the
	// queue's own (a member marked but not placed yet is answered "being placed", 503).
	type took struct {
		where, placesKeys []string
		err               error
	}
	take := func(from int) <-chan took {
		ch := make(chan took, 1)
		to := min(from+batch, len(perm))
		go func() {
			w, pk, err := a.takeFromShards(ctx, name, tags, tickets, shard, perm[from:to], base+int64(from))
			ch <- took{w, pk, err}
		}()
		return ch
	}
	var next <-chan took // the marks of the batch from `from`, taken while the last was placed
	for from := min(max(resume, 0), len(perm)); from < len(perm); from += batch {
		if err := renew(); err != nil {
			return 0, err
		}
		to := min(from+batch, len(perm))
		tw := time.Now()
		var t took
		if next != nil {
			t = <-next
			next = nil
		} else { // the first batch (nothing to wait for when the queue is not sharded)
			t.where, t.placesKeys, t.err = a.takeFromShards(ctx, name, tags, tickets, shard, perm[from:to], base+int64(from))
		}
		dt.shards += time.Since(tw)
		if t.err != nil {
			return 0, t.err
		}
		if len(tags) > 1 && to < len(perm) {
			next = take(to)
		}
		where, placesKeys := t.where, t.placesKeys
		keys := append(append(make([]string, 0, len(fixed)+len(placesKeys)), fixed...), placesKeys...)
		args := make([]any, 0, 3+3*(to-from))
		args = append(args, owner, fence, to)
		for i := from; i < to; i++ {
			args = append(args, tickets[perm[i]], base+int64(i)+1, where[i-from])
		}
		tp := time.Now()
		n, err := rstore.DrawPlace.Run(ctx, a.q.rdb, keys, args...).Int64()
		dt.place += time.Since(tp)
		if err != nil {
			return 0, fail("draw "+name, err)
		}
		if n < 0 {
			return 0, errFenced
		}
		if a.afterDrawBatch != nil {
			a.afterDrawBatch()
		}
	}
	for _, i := range perm {
		b, _ := hex.DecodeString(ids[i])
		order = append(order, b...)
	}
	if err := renew(); err != nil {
		return 0, err
	}
	n, err := rstore.DrawDone.Run(ctx, a.q.rdb, []string{k.Lease(), k.Fence(), k.Cfg(), k.Draw(), k.DrawOrder()},
		owner, fence, order, phash).Int64()
	if err != nil {
		return 0, fail("draw "+name, err)
	}
	if n < 0 {
		return 0, errFenced
	}
	if len(tags) > 1 {
		// Every entry is in the line: the shards' copies go (best effort; a failure leaves
		// rows nobody reads, which the next schedule of this name clears).
		_ = a.q.dropShards(ctx, name)
		a.q.forgetShards(name)
	}
	return len(perm), nil
}

// takeFromShards runs ptake.lua for the members of one draw batch that are in other shards
// (batch: indexes into tickets in drawn order; the first's sequence is base+1). It returns
// drawplace.lua's "where" for each member of the batch and the place-set keys it names.
func (a *Admitter) takeFromShards(ctx context.Context, name string, tags, tickets []string, shard, batch []int, base int64) ([]string, []string, error) {
	where := make([]string, len(batch))
	if len(tags) < 2 {
		return where, nil, nil
	}
	k := rstore.KeysFor(name)
	per := map[int][]int{} // shard -> positions in batch
	for j, i := range batch {
		if s := shard[i]; s > 0 {
			per[s] = append(per[s], j)
		}
	}
	// The shards' calls run side by side (on a cluster each on its own master).
	type took struct {
		got []string
		err error
	}
	res := make(map[int]*took, len(per))
	var wg sync.WaitGroup
	for s, js := range per {
		t := &took{}
		res[s] = t
		args := make([]any, 0, 2*len(js))
		for _, j := range js {
			args = append(args, tickets[batch[j]], base+int64(j)+1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.got, t.err = rstore.PTake.Run(ctx, a.q.rdb, []string{rstore.ShardKeysFor(name, tags[s]).Tickets()}, args...).StringSlice()
		}()
	}
	wg.Wait()
	var placesKeys []string
	keyIndex := map[string]int{}
	for s, js := range per {
		got, err := res[s].got, res[s].err
		if err != nil {
			return nil, nil, fail("draw "+name, err)
		}
		if len(got) != len(js) {
			return nil, nil, fmt.Errorf("draw %s: %w: %d answers for %d members", name, errUnexpected, len(got), len(js))
		}
		for n, j := range js {
			w := got[n]
			if addr, ok := strings.CutPrefix(w, "="); ok {
				idx := 0
				if addr != "" {
					pk := k.Places(addr)
					if idx = keyIndex[pk]; idx == 0 {
						placesKeys = append(placesKeys, pk)
						idx = 8 + len(placesKeys) // KEYS index in drawplace.lua (1-based, after 8 fixed)
						keyIndex[pk] = idx
					}
				}
				w = "=" + strconv.Itoa(idx)
			}
			where[j] = w
		}
	}
	return where, placesKeys, nil
}

// endBatch is how many places one call of end.lua drops.
const endBatch = 2000

// runEnd drops every place of a queue whose ends_at has passed.
func (a *Admitter) runEnd(ctx context.Context, name, owner string, fence int64) error {
	k := rstore.KeysFor(name)
	keys := []string{k.Lease(), k.Fence(), k.Cfg(), k.Tickets(), k.Seen(), k.Waiting(), k.LaneWaiting(laneP),
		k.LaneWaiting(laneB), k.Pre(), k.DrawSet(), k.Gone(), k.GoneNew(), k.LaneGone(laneP), k.LaneGoneNew(laneP),
		k.LaneGone(laneB), k.LaneGoneNew(laneB), k.Clock(), k.Seq()}
	for {
		left, err := rstore.End.Run(ctx, a.q.rdb, keys, owner, fence, endBatch).Int64()
		switch {
		case err != nil:
			return fail("end "+name, err)
		case left < 0:
			return errFenced
		case left == 0:
			// A sharded pre-queue's shards go too (their entries were dropped with the line).
			return a.q.dropShards(ctx, name)
		}
	}
}

// DrawInfo is what GET /api/queues/{queue}/draw publishes about a scheduled queue's draw.
type DrawInfo struct {
	StartsAt   time.Time
	Commitment string
	Phase      DrawPhase
	// Known once the list is frozen and hashed (at the start).
	ParticipantsHash string
	Participants     int64
	// Revealed after the draw.
	Seed string
}

// ErrNoDraw: the queue is not scheduled (it has no draw).
var ErrNoDraw = fmt.Errorf("the queue has no scheduled start")

// Draw returns the draw record of queue name (ErrQueueNotFound, ErrNoDraw).
func (q *Queue) Draw(ctx context.Context, name string) (DrawInfo, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if !ValidName(name) {
		return DrawInfo{}, ErrQueueNotFound
	}
	k := rstore.KeysFor(name)
	pipe := q.rdb.Pipeline()
	cf := pipe.HMGet(ctx, k.Cfg(), "rate", "draw", "starts_ms")
	rec := pipe.HMGet(ctx, k.Draw(), "commitment", "phash", "n", "seed")
	if _, err := pipe.Exec(ctx); err != nil {
		return DrawInfo{}, fail("draw "+name, err)
	}
	c, r := cf.Val(), rec.Val()
	if c[0] == nil {
		return DrawInfo{}, ErrQueueNotFound
	}
	ph := DrawPhase(toString(c[1]))
	if ph == DrawNone || toString(r[0]) == "" {
		return DrawInfo{}, ErrNoDraw
	}
	d := DrawInfo{StartsAt: time.UnixMilli(toInt(c[2])).UTC(), Commitment: toString(r[0]), Phase: ph}
	if ph == DrawFrozen || ph == DrawDone {
		d.ParticipantsHash, d.Participants = toString(r[1]), toInt(r[2])
	}
	if ph == DrawDone {
		d.Seed = toString(r[3])
	}
	return d, nil
}

// DrawOrder returns the draw ids of a drawn queue in drawn order, one per line (ErrNoDraw
// before the draw is done).
func (q *Queue) DrawOrder(ctx context.Context, name string) (string, error) {
	d, err := q.Draw(ctx, name)
	if err != nil {
		return "", err
	}
	if d.Phase != DrawDone {
		return "", ErrNoDraw
	}
	ctx, cancel := context.WithTimeout(ctx, 10*q.cfg.OpTimeout)
	defer cancel()
	raw, err := q.rdb.Get(ctx, rstore.KeysFor(name).DrawOrder()).Bytes()
	if err != nil && err != redis.Nil {
		return "", fail("draw order "+name, err)
	}
	var b strings.Builder
	b.Grow(len(raw) / 32 * 65)
	for i := 0; i+32 <= len(raw); i += 32 {
		b.WriteString(hex.EncodeToString(raw[i : i+32]))
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// Seqs returns the sequence numbers of waiting tickets of queue name, in the order of ids
// (0 for a ticket that is not waiting in the normal line): how a stream instance learns
// its pre-queue members' drawn places. One round trip per 1,000 tickets.
func (q *Queue) Seqs(ctx context.Context, name string, ids []string) ([]int64, error) {
	out := make([]int64, len(ids))
	k := rstore.KeysFor(name)
	const chunk = 1000
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, 0, len(ids)/chunk+1)
	for from := 0; from < len(ids); from += chunk {
		cmds = append(cmds, pipe.HMGet(ctx, k.Tickets(), ids[from:min(from+chunk, len(ids))]...))
	}
	if len(cmds) == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fail("seqs "+name, err)
	}
	i := 0
	for _, c := range cmds {
		for _, v := range c.Val() {
			if st := parseState(toString(v)); st.code == codeWaiting && st.laneC == 0 {
				out[i] = st.seq
			}
			i++
		}
	}
	return out, nil
}

// SetSoldOut marks queue name sold out (every product it sells has stock 0) or not. The
// leader's next tick stops (or resumes) admission and tells every stream; places are kept.
// A change of the flag also logs when the sold-out period began or ended (soldout.lua;
// QueueStats.SoldOutPeriods). A version > 0 is the judgement's (orders.QueueStock): one not
// newer than the judgement the flag holds changes nothing, so judgements arriving out of
// order leave the newest. An unknown queue is ignored.
func (q *Queue) SetSoldOut(ctx context.Context, name string, soldOut bool, version int64) error {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if !ValidName(name) {
		return nil
	}
	k := rstore.KeysFor(name)
	changed, err := rstore.SoldOut.Run(ctx, q.rdb, []string{k.Cfg(), k.SoldLog()}, boolStr(soldOut), version).Int()
	if err != nil {
		return fail("sold out "+name, err)
	}
	if changed == 2 {
		// A sharded pre-queue's shards refuse joins from now on too (prequeue.go).
		if err := q.syncShards(ctx, name, true); err != nil {
			return err
		}
		// Every instance's shared snapshot (the index, the admin stats) re-reads the queue at
		// its next refresh instead of finding the flag at its next probe (up to 30 s).
		_ = q.topo.PublishWake(ctx, name)
	}
	return nil
}
