package redistest

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The clusters that Start hands out in cluster mode. Each is lent to one test at a time and
// emptied before it is lent again, so tests that run in parallel (t.Parallel) each have a
// whole cluster and never see each other's keys, scripts or channels. The pool grows on
// demand (a free cluster is reused first), so a binary has about as many clusters as tests
// running at once. Clusters die with the test binary (spawn.go).

// EnvClusters is the environment variable that sizes the pool's free list at first.
const EnvClusters = "WR_TEST_CLUSTERS"

const defaultClusters = 3

var pool struct {
	mu      sync.Mutex
	all     []*Cluster    // every cluster made, for ClientURL
	free    chan *Cluster // clusters not lent
	made    int           // clusters made or being made
	max     int
	initErr error
}

func poolMax() int {
	if n, err := strconv.Atoi(os.Getenv(EnvClusters)); err == nil && n > 0 {
		return n
	}
	return defaultClusters
}

// borrowCluster lends the test a healthy, emptied cluster of the pool and takes it back
// when the test ends (after the test's own cleanups, registered later, have run).
func borrowCluster(tb testing.TB) *Cluster {
	tb.Helper()
	pool.mu.Lock()
	if pool.free == nil {
		pool.max = poolMax()
		pool.free = make(chan *Cluster, pool.max)
	}
	// A free cluster is lent at once; with none free the pool grows rather than wait — a
	// test may hold one cluster and ask for another (two Redis), and parallel tests doing
	// that would otherwise wait for each other for ever. WR_TEST_CLUSTERS only sizes the
	// free list at first; it grows with what was made.
	var c *Cluster
	grow := len(pool.free) == 0
	if grow {
		pool.made++
		if pool.made > cap(pool.free) {
			nf := make(chan *Cluster, 2*pool.made)
			for len(pool.free) > 0 {
				nf <- <-pool.free
			}
			pool.free = nf
		}
	} else {
		c = <-pool.free
	}
	pool.mu.Unlock()
	if grow {
		nc, err := newPoolCluster()
		if err != nil {
			pool.mu.Lock()
			pool.made--
			pool.mu.Unlock()
			tb.Fatalf("redistest: a test cluster did not start: %v", err)
		}
		pool.mu.Lock()
		pool.all = append(pool.all, nc)
		pool.mu.Unlock()
		c = nc
	}
	// Given back before the checks below may fail the test: Fatal runs the cleanups.
	tb.Cleanup(func() {
		pool.mu.Lock()
		pool.free <- c // its capacity is at least the number made
		pool.mu.Unlock()
	})
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		tb.Fatalf("redistest: test cluster: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.FlushAll(ctx); err != nil {
		tb.Fatalf("redistest: test cluster: FLUSHALL: %v", err)
	}
	return c
}

// poolCluster returns the pool's cluster with this URL, or nil.
func poolCluster(url string) *Cluster {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for _, c := range pool.all {
		if c.URL() == url {
			return c
		}
	}
	if shared.c != nil && shared.c.URL() == url {
		return shared.c
	}
	return nil
}

// creating serialises the pool's cluster starts: clusters started side by side took the
// same free port now and then (each picks its 12 ports on its own), and a node that could
// not bind left its cluster unhealthy.
var creating sync.Mutex

// newPoolCluster starts a cluster for the pool, one at a time, with two more tries if one
// does not come up healthy.
func newPoolCluster() (*Cluster, error) {
	creating.Lock()
	defer creating.Unlock()
	var err error
	for range 3 {
		var c *Cluster
		if c, err = NewCluster(); err == nil {
			return c, nil
		}
	}
	return nil, err
}
