package stream

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"
)

// presenceLoop keeps the places of open streams alive (abandonment works from the last
// sign of life) and records when a stream closed, so the grace starts then. One ZADD per
// 1,000 tickets per PresenceEvery: a sign-of-life cost, not a per-tick cost.
func (h *Hub) presenceLoop(ctx context.Context) {
	full := time.NewTicker(h.cfg.PresenceEvery)
	defer full.Stop()
	quick := time.NewTicker(2 * time.Second)
	defer quick.Stop()
	for {
		select {
		case <-ctx.Done():
			h.flushGone(context.Background())
			return
		case <-quick.C:
			h.flushGone(ctx)
		case <-full.C:
			h.touchAll(ctx)
		}
	}
}

func (h *Hub) flushGone(ctx context.Context) {
	h.mu.Lock()
	gone := h.gone
	h.gone = map[string][]string{}
	h.mu.Unlock()
	for q, ids := range gone {
		h.touch(ctx, q, ids)
	}
}

func (h *Hub) touchAll(ctx context.Context) {
	qs := h.queueList()
	for _, qh := range qs {
		qh.mu.Lock()
		ids := make([]string, 0, len(qh.conns))
		for c := range qh.conns {
			if !c.admitted {
				ids = append(ids, c.ticket)
			}
		}
		qh.mu.Unlock()
		h.touch(ctx, qh.name, ids)
	}
}

func (h *Hub) touch(ctx context.Context, q string, ids []string) {
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := h.src.Touch(tctx, q, ids[:n]); err != nil && ctx.Err() == nil {
			h.log.Warn().Err(err).Str("queue", q).Msg("stream: presence")
		}
		cancel()
		ids = ids[n:]
	}
}

// Instance is one live instance as the admin view shows it.
type Instance struct {
	ID             string    `json:"id"`
	SSEConnections int64     `json:"sse_connections"`
	StartedAt      time.Time `json:"started_at"`
	LastSeen       time.Time `json:"last_seen"`
}

const instancesKey = "wr:instances"

func instanceKey(id string) string { return "wr:instance:" + id }

// reportLoop publishes this instance's stream count under a key with a TTL; an instance
// that dies stops renewing it and drops out of the admin view within CountTTL.
func (h *Hub) reportLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.CountEvery)
	defer t.Stop()
	for {
		h.report(ctx)
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), time.Second)
			h.src.Redis().Del(dctx, instanceKey(h.cfg.Instance))
			h.src.Redis().SRem(dctx, instancesKey, h.cfg.Instance)
			cancel()
			return
		case <-t.C:
		}
	}
}

func (h *Hub) report(ctx context.Context) {
	b, _ := json.Marshal(Instance{ID: h.cfg.Instance, SSEConnections: h.Count(), StartedAt: h.startedAt.UTC(), LastSeen: time.Now().UTC()})
	rdb := h.src.Redis()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	pipe := rdb.Pipeline()
	pipe.Set(ctx, instanceKey(h.cfg.Instance), b, h.cfg.CountTTL)
	pipe.SAdd(ctx, instancesKey, h.cfg.Instance)
	_, _ = pipe.Exec(ctx)
}

// Instances lists every live instance of the deployment (from Redis), sorted by id.
func (h *Hub) Instances(ctx context.Context) ([]Instance, error) {
	rdb := h.src.Redis()
	ids, err := rdb.SMembers(ctx, instancesKey).Result()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = instanceKey(id)
	}
	// One pipeline of GETs (not MGET: on a Redis Cluster the keys live in different slots).
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Get(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	vals := make([]any, len(keys))
	for i, c := range cmds {
		if v, err := c.Result(); err == nil {
			vals[i] = v
		}
	}
	var out []Instance
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			rdb.SRem(ctx, instancesKey, ids[i])
			continue
		}
		var in Instance
		if json.Unmarshal([]byte(s), &in) == nil {
			out = append(out, in)
		}
	}
	sortInstances(out)
	return out, nil
}
