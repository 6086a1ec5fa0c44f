package queue

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/rstore"
)

// ErrUnconfirmed: a token is about to be handed out, but a replica of its queue's master is
// attached and has not acknowledged it within AckTimeout (a slow or paused replica). A
// failover now could lose it, so it is not handed out yet; the caller answers 503 with
// Retry-After and the client asks again (docs/OPERATIONS.md "Failover").
var ErrUnconfirmed = errors.New("admission not yet held by a replica")

// The acknowledgement rule (docs/OPERATIONS.md "Failover"): with ReplicaAcks > 0 nobody is told of an
// admission before a replica holds it. A tick whose WAIT falls short while a replica is
// attached is held (admit.go: its message is kept and no further tick runs until a replica
// acknowledges); a token read that falls short answers ErrUnconfirmed. Only when the master
// has no replica at all — nothing a failover could promote — do admissions go out
// unconfirmed (counted), and then WAIT is skipped for ackWindow at a time, each window
// ending with one INFO to see whether a replica came back.

// ackWindow is how long the replica count a shortfall found is trusted: while the master
// has fewer replicas than ReplicaAcks, WAITs ask for the replicas it has (none: no WAIT), and
// the count is read again when the window ends.
const ackWindow = time.Second

// lagWindow is how long after a shortfall joins that make only a place skip WAIT: each
// would wait AckTimeout for nothing, and a lost place is found again by the page's join
// retry. A join that hands out a token still confirms it.
const lagWindow = time.Second

// ackState is the acknowledgement state shared by a Queue and its WithClient copies.
type ackState struct {
	mu    sync.Mutex
	q     map[string]*ackQueue
	nodes map[nodeKey]*redis.Client // no-retry clients (noRetryNode)
}

// ackQueue is one queue's acknowledgement state.
type ackQueue struct {
	until   time.Time // end of a fewer-replicas window (zero: none)
	want    int       // replicas asked for until then
	shortAt time.Time // the last WAIT that fell short
	alone   bool      // the last count found no replica (warned once per such period)
}

func (s *ackState) of(name string) *ackQueue {
	if s.q == nil {
		s.q = map[string]*ackQueue{}
	}
	a := s.q[name]
	if a == nil {
		a = &ackQueue{}
		s.q[name] = a
	}
	return a
}

// ackWant is how many replicas a WAIT for queue name asks for now: ReplicaAcks, or during
// a fewer-replicas window the replicas the master has (0: no WAIT, the admission goes out
// unconfirmed). A window that has ended is renewed or closed by one replica count.
func (q *Queue) ackWant(ctx context.Context, name string) int {
	if q.cfg.ReplicaAcks <= 0 {
		return 0
	}
	now := time.Now()
	q.ack.mu.Lock()
	a := q.ack.of(name)
	if a.until.IsZero() {
		q.ack.mu.Unlock()
		return q.cfg.ReplicaAcks
	}
	if now.Before(a.until) {
		w := a.want
		q.ack.mu.Unlock()
		return w
	}
	a.until = now.Add(ackWindow) // one caller counts; the others keep the last count meanwhile
	q.ack.mu.Unlock()
	n, err := q.replicas(ctx, name)
	if err != nil {
		return q.cfg.ReplicaAcks // the WAIT will tell
	}
	return q.setReplicas(name, n)
}

// setReplicas records a replica count of queue name's master and returns the replicas to ask for.
func (q *Queue) setReplicas(name string, n int) int {
	q.ack.mu.Lock()
	defer q.ack.mu.Unlock()
	a := q.ack.of(name)
	if n >= q.cfg.ReplicaAcks {
		a.until, a.want, a.alone = time.Time{}, q.cfg.ReplicaAcks, false
		return q.cfg.ReplicaAcks
	}
	a.until, a.want = time.Now().Add(ackWindow), n
	if n > 0 {
		a.alone = false
	}
	return n
}

// lagging reports whether a WAIT of queue name fell short within lagWindow.
func (q *Queue) lagging(name string) bool {
	q.ack.mu.Lock()
	defer q.ack.mu.Unlock()
	a := q.ack.of(name)
	return !a.shortAt.IsZero() && time.Since(a.shortAt) < lagWindow
}

// shortfall judges a WAIT of queue name that answered acks, fewer than asked: it counts
// the master's replicas. ok: the writes may be handed out — every attached replica holds
// them, or none is attached (alone; the admissions go out unconfirmed). firstAlone: this
// count is the first to find no replica since one was last seen (the caller warns once).
// Not ok: a replica is attached and behind; the caller holds the admission.
func (q *Queue) shortfall(ctx context.Context, name string, acks int64) (ok, alone, firstAlone bool) {
	q.ack.mu.Lock()
	q.ack.of(name).shortAt = time.Now()
	q.ack.mu.Unlock()
	n, err := q.replicas(ctx, name)
	if err != nil {
		return false, false, false
	}
	q.setReplicas(name, n)
	if n > 0 {
		return acks >= int64(n), false, false
	}
	q.ack.mu.Lock()
	a := q.ack.of(name)
	firstAlone = !a.alone
	a.alone = true
	q.ack.mu.Unlock()
	return true, true, firstAlone
}

// replicas asks the master of queue name's slot how many replicas are connected to it
// (INFO replication, connected_slaves). A paused replica stays connected until the
// master's repl-timeout (60 s by default) drops it.
func (q *Queue) replicas(ctx context.Context, name string) (int, error) {
	n, err := q.noRetryNode(ctx, rstore.KeysFor(name).Clock())
	if err != nil {
		return 0, err
	}
	info, err := n.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO replication: no connected_slaves")
}

// ackWrite waits until want replicas hold everything the master of queue name's slot had
// written when it is called: one harmless write in the queue's slot (field=value in its
// clock hash), then WAIT on the same connection — the replication stream is ordered, so its
// acknowledgement covers every earlier write (a held tick, the token a reader is about to
// hand out). It returns how many replicas acknowledged.
func (q *Queue) ackWrite(ctx context.Context, name string, want int, field, value string) (int64, error) {
	k := rstore.KeysFor(name)
	n, err := q.noRetryNode(ctx, k.Clock())
	if err != nil {
		return 0, err
	}
	pipe := n.Pipeline()
	pipe.HSet(ctx, k.Clock(), field, value)
	w := pipe.Do(ctx, "WAIT", want, q.cfg.AckTimeout.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	return toInt(w.Val()), nil
}

// confirm is called before a token of queue name that Redis holds is handed out (a join
// that finds its ticket admitted, a status call, a stream connect): nil once a replica holds
// it (or the master has none), ErrUnconfirmed while an attached replica has not
// acknowledged it.
func (q *Queue) confirm(ctx context.Context, name string) error {
	if q.cfg.ReplicaAcks <= 0 {
		return nil
	}
	want := q.ackWant(ctx, name)
	if want == 0 {
		q.m.unconfirmed.WithLabelValues(name).Inc()
		return nil
	}
	acks, err := q.ackWrite(ctx, name, want, "ack", "1")
	if err != nil {
		return fail("confirm "+name, err)
	}
	if acks >= int64(want) {
		return nil
	}
	ok, alone, _ := q.shortfall(ctx, name, acks)
	if !ok {
		q.m.withheld.WithLabelValues(name).Inc()
		return ErrUnconfirmed
	}
	if alone {
		q.m.unconfirmed.WithLabelValues(name).Inc()
	}
	return nil
}
