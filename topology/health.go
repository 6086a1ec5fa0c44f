package topology

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom/internal/rstore"
)

// Backend health windows: every instance measures the handlers its guards protect (web's
// health collector: latency and outcome of each guarded request, per queue) and, once per
// second and only for a queue that had guarded requests in that second, writes the
// second's window here. The auto rate controller (package autorate) merges the fresh
// windows of all instances. An idle queue writes nothing and costs nothing.
//
// Storage: HASH wr:{q:<name>}:health (the queue's slot), field "<instance>/<second % 2>"
// (so each instance's last two seconds are kept), value
// "1:<end_ms>:<count>:<failures>:<bucket>=<n>,<bucket>=<n>…" (version 1; only non-empty
// buckets). The key lives healthTTL after its last write; the controller drops fields of
// instances that stopped writing.

// HealthBuckets is the number of latency buckets of a window: bucket i < HealthBuckets-1
// counts latencies up to HealthBound(i) = 2^(i/8) ms (log-spaced, 9 % apart, 1 ms … ~16 s);
// the last one counts everything longer.
const HealthBuckets = 114

// healthTTL is how long a health hash outlives its last write.
const healthTTL = 10 * time.Second

// HealthBound is the upper bound of latency bucket i (the last bucket has none: +Inf).
func HealthBound(i int) time.Duration {
	if i >= HealthBuckets-1 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Pow(2, float64(i)/8) * float64(time.Millisecond))
}

// HealthBucket is the bucket that counts latency d.
func HealthBucket(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms <= 1 {
		return 0
	}
	i := int(math.Ceil(8 * math.Log2(ms)))
	// Floating point may put an exact bound one bucket too high.
	if i > 0 && HealthBound(i-1) >= d {
		i--
	}
	return min(i, HealthBuckets-1)
}

// HealthWindow is what guarded requests of one queue did in one window (one instance's
// second, or several merged).
type HealthWindow struct {
	End      time.Time // the end of the (latest) second counted
	Count    int64     // guarded requests that finished
	Failures int64     // of them: 5xx answers (pool busy, timeouts, handler errors)
	Buckets  [HealthBuckets]int64
}

// Observe counts one request (not safe for concurrent use: web's collector keeps atomic
// counters and builds a window from them).
func (w *HealthWindow) Observe(d time.Duration, failed bool) {
	w.Count++
	if failed {
		w.Failures++
	}
	w.Buckets[HealthBucket(d)]++
}

// Merge adds o to w.
func (w *HealthWindow) Merge(o HealthWindow) {
	w.Count += o.Count
	w.Failures += o.Failures
	for i, n := range o.Buckets {
		w.Buckets[i] += n
	}
	if o.End.After(w.End) {
		w.End = o.End
	}
}

// Quantile is the latency under which a share q (0..1) of the window's requests finished,
// interpolated within its bucket (0 for an empty window; the last finite bound for the
// overflow bucket).
func (w HealthWindow) Quantile(q float64) time.Duration {
	var total int64
	for _, n := range w.Buckets {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	var seen float64
	for i, n := range w.Buckets {
		if n == 0 {
			continue
		}
		if seen+float64(n) >= rank {
			if i == HealthBuckets-1 {
				return HealthBound(HealthBuckets - 2)
			}
			lo := time.Duration(0)
			if i > 0 {
				lo = HealthBound(i - 1)
			}
			hi := HealthBound(i)
			frac := (rank - seen) / float64(n)
			return lo + time.Duration(frac*float64(hi-lo))
		}
		seen += float64(n)
	}
	return HealthBound(HealthBuckets - 2)
}

// FailureRatio is Failures / Count (0 for an empty window).
func (w HealthWindow) FailureRatio() float64 {
	if w.Count == 0 {
		return 0
	}
	return float64(w.Failures) / float64(w.Count)
}

// encode is the stored form of w.
func (w HealthWindow) encode() string {
	var b strings.Builder
	fmt.Fprintf(&b, "1:%d:%d:%d:", w.End.UnixMilli(), w.Count, w.Failures)
	first := true
	for i, n := range w.Buckets {
		if n == 0 {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(n, 10))
	}
	return b.String()
}

// decodeHealth parses a stored window; ok is false for a value it cannot read (another
// version, damage), which the reader skips.
func decodeHealth(v string) (w HealthWindow, ok bool) {
	parts := strings.SplitN(v, ":", 5)
	if len(parts) != 5 || parts[0] != "1" {
		return w, false
	}
	end, err1 := strconv.ParseInt(parts[1], 10, 64)
	count, err2 := strconv.ParseInt(parts[2], 10, 64)
	fails, err3 := strconv.ParseInt(parts[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || count < 0 || fails < 0 || fails > count {
		return w, false
	}
	w.End, w.Count, w.Failures = time.UnixMilli(end), count, fails
	if parts[4] == "" {
		return w, true
	}
	for _, p := range strings.Split(parts[4], ",") {
		is, ns, found := strings.Cut(p, "=")
		i, err1 := strconv.Atoi(is)
		n, err2 := strconv.ParseInt(ns, 10, 64)
		if !found || err1 != nil || err2 != nil || i < 0 || i >= HealthBuckets || n < 0 {
			return HealthWindow{}, false
		}
		w.Buckets[i] += n
	}
	return w, true
}

// healthField is the hash field of an instance's window ending at end: the instance's
// last two seconds stay side by side.
func healthField(instance string, end time.Time) string {
	return instance + "/" + strconv.FormatInt((end.UnixMilli()/1000)%2, 10)
}

// ReportHealth stores one instance's window of queue name (one pipeline: HSET, PEXPIRE).
func (t *Topology) ReportHealth(ctx context.Context, name, instance string, w HealthWindow) error {
	ctx, cancel := t.st.Bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name).Health()
	pipe := t.st.Client().Pipeline()
	pipe.HSet(ctx, k, healthField(instance, w.End), w.encode())
	pipe.PExpire(ctx, k, healthTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return rstore.Fail("report health "+name, err)
	}
	return nil
}

// Health merges the windows of queue name that end after since, from every instance.
func (t *Topology) Health(ctx context.Context, name string, since time.Time) (HealthWindow, error) {
	ctx, cancel := t.st.Bound(ctx)
	defer cancel()
	m, err := t.st.Client().HGetAll(ctx, rstore.KeysFor(name).Health()).Result()
	if err != nil {
		return HealthWindow{}, rstore.Fail("read health "+name, err)
	}
	w, _ := MergeHealth(m, since)
	return w, nil
}

// MergeHealth merges the windows in m (the health hash, as HGETALL returns it) that end
// after since and names the fields too old to matter again (an instance that stopped
// writing), for the reader to drop: the auto rate controller drops them in its own
// transaction.
func MergeHealth(m map[string]string, since time.Time) (HealthWindow, []string) {
	var w HealthWindow
	var stale []string
	for f, v := range m {
		one, ok := decodeHealth(v)
		switch {
		case !ok || one.End.Before(since.Add(-healthTTL)):
			stale = append(stale, f)
		case one.End.After(since):
			w.Merge(one)
		}
	}
	return w, stale
}
