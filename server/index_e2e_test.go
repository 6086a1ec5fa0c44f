package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue/redistest"
)

// indexEntry is one queue as the index page lists it.
type indexEntry struct {
	state string
	link  bool // a join link is offered
	html  string
}

var indexItemRE = regexp.MustCompile(`(?s)<li class="card queue-item[^"]*" data-testid="queue-item" data-queue="([^"]+)" data-state="([^"]*)">(.*?)</li>`)

// readIndex reads GET / (lang en) into its entries by queue name.
func readIndex(t *testing.T, url string) map[string]indexEntry {
	t.Helper()
	res := call(t, "GET", url+"/?lang=en", "", nil, nil)
	if res.StatusCode != 200 {
		t.Fatalf("GET /: %d", res.StatusCode)
	}
	out := map[string]indexEntry{}
	for _, m := range indexItemRE.FindAllStringSubmatch(readAll(res), -1) {
		out[m[1]] = indexEntry{state: m[2], link: strings.Contains(m[3], `data-testid="queue-link"`), html: m[3]}
	}
	return out
}

// setIndexStates makes one queue per state and per precedence case (the name says what the
// index must show); the ended ones get an ends_at in the past straight in Redis (the API
// accepts only a future one): one a minute ago, one 25 hours ago (no longer listed).
func setIndexStates(t *testing.T, in *instance, rs *redistest.Server) map[string]string {
	t.Helper()
	hour := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	put := func(name string, body map[string]any) {
		t.Helper()
		body["rate_per_second"] = 1
		mustAdmin(t, in, "PUT", "/admin/api/queues/"+name, body)
	}
	soldOut := func(name string) {
		t.Helper()
		mustAdmin(t, in, "PUT", "/admin/api/products/p-"+name, map[string]any{"name": "Thing", "price": 1000, "stock": 0, "queue": name})
	}
	put("s-open", map[string]any{})
	put("s-paused", map[string]any{"paused": true})
	put("s-scheduled", map[string]any{"starts_at": hour})
	put("s-scheduled-paused", map[string]any{"starts_at": hour, "paused": true})
	put("s-soldout", map[string]any{})
	soldOut("s-soldout")
	put("s-soldout-scheduled", map[string]any{"starts_at": hour})
	soldOut("s-soldout-scheduled")
	put("s-closed", map[string]any{"closed": true})
	put("s-reject", map[string]any{"method": "reject"})
	put("s-closed-soldout", map[string]any{"closed": true})
	soldOut("s-closed-soldout")
	put("s-ended", map[string]any{})
	put("s-ended-closed", map[string]any{"closed": true})
	put("s-ended-old", map[string]any{})
	rdb := rs.Client()
	defer rdb.Close()
	ctx := context.Background()
	past := func(name string, ago time.Duration) {
		t.Helper()
		if err := rdb.HSet(ctx, "wr:{q:"+name+"}:cfg", "ends_ms", time.Now().Add(-ago).UnixMilli()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	past("s-ended", time.Minute)
	past("s-ended-closed", time.Minute)
	past("s-ended-old", 25*time.Hour)
	return map[string]string{
		"s-open": "open", "s-paused": "paused", "s-scheduled": "scheduled", "s-scheduled-paused": "scheduled",
		"s-soldout": "sold_out", "s-soldout-scheduled": "sold_out", "s-closed": "closed", "s-reject": "closed",
		"s-closed-soldout": "closed", "s-ended": "ended", "s-ended-closed": "ended",
	}
}

// TestIndexStateIsTheJoins: the index labels every queue with one state by the join's own
// precedence, offers a join link only where a join succeeds, and a join of each listed queue
// answers what its label says (201 where a link is offered; 423 queue_ended, queue_closed or
// sold_out where not). An ended queue stays listed for 24 h after ends_at; the waiting page of
// an ended queue says so and shows when it ended.
func TestIndexStateIsTheJoins(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "index", tolerantEnv(rs.URL(), testDB(t), nil))
	want := setIndexStates(t, in, rs)
	got := readIndex(t, in.url)
	if _, ok := got["s-ended-old"]; ok {
		t.Errorf("a queue that ended 25 h ago is still listed")
	}
	refusal := map[string]string{"ended": "queue_ended", "closed": "queue_closed", "sold_out": "sold_out"}
	for name, state := range want {
		t.Run(name, func(t *testing.T) {
			e, ok := got[name]
			if !ok {
				t.Fatalf("not listed")
			}
			if e.state != state {
				t.Fatalf("data-state %q, want %q", e.state, state)
			}
			joinable := state == "open" || state == "paused" || state == "scheduled"
			if e.link != joinable {
				t.Errorf("join link offered: %v, want %v\n%s", e.link, joinable, e.html)
			}
			if state == "scheduled" && !strings.Contains(e.html, `data-testid="queue-starts" datetime="`) {
				t.Errorf("a scheduled queue does not show its start:\n%s", e.html)
			}
			if !joinable && strings.Contains(e.html, `data-testid="queue-rate"`) {
				t.Errorf("a queue that lets nobody in shows a rate:\n%s", e.html)
			}
			var er errResp
			res := call(t, "POST", in.url+"/api/queues/"+name+"/join", "", nil, &er)
			switch {
			case joinable && res.StatusCode != 201:
				t.Errorf("join: %d %+v, want 201 (the index offers a join)", res.StatusCode, er)
			case !joinable && (res.StatusCode != 423 || er.Error.Code != refusal[state]):
				t.Errorf("join: %d %+v, want 423 %s", res.StatusCode, er, refusal[state])
			}
		})
	}

	// The waiting page of an ended queue: it says so, with the end, and joins nothing.
	res := call(t, "GET", in.url+"/q/s-ended?lang=en", "", nil, nil)
	page := readAll(res)
	if res.StatusCode != 200 || !strings.Contains(page, `id="join-error" class="card notice" data-reason="queue_ended"`) || !strings.Contains(page, `id="ends-at"`) ||
		strings.Contains(page, `id="room"`) {
		t.Errorf("waiting page of an ended queue: %d\n%s", res.StatusCode, page)
	}
	// A queue with a future end shows it on the waiting page, RFC 3339 in datetime.
	end := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	mustAdmin(t, in, "PUT", "/admin/api/queues/s-ends", map[string]any{"ends_at": end.Format(time.RFC3339)})
	page = readAll(call(t, "GET", in.url+"/q/s-ends", "", nil, nil))
	if want := fmt.Sprintf(`<time id="ends-at" class="local-time" datetime="%s">`, end.Format("2006-01-02T15:04:05.000Z07:00")); !strings.Contains(page, want) {
		t.Errorf("waiting page with ends_at: no %s", want)
	}
}
