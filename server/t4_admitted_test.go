package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// noMoreAdmitted is the explicit signal that replaces "sleep and let any duplicate admitted
// event arrive". Every admitted event an instance's hub queues to a stream is counted
// (sse_admitted_events_total), and the hub applies a queue's tick messages one after the
// other. So, once every user of the test has had its admission: the queue is paused, a
// marker user joins on each instance and streams from it, the queue resumes, and each marker
// is admitted in a tick after all of theirs. When each marker's admitted event has arrived,
// its hub has handled every earlier tick, and any duplicate those ticks made would already
// be counted: the instances together must have queued exactly want + one per marker.
//
// resume are the settings that let the queue admit again (the test's rate, say).
func noMoreAdmitted(t *testing.T, ins []*instance, queue string, want int, resume map[string]any) {
	t.Helper()
	admin(t, ins[0], "PUT", "/admin/api/queues/"+queue, map[string]any{"paused": true})
	markers := make([]*sseStream, len(ins))
	for i, in := range ins {
		var j joinResp
		if res := call(t, "POST", in.url+"/api/queues/"+queue+"/join", "", nil, &j); res.StatusCode != 201 {
			t.Fatalf("marker join on %s: %d", in.id, res.StatusCode)
		}
		markers[i] = mustStream(t, in.url+"/api/queues/"+queue+"/stream", j.Ticket)
		// Its first position: the stream is the hub's before the admission can come.
		if _, ok := markers[i].next(t, 30*time.Second, "position"); !ok {
			t.Fatalf("marker on %s: no first position", in.id)
		}
	}
	resume = copyAny(resume)
	resume["paused"] = false
	admin(t, ins[0], "PUT", "/admin/api/queues/"+queue, resume)
	for i, s := range markers {
		if _, ok := s.next(t, 60*time.Second, "admitted"); !ok {
			t.Fatalf("marker on %s: not admitted within 60 s", ins[i].id)
		}
	}
	total := 0
	for _, in := range ins {
		total += int(metricValue(t, in, "sse_admitted_events_total"))
	}
	if total != want+len(ins) {
		t.Fatalf("the instances queued %d admitted events: %d users and %d markers should make %d (a duplicate was sent)",
			total, want, len(ins), want+len(ins))
	}
}

// metricValue is the value of an unlabelled metric of the instance's /metrics page.
func metricValue(t *testing.T, in *instance, name string) float64 {
	t.Helper()
	line := metricLine(readAll(call(t, "GET", in.url+"/metrics", "", nil, nil)), name)
	v, err := strconv.ParseFloat(strings.TrimPrefix(line, name+" "), 64)
	if line == "" || err != nil {
		t.Fatalf("%s: no %s in /metrics (%q)", in.id, name, line)
	}
	return v
}

func copyAny(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
