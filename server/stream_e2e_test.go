package main

import (
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// userLog is what one simulated user saw on its stream(s).
type userLog struct {
	mu        sync.Mutex
	positions []sseEvent
	admitted  []sseEvent
	other     []sseEvent
}

func (u *userLog) add(ev sseEvent) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch ev.Name {
	case "position":
		u.positions = append(u.positions, ev)
	case "admitted":
		u.admitted = append(u.admitted, ev)
	default:
		u.other = append(u.other, ev)
	}
}

// TestLivePositionsAcrossInstances: 200 users join in a known order, alternating between
// two instances on one Redis, and stream from the instance they joined. Every position
// event equals the true position at the tick it describes, positions never increase,
// every user gets exactly one admitted event with its own token, and admission follows
// join order.
func TestLivePositionsAcrossInstances(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	env := tolerantEnv(rs.URL(), testDB(t), nil)
	ins := startInProcessAll(t, env, "a", "b")
	admin(t, ins[0], "PUT", "/admin/api/queues/live", map[string]any{"rate_per_second": 40, "paused": true, "places_per_ip": 0})

	const n = 200
	tickets := make([]string, n)
	logs := make([]*userLog, n)
	for i := range n {
		in := ins[i%2]
		var j joinResp
		if res := call(t, "POST", in.url+"/api/queues/live/join", "", nil, &j); res.StatusCode != 201 || j.Position != int64(i+1) {
			t.Fatalf("join %d: %d position %d", i, res.StatusCode, j.Position)
		}
		tickets[i] = j.Ticket
		logs[i] = record(mustStream(t, in.url+"/api/queues/live/stream", j.Ticket))
	}
	// Everyone has the first position before admission starts.
	testwait.For(t, 30*time.Second, "first positions", func() bool {
		return all(logs, func(u *userLog) bool { return len(u.positions) > 0 })
	})
	admin(t, ins[1], "PUT", "/admin/api/queues/live", map[string]any{"paused": false})
	testwait.For(t, 120*time.Second, "every user admitted", func() bool { return all(logs, hasAdmitted) })
	// The admin view counts both instances' streams.
	var st struct {
		Instances []struct {
			ID  string `json:"id"`
			SSE int64  `json:"sse_connections"`
		} `json:"instances"`
		Total int64 `json:"sse_connections_total"`
	}
	testwait.For(t, 30*time.Second, "admin counts", func() bool {
		call(t, "GET", ins[0].url+"/admin/api/stats", adminToken, nil, &st)
		return st.Total == n && len(st.Instances) == 2
	})
	// No duplicate admitted event was sent (the marker users' admissions come after every
	// tick that could have made one).
	noMoreAdmitted(t, ins, "live", n, map[string]any{"rate_per_second": 40})

	// The tick at which each user was admitted (admission order = join order).
	admittedAt := admittedTicks(t, logs)
	tokens := map[string]int{}
	for i, u := range logs {
		tok, _ := u.admitted[0].Data["token"].(string)
		if prev, dup := tokens[tok]; dup || tok == "" {
			t.Fatalf("user %d token %q (also user %d)", i, tok, prev)
		}
		tokens[tok] = i
		var st joinResp
		call(t, "GET", ins[(i+1)%2].url+"/api/queues/live/status", tickets[i], nil, &st)
		if st.State != "admitted" || st.Token != tok {
			t.Fatalf("user %d: streamed token %s, status says %s %s", i, tok, st.State, st.Token)
		}
		if i > 0 && admittedAt[i] < admittedAt[i-1] {
			t.Fatalf("user %d admitted at tick %d before user %d (tick %d): not join order", i, admittedAt[i], i-1, admittedAt[i-1])
		}
	}
	checked := checkTruePositions(t, logs, admittedAt)
	t.Logf("%d position events checked against the true position; %d users admitted once each, in join order", checked, n)
	if checked < 2*n {
		t.Fatalf("only %d position events for %d users", checked, n)
	}
}

// record collects every event of s into a new userLog.
func record(s *sseStream) *userLog {
	u := &userLog{}
	go func() {
		for ev := range s.events {
			u.add(ev)
		}
	}()
	return u
}

// all reports whether every log satisfies f.
func all(logs []*userLog, f func(u *userLog) bool) bool {
	for _, u := range logs {
		u.mu.Lock()
		ok := f(u)
		u.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

func hasAdmitted(u *userLog) bool { return len(u.admitted) > 0 }

// admittedTicks returns the tick of each user's one admitted event (users in join order).
func admittedTicks(t *testing.T, logs []*userLog) []int64 {
	t.Helper()
	out := make([]int64, len(logs))
	for i, u := range logs {
		u.mu.Lock()
		if len(u.admitted) != 1 {
			t.Fatalf("user %d got %d admitted events", i, len(u.admitted))
		}
		out[i] = num(u.admitted[0].Data["tick"])
		u.mu.Unlock()
	}
	return out
}

// checkTruePositions checks every position event against the true position at its tick
// (1 + users ahead not yet admitted by then; users in join order, admitted in order) and
// that positions never go up. It returns the number of events checked.
func checkTruePositions(t *testing.T, logs []*userLog, admittedAt []int64) int {
	t.Helper()
	checked := 0
	for i, u := range logs {
		last := int64(1 << 62)
		u.mu.Lock()
		for _, ev := range u.positions {
			tick, pos := num(ev.Data["tick"]), num(ev.Data["position"])
			ahead := 0
			for j := range i {
				if admittedAt[j] > tick {
					ahead++
				}
			}
			if pos != int64(ahead+1) {
				t.Fatalf("user %d at tick %d: position %d, true position %d", i, tick, pos, ahead+1)
			}
			if pos > last {
				t.Fatalf("user %d: position went up from %d to %d", i, last, pos)
			}
			if ev.ID == "" || ev.Data["server_time"] == nil {
				t.Fatalf("user %d: event without id or server_time: %+v", i, ev)
			}
			last = pos
			checked++
		}
		u.mu.Unlock()
	}
	return checked
}
