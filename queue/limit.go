package queue

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/rstore"
)

// The order-API rate limiter: token buckets in Redis, refilled continuously at Rate per
// second up to Burst, evaluated by limit.lua with the clock from Redis TIME, so every
// instance shares one budget.

// ErrInvalidLimit is returned for a limit that cannot be evaluated (rate ≤ 0, burst < 1,
// an empty or too long chain).
var ErrInvalidLimit = errors.New("invalid rate limit")

// maxChain bounds the buckets one call checks.
const maxChain = 8

// Limit is one token bucket of a chain.
type Limit struct {
	// Scope names the limit ("user", "ip", "global"); Result.Scope reports it when this
	// limit refuses. Buckets of different scopes never share a key.
	Scope string
	// Key picks the bucket within its scope (a ticket, an IP); "" for a global bucket.
	Key string
	// Rate is the refill in requests per second (> 0; fractions allowed).
	Rate float64
	// Burst is the bucket's capacity: requests allowed at once after a quiet spell (≥ 1).
	Burst int
}

// Result is a limiter's answer.
type Result struct {
	// Allowed is true when every limit had room; then each was charged one request.
	Allowed bool
	// Remaining is the number of requests still allowed right now: the fewest left in any
	// bucket when allowed, the refusing bucket's when not.
	Remaining int
	// RetryAfter is when the refusing bucket will have room again (0 when allowed).
	RetryAfter time.Duration
	// Scope is the Scope of the limit that refused ("" when allowed).
	Scope string
}

// Limiter checks token buckets in Redis.
type Limiter struct {
	rdb    redis.Scripter
	prefix string
}

// NewLimiter returns a Limiter whose keys start with prefix (default "wr:"). rdb may be a
// *redis.Client, *redis.ClusterClient or redis.UniversalClient.
//
// Keys are <prefix>{rl}:<scope>:<key>. Every bucket shares the hash tag {rl}, so on a
// Redis Cluster all of them live in one slot and a chain (several keys in one script) is
// allowed. That slot takes every limited request; with one global bucket in every chain it
// would anyway. To spread per-user buckets over the cluster, give them their own tags and
// check the chain with sequential calls instead (losing the no-charge-on-refusal property).
func NewLimiter(rdb redis.Scripter, prefix string) *Limiter {
	if prefix == "" {
		prefix = "wr:"
	}
	return &Limiter{rdb: rdb, prefix: prefix}
}

// Allow takes one request from the bucket key (rate per second, burst capacity).
func (l *Limiter) Allow(ctx context.Context, key string, rate float64, burst int) (Result, error) {
	return l.AllowChain(ctx, []Limit{{Key: key, Rate: rate, Burst: burst}})
}

// AllowChain checks limits in order, atomically, in one script call. The first limit
// without room refuses the request and nothing is charged — so a request refused by the
// per-user limit does not spend the global budget (and one refused by the global limit
// does not spend the user's). When every limit has room, every one is charged.
//
// A Redis error is returned as is (wrapped); the caller chooses to fail open or closed.
func (l *Limiter) AllowChain(ctx context.Context, limits []Limit) (Result, error) {
	if len(limits) == 0 || len(limits) > maxChain {
		return Result{}, fmt.Errorf("%w: a chain needs 1 to %d limits", ErrInvalidLimit, maxChain)
	}
	keys := make([]string, len(limits))
	args := make([]any, 0, 1+2*len(limits))
	args = append(args, 1) // cost
	for i, lim := range limits {
		if !(lim.Rate > 0) || math.IsInf(lim.Rate, 0) || lim.Burst < 1 {
			return Result{}, fmt.Errorf("%w: scope %q: rate %v, burst %d", ErrInvalidLimit, lim.Scope, lim.Rate, lim.Burst)
		}
		keys[i] = l.key(lim)
		args = append(args, strconv.FormatFloat(lim.Rate, 'g', -1, 64), lim.Burst)
	}
	res, err := rstore.Limit.Run(ctx, l.rdb, keys, args...).Int64Slice()
	if err != nil {
		return Result{}, fail("rate limit", err)
	}
	if len(res) != 4 {
		return Result{}, fmt.Errorf("queue: rate limit: unexpected reply %v", res)
	}
	r := Result{Allowed: res[0] == 1, Remaining: int(res[2]), RetryAfter: time.Duration(res[3]) * time.Millisecond}
	if !r.Allowed {
		i := int(res[1]) - 1
		if i < 0 || i >= len(limits) {
			return Result{}, fmt.Errorf("queue: rate limit: unexpected reply %v", res)
		}
		r.Scope = limits[i].Scope
	}
	return r, nil
}

func (l *Limiter) key(lim Limit) string {
	if lim.Scope == "" {
		return l.prefix + "{rl}:" + lim.Key
	}
	return l.prefix + "{rl}:" + lim.Scope + ":" + lim.Key
}
