package queue

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The instance registry: every instance reports its live stream count under a key with a
// TTL, so the admin view shows every instance and the total, and a dead instance drops out
// by itself when its key expires.

// Instance is one live instance as the admin view shows it.
type Instance struct {
	ID             string    `json:"id"`
	SSEConnections int64     `json:"sse_connections"`
	MaxStreams     int64     `json:"max_streams"`     // stream budget (0 = none, or an older release)
	Connections    int64     `json:"connections"`     // open client connections, streams included
	MaxConnections int64     `json:"max_connections"` // connection budget (0 = none)
	StartedAt      time.Time `json:"started_at"`
	LastSeen       time.Time `json:"last_seen"`
	// Queues is this instance's open streams per queue (queues with none are left out).
	Queues map[string]int64 `json:"queues,omitempty"`
}

const instancesKey = "wr:instances" // SET of instance ids (global, outside any queue's slot)

func instanceKey(id string) string { return "wr:instance:" + id }

// ReportInstance records in as live for ttl.
func (q *Queue) ReportInstance(ctx context.Context, in Instance, ttl time.Duration) error {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	pipe := q.rdb.Pipeline()
	pipe.Set(ctx, instanceKey(in.ID), b, ttl)
	pipe.SAdd(ctx, instancesKey, in.ID)
	// The live set that spreads leadership (Alive): scored by this report's time; entries
	// an hour old are gone for good.
	now := time.Now()
	pipe.ZAdd(ctx, aliveKey, redis.Z{Score: float64(now.UnixMilli()), Member: in.ID})
	pipe.ZRemRangeByScore(ctx, aliveKey, "-inf", strconv.FormatInt(now.Add(-time.Hour).UnixMilli(), 10))
	if _, err := pipe.Exec(ctx); err != nil {
		return fail("report instance", err)
	}
	return nil
}

// RemoveInstance drops instance id from the registry at once (clean shutdown).
func (q *Queue) RemoveInstance(ctx context.Context, id string) error {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	pipe := q.rdb.Pipeline()
	pipe.Del(ctx, instanceKey(id))
	pipe.SRem(ctx, instancesKey, id)
	pipe.ZRem(ctx, aliveKey, id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fail("remove instance", err)
	}
	return nil
}

// Instances lists every live instance of the deployment, sorted by id; ids whose key has
// expired are dropped from the set on the way.
func (q *Queue) Instances(ctx context.Context) ([]Instance, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	ids, err := q.rdb.SMembers(ctx, instancesKey).Result()
	if err != nil {
		return nil, fail("list instances", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// One pipeline of GETs (not MGET: on a Redis Cluster the keys live in different slots).
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Get(ctx, instanceKey(id))
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fail("list instances", err)
	}
	var out []Instance
	var dead []any
	for i, c := range cmds {
		var in Instance
		s, err := c.Result()
		if err != nil || json.Unmarshal([]byte(s), &in) != nil {
			dead = append(dead, ids[i])
			continue
		}
		out = append(out, in)
	}
	if len(dead) > 0 {
		_ = q.rdb.SRem(ctx, instancesKey, dead...).Err() // tidying; the next call retries
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
