package topology

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
)

// The instance registry: every instance reports its live stream count under a key with a
// TTL, so the admin view shows every instance and the total, and a dead instance drops out
// by itself when its key expires. The same report keeps the instance in the live set
// (rstore.AliveKey) that spreads queue leadership.

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
	// Features is what this instance's release can do that an older one's cannot, so a
	// deployment turns a feature on only once every live instance has it (ReportInstance
	// fills it in: Features).
	Features []string `json:"features,omitempty"`
}

// FeaturePrequeueShards: the release knows sharded pre-queues (queue/prequeue.go): its
// join.lua and admit.lua leave their freeze to the instance that counts every shard.
const FeaturePrequeueShards = "prequeue-shards"

// Features is what this release reports in every instance report.
var Features = []string{FeaturePrequeueShards}

// ReportInstance records in as live for ttl.
func (t *Topology) ReportInstance(ctx context.Context, in Instance, ttl time.Duration) error {
	ctx, cancel := t.st.Bound(ctx)
	defer cancel()
	in.Features = Features
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	pipe := t.st.Client().Pipeline()
	pipe.Set(ctx, rstore.InstanceKey(in.ID), b, ttl)
	pipe.SAdd(ctx, rstore.InstancesKey, in.ID)
	// The live set that spreads leadership (Alive): scored by this report's time; entries
	// an hour old are gone for good.
	now := time.Now()
	pipe.ZAdd(ctx, rstore.AliveKey, redis.Z{Score: float64(now.UnixMilli()), Member: in.ID})
	pipe.ZRemRangeByScore(ctx, rstore.AliveKey, "-inf", strconv.FormatInt(now.Add(-time.Hour).UnixMilli(), 10))
	if _, err := pipe.Exec(ctx); err != nil {
		return rstore.Fail("report instance", err)
	}
	return nil
}

// RemoveInstance drops instance id from the registry and the live set at once (clean
// shutdown).
func (t *Topology) RemoveInstance(ctx context.Context, id string) error {
	ctx, cancel := t.st.Bound(ctx)
	defer cancel()
	pipe := t.st.Client().Pipeline()
	pipe.Del(ctx, rstore.InstanceKey(id))
	pipe.SRem(ctx, rstore.InstancesKey, id)
	pipe.ZRem(ctx, rstore.AliveKey, id)
	if _, err := pipe.Exec(ctx); err != nil {
		return rstore.Fail("remove instance", err)
	}
	return nil
}

// Instances lists every live instance of the deployment, sorted by id; ids whose key has
// expired are dropped from the set on the way.
func (t *Topology) Instances(ctx context.Context) ([]Instance, error) {
	ctx, cancel := t.st.Bound(ctx)
	defer cancel()
	rdb := t.st.Client()
	ids, err := rdb.SMembers(ctx, rstore.InstancesKey).Result()
	if err != nil {
		return nil, rstore.Fail("list instances", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// One pipeline of GETs (not MGET: on a Redis Cluster the keys live in different slots).
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Get(ctx, rstore.InstanceKey(id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, rstore.Fail("list instances", err)
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
		_ = rdb.SRem(ctx, rstore.InstancesKey, dead...).Err() // tidying; the next call retries
	}
	slices.SortFunc(out, func(a, b Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Alive lists the ids of instances that reported within the last ttl, sorted: the
// admission loops spread the queues' leadership over them.
func (t *Topology) Alive(ctx context.Context, ttl time.Duration) ([]string, error) {
	ctx, cancel := t.st.Bound(ctx)
	defer cancel()
	from := strconv.FormatInt(time.Now().Add(-ttl).UnixMilli(), 10)
	ids, err := t.st.Client().ZRangeByScore(ctx, rstore.AliveKey, &redis.ZRangeBy{Min: from, Max: "+inf"}).Result()
	if err != nil {
		return nil, rstore.Fail("alive instances", err)
	}
	slices.Sort(ids)
	return ids, nil
}
