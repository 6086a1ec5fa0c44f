package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/draw"
	"github.com/waitroom/waitroom/queue/redistest"
)

// The drop-day API (docs/API.md, "Queues and joining" and "The schedule and the method"): schedule settings and their
// refusals, the pre-queue's answers, the public draw, queueing methods, sold out and the
// end of a sale. Every request and answer is also checked against docs/openapi.yaml.

// ddPlace is a join or status answer with the drop-day fields (position may be null).
type ddPlace struct {
	Ticket       string   `json:"ticket"`
	State        string   `json:"state"`
	Position     *int64   `json:"position"`
	ETA          *float64 `json:"eta_seconds"`
	Token        string   `json:"token"`
	SoldOut      bool     `json:"sold_out"`
	StartsAt     string   `json:"starts_at"`
	PrequeueSize *int64   `json:"prequeue_size"`
	DrawID       string   `json:"draw_id"`
}

// ddSettings is the drop-day part of a queue's settings (PUT answer) or stats.
type ddSettings struct {
	Name     string  `json:"name"`
	StartsAt *string `json:"starts_at"`
	EndsAt   *string `json:"ends_at"`
	Method   string  `json:"method"`
	SoldOut  bool    `json:"sold_out"`
	Ended    bool    `json:"ended"`
	Prequeue int64   `json:"prequeue"`
	Draw     string  `json:"draw"`
}

func (s ddSettings) String() string {
	str := func(p *string) string {
		if p == nil {
			return "null"
		}
		return *p
	}
	return fmt.Sprintf("%s starts_at=%s ends_at=%s method=%s sold_out=%v ended=%v prequeue=%d draw=%s",
		s.Name, str(s.StartsAt), str(s.EndsAt), s.Method, s.SoldOut, s.Ended, s.Prequeue, s.Draw)
}

type ddErr struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

// ddDraw is GET /api/queues/{queue}/draw.
type ddDraw struct {
	StartsAt         string `json:"starts_at"`
	Commitment       string `json:"commitment"`
	Seed             string `json:"seed"`
	ParticipantsHash string `json:"participants_hash"`
	Participants     *int64 `json:"participants"`
	Algorithm        string `json:"algorithm"`
}

func ddStart(t *testing.T) *instance {
	t.Helper()
	rs := redistest.Start(t)
	return startInProcess(t, "dd", tolerantEnv(rs.URL(), testDB(t), nil))
}

// ddPut changes a queue's settings and decodes the answer (settings or error).
func ddPut(t *testing.T, in *instance, name string, body any) (int, ddSettings, ddErr) {
	t.Helper()
	res := call(t, "PUT", in.url+"/admin/api/queues/"+name, adminToken, body, nil)
	var st ddSettings
	var e ddErr
	ddDecode(t, res, &st, &e)
	return res.StatusCode, st, e
}

func ddStats(t *testing.T, in *instance, name string) ddSettings {
	t.Helper()
	return statsOf[ddSettings](t, in, name)
}

func ddJoin(t *testing.T, in *instance, name string) (int, ddPlace, ddErr) {
	t.Helper()
	res := call(t, "POST", in.url+"/api/queues/"+name+"/join", "", nil, nil)
	var p ddPlace
	var e ddErr
	ddDecode(t, res, &p, &e)
	return res.StatusCode, p, e
}

func ddStatus(t *testing.T, in *instance, name, ticket string) (int, ddPlace, ddErr) {
	t.Helper()
	res := call(t, "GET", in.url+"/api/queues/"+name+"/status", ticket, nil, nil)
	var p ddPlace
	var e ddErr
	ddDecode(t, res, &p, &e)
	return res.StatusCode, p, e
}

// ddDecode decodes a JSON answer into each of outs (an answer or an error shape).
func ddDecode(t *testing.T, res *http.Response, outs ...any) {
	t.Helper()
	data, _ := io.ReadAll(res.Body)
	for _, o := range outs {
		if err := json.Unmarshal(data, o); err != nil {
			t.Fatalf("%d %q: %v", res.StatusCode, data, err)
		}
	}
}

// rfc3339 is t as the tests send it (milliseconds, UTC).
func rfc3339(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func TestDropDayAPISettings(t *testing.T) {
	t.Parallel()
	in := ddStart(t)
	if code, _, _ := ddPut(t, in, "ddset", map[string]any{"rate_per_second": 0}); code != 201 {
		t.Fatalf("create: %d", code)
	}
	soon, later := time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)

	t.Run("bad values are 422 naming the field", func(t *testing.T) {
		for _, c := range []struct {
			name  string
			body  any
			field string
		}{
			{"starts_at in the past", map[string]any{"starts_at": rfc3339(time.Now().Add(-time.Minute))}, "starts_at"},
			{"ends_at in the past", map[string]any{"ends_at": rfc3339(time.Now().Add(-time.Minute))}, "ends_at"},
			{"starts_at after ends_at", map[string]any{"starts_at": rfc3339(later), "ends_at": rfc3339(soon)}, "starts_at"},
			{"starts_at equal to ends_at", map[string]any{"starts_at": rfc3339(soon), "ends_at": rfc3339(soon)}, "starts_at"},
			{"malformed starts_at", map[string]any{"starts_at": "next tuesday"}, "starts_at"},
			{"starts_at of the wrong type", map[string]any{"starts_at": 1900000000}, "starts_at"},
			{"malformed ends_at", map[string]any{"ends_at": "2030-02-30T10:00:00Z"}, "ends_at"},
			{"unknown method", map[string]any{"method": "lottery"}, "method"},
			{"passthrough without max_active", map[string]any{"method": "passthrough", "max_active": 0}, "method"},
		} {
			code, _, e := ddPut(t, in, "ddset", c.body)
			if code != 422 || e.Error.Field != c.field || e.Error.Message == "" {
				t.Errorf("%s: %d %+v, want 422 with field %s", c.name, code, e, c.field)
			}
		}
		if st := ddStats(t, in, "ddset"); st.StartsAt != nil || st.EndsAt != nil || st.Method != "fifo" || st.Draw != "none" {
			t.Fatalf("a refused change changed the queue: %+v", st)
		}
	})

	t.Run("a schedule is shown in the answer and the stats", func(t *testing.T) {
		code, st, e := ddPut(t, in, "ddset", map[string]any{"starts_at": rfc3339(soon), "ends_at": rfc3339(later),
			"method": "random"})
		if code != 200 || st.StartsAt == nil || *st.StartsAt != rfc3339(soon) || st.EndsAt == nil || *st.EndsAt != rfc3339(later) ||
			st.Method != "random" || st.Draw != "scheduled" || st.Prequeue != 0 || st.SoldOut || st.Ended {
			t.Fatalf("schedule: %d %+v %+v", code, st, e)
		}
		if got := ddStats(t, in, "ddset"); got.String() != st.String() {
			t.Fatalf("stats %+v, the PUT answered %+v", got, st)
		}
		// Unchanged values are accepted, and a scheduled queue's start may still move.
		if code, _, e := ddPut(t, in, "ddset", map[string]any{"starts_at": rfc3339(soon), "ends_at": rfc3339(later)}); code != 200 {
			t.Fatalf("unchanged: %d %+v", code, e)
		}
		if code, st, e := ddPut(t, in, "ddset", map[string]any{"starts_at": rfc3339(soon.Add(time.Minute))}); code != 200 || *st.StartsAt != rfc3339(soon.Add(time.Minute)) {
			t.Fatalf("move the start: %d %+v %+v", code, st, e)
		}
		if code, st, _ := ddPut(t, in, "ddset", map[string]any{"ends_at": nil, "method": "fifo"}); code != 200 || st.EndsAt != nil || st.Method != "fifo" {
			t.Fatalf("clear ends_at: %d %+v", code, st)
		}
	})

	t.Run("clearing the start of a scheduled queue starts the sale now", func(t *testing.T) {
		ddPut(t, in, "ddnow", map[string]any{"rate_per_second": 0, "places_per_ip": 0, "starts_at": rfc3339(soon)})
		if code, p, _ := ddJoin(t, in, "ddnow"); code != 201 || p.State != "prequeue" {
			t.Fatalf("join: %d %+v", code, p)
		}
		asked := time.Now()
		code, st, e := ddPut(t, in, "ddnow", map[string]any{"starts_at": nil})
		if code != 200 || st.StartsAt == nil || st.Draw == "none" {
			t.Fatalf("start now: %d %+v %+v", code, st, e)
		}
		if at, err := time.Parse(time.RFC3339, *st.StartsAt); err != nil || at.Before(asked.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
			t.Fatalf("starts_at %s, asked at %s", *st.StartsAt, asked)
		}
		testwait.For(t, 20*time.Second, "the draw", func() bool { return ddStats(t, in, "ddnow").Draw == "done" })
	})

	t.Run("a start cannot be set while people wait", func(t *testing.T) {
		ddPut(t, in, "ddbusy", map[string]any{"rate_per_second": 0})
		if code, p, _ := ddJoin(t, in, "ddbusy"); code != 201 || p.State != "waiting" || p.Position == nil || *p.Position != 1 {
			t.Fatalf("join: %d %+v", code, p)
		}
		code, _, e := ddPut(t, in, "ddbusy", map[string]any{"starts_at": rfc3339(soon)})
		if code != 409 || e.Error.Code != "queue_not_empty" {
			t.Fatalf("schedule with a waiter: %d %+v", code, e)
		}
	})
}

// TestDropDayAPIPrequeueAndDraw: joins before the start are pre-queue places with a
// public draw id; the draw is published, verifies, and gives the places the status reads
// back; the start cannot move afterwards and nothing is lost by trying.
func TestDropDayAPIPrequeueAndDraw(t *testing.T) {
	t.Parallel()
	in := ddStart(t)
	ddPut(t, in, "ddplain", map[string]any{"rate_per_second": 0})
	var e ddErr
	if res := call(t, "GET", in.url+"/api/queues/ddplain/draw", "", nil, &e); res.StatusCode != 404 || e.Error.Code != "no_draw" {
		t.Fatalf("draw of an unscheduled queue: %d %+v", res.StatusCode, e)
	}
	if res := call(t, "GET", in.url+"/api/queues/ddnope/draw", "", nil, &e); res.StatusCode != 404 || e.Error.Code != "queue_not_found" {
		t.Fatalf("draw of an unknown queue: %d %+v", res.StatusCode, e)
	}

	// Scheduled an hour ahead; once the pre-queue is checked the start is moved to now.
	start := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if code, st, e := ddPut(t, in, "dddraw", map[string]any{"rate_per_second": 0, "places_per_ip": 0, "starts_at": rfc3339(start)}); code != 201 || st.Draw != "scheduled" {
		t.Fatalf("create scheduled: %d %+v %+v", code, st, e)
	}
	var before ddDraw
	res := call(t, "GET", in.url+"/api/queues/dddraw/draw", "", nil, &before)
	if res.StatusCode != 200 || res.Header.Get("Cache-Control") != "no-store" || len(before.Commitment) != 64 ||
		before.StartsAt != rfc3339(start) || before.Seed != "" || before.Participants != nil || before.Algorithm != "" {
		t.Fatalf("draw before the start: %d %q %+v", res.StatusCode, res.Header.Get("Cache-Control"), before)
	}
	if res := call(t, "GET", in.url+"/api/queues/dddraw/draw/order", "", nil, &e); res.StatusCode != 404 || e.Error.Code != "no_draw" {
		t.Fatalf("order before the draw: %d %+v", res.StatusCode, e)
	}

	const n = 5
	tickets := make([]string, n)
	// The size each join answers: exact on one shard; on a Redis Cluster the pre-queue is
	// sharded (this queue has no address cap, so the joins spread) and the answer counts the
	// join's own shard and the others as the leader last did: at least 1, at most i+1.
	exact := os.Getenv("WR_TEST_REDIS") != "cluster"
	for i := range n {
		code, p, e := ddJoin(t, in, "dddraw")
		id := ticketOf(p.Ticket)
		if code != 201 || p.State != "prequeue" || p.Position != nil || p.ETA != nil || p.StartsAt != rfc3339(start) ||
			p.PrequeueSize == nil || *p.PrequeueSize > int64(i+1) || *p.PrequeueSize < 1 ||
			(exact && *p.PrequeueSize != int64(i+1)) || p.DrawID != draw.ID(id) || id == "" {
			t.Fatalf("join %d before the start: %d %+v %+v", i, code, p, e)
		}
		tickets[i] = p.Ticket
	}
	// On a Redis Cluster the pre-queue is sharded (queue/prequeue.go): a member's answer
	// counts the other shards as the leader last did, at most a second or two behind.
	testwait.For(t, 15*time.Second, "the pre-queue's size in a member's status", func() bool {
		code, p, _ := ddStatus(t, in, "dddraw", tickets[0])
		if code != 200 || p.State != "prequeue" || p.Position != nil || p.DrawID != draw.ID(ticketOf(tickets[0])) || *p.PrequeueSize > n {
			t.Fatalf("status in the pre-queue: %d %+v", code, p)
		}
		return *p.PrequeueSize == n
	})
	testwait.For(t, 15*time.Second, "the pre-queue's size in the admin's stats", func() bool {
		st := ddStats(t, in, "dddraw")
		if st.Prequeue > n {
			t.Fatalf("stats before the start: %+v", st)
		}
		return st.Prequeue == n
	})
	// A pre-queue member's stream attaches (its events are the stream package's business).
	if s, res := openStream(t, in.url+"/api/queues/dddraw/stream", tickets[1], ""); s == nil {
		t.Fatalf("stream of a pre-queue member: %v", res)
	} else {
		s.close()
	}

	if code, st, e := ddPut(t, in, "dddraw", map[string]any{"starts_at": nil}); code != 200 {
		t.Fatalf("start now: %d %+v %+v", code, st, e)
	}
	var after ddDraw
	testwait.For(t, 60*time.Second, "the draw published", func() bool {
		after = ddDraw{}
		call(t, "GET", in.url+"/api/queues/dddraw/draw", "", nil, &after)
		return after.Seed != ""
	})
	if after.Commitment != before.Commitment || after.StartsAt == "" || after.Participants == nil ||
		*after.Participants != n || len(after.ParticipantsHash) != 64 || after.Algorithm != draw.Algorithm {
		t.Fatalf("draw after: %+v (before %+v)", after, before)
	}
	res = call(t, "GET", in.url+"/api/queues/dddraw/draw/order", "", nil, nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
		res.Header.Get("Cache-Control") != "public, max-age=60" {
		t.Fatalf("order: %d %q %q", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Cache-Control"))
	}
	order := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if err := draw.Verify(after.Seed, after.Commitment, after.ParticipantsHash, order); err != nil || len(order) != n {
		t.Fatalf("the published draw does not verify: %v (%d ids)", err, len(order))
	}
	place := map[string]int64{}
	for i, id := range order {
		place[id] = int64(i + 1)
	}
	positions := make([]int64, n)
	for i, tk := range tickets {
		code, p, _ := ddStatus(t, in, "dddraw", tk)
		if code != 200 || p.State != "waiting" || p.Position == nil || *p.Position != place[draw.ID(ticketOf(tk))] ||
			p.DrawID != "" || p.PrequeueSize != nil {
			t.Fatalf("ticket %d after the draw: %d %+v, the order says %d", i, code, p, place[draw.ID(ticketOf(tk))])
		}
		positions[i] = *p.Position
	}
	// The stats come from the shared snapshot: a draw made by a tick shows at its next
	// refresh (within about a second).
	testwait.For(t, 10*time.Second, "the stats show the draw done", func() bool {
		st := ddStats(t, in, "dddraw")
		return st.Draw == "done" && st.Prequeue == 0
	})

	// The start cannot move any more; re-sending it is accepted; nothing moved.
	code, _, e := ddPut(t, in, "dddraw", map[string]any{"starts_at": rfc3339(time.Now().Add(time.Hour))})
	if code != 409 || e.Error.Code != "draw_done" {
		t.Fatalf("moving the start after the draw: %d %+v", code, e)
	}
	if code, _, e := ddPut(t, in, "dddraw", map[string]any{"starts_at": nil}); code != 409 || e.Error.Code != "draw_done" {
		t.Fatalf("clearing the start after the draw: %d %+v", code, e)
	}
	if code, st, e := ddPut(t, in, "dddraw", map[string]any{"starts_at": after.StartsAt}); code != 200 || st.Draw != "done" {
		t.Fatalf("re-sending the start: %d %+v %+v", code, st, e)
	}
	for i, tk := range tickets {
		if _, p, _ := ddStatus(t, in, "dddraw", tk); p.Position == nil || *p.Position != positions[i] {
			t.Fatalf("ticket %d moved from %d to %+v", i, positions[i], p.Position)
		}
	}
	// A joiner after the start queues behind the drawn places.
	if code, p, _ := ddJoin(t, in, "dddraw"); code != 201 || p.State != "waiting" || p.Position == nil || *p.Position != n+1 {
		t.Fatalf("join after the draw: %d %+v", code, p)
	}
}

// ticketOf is the random id inside a ticket string "<queue>.<id>.<signature>".
func ticketOf(ticket string) string {
	parts := strings.Split(ticket, ".")
	if len(parts) != 3 {
		return ""
	}
	return parts[1]
}

func TestDropDayAPIMethods(t *testing.T) {
	t.Parallel()
	in := ddStart(t)
	t.Run("reject refuses every join", func(t *testing.T) {
		ddPut(t, in, "ddreject", map[string]any{"method": "reject"})
		code, _, e := ddJoin(t, in, "ddreject")
		if code != 423 || e.Error.Code != "queue_closed" || !strings.Contains(e.Error.Message, "not open") {
			t.Fatalf("join: %d %+v", code, e)
		}
	})
	t.Run("random shows no position", func(t *testing.T) {
		ddPut(t, in, "ddrandom", map[string]any{"method": "random", "rate_per_second": 0, "places_per_ip": 0})
		for range 2 {
			code, p, _ := ddJoin(t, in, "ddrandom")
			if code != 201 || p.State != "waiting" || p.Position != nil || p.ETA != nil {
				t.Fatalf("join: %d %+v", code, p)
			}
			if code, p, _ := ddStatus(t, in, "ddrandom", p.Ticket); code != 200 || p.Position != nil {
				t.Fatalf("status: %d %+v", code, p)
			}
		}
	})
	t.Run("passthrough admits by the join while nobody waits", func(t *testing.T) {
		ddPut(t, in, "ddpass", map[string]any{"method": "passthrough", "max_active": 5, "rate_per_second": 100, "places_per_ip": 0})
		code, p, _ := ddJoin(t, in, "ddpass")
		if code != 201 || p.State != "admitted" || p.Token == "" || p.Position == nil || *p.Position != 0 {
			t.Fatalf("join: %d %+v", code, p)
		}
	})
}

// TestDropDayAPISoldOut: the order that takes the last unit sells the queue out (joins
// 423 sold_out), a restock opens it again, and a product moved between queues changes
// both.
func TestDropDayAPISoldOut(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "dd", tolerantEnv(rs.URL(), testDB(t), nil))
	admin(t, in, "PUT", "/admin/api/products/ddshoe", map[string]any{"stock": 1, "queue": "ddso"})
	tickets, tokens := admittedUsers(t, in, "ddso", 1)
	// From here on the queue's sold-out flag is written twice, in whatever order a busy
	// machine makes of them: by the order (sold out) and by the restock (not), each with the
	// version of its judgement, so the restock's stands whichever lands last.
	flagWrites := watchCommands(t, rs, soldOutScriptOn("ddso"))
	if ddStats(t, in, "ddso").SoldOut {
		t.Fatal("sold out with stock left")
	}
	res, e, _ := order(t, in, tickets[0], tokens[0], "", map[string]any{"product_id": "ddshoe", "quantity": 1})
	if res.StatusCode != 201 {
		t.Fatalf("order: %d %+v", res.StatusCode, e)
	}
	if code, _, e := ddJoin(t, in, "ddso"); code != 423 || e.Error.Code != "sold_out" {
		t.Fatalf("join after the last unit: %d %+v", code, e)
	}
	if st := ddStats(t, in, "ddso"); !st.SoldOut {
		t.Fatalf("stats: %+v", st)
	}
	// The holder of a place keeps it (status still answers, saying sold out).
	if code, p, _ := ddStatus(t, in, "ddso", tickets[0]); code != 200 || !p.SoldOut {
		t.Fatalf("status while sold out: %d %+v", code, p)
	}
	admin(t, in, "PUT", "/admin/api/products/ddshoe", map[string]any{"stock": 3})
	if code, p, e := ddJoin(t, in, "ddso"); code != 201 || p.SoldOut {
		t.Fatalf("join after the restock: %d %+v %+v", code, p, e)
	}
	testwait.For(t, 30*time.Second, "both judgements written", func() bool { return flagWrites.count() >= 2 })
	if st := ddStats(t, in, "ddso"); st.SoldOut {
		t.Fatalf("sold out again after both judgements landed: %+v", st)
	}

	t.Run("a queue made after its sold-out product starts sold out", func(t *testing.T) {
		admin(t, in, "PUT", "/admin/api/products/ddlate", map[string]any{"stock": 0, "queue": "ddlate"})
		if code, st, e := ddPut(t, in, "ddlate", map[string]any{"rate_per_second": 1}); code != 201 || !st.SoldOut {
			t.Fatalf("create: %d %+v %+v", code, st, e)
		}
	})

	t.Run("a product moved between queues changes both", func(t *testing.T) {
		ddPut(t, in, "ddmoveA", map[string]any{"rate_per_second": 0, "places_per_ip": 0})
		ddPut(t, in, "ddmoveB", map[string]any{"rate_per_second": 0, "places_per_ip": 0})
		admin(t, in, "PUT", "/admin/api/products/ddboot", map[string]any{"stock": 0, "queue": "ddmoveA"})
		if code, _, e := ddJoin(t, in, "ddmoveA"); code != 423 || e.Error.Code != "sold_out" {
			t.Fatalf("A with its only product at 0: %d %+v", code, e)
		}
		admin(t, in, "PUT", "/admin/api/products/ddboot", map[string]any{"queue": "ddmoveB"})
		if code, _, e := ddJoin(t, in, "ddmoveA"); code != 201 {
			t.Fatalf("A after its product left: %d %+v", code, e)
		}
		if code, _, e := ddJoin(t, in, "ddmoveB"); code != 423 || e.Error.Code != "sold_out" {
			t.Fatalf("B with the product at 0: %d %+v", code, e)
		}
	})
}

// TestDropDayAPIEnded: at ends_at the places are dropped; joins and status answer 423
// queue_ended, and a stream 204 (EventSource stops).
func TestDropDayAPIEnded(t *testing.T) {
	t.Parallel()
	in := ddStart(t)
	// The end is set after the join, a moment ahead (further if the save was slower than
	// that and refused it): with the end set first, a machine busy beside the test let it pass
	// before the join (423, a fresh-clone run beside a CPU hog, 2026-12-03).
	ddPut(t, in, "ddend", map[string]any{"rate_per_second": 0, "places_per_ip": 0})
	code, p, _ := ddJoin(t, in, "ddend")
	if code != 201 || p.State != "waiting" {
		t.Fatalf("join before the end: %d %+v", code, p)
	}
	for ahead := 2 * time.Second; ; ahead *= 2 {
		code, _, e := ddPut(t, in, "ddend", map[string]any{"ends_at": rfc3339(time.Now().Add(ahead))})
		if code < 300 {
			break
		}
		if ahead >= time.Minute {
			t.Fatalf("setting the end %v ahead: %d %+v", ahead, code, e)
		}
	}
	testwait.For(t, 20*time.Second, "the sale ended", func() bool { return ddStats(t, in, "ddend").Ended })
	if code, _, e := ddJoin(t, in, "ddend"); code != 423 || e.Error.Code != "queue_ended" {
		t.Fatalf("join after the end: %d %+v", code, e)
	}
	if code, _, e := ddStatus(t, in, "ddend", p.Ticket); code != 423 || e.Error.Code != "queue_ended" {
		t.Fatalf("status after the end: %d %+v", code, e)
	}
	s, res := openStream(t, in.url+"/api/queues/ddend/stream", p.Ticket, "")
	if s != nil {
		s.close()
		t.Fatal("a stream of an ended queue attached")
	}
	if res == nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("stream after the end: %v", res)
	}
	res.Body.Close()
	if code, _, e := ddPut(t, in, "ddend", map[string]any{"ends_at": rfc3339(time.Now().Add(time.Hour))}); code != 422 || e.Error.Field != "ends_at" {
		t.Fatalf("a new end for an ended sale: %d %+v", code, e)
	}
}

// statsOf is queue name in GET /admin/api/stats, decoded into T (the fields a test reads).
func statsOf[T any](t *testing.T, in *instance, name string) T {
	t.Helper()
	var st struct {
		Queues []json.RawMessage `json:"queues"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
	for _, raw := range st.Queues {
		var q struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &q) == nil && q.Name == name {
			var v T
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatalf("queue %s in the stats: %v", name, err)
			}
			return v
		}
	}
	t.Fatalf("GET /admin/api/stats has no queue %s", name)
	var zero T
	return zero
}
