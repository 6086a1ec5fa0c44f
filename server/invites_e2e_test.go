package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

type inviteResp struct {
	Code      string `json:"code"`
	URL       string `json:"url"`
	Lane      string `json:"lane"`
	UsesLeft  int64  `json:"uses_left"`
	ExpiresAt string `json:"expires_at"`
}

type inviteListResp struct {
	Invites []inviteResp `json:"invites"`
}

type laneJoinResp struct {
	Ticket   string `json:"ticket"`
	State    string `json:"state"`
	Position int64  `json:"position"`
	Waiting  int64  `json:"waiting"`
	Lane     string `json:"lane"`
}

type fieldErrResp struct {
	Error struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"error"`
}

func createInvites(t *testing.T, in *instance, q string, body map[string]any) []inviteResp {
	t.Helper()
	var out inviteListResp
	res := call(t, "POST", in.url+"/admin/api/queues/"+q+"/invites", adminToken, body, &out)
	if res.StatusCode != 201 || len(out.Invites) != int(body["count"].(int)) {
		t.Fatalf("create invites %v: %d, %d codes", body, res.StatusCode, len(out.Invites))
	}
	return out.Invites
}

// TestInvitesAcrossInstances: an operator creates bypass and priority codes; buyers join
// with them on two instances and stream from the instance they joined. Each gets its lane,
// every position event is the exact position in the buyer's own lane at its tick (on both
// instances, while the line moves), positions never rise, the bypass holders are admitted
// before anyone else, and revoked, used-up and foreign codes are refused.
func TestInvitesAcrossInstances(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	env := tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_UPDATE_INTERVAL": "250ms"})
	ins := startInProcessAll(t, env, "a", "b")
	admin(t, ins[0], "PUT", "/admin/api/queues/vip", map[string]any{"rate_per_second": 4, "paused": true, "places_per_ip": 0, "priority_share": 0.5})
	admin(t, ins[0], "PUT", "/admin/api/queues/other", map[string]any{"rate_per_second": 1})

	// The admin API: values out of range name their field; unknown queue and code are 404.
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"count": 0, "lane": "bypass"}, "count"},
		{map[string]any{"count": 10001, "lane": "bypass"}, "count"},
		{map[string]any{"count": 1, "lane": "vip"}, "lane"},
		{map[string]any{"count": 1, "lane": "priority", "max_uses": 0}, "max_uses"},
		{map[string]any{"count": 1, "lane": "priority", "expires_at": "2020-01-01T00:00:00Z"}, "expires_at"},
		{map[string]any{"count": 1, "lane": "priority", "expires_at": time.Now().Add(100 * 24 * time.Hour).UTC().Format(time.RFC3339)}, "expires_at"},
	} {
		var e fieldErrResp
		if res := call(t, "POST", ins[1].url+"/admin/api/queues/vip/invites", adminToken, c.body, &e); res.StatusCode != 422 ||
			e.Error.Code != "invalid_invites" || e.Error.Field != c.field {
			t.Fatalf("%v: %d %+v, want 422 invalid_invites on %s", c.body, res.StatusCode, e, c.field)
		}
	}
	var e fieldErrResp
	if res := call(t, "POST", ins[0].url+"/admin/api/queues/nope/invites", adminToken, map[string]any{"count": 1, "lane": "bypass"}, &e); res.StatusCode != 404 || e.Error.Code != "queue_not_found" {
		t.Fatalf("invites of an unknown queue: %d %+v", res.StatusCode, e)
	}
	if res := call(t, "DELETE", ins[0].url+"/admin/api/queues/vip/invites/AAAAAAAAAAAAAAAAAAAAAA", adminToken, nil, &e); res.StatusCode != 404 || e.Error.Code != "invite_not_found" {
		t.Fatalf("revoke of an unknown code: %d %+v", res.StatusCode, e)
	}

	bypass := createInvites(t, ins[0], "vip", map[string]any{"count": 3, "lane": "bypass"})
	exp := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	priority := createInvites(t, ins[1], "vip", map[string]any{"count": 4, "lane": "priority", "max_uses": 1, "expires_at": exp.Format(time.RFC3339)})
	revoked := createInvites(t, ins[0], "vip", map[string]any{"count": 1, "lane": "priority"})[0]
	foreign := createInvites(t, ins[0], "other", map[string]any{"count": 1, "lane": "bypass"})[0]
	for _, in := range append(append([]inviteResp(nil), bypass...), priority...) {
		if in.URL != "/q/vip?invite="+in.Code || in.UsesLeft != 1 || len(in.Code) < 22 {
			t.Fatalf("invite %+v", in)
		}
	}
	if got, _ := time.Parse(time.RFC3339, priority[0].ExpiresAt); !got.Equal(exp) || priority[0].Lane != "priority" {
		t.Fatalf("priority invite %+v, want expiry %v", priority[0], exp)
	}
	var list inviteListResp
	if res := call(t, "GET", ins[1].url+"/admin/api/queues/vip/invites", adminToken, nil, &list); res.StatusCode != 200 || len(list.Invites) != 8 {
		t.Fatalf("list: %d, %d codes", res.StatusCode, len(list.Invites))
	}
	if res := admin(t, ins[1], "DELETE", "/admin/api/queues/vip/invites/"+revoked.Code, nil); res.StatusCode != 204 {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	// The waiting page takes the code from its link.
	res := call(t, "GET", ins[0].url+bypass[0].URL, "", nil, nil)
	if body, _ := io.ReadAll(res.Body); res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Type"), "text/html") || len(body) == 0 {
		t.Fatalf("GET %s: %d %s", bypass[0].URL, res.StatusCode, res.Header.Get("Content-Type"))
	}

	// Buyers in arrival order: normal, priority and bypass mixed, alternating instances.
	plan := []string{"n", "p", "n", "b", "n", "p", "n", "b", "p", "n", "n", "b", "p", "n"}
	codes := map[string][]inviteResp{"b": bypass, "p": priority}
	lanes := map[string]string{"n": "normal", "p": "priority", "b": "bypass"}
	type buyer struct {
		lane   string
		index  int // place in its lane, from 0
		ticket string
		in     *instance
		log    *userLog
	}
	var buyers []*buyer
	byLane := map[string][]*buyer{}
	for i, l := range plan {
		in := ins[i%2]
		var body any
		if l != "n" {
			body = map[string]any{"invite": codes[l][0].Code}
			codes[l] = codes[l][1:]
		}
		var j laneJoinResp
		k := len(byLane[l])
		if res := call(t, "POST", in.url+"/api/queues/vip/join", "", body, &j); res.StatusCode != 201 ||
			j.Lane != lanes[l] || j.Position != int64(k+1) || j.Waiting != int64(k+1) || j.State != "waiting" {
			t.Fatalf("join %d (%s): %d %+v, want lane %s position %d", i, l, res.StatusCode, j, lanes[l], k+1)
		}
		b := &buyer{lane: l, index: k, ticket: j.Ticket, in: in}
		b.log = record(mustStream(t, in.url+"/api/queues/vip/stream", j.Ticket))
		buyers = append(buyers, b)
		byLane[l] = append(byLane[l], b)
		// The other instance says the same.
		var st laneJoinResp
		if call(t, "GET", ins[(i+1)%2].url+"/api/queues/vip/status", j.Ticket, nil, &st); st.Lane != lanes[l] || st.Position != int64(k+1) {
			t.Fatalf("status of buyer %d on the other instance: %+v", i, st)
		}
	}
	// Refused codes: revoked, used up, another queue's.
	for what, code := range map[string]string{"revoked": revoked.Code, "used up": bypass[0].Code, "foreign": foreign.Code} {
		if res := call(t, "POST", ins[1].url+"/api/queues/vip/join", "", map[string]any{"invite": code}, &e); res.StatusCode != 422 ||
			e.Error.Code != "invite_invalid" || e.Error.Field != "invite" {
			t.Fatalf("%s code: %d %+v, want 422 invite_invalid", what, res.StatusCode, e)
		}
	}
	// A holder reloading the link keeps the place (200) and spends nothing.
	var again laneJoinResp
	if res := call(t, "POST", ins[0].url+"/api/queues/vip/join", byLane["p"][0].ticket, map[string]any{"invite": priority[0].Code}, &again); res.StatusCode != 200 || again.Lane != "priority" || again.Position != 1 {
		t.Fatalf("rejoin with the used code: %d %+v", res.StatusCode, again)
	}
	if call(t, "GET", ins[0].url+"/admin/api/queues/vip/invites", adminToken, nil, &list); len(list.Invites) != 0 {
		t.Fatalf("%d codes still listed after their one use (or revoke)", len(list.Invites))
	}

	logs := make([]*userLog, len(buyers))
	for i, b := range buyers {
		logs[i] = b.log
	}
	testwait.For(t, 30*time.Second, "first positions", func() bool {
		return all(logs, func(u *userLog) bool { return len(u.positions) > 0 })
	})
	admin(t, ins[1], "PUT", "/admin/api/queues/vip", map[string]any{"paused": false})
	testwait.For(t, 120*time.Second, "every buyer admitted", func() bool { return all(logs, hasAdmitted) })
	// No duplicate admitted event was sent: the markers' admissions come after every tick
	// that could have made one.
	noMoreAdmitted(t, ins, "vip", len(buyers), map[string]any{"rate_per_second": 4})

	at := map[*buyer]int64{}
	for _, b := range buyers {
		b.log.mu.Lock()
		if len(b.log.admitted) != 1 {
			t.Fatalf("%s buyer %d: %d admitted events", b.lane, b.index, len(b.log.admitted))
		}
		at[b] = num(b.log.admitted[0].Data["tick"])
		b.log.mu.Unlock()
	}
	checked := 0
	for l, bs := range byLane {
		ls := make([]*userLog, len(bs))
		ticks := make([]int64, len(bs))
		for i, b := range bs {
			ls[i], ticks[i] = b.log, at[b]
			if i > 0 && ticks[i] < ticks[i-1] {
				t.Fatalf("lane %s: buyer %d admitted at tick %d before buyer %d (tick %d)", l, i, ticks[i], i-1, ticks[i-1])
			}
		}
		// Every position event is the buyer's place in its own lane at the event's tick.
		checked += checkTruePositions(t, ls, ticks)
		for _, b := range bs {
			b.log.mu.Lock()
			for _, ev := range b.log.positions {
				if got, _ := ev.Data["lane"].(string); (l == "n" && got != "") || (l != "n" && got != lanes[l]) {
					t.Fatalf("lane %s: position event names lane %q", l, got)
				}
			}
			b.log.mu.Unlock()
		}
	}
	// Bypass first: every bypass holder before anyone else (in a tick that admits two, the
	// bypass holder is popped first; queue/TestBypassInvitesConcurrent checks the order).
	for _, b := range byLane["b"] {
		for _, o := range buyers {
			if o.lane != "b" && at[o] < at[b] {
				t.Fatalf("a %s buyer admitted at tick %d, not after bypass buyer %d (tick %d)", o.lane, at[o], b.index, at[b])
			}
		}
	}
	// With priority_share 0.5 the four priority holders are through before the last of
	// the seven normal buyers.
	lastP := at[byLane["p"][len(byLane["p"])-1]]
	if lastN := at[byLane["n"][len(byLane["n"])-1]]; lastP >= lastN {
		t.Fatalf("last priority admission at tick %d, last normal at %d", lastP, lastN)
	}
	t.Logf("%d position events checked against the true lane position on two instances; %d buyers admitted once, bypass first", checked, len(buyers))
	if checked < len(buyers)*2 {
		t.Fatalf("only %d position events", checked)
	}
	var st laneJoinResp
	if call(t, "GET", ins[1].url+"/api/queues/vip/status", byLane["b"][0].ticket, nil, &st); st.State != "admitted" || st.Lane != "bypass" {
		t.Fatalf("admitted bypass buyer's status: %+v", st)
	}
}
