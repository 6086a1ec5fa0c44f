package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// TestBrowserStreamCapBackToStream: the embeddable client under the per-address stream cap
// (WR_STREAMS_PER_IP=1, the one stream held by another client of 127.0.0.1): the refused
// stream is told apart by HEAD (429 too_many_streams), the room polls /status at the 429's
// Retry-After and its position follows the line, and once the other stream closes the room
// goes back to the stream by itself (onPolling false, live), leaving one stream open.
func TestBrowserStreamCapBackToStream(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromiumBin); err != nil {
		t.Fatalf("headless Chromium is required at %s: %v", chromiumBin, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	rs := redistest.Start(t)
	in := startInProcess(t, "cap", tolerantEnv(rs.URL(), testDB(t), map[string]string{
		"WR_HEARTBEAT": "1s", "WR_STREAMS_PER_IP": "1",
	}))
	mustAdmin(t, in, "PUT", "/admin/api/queues/sc", map[string]any{"rate_per_second": 1, "paused": true})
	ahead := dropJoinAPI(t, in, "sc")
	held, res := openStream(t, in.url+"/api/queues/sc/stream", ahead.Ticket, "")
	if held == nil {
		t.Fatalf("the first stream: %v", res)
	}
	// The cap as the API answers it: 429 too_many_streams, scope ip, Retry-After 1 (the status
	// limit is off in the tests: 1 s), for GET and for HEAD alike.
	other := dropJoinAPI(t, in, "sc")
	var er errResp
	if res := call(t, "GET", in.url+"/api/queues/sc/stream", other.Ticket, nil, &er); res.StatusCode != 429 ||
		er.Error.Code != "too_many_streams" || res.Header.Get("X-RateLimit-Scope") != "ip" || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("a second stream: %d %+v Retry-After %q", res.StatusCode, er, res.Header.Get("Retry-After"))
	}
	if res := call(t, "HEAD", in.url+"/api/queues/sc/stream", other.Ticket, nil, nil); res.StatusCode != 429 ||
		res.Header.Get("X-RateLimit-Scope") != "ip" || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("HEAD of a second stream: %d", res.StatusCode)
	}
	call(t, "DELETE", in.url+"/api/queues/sc/ticket", other.Ticket, nil, nil)

	b := startBrowser(t, ctx)
	p := b.open(t, "room")
	p.navigate(in.url + "/q/no-such-queue") // a page of this origin with waitroom.js and no room of its own
	p.eval(`(() => {
		window.__log = [];
		window.__room = WaitRoom.join({ queue: 'sc', streamRetryMs: 1000,
			onPolling(x) { __log.push('polling:' + x.polling + (x.polling ? ':' + x.interval_ms + ':' + x.reason : '')); },
			onPosition(x) { window.__pos = x.position; },
			onState(s) { window.__state = s; } });
		return '';
	})()`)
	p.waitJS("polling at 1 s for the cap, 2nd in line", 30*time.Second, `__log[0] === 'polling:true:1000:too_many_streams' && __pos === 2 && __state === 'live'`)
	call(t, "DELETE", in.url+"/api/queues/sc/ticket", dropJoinAPI(t, in, "sc").Ticket, nil, nil) // a place behind: nothing moves
	call(t, "DELETE", in.url+"/api/queues/sc/ticket", ahead.Ticket, nil, nil)                    // the first place leaves
	p.waitJS("the polled position moves up", 30*time.Second, `__pos === 1 && __log.length === 1`)

	held.close()
	p.waitJS("back on the stream", 30*time.Second, `__log[__log.length - 1] === 'polling:false' && __state === 'live' && __pos === 1`)
	testwait.For(t, 30*time.Second, "one stream open (the room's)", func() bool { return badStreams(t, in) == 1 })
	p.eval(`(() => { __room.close(); return ''; })()`)
	p.checkConsole()
}
