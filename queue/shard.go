package queue

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/rstore"
)

// How tick messages travel (Config.PubSub, WR_PUBSUB).
const (
	// PubSubAuto: sharded on a Redis Cluster, plain otherwise.
	PubSubAuto = "auto"
	// PubSubPlain: PUBLISH / SUBSCRIBE. On a Redis Cluster every node copies every message.
	PubSubPlain = "plain"
	// PubSubSharded: SPUBLISH / SSUBSCRIBE (Redis ≥ 7). The channel shares the queue's hash
	// tag, so a tick travels only on the shard that holds its queue.
	PubSubSharded = "sharded"
	// PubSubBoth: publish both ways and listen both ways, for the rolling deploy from a
	// release that publishes plain to one that publishes sharded (readers drop the
	// duplicate by its event number).
	PubSubBoth = "both"
)

// ValidPubSub reports whether s names a pub/sub mode.
func ValidPubSub(s string) bool {
	switch s {
	case PubSubAuto, PubSubPlain, PubSubSharded, PubSubBoth:
		return true
	}
	return false
}

// PubSub is the resolved mode: plain, sharded or both.
func (q *Queue) PubSub() string {
	switch q.cfg.PubSub {
	case PubSubPlain, PubSubSharded, PubSubBoth:
		return q.cfg.PubSub
	}
	if q.Cluster() {
		return PubSubSharded
	}
	return PubSubPlain
}

// Cluster reports whether the client talks to a Redis Cluster.
func (q *Queue) Cluster() bool {
	_, ok := q.rdb.(*redis.ClusterClient)
	return ok
}

// ReplicaAcks is how many replicas must acknowledge an admission before anyone is told of
// it (Config.ReplicaAcks; 0 = none asked).
func (q *Queue) ReplicaAcks() int { return q.cfg.ReplicaAcks }

// node returns a client of the one server that holds key (the master of its slot on a
// Redis Cluster; the client itself otherwise), so that a pipeline runs on one connection
// of that server: WAIT counts the writes of its own connection only.
func (q *Queue) node(ctx context.Context, key string) (redis.UniversalClient, error) {
	if cc, ok := q.rdb.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return q.rdb, nil
}

// ReloadTopology makes a Redis Cluster client read the slot map again at once (after an
// error that may be a failover), instead of at its next periodic refresh.
func (q *Queue) ReloadTopology(ctx context.Context) {
	if cc, ok := q.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

// WatchTopology makes a Redis Cluster client re-read the slot map as soon as a command
// fails on the network (a master died, a slot moved), at most twice a second, instead of at
// go-redis's next periodic refresh (every 10 s while commands flow). With it a failover costs
// the cluster's own detection and promotion time (cluster-node-timeout plus an election),
// not that plus up to 10 s more of 503s.
func WatchTopology(c redis.UniversalClient) {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return
	}
	cc.AddHook(&topologyHook{cc: cc})
}

type topologyHook struct {
	cc   *redis.ClusterClient
	last atomic.Int64 // unix nanos of the last reload asked
}

func (h *topologyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *topologyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h *topologyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h *topologyHook) check(ctx context.Context, err error) {
	if err == nil || errors.Is(err, redis.Nil) {
		return
	}
	var re redis.Error
	if errors.As(err, &re) && !strings.HasPrefix(re.Error(), "CLUSTERDOWN") && !strings.HasPrefix(re.Error(), "MOVED") &&
		!strings.HasPrefix(re.Error(), "READONLY") && !strings.HasPrefix(re.Error(), "TRYAGAIN") {
		return // an answer from a live server (a script's error, NOSCRIPT, …)
	}
	now := time.Now().UnixNano()
	last := h.last.Load()
	if now-last < int64(500*time.Millisecond) || !h.last.CompareAndSwap(last, now) {
		return
	}
	h.cc.ReloadState(context.WithoutCancel(ctx))
}

// publishTick sends a tick message that admit.lua returned (publishReturn) the way the
// configuration says.
func (q *Queue) publishTick(ctx context.Context, name, msg string) error {
	ch := rstore.Channel(name)
	mode := q.PubSub()
	if mode == PubSubPlain || mode == PubSubBoth {
		if err := q.rdb.Publish(ctx, ch, msg).Err(); err != nil {
			return fail("publish "+name, err)
		}
	}
	if mode == PubSubSharded || mode == PubSubBoth {
		if err := q.rdb.SPublish(ctx, ch, msg).Err(); err != nil {
			return fail("publish "+name, err)
		}
	}
	return nil
}

// evalWait runs script on the server that holds keys[0] and then WAITs, in one pipeline on
// one connection, for want replicas to hold its writes. It returns the script's
// answer (a string: the scripts run this way answer JSON) and how many replicas acknowledged
// (0 when WAIT itself failed: the script's writes stand, the caller counts them
// unconfirmed). A script's error answer (a named refusal) comes back with the acknowledgements
// too: the WAIT ran after it all the same. The pipeline goes through a client that never
// retries: go-redis retries a whole pipeline after a read timeout, and a script that already
// ran must not run again (admit.lua would hand the same token ids to other users).
func (q *Queue) evalWait(ctx context.Context, want int, s *redis.Script, keys []string, args ...any) (string, int64, error) {
	n, err := q.noRetryNode(ctx, keys[0])
	if err != nil {
		q.ReloadTopology(ctx)
		return "", 0, err
	}
	for attempt := 0; ; attempt++ {
		pipe := n.Pipeline()
		res := s.EvalSha(ctx, pipe, keys, args...)
		w := pipe.Do(ctx, "WAIT", want, q.cfg.AckTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx)
		if attempt == 0 && isNoScript(res.Err()) {
			if err := s.Load(ctx, n).Err(); err != nil {
				return "", 0, err
			}
			continue
		}
		acks := int64(0)
		if w.Err() == nil {
			acks = toInt(w.Val())
		}
		if err := res.Err(); err != nil {
			if !isScriptError(err) {
				q.ReloadTopology(ctx) // MOVED after a failover, a dead master: the node clients are not hooked
				return "", 0, err
			}
			return "", acks, err
		}
		out, err := res.Text()
		if err != nil {
			return "", 0, err
		}
		return out, acks, nil
	}
}

// isScriptError reports an error answer of a live server about the script itself (not the
// network, not the cluster's topology).
func isScriptError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	m := re.Error()
	return !strings.HasPrefix(m, "MOVED") && !strings.HasPrefix(m, "ASK") && !strings.HasPrefix(m, "CLUSTERDOWN") &&
		!strings.HasPrefix(m, "TRYAGAIN") && !strings.HasPrefix(m, "READONLY") && !strings.HasPrefix(m, "LOADING")
}

// noRetryNode is node with a client of the same server and options but no retries, made
// once per server address and per client of the Queue: the admission loops' copy
// (WithClient) gets clients of its own, so WAITs of requests held up by a slow replica
// never take the connections a tick needs.
func (q *Queue) noRetryNode(ctx context.Context, key string) (redis.UniversalClient, error) {
	n, err := q.node(ctx, key)
	if err != nil {
		return nil, err
	}
	c, ok := n.(*redis.Client)
	if !ok {
		return n, nil
	}
	o := c.Options()
	q.ack.mu.Lock()
	defer q.ack.mu.Unlock()
	if q.ack.nodes == nil {
		q.ack.nodes = map[nodeKey]*redis.Client{}
	}
	nk := nodeKey{of: q.rdb, addr: o.Addr}
	if nc := q.ack.nodes[nk]; nc != nil {
		return nc, nil
	}
	cp := *o
	cp.MaxRetries = -1
	nc := redis.NewClient(&cp)
	if q.cfg.NewNode != nil {
		q.cfg.NewNode(nc)
	}
	q.ack.nodes[nk] = nc
	return nc, nil
}

// nodeKey names a no-retry client: the Queue's client it was made for and the server.
type nodeKey struct {
	of   redis.UniversalClient
	addr string
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
