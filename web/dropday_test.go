package web

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
)

func TestParseQueueBodyTimes(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 6, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, body string
		starts     *time.Time // nil: absent
		field      string     // a 422 about this field
	}{
		{"absent", `{"rate_per_second":1}`, nil, ""},
		{"RFC 3339", `{"starts_at":"2030-06-01T10:00:00Z"}`, &at, ""},
		{"with an offset and fraction", `{"starts_at":"2030-06-01T12:00:00.000+02:00"}`, &at, ""},
		{"null clears", `{"starts_at":null}`, &time.Time{}, ""},
		{"not a time", `{"starts_at":"tomorrow"}`, nil, "starts_at"},
		{"a date only", `{"starts_at":"2030-06-01"}`, nil, "starts_at"},
		{"a number", `{"starts_at":1900000000}`, nil, "starts_at"},
		{"the zero time", `{"starts_at":"0001-01-01T00:00:00Z"}`, nil, "starts_at"},
		{"ends_at malformed", `{"ends_at":"2030-13-01T00:00:00Z"}`, nil, "ends_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseQueueBody([]byte(tc.body))
			if tc.field != "" {
				var e *Error
				if !errors.As(err, &e) || e.Status != 422 || e.Field != tc.field || e.Code != "invalid_settings" {
					t.Fatalf("err = %#v, want a 422 about %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.starts == nil && p.StartsAt != nil,
				tc.starts != nil && (p.StartsAt == nil || !p.StartsAt.Equal(*tc.starts)):
				t.Fatalf("starts_at = %v, want %v", p.StartsAt, tc.starts)
			}
		})
	}
	p, err := parseQueueBody([]byte(`{"method":"random"}`))
	if err != nil || p.Method == nil || *p.Method != queue.MethodRandom {
		t.Fatalf("method: %+v %v", p, err)
	}
	if _, err := parseQueueBody([]byte(`{"method":5}`)); statusOf(err) != 422 {
		t.Fatalf("method of the wrong type: %v", err)
	}
}

// Positions are null where none exists; the pre-queue's fields appear only in it.
func TestPlaceBodyDropDay(t *testing.T) {
	t.Parallel()
	s := &Server{}
	tk := queue.Ticket{Queue: "drop", ID: "id"}
	starts := time.Date(2030, 6, 1, 10, 0, 0, 0, time.UTC)
	body := func(p queue.Place) map[string]any {
		t.Helper()
		b, _ := json.Marshal(s.placeBody(tk, "raw", p))
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	pre := body(queue.Place{Queue: "drop", State: queue.StatePrequeue, StartsAt: starts, PrequeueSize: 0, DrawID: "ab", Rate: 5})
	if pre["position"] != nil || pre["eta_seconds"] != nil || pre["starts_at"] != "2030-06-01T10:00:00.000Z" ||
		pre["prequeue_size"] != 0.0 || pre["draw_id"] != "ab" || pre["sold_out"] != false {
		t.Fatalf("pre-queue: %v", pre)
	}
	random := body(queue.Place{Queue: "drop", State: queue.StateWaiting, Position: 3, Method: queue.MethodRandom, Rate: 5, SoldOut: true})
	if _, ok := random["position"]; !ok || random["position"] != nil || random["eta_seconds"] != nil || random["sold_out"] != true {
		t.Fatalf("random: %v", random)
	}
	lane := body(queue.Place{Queue: "drop", State: queue.StateWaiting, Lane: queue.LanePriority, Position: 2, Method: queue.MethodRandom, Rate: 5})
	if lane["position"] != 2.0 || lane["eta_seconds"] == nil {
		t.Fatalf("an invite lane of a random queue keeps its order: %v", lane)
	}
	fifo := body(queue.Place{Queue: "drop", State: queue.StateWaiting, Position: 4, Method: queue.MethodFIFO, Rate: 2})
	for _, k := range []string{"starts_at", "prequeue_size", "draw_id"} {
		if _, ok := fifo[k]; ok {
			t.Fatalf("%s outside the pre-queue: %v", k, fifo)
		}
	}
	if fifo["position"] != 4.0 || fifo["eta_seconds"] != 2.0 {
		t.Fatalf("fifo: %v", fifo)
	}
}

func TestDropDayErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{queue.ErrSoldOut, 423, "sold_out"},
		{queue.ErrQueueNotOpen, 423, "queue_closed"},
		{queue.ErrQueueEnded, 423, "queue_ended"},
		{queue.ErrNoDraw, 404, "no_draw"},
		{queue.ErrQueueNotEmpty, 409, "queue_not_empty"},
		{queue.ErrDrawDone, 409, "draw_done"},
	} {
		if e := mapError(tc.err); e.Status != tc.status || e.Code != tc.code {
			t.Errorf("%v → %d %s, want %d %s", tc.err, e.Status, e.Code, tc.status, tc.code)
		}
	}
}
