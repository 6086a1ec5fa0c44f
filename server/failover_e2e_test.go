package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// follower keeps one user's stream open across instance failures, reconnecting like a
// browser's EventSource (with Last-Event-ID) to the next live instance.
type follower struct {
	ticket string
	log    userLog
	stop   chan struct{}
	wg     sync.WaitGroup

	mu         sync.Mutex
	reconnects int
	tokens     map[string]int
}

func follow(t *testing.T, ins []*instance, first int, queue, ticket string) *follower {
	f := &follower{ticket: ticket, stop: make(chan struct{}), tokens: map[string]int{}}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		k, lastID := first, ""
		for {
			select {
			case <-f.stop:
				return
			default:
			}
			s, _ := openStream(t, ins[k%len(ins)].url+"/api/queues/"+queue+"/stream", ticket, lastID)
			if s == nil {
				k++
				<-time.After(50 * time.Millisecond) // a browser's pause before it reconnects
				continue
			}
			ended := false
			for !ended {
				select {
				case ev, ok := <-s.events:
					if !ok {
						ended = true
						break
					}
					lastID = ev.ID
					f.log.add(ev)
					if ev.Name == "admitted" {
						f.mu.Lock()
						tok, _ := ev.Data["token"].(string)
						f.tokens[tok]++
						f.mu.Unlock()
					}
				case <-f.stop:
					s.close()
					return
				}
			}
			s.close()
			f.mu.Lock()
			f.reconnects++
			f.mu.Unlock()
			k++
		}
	}()
	return f
}

func (f *follower) admittedTokens() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.tokens {
		out[k] = v
	}
	return out
}

// TestKillInstanceMidRun: two server processes; the one that does NOT lead admission is
// SIGKILLed while users are being admitted. Its users reconnect to the survivor, and
// every user ends up with exactly one token (the same one on every delivery); no
// admission is lost or duplicated.
func TestKillInstanceMidRun(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	env := tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_LOG_LEVEL": "info"})
	ins := []*instance{startProcess(t, "p1", env), startProcess(t, "p2", env)}
	admin(t, ins[0], "PUT", "/admin/api/queues/kill", map[string]any{"rate_per_second": 20, "places_per_ip": 0, "paused": true})
	// An empty queue rests with no leader: a first waiter wakes it, paused so it
	// stays; admission starts once every follower is on.
	call(t, "POST", ins[0].url+"/api/queues/kill/join", "", nil, nil)
	// Find the leader (the admin view names it).
	var leader string
	testwait.For(t, 30*time.Second, "a leader", func() bool {
		var st struct {
			Queues []struct{ Name, Leader string } `json:"queues"`
		}
		call(t, "GET", ins[0].url+"/admin/api/stats", adminToken, nil, &st)
		for _, q := range st.Queues {
			if q.Name == "kill" && q.Leader != "" {
				leader = q.Leader
				return true
			}
		}
		return false
	})
	victim := 0
	if strings.HasPrefix(leader, "p1") {
		victim = 1
	}
	const n = 120
	var fs []*follower
	for i := range n {
		var j joinResp
		call(t, "POST", ins[i%2].url+"/api/queues/kill/join", "", nil, &j)
		fs = append(fs, follow(t, ins, i%2, "kill", j.Ticket))
	}
	defer func() {
		for _, f := range fs {
			close(f.stop)
			f.wg.Wait()
		}
	}()
	admin(t, ins[0], "PUT", "/admin/api/queues/kill", map[string]any{"paused": false})
	testwait.For(t, 30*time.Second, "admission under way (20 users told)", func() bool {
		told := 0
		for _, f := range fs {
			if len(f.admittedTokens()) > 0 {
				told++
			}
		}
		return told >= 20
	})
	ins[victim].kill()
	t.Logf("killed %s (the leader is %s)", ins[victim].id, leader)

	testwait.For(t, 30*time.Second, "every user admitted", func() bool {
		for _, f := range fs {
			if len(f.admittedTokens()) == 0 {
				return false
			}
		}
		return true
	})
	seen := map[string]bool{}
	reconnected := 0
	for i, f := range fs {
		toks := f.admittedTokens()
		if len(toks) != 1 {
			t.Fatalf("user %d received %d different tokens: %v", i, len(toks), toks)
		}
		for tok := range toks {
			if seen[tok] {
				t.Fatalf("token %s delivered to two users", tok)
			}
			seen[tok] = true
		}
		f.mu.Lock()
		if f.reconnects > 0 {
			reconnected++
		}
		f.mu.Unlock()
	}
	t.Logf("%d users, %d reconnected after the kill, every one got exactly one token", n, reconnected)
	if reconnected < n/2-10 {
		t.Fatalf("only %d users reconnected; the victim held about %d", reconnected, n/2)
	}
}
