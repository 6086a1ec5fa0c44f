package main

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestBrowserTruthLostPlace: the zero-config server (in-process Redis) is killed and started
// again on the same address, which loses the line. The buyer's page reconnects, finds its
// place gone, joins again — and says so in words with the new place, never a silent move.
func TestBrowserTruthLostPlace(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromiumBin); err != nil {
		t.Fatalf("headless Chromium is required at %s: %v", chromiumBin, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a guard, not a budget
	t.Cleanup(cancel)
	port := restartPort(t)
	// No REDIS_URL: the in-process Redis, whose line dies with the process. The demo queue is
	// made at every start, paused by a rate of 0 so the buyers wait.
	env := baseEnv("", testDB(t), withBrowserEnv(map[string]string{"WR_ADDR": "127.0.0.1:" + strconv.Itoa(port),
		"WR_DEMO": "true", "WR_DEMO_RATE": "0", "WR_HEARTBEAT": "1s"}))
	delete(env, "REDIS_URL")
	first := startProcess(t, "lost-1", env)
	for range 2 { // two buyers ahead of ours before the restart
		dropJoinAPI(t, first, "demo")
	}
	b := startBrowser(t, ctx)
	shots := newDropShots(t)
	buyer := b.open(t, "buyer")
	buyer.navigate(first.url + "/q/demo")
	buyer.waitJS("3rd in line", 15*time.Second, `document.getElementById('conn-state').dataset.state === 'live' &&
		document.getElementById('position').dataset.position === '3'`)

	first.kill()
	second := startProcess(t, "lost-2", env)
	if second.url != first.url {
		t.Fatalf("restarted at %s, want %s", second.url, first.url)
	}
	dropJoinAPI(t, second, "demo") // someone else is first in the new line
	buyer.waitJS("the lost-place message", 60*time.Second, `(() => {
		const l = document.getElementById('lost-place');
		return l && !l.hidden && document.getElementById('position').dataset.position === '2';
	})()`)
	msg := buyer.eval(`document.getElementById('lost-place').textContent.trim()`)
	t.Logf("after the restart the page says %q", msg)
	if msg != "Your place was lost when the service restarted; you have a new place: 2nd" {
		t.Fatalf("lost-place message %q", msg)
	}
	truthShots(t, shots, buyer, "lost-place")
	for _, p := range b.pages {
		p.checkConsole()
	}
}
