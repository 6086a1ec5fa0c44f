package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// accessLine is one access-log line as the tests read it.
type accessLine struct {
	Level      string  `json:"level"`
	Message    string  `json:"message"`
	RequestID  string  `json:"request_id"`
	Method     string  `json:"method"`
	Path       string  `json:"path"`
	Status     int     `json:"status"`
	Bytes      int64   `json:"bytes"`
	DurationMs float64 `json:"duration_ms"`
	IP         string  `json:"ip"`
	Stream     bool    `json:"stream"`
	End        string  `json:"end"`
}

// accessLines are the instance's access-log lines so far.
func accessLines(t *testing.T, in *instance) []accessLine {
	t.Helper()
	var out []accessLine
	for _, l := range strings.Split(in.logs.String(), "\n") {
		if !strings.Contains(l, `"message":"request"`) {
			continue
		}
		var a accessLine
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("access line %q: %v", l, err)
		}
		out = append(out, a)
	}
	return out
}

// TestAccessLog: at the default WR_ACCESS_LOG and WR_LOG_LEVEL=info, a join, a stream and an
// invite revocation each write one info line with the request id the client was answered
// with, the method, the path, the status, the bytes, the duration and the client address; the
// stream's line comes when it ends and says so. No ticket, ticket id, token or invite code
// reaches the log, although the stream carries the ticket in its query string and its
// Authorization header. With WR_ACCESS_LOG=false no request line is written at info.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	db := testDB(t)

	t.Run("on by default", func(t *testing.T) {
		env := tolerantEnv(rs.URL(), db, map[string]string{"WR_LOG_LEVEL": "info", "WR_HEARTBEAT": "1s"})
		in := startInProcess(t, "access", env)
		admin(t, in, "PUT", "/admin/api/queues/acc", map[string]any{"rate_per_second": 50000, "places_per_ip": 0})
		var j joinResp
		res := call(t, "POST", in.url+"/api/queues/acc/join", "", nil, &j, "X-Request-ID", "join-req-1")
		if j.Ticket == "" {
			t.Fatalf("join: %d", res.StatusCode)
		}
		s, sres := openStreamWith(t, streamClient, in.url+"/api/queues/acc/stream?ticket="+j.Ticket, j.Ticket, "", "X-Request-ID", "stream-req-1")
		if s == nil {
			t.Fatalf("stream: %v", sres)
		}
		ev, ok := s.next(t, 10*time.Second, "admitted")
		if !ok {
			t.Fatal("no admitted event")
		}
		token, _ := ev.Data["token"].(string)
		if token == "" {
			t.Fatalf("admitted event without a token: %v", ev.Data)
		}
		s.close() // the hub finds the closed socket at a heartbeat and ends the stream
		codes := createInvites(t, in, "acc", map[string]any{"count": 1, "lane": "priority"})
		if res := admin(t, in, "DELETE", "/admin/api/queues/acc/invites/"+codes[0].Code, nil); res.StatusCode != 204 {
			t.Fatalf("revoke invite: %d", res.StatusCode)
		}

		find := func(id string) (accessLine, bool) {
			for _, a := range accessLines(t, in) {
				if a.RequestID == id {
					return a, true
				}
			}
			return accessLine{}, false
		}
		var st accessLine
		testwait.For(t, 30*time.Second, "the stream's access line", func() (ok bool) {
			st, ok = find("stream-req-1")
			return ok
		})
		jl, ok := find("join-req-1")
		if !ok {
			t.Fatal("no access line for the join")
		}
		if jl.Level != "info" || jl.Method != "POST" || jl.Path != "/api/queues/acc/join" || jl.Status != res.StatusCode ||
			jl.Bytes <= 0 || jl.DurationMs <= 0 || jl.IP != "127.0.0.1" || jl.Stream {
			t.Errorf("join line %+v (answered %d)", jl, res.StatusCode)
		}
		if st.Level != "info" || st.Method != "GET" || st.Path != "/api/queues/acc/stream" || st.Status != 200 ||
			!st.Stream || st.End != "client_closed" || st.Bytes <= 0 || st.DurationMs <= 0 || st.IP != "127.0.0.1" {
			t.Errorf("stream line %+v", st)
		}
		var revoked bool
		for _, a := range accessLines(t, in) {
			if a.Method == "DELETE" && a.Path == "/admin/api/queues/acc/invites/:code" && a.Status == 204 && a.Bytes == 0 {
				revoked = true
			}
		}
		if !revoked {
			t.Error("no access line for the invite revocation with its code hidden and no body")
		}

		logs := in.logs.String()
		id := strings.Split(j.Ticket, ".")[1]
		for what, secret := range map[string]string{"ticket": j.Ticket, "ticket id": id, "token": token,
			"invite code": codes[0].Code, "admin token": adminToken} {
			if strings.Contains(logs, secret) {
				t.Errorf("the log contains the %s", what)
			}
		}
	})

	t.Run("off", func(t *testing.T) {
		env := tolerantEnv(rs.URL(), db, map[string]string{"WR_LOG_LEVEL": "info", "WR_ACCESS_LOG": "false"})
		in := startInProcess(t, "access-off", env)
		admin(t, in, "PUT", "/admin/api/queues/accoff", map[string]any{"rate_per_second": 1})
		var j joinResp
		if res := call(t, "POST", in.url+"/api/queues/accoff/join", "", nil, &j); j.Ticket == "" {
			t.Fatalf("join: %d", res.StatusCode)
		}
		in.stop()
		if lines := accessLines(t, in); len(lines) != 0 {
			t.Errorf("WR_ACCESS_LOG=false wrote %d request lines at info, first %+v", len(lines), lines[0])
		}
	})
}
