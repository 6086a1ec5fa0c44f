//go:build ackrolling

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// TestRollingAckMeasure is a measurement for docs/UPGRADING.md and BENCHMARKS.md, not part of
// the test command (build tag ackrolling): the failover scenario of TestClusterMasterFailover
// — N users on open streams over two instances, admission at 200/s, the slot's replica
// paused, then the master SIGKILLed and the replica resumed — with the two instances run
// from the binaries WR_ACK_BIN_1 and WR_ACK_BIN_2 (default: this tree's build), e.g. a
// build of the release before beside this one. It reports instead of failing: which
// instance led the queue, how many users were told a token, how many of those tokens then
// failed to buy (lost), and how many users were told a second token.
//
//	WR_ACK_BIN_1=/tmp/ack-before/wr go test -tags ackrolling -run TestRollingAckMeasure -v ./server
func TestRollingAckMeasure(t *testing.T) {
	const n, rate = 1000, 200
	bins := []string{os.Getenv("WR_ACK_BIN_1"), os.Getenv("WR_ACK_BIN_2")}
	for i, b := range bins {
		if b == "" {
			bins[i] = binary(t)
		}
	}
	c := redistest.StartCluster(t)
	env := baseEnv(c.URL(), testDB(t), map[string]string{"WR_LOG_LEVEL": "info"})
	ins := []*instance{startCommand(t, "r1", env, bins[0]), startCommand(t, "r2", env, bins[1])}
	admin(t, ins[0], "PUT", "/admin/api/queues/ro", map[string]any{"rate_per_second": rate, "paused": true, "places_per_ip": 0, "token_ttl_seconds": 600})
	admin(t, ins[0], "PUT", "/admin/api/products/ro-item", map[string]any{"name": "Item", "price": 1000, "stock": 2 * n, "queue": "ro"})
	tickets := make([]string, n)
	for i := range n {
		var j joinResp
		if res := call(t, "POST", ins[i%2].url+"/api/queues/ro/join", "", nil, &j); res.StatusCode != 201 {
			t.Fatalf("join %d: %d", i, res.StatusCode)
		}
		tickets[i] = j.Ticket
	}
	fs := make([]*follower, n)
	for i := range n {
		fs[i] = follow(t, ins, i%2, "ro", tickets[i])
	}
	defer func() {
		for _, f := range fs {
			close(f.stop)
			f.wg.Wait()
		}
	}()
	testwait.For(t, 60*time.Second, "every stream's first position", func() bool {
		for _, f := range fs {
			f.log.mu.Lock()
			k := len(f.log.positions)
			f.log.mu.Unlock()
			if k == 0 {
				return false
			}
		}
		return true
	})
	master, err := c.MasterFor(context.Background(), "wr:{q:ro}:clock")
	if err != nil {
		t.Fatal(err)
	}
	replica := replicaOf(t, c, master)
	admin(t, ins[0], "PUT", "/admin/api/queues/ro", map[string]any{"paused": false})
	testwait.For(t, 60*time.Second, "a fifth admitted", func() bool { return admittedCount(fs) >= n/5 })
	var leader string
	for _, in := range ins {
		for _, l := range strings.Split(readAll(call(t, "GET", in.url+"/metrics", "", nil, nil)), "\n") {
			if strings.HasPrefix(l, `queue_leader{queue="ro"} 1`) {
				leader = in.id
			}
		}
	}
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the measured scenario: a replica paused 3 s before the kill
	told := admittedCount(fs)
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 120*time.Second, "every user told a token", func() bool { return admittedCount(fs) == n })
	// Each user buys with the first token it was told.
	var mu sync.Mutex
	lost, replaced := 0, 0
	var wg sync.WaitGroup
	work := make(chan int)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				fs[i].log.mu.Lock()
				first := fmt.Sprint(fs[i].log.admitted[0].Data["token"])
				fs[i].log.mu.Unlock()
				res, _, _ := order(t, ins[(i+w)%2], tickets[i], first, fmt.Sprintf("ro-%d", i), map[string]any{"product_id": "ro-item", "quantity": 1})
				mu.Lock()
				if res == nil || res.StatusCode == 401 {
					lost++
				}
				if len(fs[i].admittedTokens()) > 1 {
					replaced++
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	t.Logf("binaries %v; leader %s; %d of %d users told a token before the kill; %d told tokens lost (their order 401); %d users told a second token on their stream; unconfirmed %d",
		bins, leader, told, n, lost, replaced, unconfirmedOf(t, ins))
}
