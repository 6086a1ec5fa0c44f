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
// demand up to EnvClusters clusters (default 3) per test binary; a test asking for more
// waits until one is given back. Clusters die with the test binary (spawn.go).

// EnvClusters is the environment variable that bounds the clusters of one test binary.
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
	grow := pool.made < pool.max && len(pool.free) == 0
	if grow {
		pool.made++
	}
	pool.mu.Unlock()
	var c *Cluster
	if grow {
		nc, err := NewCluster()
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
	} else {
		select {
		case c = <-pool.free:
		case <-time.After(15 * time.Minute):
			tb.Fatalf("redistest: no test cluster came free within 15 minutes")
		}
	}
	// Given back before the checks below may fail the test: Fatal runs the cleanups.
	tb.Cleanup(func() { pool.free <- c })
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
