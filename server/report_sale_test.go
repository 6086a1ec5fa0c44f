package main

import (
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// reportJSON is the part of GET /admin/api/queues/{queue}/report these tests read.
type reportJSON struct {
	Joined       int64      `json:"joined"`
	Admitted     int64      `json:"admitted"`
	Abandoned    int64      `json:"abandoned"`
	Left         int64      `json:"left"`
	Dropped      *int64     `json:"dropped_at_end"`
	StillWaiting *int64     `json:"still_waiting"`
	Unaccounted  int64      `json:"unaccounted"`
	Bought       int64      `json:"bought"`
	Units        int64      `json:"units"`
	SoldOutAt    *time.Time `json:"sold_out_at"`
	SoldOut      []struct {
		From time.Time  `json:"from"`
		To   *time.Time `json:"to"`
	} `json:"sold_out_periods"`
	GeneratedAt     time.Time `json:"generated_at"`
	OrdersPerMinute []struct {
		T      time.Time `json:"t"`
		Orders int64     `json:"orders"`
	} `json:"orders_per_minute"`
}

func readReport(t *testing.T, in *instance, q string) reportJSON {
	t.Helper()
	var r reportJSON
	if res := call(t, "GET", in.url+"/admin/api/queues/"+q+"/report", adminToken, nil, &r); res.StatusCode != 200 {
		t.Fatalf("report: %d %s", res.StatusCode, readAll(res))
	}
	return r
}

// saleLine follows the tickets of a test sale by their status answers.
type saleLine struct {
	t       *testing.T
	in      *instance
	q       string
	tickets []string
	gone    map[string]bool // left the line
	used    map[string]bool // token spent on an order
}

// states polls every ticket still known and returns the waiting ones and the admitted
// ones with an unspent token (ticket → token); admitted counts every admission seen.
func (l *saleLine) states() (waiting []string, live map[string]string, admitted int) {
	live = map[string]string{}
	for _, tk := range l.tickets {
		if l.gone[tk] {
			continue
		}
		var st joinResp
		call(l.t, "GET", l.in.url+"/api/queues/"+l.q+"/status", tk, nil, &st)
		switch {
		case st.State == "waiting":
			waiting = append(waiting, tk)
		case l.used[tk]:
			admitted++
		case st.State == "admitted":
			admitted++
			live[tk] = st.Token
		}
	}
	return waiting, live, admitted
}

type saleStats struct {
	SoldOut bool  `json:"sold_out"`
	Ended   bool  `json:"ended"`
	Waiting int64 `json:"waiting"`
}

func saleQueueStats(t *testing.T, in *instance, q string) saleStats {
	t.Helper()
	return statsOf[saleStats](t, in, q)
}

// TestReportAddsUpAfterASale runs a real sale — eight join, admission one at a time, the
// stock sells out (admission stops), one waiter leaves, a restock sells out again, the end
// drops whoever still waits — and checks the report against what happened: joined =
// admitted + abandoned + left + dropped at the end + still waiting, each term as counted
// here, two sold-out periods with the first one's start as "sold out at", and the
// orders per minute never after the report's own time.
func TestReportAddsUpAfterASale(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	db := testDB(t)
	in := startInProcess(t, "rs", tolerantEnv(rs.URL(), db, nil))
	const q = "rsale"
	mustAdmin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"rate_per_second": 1000, "max_active": 1, "places_per_ip": 0})
	mustAdmin(t, in, "PUT", "/admin/api/products/rsp", map[string]any{"name": "Sale", "price": 1000, "stock": 2, "queue": q})
	l := &saleLine{t: t, in: in, q: q, tickets: joinUsers(t, in, q, 8, 1), gone: map[string]bool{}, used: map[string]bool{}}

	// Buy with the live tokens until the stock is gone (one at a time: max_active 1).
	buyOut := func(stock int) {
		bought := 0
		testwait.For(t, 30*time.Second, "the stock sold", func() bool {
			_, live, _ := l.states()
			for tk, tok := range live {
				if bought == stock {
					break
				}
				res, e, _ := order(t, in, tk, tok, "", map[string]any{"product_id": "rsp", "quantity": 1})
				if res.StatusCode != 201 {
					t.Fatalf("order: %d %s", res.StatusCode, e.Error.Code)
				}
				l.used[tk] = true
				bought++
			}
			return bought == stock
		})
		testwait.For(t, 30*time.Second, "the queue sold out", func() bool { return saleQueueStats(t, in, q).SoldOut })
	}
	before := time.Now()
	buyOut(2)
	firstSoldOut := time.Now()

	// Sold out: admission has stopped. One waiter leaves.
	waiting, _, _ := l.states()
	if len(waiting) < 3 {
		t.Fatalf("%d waiting after the sell-out, want at least 3", len(waiting))
	}
	if res := call(t, "DELETE", in.url+"/api/queues/"+q+"/ticket", waiting[0], nil, nil); res.StatusCode != 204 {
		t.Fatalf("leave: %d", res.StatusCode)
	}
	l.gone[waiting[0]] = true

	// A restock of one: admission resumes, it sells out again.
	mustAdmin(t, in, "PUT", "/admin/api/products/rsp", map[string]any{"name": "Sale", "price": 1000, "stock": 1, "queue": q})
	testwait.For(t, 30*time.Second, "the restock seen", func() bool { return !saleQueueStats(t, in, q).SoldOut })
	restocked := time.Now()
	buyOut(1)

	// The end: whoever still waits is dropped.
	waiting, _, admitted := l.states()
	end := time.Now().Add(time.Second)
	mustAdmin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"ends_at": end.UTC().Format(time.RFC3339Nano)})
	testwait.For(t, 30*time.Second, "the end", func() bool {
		s := saleQueueStats(t, in, q)
		return s.Ended && s.Waiting == 0
	})
	t.Logf("what happened: joined 8, admitted %d, left 1, waiting at the end %d; orders 3", admitted, len(waiting))

	// (The report is read at once: what happened since the last recorded 10-s step counts
	// too.)
	r := readReport(t, in, q)
	t.Logf("report: joined %d = admitted %d + abandoned %d + left %d + dropped %v + still waiting %v (unaccounted %d); sold out at %v, periods %+v",
		r.Joined, r.Admitted, r.Abandoned, r.Left, deref(r.Dropped), deref(r.StillWaiting), r.Unaccounted, r.SoldOutAt, r.SoldOut)
	if r.Joined != 8 || r.Admitted != int64(admitted) || r.Abandoned != 0 || r.Left != 1 || r.Bought != 3 || r.Units != 3 {
		t.Errorf("report joined %d admitted %d abandoned %d left %d bought %d units %d; want 8, %d, 0, 1, 3, 3",
			r.Joined, r.Admitted, r.Abandoned, r.Left, r.Bought, r.Units, admitted)
	}
	if r.Dropped == nil || *r.Dropped != int64(len(waiting)) || r.StillWaiting == nil || *r.StillWaiting != 0 {
		t.Errorf("dropped at the end %v, still waiting %v; want %d and 0", deref(r.Dropped), deref(r.StillWaiting), len(waiting))
	}
	if sum := r.Admitted + r.Abandoned + r.Left + deref(r.Dropped) + deref(r.StillWaiting); sum != r.Joined || r.Unaccounted != 0 {
		t.Errorf("joined %d, the parts add up to %d (unaccounted %d)", r.Joined, sum, r.Unaccounted)
	}
	if r.SoldOutAt == nil || r.SoldOutAt.Before(before) || r.SoldOutAt.After(firstSoldOut) {
		t.Errorf("sold out at %v, want within the first sell-out [%v, %v]", r.SoldOutAt, before, firstSoldOut)
	}
	if len(r.SoldOut) != 2 || r.SoldOut[0].To == nil || r.SoldOut[0].To.After(restocked) || r.SoldOut[1].To != nil ||
		!r.SoldOut[1].From.After(*r.SoldOut[0].To) {
		t.Errorf("sold-out periods %+v, want two: the first ended by the restock (by %v), the second open", r.SoldOut, restocked)
	}
	for _, m := range r.OrdersPerMinute {
		if m.T.After(r.GeneratedAt) {
			t.Errorf("orders minute %v after the report's time %v", m.T, r.GeneratedAt)
		}
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
