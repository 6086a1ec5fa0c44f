package main

import (
	"context"
	"encoding/csv"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/orders/pgtest"
	"github.com/waitroom/waitroom/queue/redistest"
)

// histCounts are the history's totals and the matching /metrics counters.
type histCounts struct{ joined, admitted, abandoned, expired, orders int64 }

// metricSums sums each counter's sample over the instances' /metrics pages, reading each page
// once (a test polling five counters on two instances read ten pages a poll: most of its CPU).
func metricSums(t *testing.T, ins []*instance, series ...string) []int64 {
	t.Helper()
	sums := make([]float64, len(series))
	for _, in := range ins {
		for _, l := range strings.Split(readAll(call(t, "GET", in.url+"/metrics", "", nil, nil)), "\n") {
			for i, s := range series {
				if v, ok := strings.CutPrefix(l, s+" "); ok {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						t.Fatalf("metric %s: %q", s, l)
					}
					sums[i] += f
				}
			}
		}
	}
	out := make([]int64, len(series))
	for i, f := range sums {
		out[i] = int64(f)
	}
	return out
}

func metricCounts(t *testing.T, ins []*instance, q string) histCounts {
	t.Helper()
	lbl := `{queue="` + q + `"}`
	n := metricSums(t, ins, "queue_enter_total"+lbl, "queue_token_issued_total"+lbl, "queue_abandoned_total"+lbl,
		"queue_token_expired_total"+lbl, `order_outcomes_total{result="created"}`)
	return histCounts{joined: n[0], admitted: n[1], abandoned: n[2], expired: n[3], orders: n[4]}
}

type historyJSON struct {
	Queue       string           `json:"queue"`
	StepSeconds int64            `json:"step_seconds"`
	Points      []map[string]any `json:"points"`
}

func historyCounts(t *testing.T, in *instance, q, query string) histCounts {
	t.Helper()
	var h historyJSON
	if res := call(t, "GET", in.url+"/admin/api/queues/"+q+"/history?"+query, adminToken, nil, &h); res.StatusCode != 200 {
		t.Fatalf("history: %d %s", res.StatusCode, readAll(res))
	}
	var c histCounts
	for _, p := range h.Points {
		c.joined += num(p["joined"])
		c.admitted += num(p["admitted"])
		c.abandoned += num(p["abandoned"])
		c.expired += num(p["expired"])
		c.orders += num(p["orders"])
	}
	return c
}

func TestHistoryAndReportAgreeWithTheMetrics(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	db := testDB(t)
	env := tolerantEnv(rs.URL(), db, map[string]string{"WR_GRACE": "5s"})
	a := startInProcess(t, "ha", env)
	b := startInProcess(t, "hb", env)
	ins := []*instance{a, b}
	const q = "hist"
	start := time.Now().UTC()
	mustAdmin(t, a, "PUT", "/admin/api/products/histp", map[string]any{"name": "Hist", "price": 100, "stock": 100, "queue": q})
	mustAdmin(t, a, "PUT", "/admin/api/queues/"+q, map[string]any{"token_ttl_seconds": 10})

	// Admissions through both instances, three of them buy.
	ticketsA, tokensA := admittedUsers(t, a, q, 6)
	ticketsB, tokensB := admittedUsers(t, b, q, 4)
	for i, in := range []*instance{a, a, b} {
		tk, tok := ticketsA[i], tokensA[i]
		if in == b {
			tk, tok = ticketsB[0], tokensB[0]
		}
		if res, e, _ := order(t, in, tk, tok, "", map[string]any{"product_id": "histp", "quantity": 2}); res.StatusCode != 201 {
			t.Fatalf("order: %d %s", res.StatusCode, e.Error.Code)
		}
	}
	// A paused line: two give up their place, three walk away (abandoned after the grace).
	mustAdmin(t, a, "PUT", "/admin/api/queues/"+q, map[string]any{"paused": true})
	var waiting []string
	for i := range 5 {
		var j joinResp
		call(t, "POST", ins[i%2].url+"/api/queues/"+q+"/join", "", nil, &j)
		if j.State != "waiting" {
			t.Fatalf("join while paused: %+v", j)
		}
		waiting = append(waiting, j.Ticket)
	}
	for _, tk := range waiting[:2] {
		if res := call(t, "DELETE", b.url+"/api/queues/"+q+"/ticket", tk, nil, nil); res.StatusCode >= 300 {
			t.Fatalf("leave: %d", res.StatusCode)
		}
	}
	testwait.Every(t, 250*time.Millisecond, 30*time.Second, "3 places abandoned", func() bool {
		return metricCounts(t, ins, q).abandoned == 3
	})
	mustAdmin(t, a, "PUT", "/admin/api/queues/"+q, map[string]any{"paused": false})

	// Every unused token lapses, the queue rests; the last step is recorded within one step.
	window := "from=" + url.QueryEscape(start.Add(-time.Minute).Format(time.RFC3339)) + "&step=10"
	var m, h histCounts
	testwait.Every(t, 250*time.Millisecond, 45*time.Second, "the history's totals to equal the metrics", func() bool {
		m = metricCounts(t, ins, q)
		h = historyCounts(t, a, q, window)
		return m.expired >= 7 && h == m
	})
	want := histCounts{joined: 15, admitted: 10, abandoned: 3, expired: 7, orders: 3}
	if m != want {
		t.Errorf("metrics %+v, want %+v", m, want)
	}
	// The other instance answers the same; longer steps sum to the same totals. Steps of a
	// minute or more read the minute rows, and a 10-s row written after its minute was rolled
	// up is counted at the next rollup (each recomputes the last three minutes): wait for it.
	var hb histCounts
	testwait.Every(t, 250*time.Millisecond, 150*time.Second, "120-s steps on the other instance to sum to the same totals", func() bool {
		hb = historyCounts(t, b, q, strings.Replace(window, "step=10", "step=120", 1))
		return hb == h
	})

	t.Run("the report agrees", func(t *testing.T) {
		var rp map[string]any
		if res := call(t, "GET", a.url+"/admin/api/queues/"+q+"/report", adminToken, nil, &rp); res.StatusCode != 200 {
			t.Fatalf("report: %d", res.StatusCode)
		}
		got := histCounts{joined: num(rp["joined"]), admitted: num(rp["admitted"]), abandoned: num(rp["abandoned"]),
			expired: num(rp["expired"]), orders: num(rp["bought"])}
		if got != h || num(rp["left"]) != 2 || num(rp["units"]) != 6 || rp["from"] == nil || num(rp["peak_waiting"]) < 3 {
			t.Errorf("report %v, want totals %+v, left 2, units 6, peak waiting ≥ 3 (the paused line after the leaves)", rp, h)
		}
		w, _ := rp["wait_seconds"].(map[string]any)
		if num(w["count"]) > 10 || w["p50"] == nil && num(w["count"]) > 0 {
			t.Errorf("wait_seconds %v", w)
		}
	})

	t.Run("the CSV parses, one row per minute", func(t *testing.T) {
		res := call(t, "GET", a.url+"/admin/api/queues/"+q+"/report?format=csv", adminToken, nil, nil)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/csv; charset=utf-8" ||
			res.Header.Get("Content-Disposition") != `attachment; filename="hist-report.csv"` {
			t.Fatalf("csv: %d %q %q", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Disposition"))
		}
		recs, err := csv.NewReader(strings.NewReader(readAll(res))).ReadAll() // ReadAll refuses a row of another width
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) < 2 || strings.Join(recs[0], ",") != "minute,joined,admitted,abandoned,expired,orders,peak_waiting,peak_sse_connections,wait_p50_seconds,wait_p95_seconds,left,dropped_at_end" {
			t.Fatalf("csv %q", recs)
		}
		var joined int64
		for _, r := range recs[1:] {
			n, _ := strconv.ParseInt(r[1], 10, 64)
			joined += n
		}
		if joined != h.joined {
			t.Errorf("csv joined %d, want %d", joined, h.joined)
		}
	})

	t.Run("bad input is refused with its field, unknown queues are 404", func(t *testing.T) {
		now := time.Now().UTC()
		ts := func(d time.Duration) string { return url.QueryEscape(now.Add(d).Format(time.RFC3339)) }
		cases := []struct{ name, query, field string }{
			{"reversed range", "from=" + ts(0) + "&to=" + ts(-time.Hour), "from"},
			{"over 90 days", "from=" + ts(-91*24*time.Hour), "from"},
			{"step 5", "step=5", "step"},
			{"step 15", "step=15", "step"},
			{"too many points", "from=" + ts(-40*time.Hour) + "&step=10", "step"},
			{"10-s steps past 48 h", "from=" + ts(-50*time.Hour) + "&to=" + ts(-49*time.Hour) + "&step=10", "step"},
			{"a bad time", "from=yesterday", "from"},
			{"a bad to", "to=2026-13-01T00:00:00Z", "to"},
		}
		for _, c := range cases {
			var e struct {
				Error struct{ Code, Field string } `json:"error"`
			}
			res := call(t, "GET", a.url+"/admin/api/queues/"+q+"/history?"+c.query, adminToken, nil, &e)
			if res.StatusCode != 422 || e.Error.Code != "invalid_range" || e.Error.Field != c.field {
				t.Errorf("%s: %d %+v, want 422 invalid_range on %s", c.name, res.StatusCode, e.Error, c.field)
			}
		}
		var e errResp
		if res := call(t, "GET", a.url+"/admin/api/queues/"+q+"/report?format=xml", adminToken, nil, &e); res.StatusCode != 422 || e.Error.Code != "invalid_format" {
			t.Errorf("format xml: %d %+v", res.StatusCode, e.Error)
		}
		for _, path := range []string{"/queues/nosuch/history", "/queues/nosuch/report", "/queues/nosuch/report?format=csv", "/queues/Bad%20Name/history"} {
			var e errResp
			if res := call(t, "GET", a.url+"/admin/api"+path, adminToken, nil, &e); res.StatusCode != 404 || e.Error.Code != "queue_not_found" {
				t.Errorf("%s: %d %+v, want 404 queue_not_found", path, res.StatusCode, e.Error)
			}
		}
	})
}

// TestHistoryWhilePostgresIsDown: history and report answer 503 database_unavailable with
// Retry-After (never a hang or a 500), admission goes on, and both answer again once
// PostgreSQL is back.
func TestHistoryWhilePostgresIsDown(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	pg := pgtest.MustPrivate(t)
	in := startInProcess(t, "hpg", baseEnv(rs.URL(), pg.URL(), nil))
	mustAdmin(t, in, "PUT", "/admin/api/queues/hpg", map[string]any{"rate_per_second": 10})
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/history", "/report", "/report?format=csv"} {
		var e errResp
		res := call(t, "GET", in.url+"/admin/api/queues/hpg"+path, adminToken, nil, &e)
		if res.StatusCode != 503 || e.Error.Code != "database_unavailable" || res.Header.Get("Retry-After") == "" {
			t.Errorf("%s with PostgreSQL down: %d %+v", path, res.StatusCode, e.Error)
		}
	}
	admittedUsers(t, in, "hpg", 3) // the recorder's failed writes do not hold admission up
	if err := pg.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "history to answer again", func() bool {
		return call(t, "GET", in.url+"/admin/api/queues/hpg/history", adminToken, nil, nil).StatusCode == 200
	})
}
