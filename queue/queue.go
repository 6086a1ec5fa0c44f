// Package queue owns the waiting line in Redis: queue settings, tickets, the atomic join
// and admission scripts, the per-queue admission loop with its lease, and admission
// tokens. It does not import Fiber.
package queue

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue/draw"
	"github.com/waitroom/waitroom/topology"
)

// ValidName reports whether s is a valid queue name (1–64 of A–Z a–z 0–9 _ -).
func ValidName(s string) bool { return rstore.ValidName(s) }

// Config tunes a Queue. Zero fields take the documented defaults.
type Config struct {
	// Grace is how long a waiting place survives with no open stream and no status
	// call before it is treated as abandoned (default 60 s; negative turns it off).
	Grace time.Duration
	// ClaimTTL bounds how long one order request may hold a token (default 15 s).
	ClaimTTL time.Duration
	// OpTimeout bounds every Redis call the Queue makes for a request, connection-pool wait
	// included (default 1 s; the client must have ContextTimeoutEnabled so that the
	// deadline also cuts a read from a stalled server). A stalled Redis costs a request at
	// most this much before it is answered 503.
	OpTimeout time.Duration
	// PubSub is how tick messages travel: PubSubAuto (default), PubSubPlain,
	// PubSubSharded or PubSubBoth.
	PubSub string
	// ReplicaAcks is how many replicas must hold an admission before a browser is told of it
	// (0 = do not wait: a single Redis; see docs/OPERATIONS.md "Failover"). AckTimeout bounds each WAIT
	// (default 250 ms). While a replica is attached but has not acknowledged, admission
	// holds its tick and token reads answer ErrUnconfirmed; with no replica attached at
	// all, admissions go out unconfirmed (counted). See ack.go.
	ReplicaAcks int
	AckTimeout  time.Duration
	// Claimed, when set, is told of each claim that takes a token (ClaimToken answering
	// TokenLive), with the tick that admitted it (0 when the ticket's state records none),
	// on the claiming request's context: the tracing links the request to that tick. It
	// must not block.
	Claimed func(ctx context.Context, queue string, tick int64)
	// NewNode, when set, is given each client the Queue makes for one server of a Redis
	// Cluster (the no-retry clients of the replica acknowledgement, shard.go) before its first
	// command, as the clients it was handed were (the tracing hooks).
	NewNode func(*redis.Client)
	// PrequeueShards is how many shards a scheduled queue's pre-queue spreads over
	// (prequeue.go), fixed when its start is first set: 0 = one per master of a Redis
	// Cluster, 1 on a single Redis (the default); at most 16. A pre-queue is sharded only
	// while every live instance runs a release that knows shards (topology.Features).
	PrequeueShards int
}

func (c Config) withDefaults() Config {
	if c.Grace == 0 {
		c.Grace = 60 * time.Second
	}
	if c.ClaimTTL == 0 {
		c.ClaimTTL = 15 * time.Second
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = time.Second
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = 250 * time.Millisecond
	}
	return c
}

// bound gives ctx the Queue's per-call deadline unless it already has an earlier one.
func (q *Queue) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, q.cfg.OpTimeout)
}

// OpTimeout is the per-call Redis deadline of the Queue (for callers that talk to Redis
// through another object, like the Limiter).
func (q *Queue) OpTimeout() time.Duration { return q.cfg.OpTimeout }

// Queue is the Redis-backed store of every waiting line of a deployment.
type Queue struct {
	rdb redis.UniversalClient
	cfg Config
	m   *metrics
	ack *ackState // shared by the copies WithClient makes
	// topo is the deployment's topology on the same client: the admission loops read the
	// live instances and the wakes from it, joins and settings changes send wakes through it.
	topo *topology.Topology
	// What this instance knows of the queues' pre-queue shards, and what its leaders last
	// copied to them (prequeue.go); shared by the copies WithClient makes.
	shards *sync.Map
	ssync  *shardSync
}

// New returns a Queue on rdb; its metrics are registered on reg (nil: not registered).
func New(rdb redis.UniversalClient, cfg Config, reg prometheus.Registerer) *Queue {
	cfg = cfg.withDefaults()
	return &Queue{rdb: rdb, cfg: cfg, m: newMetrics(reg), ack: &ackState{}, topo: newTopology(rdb, cfg),
		shards: &sync.Map{}, ssync: &shardSync{}}
}

// newTopology is the topology a Queue on rdb reads and writes through: same client, same
// per-call deadline.
func newTopology(rdb redis.UniversalClient, cfg Config) *topology.Topology {
	return topology.New(rstore.New(rdb, cfg.OpTimeout))
}

// WithClient returns a Queue on another client sharing this one's settings and metrics
// (the admission loops get their own connection pool, so request traffic cannot starve
// them).
func (q *Queue) WithClient(rdb redis.UniversalClient) *Queue {
	c := *q
	c.rdb = rdb
	c.topo = newTopology(rdb, q.cfg)
	return &c
}

// Ping checks that Redis answers (readiness).
func (q *Queue) Ping(ctx context.Context) error {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if err := q.rdb.Ping(ctx).Err(); err != nil {
		return fail("ping", err)
	}
	return nil
}

// Place is where a ticket stands in its queue.
type Place struct {
	Queue string
	State State
	// Lane is the line the ticket waits (or waited) in: LaneNormal, LanePriority or
	// LaneBypass (invites).
	Lane      Lane
	Seq       int64
	Position  int64 // 1 = next to be admitted; 0 when not waiting
	Waiting   int64
	AdmitRate float64 // the ETA's estimate of the rate, users/s (see ETA)
	// RealRate is what was really admitted per second over about the last 5 s (0 while
	// paused or empty): the answer's admit_rate.
	RealRate       float64
	Rate           float64 // configured users/s
	Paused         bool
	Token          string
	TokenExpiresAt time.Time
	// TokenIssuedAt is when the token was issued (the admission); zero for a token issued
	// by a leader that does not record it (see IssuedAt).
	TokenIssuedAt time.Time
	Tick          int64 // the admission tick, for an admitted ticket read by TicketState
	// A scheduled queue: its start, and for a pre-queue member the pre-queue's size and
	// its public draw id (draw.ID of the ticket id).
	StartsAt     time.Time
	PrequeueSize int64
	DrawID       string
	// SoldOut: every product the queue sells has stock 0 (admission stops, places kept).
	SoldOut bool
	// Method is the queue's queueing method (a random queue shows no position).
	Method Method
	// rateCut is the part of the queue's rate that does not go to this place's lane while
	// it waits (1 − LaneShare; 0, the zero value, for the whole rate).
	rateCut float64
}

// ETA estimates the wait from the measured admit rate and the lane's share of it (see
// LaneShare); -1 when no estimate exists (paused, sold out, rate 0, or a lane that gets no
// share).
func (p Place) ETA() float64 {
	if p.Paused || p.SoldOut {
		return -1
	}
	f := 1 - p.rateCut
	return ETA(p.Position, p.AdmitRate*f, p.Rate*f)
}

// LaneShare is the part of a queue's admission rate that a lane's line gets, as waiting
// times are estimated from it: bypass waiters go first (the whole rate); the priority line
// gets share (the queue's priority_share) and the normal line 1 − share while the other of
// the two has waiters, the whole rate otherwise (admission is work-conserving: a lane's
// unused part goes to the other). otherWaiting is the other line's length.
func LaneShare(l Lane, share float64, otherWaiting int64) float64 {
	switch {
	case l == LaneBypass || otherWaiting <= 0:
		return 1
	case l == LanePriority:
		return share
	}
	return 1 - share
}

// ETA is position / rate, the rate being the estimate admit.lua keeps — a 5 s moving
// average of what was admitted while admission ran, restarted from the configured rate after
// every pause and rate change — bounded by the configured rate (nobody is let in faster), and
// the configured rate while nothing has been measured yet; -1 when neither gives an estimate
// (paused or rate 0).
func ETA(position int64, measured, configured float64) float64 {
	if position <= 0 {
		return 0
	}
	r := measured
	if r < 0.01 {
		r = configured
	}
	if configured > 0 && r > configured {
		r = configured
	}
	if r <= 0 {
		return -1
	}
	return math.Ceil(float64(position) / r)
}

// Lane is one of a queue's lines. Invites put their holders in the priority or bypass
// line; everyone else waits in the normal line.
type Lane string

// Lanes.
const (
	LaneNormal   Lane = "normal"
	LanePriority Lane = "priority"
	LaneBypass   Lane = "bypass"
)

// Join gives ticket t a place in its queue or returns the place it already has; created
// reports a new place. It applies no per-address cap (JoinFrom does).
func (q *Queue) Join(ctx context.Context, t Ticket) (Place, bool, error) {
	return q.JoinWith(ctx, t, JoinOptions{})
}

// JoinFrom is Join for a caller at client (an address key, e.g. an IPv4 address or an
// IPv6 /64): a new place is refused with ErrTooManyPlaces while client holds the queue's
// Settings.AddressCap live places (places.go).
func (q *Queue) JoinFrom(ctx context.Context, t Ticket, client string) (Place, bool, error) {
	return q.JoinWith(ctx, t, JoinOptions{Client: client})
}

// JoinOptions are what a join request brings besides its ticket.
type JoinOptions struct {
	// Client is the caller's address key ("" = no per-address cap).
	Client string
	// Pow is a verified proof of work (see VerifyPow); the zero value is none. A queue with
	// pow_difficulty > 0 refuses a new place without one (ErrPowRequired), and each
	// challenge makes one place at most, until its expiry on Redis time (ErrPowInvalid
	// after it, whatever this instance's clock says).
	Pow PowProof
	// Invite is an invite code ("" = none): a valid one puts the place in the invite's lane
	// (and a new place with it needs no proof of work); an invalid one is ErrInviteInvalid.
	Invite string
}

// ValidInviteCode reports whether s has the shape of an invite code (base64url, 16–128
// characters). A join passes anything else to join.lua as a code no stored code matches, so
// no other input ever reaches Redis as a hash field; trust, which makes and revokes the
// codes, checks the same shape.
func ValidInviteCode(s string) bool {
	if len(s) < 16 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// PowProof is a proof of work the caller verified: the challenge's id (its single-use
// record), its difficulty and when it expires.
type PowProof struct {
	ID         string
	Difficulty int
	Expires    time.Time
}

// JoinWith is Join with the request's options.
func (q *Queue) JoinWith(ctx context.Context, t Ticket, o JoinOptions) (Place, bool, error) {
	p, created, err := q.place(ctx, t, true, o)
	if err == nil && created {
		q.m.enter.WithLabelValues(t.Queue).Inc()
	}
	return p, created, err
}

// Status returns the place of ticket t (ErrNoPlace when it has none). It also counts as a
// sign of life, so a client that polls keeps its place.
func (q *Queue) Status(ctx context.Context, t Ticket) (Place, error) {
	p, _, err := q.place(ctx, t, false, JoinOptions{})
	return p, err
}

// place runs join.lua for ticket t (join: joinPlace, else joinStatus); created reports a
// new place.
func (q *Queue) place(ctx context.Context, t Ticket, join bool, o JoinOptions) (p Place, created bool, err error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	mode := joinStatus
	if join {
		mode = joinPlace
	}
	// The challenge's expiry goes to the script as it is: the script checks it, and keeps
	// the single-use record until it, on Redis time (not on this instance's clock).
	powDiff, powExp := "", int64(0)
	if o.Pow.ID != "" {
		powDiff = strconv.Itoa(o.Pow.Difficulty)
		powExp = o.Pow.Expires.UnixMilli()
	}
	invite := o.Invite
	if invite != "" && !ValidInviteCode(invite) {
		invite = "!" // no code has this shape: the script refuses it (after returning a live place)
	}
	// A sharded pre-queue (prequeue.go): a ticket of another shard than the queue's own slot
	// is answered there while it holds an entry (or, before the start, takes one); a join with
	// an invite code goes to the queue's slot (the code's lane is there), and then gives up
	// the entry it may hold in its shard.
	if sp, handled, err := q.placeSharded(ctx, t, mode, o, powDiff, powExp, invite); handled || err != nil {
		return sp.p, sp.created, err
	}
	p, created, err = q.placeOwn(ctx, t, join, mode, o, powDiff, powExp, invite)
	if errors.Is(err, errSharded) || (errors.Is(err, ErrNoPlace) && !q.preShardsOf(ctx, t.Queue).routed()) {
		// What this instance knew of the queue's shards is stale (they were set up after it
		// read them): read them again; the shard answers (or ErrNoPlace stands).
		q.forgetShards(t.Queue)
		sp, handled, serr := q.placeSharded(ctx, t, mode, o, powDiff, powExp, invite)
		switch {
		case serr != nil:
			return Place{}, false, serr
		case handled:
			return sp.p, sp.created, nil
		case errors.Is(err, errSharded):
			return Place{}, false, fmt.Errorf("join %s: %w: the pre-queue's shards are being set up", t.Queue, ErrUnavailable)
		}
	}
	if errors.Is(err, errStarting) {
		// The start of a sharded pre-queue: freeze every shard, then join behind the draw.
		if _, ferr := q.freezeShards(ctx, t.Queue); ferr != nil {
			return Place{}, false, ferr
		}
		p, created, err = q.placeOwn(ctx, t, join, mode, o, powDiff, powExp, invite)
	}
	if err == nil && created && invite != "" {
		// Best effort: an entry left behind is not placed by the draw (drawplace.lua finds
		// the ticket's row in the line) and goes when the shards are dropped.
		_, _ = q.leaveShard(ctx, t)
	}
	return p, created, err
}

// placeOwn is place on the queue's own slot: join.lua.
func (q *Queue) placeOwn(ctx context.Context, t Ticket, join bool, mode joinMode, o JoinOptions, powDiff string, powExp int64, invite string) (p Place, created bool, err error) {
	k := rstore.KeysFor(t.Queue)
	// A fresh token for a passthrough admission by the join itself (unused otherwise).
	token := uuid.NewString()
	keys := []string{k.Cfg(), k.Seq(), k.Waiting(), k.Tickets(), k.Seen(), k.Clock(), k.Places(o.Client), k.Pow(o.Pow.ID),
		k.Invites(), k.InviteExp(), k.LaneWaiting(laneP), k.LaneWaiting(laneB), k.Gone(), k.GoneNew(),
		k.Pre(), k.DrawSet(), k.Draw(), k.Active(), k.Retire(), k.Token(token)}
	args := []any{t.ID, string(mode), o.Client, powDiff, powExp, invite, token}
	var text string
	acked, behind := false, false // behind: the answer's writes are not known to be on a replica
	want := 0
	if join {
		want = q.ackWant(ctx, t.Queue)
	}
	if want > 0 && !q.lagging(t.Queue) {
		// The place (or a passthrough admission) is on a replica before the answer: a
		// failover of the master cannot take back what the page was told (docs/OPERATIONS.md "Failover").
		var acks int64
		text, acks, err = q.evalWait(ctx, want, rstore.Join, keys, args...)
		// A refusal answers too: its WAIT is judged as a place's is.
		answered := err == nil || refusal(err) != nil
		acked = answered && acks >= int64(want)
		if answered && !acked {
			// ok: every attached replica holds it, or none is attached (alone).
			ok, alone, _ := q.shortfall(ctx, t.Queue, acks)
			acked, behind = ok, !ok || alone
		}
	} else {
		text, err = rstore.Join.Run(ctx, q.rdb, keys, args...).Text()
		// No replica attached, or one fell short within lagWindow: the place is not
		// confirmed (a lost place is found again by the page's join retry); a token is, below.
		behind = join && q.cfg.ReplicaAcks > 0
	}
	if err != nil {
		return Place{}, false, fail("join "+t.Queue, err) // a refusal becomes its package error
	}
	var a joinAnswer
	if err := decodeAnswer("join "+t.Queue, text, &a); err != nil {
		return Place{}, false, err
	}
	p, created = a.place(t.Queue), a.Created
	if p.State == StatePrequeue {
		p.DrawID = draw.ID(t.ID)
	}
	if created && p.State == StateAdmitted {
		q.m.issued.WithLabelValues(t.Queue).Inc() // a passthrough admission by the join itself
	}
	if a.Woke {
		// This join ended the queue's rest: the admission loops wake (a lost message costs
		// one rest check at most; the join itself already cleared the flag).
		_ = q.topo.PublishWake(ctx, t.Queue)
	}
	if created && behind {
		if p.Token == "" {
			q.m.placesUnconf.WithLabelValues(t.Queue).Inc() // a new place, answered unconfirmed
		} else if acked {
			q.m.unconfirmed.WithLabelValues(t.Queue).Inc() // a passthrough admission, no replica attached
		}
	}
	if p.Token != "" && !(acked && created) {
		// A token admitted earlier (or by this join, unconfirmed) is about to be handed out.
		if err := q.confirm(ctx, t.Queue); err != nil {
			return Place{}, created, err
		}
	}
	return p, created, nil
}

// Leave gives up ticket t's place (or its unused token). The departure reaches every
// instance in the next tick message, so positions behind move up.
func (q *Queue) Leave(ctx context.Context, t Ticket) error {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if done, err := q.leaveShard(ctx, t); done || err != nil {
		return err
	}
	k := rstore.KeysFor(t.Queue)
	// The token key must be passed in KEYS, so it is read first; if the ticket is admitted
	// between the read and the script, the script says so and the read is repeated.
	for range 3 {
		cur, err := q.rdb.HGet(ctx, k.Tickets(), t.ID).Result()
		if err != nil && err != redis.Nil {
			return fail("leave "+t.Queue, err)
		}
		st := parseState(cur)
		n, err := rstore.Leave.Run(ctx, q.rdb,
			[]string{k.Waiting(), k.Tickets(), k.Gone(), k.GoneNew(), k.Seen(), k.Active(), k.Token(st.token),
				k.LaneWaiting(laneP), k.LaneGone(laneP), k.LaneGoneNew(laneP),
				k.LaneWaiting(laneB), k.LaneGone(laneB), k.LaneGoneNew(laneB), k.Pre(), k.Clock()},
			t.ID, st.token).Int64()
		switch {
		case err != nil:
			return fail("leave "+t.Queue, err)
		case n == 0:
			return ErrNoPlace
		case n == 1:
			return nil
		}
	}
	return fmt.Errorf("leave %s: ticket state kept changing", t.Queue)
}

// Touch records a sign of life for waiting tickets of one queue (their streams are open),
// so they are not treated as abandoned. One ZADD per call whatever len(ids) is.
func (q *Queue) Touch(ctx context.Context, queue string, ids []string) error {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	// Scored with Redis TIME, the clock the abandonment sweep compares with.
	if err := rstore.Touch.Run(ctx, q.rdb, []string{rstore.KeysFor(queue).Seen()}, args...).Err(); err != nil {
		return fail("touch "+queue, err)
	}
	return nil
}

// Snapshot is the state of one queue at event number Ev, for resynchronisation.
type Snapshot struct {
	Ev        int64
	Head      int64 // highest sequence admitted (the normal line)
	Tail      int64 // highest sequence handed out (the normal line)
	Tick      int64
	AdmitRate float64 // the ETA's estimate
	RealRate  float64 // really admitted per second lately (0 while paused or empty)
	Rate      float64
	Paused    bool
	Waiting   int64   // the normal line's length
	Gone      []int64 // departed sequences above Head
	// Share is the queue's priority_share; Priority and Bypass the invite lanes' lines
	// (their sequences are numbered apart from the normal line's).
	Share    float64
	Priority LaneState
	Bypass   LaneState
	// Drop day: the schedule (Sched nil when the queue has none), sold out, the method, the end.
	Sched   *TickSchedule
	SoldOut bool
	Method  Method
	Ended   bool
}

// LaneState is one invite lane's line: positions in it are seq − Head − departures in
// (Head, seq), as in the normal line.
type LaneState struct {
	Head    int64   `json:"head"`    // highest sequence admitted from the lane
	Tail    int64   `json:"tail"`    // highest sequence handed out in the lane
	Waiting int64   `json:"waiting"` // the lane's length
	Gone    []int64 `json:"gone,omitempty"`
}

// Snapshot reads the resync state of queue name atomically.
func (q *Queue) Snapshot(ctx context.Context, name string) (Snapshot, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	res, err := rstore.Snapshot.Run(ctx, q.rdb,
		[]string{k.Ev(), k.Clock(), k.Gone(), k.Seq(), k.Cfg(), k.Waiting(),
			k.LaneGone(laneP), k.LaneWaiting(laneP), k.LaneGone(laneB), k.LaneWaiting(laneB), k.Pre(), k.Draw()}).Int64Slice()
	if err != nil {
		return Snapshot{}, fail("snapshot "+name, err)
	}
	if len(res) < 26 {
		return Snapshot{}, fmt.Errorf("snapshot %s: %d values", name, len(res))
	}
	s := Snapshot{Ev: res[0], Head: res[1], Tail: res[2], Tick: res[3],
		AdmitRate: float64(res[4]) / 1000, Rate: float64(res[5]) / 1000, Paused: res[6] == 1, Waiting: res[7],
		Share:    float64(res[8]) / 1e6,
		Priority: LaneState{Head: res[9], Tail: res[10], Waiting: res[11]},
		Bypass:   LaneState{Head: res[13], Tail: res[14], Waiting: res[15]}}
	if ph := res[19]; ph > 0 {
		s.Sched = &TickSchedule{Starts: res[17], Prequeue: res[18], Phase: string([...]DrawPhase{DrawNone, DrawScheduled, DrawFrozen, DrawDone}[min(ph, 3)]),
			Base: res[20], N: res[21]}
	}
	s.SoldOut, s.Ended = res[22] == 1, res[24] == 1
	s.Method = [...]Method{MethodFIFO, MethodRandom, MethodPassthrough, MethodReject}[min(max(res[23], 0), 3)]
	s.RealRate = float64(res[25]) / 1000
	rest := res[26:]
	np, nb := min(res[12], int64(len(rest))), int64(0)
	s.Priority.Gone = append([]int64(nil), rest[:np]...)
	rest = rest[np:]
	nb = min(res[16], int64(len(rest)))
	s.Bypass.Gone = append([]int64(nil), rest[:nb]...)
	s.Gone = append([]int64(nil), rest[nb:]...)
	return s, nil
}

// TicketState is the stored state of a ticket (for stream connects).
func (q *Queue) TicketState(ctx context.Context, t Ticket) (Place, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	cur, err := q.rdb.HGet(ctx, rstore.KeysFor(t.Queue).Tickets(), t.ID).Result()
	if err == redis.Nil {
		// An entry of another shard of a sharded pre-queue (prequeue.go) is in the pre-queue
		// (or being moved to the line by the draw: its place arrives with the draw's tick).
		if in, serr := q.inShard(ctx, t); serr != nil || in {
			return Place{Queue: t.Queue, State: StatePrequeue}, serr
		}
		if _, err := q.Settings(ctx, t.Queue); err != nil {
			return Place{}, err
		}
		return Place{}, ErrNoPlace
	}
	if err != nil {
		return Place{}, fail("ticket state", err)
	}
	st := parseState(cur)
	p := Place{Queue: t.Queue, Seq: st.seq, State: st.state(), Lane: st.lane()}
	if p.State == StateAdmitted {
		p.Token, p.TokenExpiresAt = st.token, time.UnixMilli(st.exp)
		p.Tick, _ = strconv.ParseInt(st.extra, 10, 64)
		if st.iat > 0 {
			p.TokenIssuedAt = time.UnixMilli(st.iat)
		}
		if !p.TokenExpiresAt.After(time.Now()) {
			p.State, p.Token, p.TokenExpiresAt, p.TokenIssuedAt = StateExpired, "", time.Time{}, time.Time{}
		} else if err := q.confirm(ctx, t.Queue); err != nil {
			return Place{}, err // the token is about to be handed out: not before a replica holds it
		}
	}
	return p, nil
}

// QueueStats are the live counts of one queue for the admin view.
type QueueStats struct {
	Settings
	Waiting         int64 // the normal line
	WaitingPriority int64 // the priority line (invites)
	WaitingBypass   int64 // the bypass line (invites)
	Prequeue        int64 // the pre-queue of a scheduled queue before its start
	AdmittedTotal   int64
	ActiveTokens    int64
	AdmitRate       float64
	TickLagMs       float64 // how late the leader's last tick started
	Leader          string
	// Running totals since the queue was made (the scripts keep them in its clock hash;
	// what scripts without them did is not counted): new places, lapsed tokens,
	// places removed after the abandonment grace, places given up by leaving, places
	// dropped at the end of the sale (end.lua).
	Joined, Expired, Abandoned, Left, Dropped int64
	// SoldOutPeriods are the queue's last 64 sold-out periods, oldest first (a period
	// flagged by a soldout.lua that does not log is missing).
	SoldOutPeriods []SoldOutPeriod
}

// SoldOutPeriod is one time a queue was sold out: from the instant its flag was set to the
// instant a restock cleared it (zero while it lasts).
type SoldOutPeriod struct {
	From, To time.Time
}

// parseSoldLog reads soldout.lua's log entries ("from[:to]", ms).
func parseSoldLog(entries []string) []SoldOutPeriod {
	out := make([]SoldOutPeriod, 0, len(entries))
	for _, e := range entries {
		from, to, _ := strings.Cut(e, ":")
		f := msTime(from)
		if f == nil {
			continue
		}
		p := SoldOutPeriod{From: *f}
		if t := msTime(to); t != nil {
			p.To = *t
		}
		out = append(out, p)
	}
	return out
}

// Stats returns the live counts of queue name.
func (q *Queue) Stats(ctx context.Context, name string) (QueueStats, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	pipe := q.rdb.Pipeline()
	cfg := pipe.HGetAll(ctx, k.Cfg())
	w := pipe.ZCard(ctx, k.Waiting())
	a := pipe.ZCount(ctx, k.Active(), fmt.Sprint(time.Now().UnixMilli()), "+inf")
	c := pipe.HMGet(ctx, k.Clock(), "total", "real_shown", "lag_ms", "seq_p", "head_p", "seq_b", "head_b", "arate",
		"joins", "expired_n", "abandoned_n", "left_n", "dropped_n")
	l := pipe.Get(ctx, k.Lease())
	pq := pipe.ZCard(ctx, k.Pre())
	sl := pipe.LRange(ctx, k.SoldLog(), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return QueueStats{}, fail("stats "+name, err)
	}
	if len(cfg.Val()) == 0 {
		return QueueStats{}, ErrQueueNotFound
	}
	s := QueueStats{Settings: ParseSettings(name, cfg.Val()), Waiting: w.Val(), ActiveTokens: a.Val(), Leader: l.Val(),
		Prequeue: pq.Val() + q.shardEntries(ctx, name, cfg.Val())}
	s.SoldOutPeriods = parseSoldLog(sl.Val())
	v := c.Val()
	if len(v) != 13 {
		return s, nil
	}
	s.AdmittedTotal = toInt(v[0])
	s.Joined, s.Expired, s.Abandoned, s.Left, s.Dropped = toInt(v[8]), toInt(v[9]), toInt(v[10]), toInt(v[11]), toInt(v[12])
	// Users really admitted per second lately, 0 while paused or empty (a leader that does
	// not measure it keeps only the ETA's estimate).
	s.AdmitRate = toFloat(v[1])
	if v[1] == nil {
		s.AdmitRate = toFloat(v[7])
	}
	s.TickLagMs = toFloat(v[2])
	// A lane whose counter has not passed its head is empty: its length is only asked for
	// when it may have waiters, so stats of a queue without invites cost what they did.
	var wp, wb *redis.IntCmd
	pipe = q.rdb.Pipeline()
	if toInt(v[3]) > toInt(v[4]) {
		wp = pipe.ZCard(ctx, k.LaneWaiting(laneP))
	}
	if toInt(v[5]) > toInt(v[6]) {
		wb = pipe.ZCard(ctx, k.LaneWaiting(laneB))
	}
	if wp == nil && wb == nil {
		return s, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return QueueStats{}, fail("stats "+name, err)
	}
	if wp != nil {
		s.WaitingPriority = wp.Val()
	}
	if wb != nil {
		s.WaitingBypass = wb.Val()
	}
	return s, nil
}

func sortStrings(s []string) { sort.Strings(s) }

// RoundRate rounds a measured rate to two decimals for display.
func RoundRate(f float64) float64 { return math.Round(f*100) / 100 }

// Channel is the pub/sub channel on which the leader publishes one message per tick
// (read them with Feed; exported for tests that watch the wire).
func Channel(name string) string { return rstore.Channel(name) }
