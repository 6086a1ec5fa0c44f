package main

import (
	"testing"
	"time"
)

// TestBrowserKeepsAPlaceInEveryQueue: one browser waits in two queues. Before per-queue
// cookies, joining the second queue overwrote the first one's ticket, and going back to the
// first queue's page took a new place at the back of the line.
//
// Then a third queue, hp, whose places_per_ip (1) the address already holds: the page shows
// the final notice (waitroom.js reports the error as fatal and closes the room instead of
// scheduling another join; a retried 429 would show the "retrying" state). It shares this
// test's instance and browser: a page of its own cost an instance and a browser for one check.
func TestBrowserKeepsAPlaceInEveryQueue(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "two-queues", 60*time.Second, nil)
	for _, q := range []string{"qa", "qb"} {
		mustAdmin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"paused": true})
	}
	b := startBrowser(t, ctx)
	p := b.open(t, "buyer")
	livePosition := func(q string, want string) {
		p.waitJS("position "+want+" in "+q, 10*time.Second, `document.getElementById('position').dataset.position === '`+want+`' &&
			document.getElementById('conn-state').dataset.state === 'live'`)
	}
	p.navigate(in.url + "/q/qa")
	livePosition("qa", "1")
	// Someone else joins qa behind the buyer.
	call(t, "POST", in.url+"/api/queues/qa/join", "", nil, nil)
	p.navigate(in.url + "/q/qb")
	livePosition("qb", "1")
	p.navigate(in.url + "/q/qa")
	livePosition("qa", "1") // the same place, not a third one behind the other joiner

	var st struct {
		Queues []struct {
			Name    string `json:"name"`
			Waiting int64  `json:"waiting"`
		} `json:"queues"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
	for _, q := range st.Queues {
		want := map[string]int64{"qa": 2, "qb": 1}[q.Name]
		if q.Waiting != want {
			t.Fatalf("queue %s has %d waiting, want %d (one place per queue for the browser)", q.Name, q.Waiting, want)
		}
	}

	// Too many places from this address: hp's one place per address is taken over the API
	// (created after the count above, which wants qa and qb only).
	mustAdmin(t, in, "PUT", "/admin/api/queues/hp", map[string]any{"paused": true, "places_per_ip": 1})
	call(t, "POST", in.url+"/api/queues/hp/join", "", nil, nil) // the address's one place
	p.navigate(in.url + "/q/hp")
	p.waitJS("the too-many-places notice", 10*time.Second, `!document.getElementById('join-error').hidden &&
		document.getElementById('join-error').dataset.reason === 'too_many_places' &&
		document.getElementById('joining').hidden`)
	t.Logf("notice: %q", p.eval(`document.getElementById('join-error-title').textContent`))
}
