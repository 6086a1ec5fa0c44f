package stream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// TestLinePositionsMatchRedis is the property behind live positions: random joins,
// leaves and admissions, and after every tick each instance's locally computed position
// of every waiting ticket equals its ZRANK + 1 in Redis. Instance a follows from the
// start; instance b starts from a snapshot halfway, as a new instance would.
func TestLinePositionsMatchRedis(t *testing.T) { linePositionsProperty(t, "prop", 1, 2, -1) }

func receiveTick(t *testing.T, feed *queue.Feed) queue.Tick {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ev, err := feed.Receive(ctx)
	if err != nil || ev.Kind != queue.FeedTick {
		t.Fatalf("receive: %+v, %v", ev, err)
	}
	return ev.Tick
}

func TestParseLastEventID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", 0, false}, {"0", 0, true}, {"42", 42, true}, {"-1", 0, false}, {"abc", 0, false},
		{"99999999999999999999", 0, false}, {"4611686018427387904", 0, false}, {" 1", 0, false},
	} {
		got, ok := ParseLastEventID(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseLastEventID(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseLastEventID(f *testing.F) {
	for _, s := range []string{"", "0", "17", "-3", "1e9", "９", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseLastEventID(s)
		if ok && (n < 0 || n >= 1<<62) {
			t.Fatalf("accepted %q as %d", s, n)
		}
		if !ok && n != 0 {
			t.Fatalf("rejected %q but returned %d", s, n)
		}
	})
}

func TestPositionRendererIsValidJSON(t *testing.T) {
	t.Parallel()
	for _, l := range []line{
		{ev: 7, tick: 42, waiting: 100, rate: 5, arate: 4.567},
		{ev: 1, tick: 1, waiting: 3, rate: 2.5, paused: true},
		{ev: 9, tick: 2, waiting: 1, rate: 0, arate: 0},
	} {
		b := newPositionRenderer(&l).render(3)
		s := string(b)
		if !strings.HasPrefix(s, "id: ") || !strings.HasSuffix(s, "\n\n") {
			t.Fatalf("frame %q", s)
		}
		data := strings.TrimPrefix(strings.Split(s, "\n")[2], "data: ")
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		for _, k := range []string{"position", "waiting", "eta_seconds", "rate_per_second", "admit_rate", "server_time", "tick"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("%q lacks %s", data, k)
			}
		}
		if m["position"] != 3.0 || (l.paused && (m["eta_seconds"] != nil || m["rate_per_second"] != 0.0)) {
			t.Fatalf("%q for %+v", data, l)
		}
		if !l.paused && l.rate > 0 && m["eta_seconds"] == nil {
			t.Fatalf("%q: no ETA for a running queue", data)
		}
	}
}
