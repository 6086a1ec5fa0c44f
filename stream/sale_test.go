package stream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue"
)

// Position events say paused and sold_out; while either holds there is no ETA; a random
// queue's normal line shows no place (position and ETA null, the number waiting kept),
// while its invite lanes keep their positions.
func TestPositionEventSaleFields(t *testing.T) {
	t.Parallel()
	base := line{ev: 3, tick: 9, head: 10, tail: 40, waiting: 30, rate: 10, arate: 10, share: 0.5,
		lanes: [2]laneLine{{tail: 5, waiting: 5}}}
	data := func(l line, lane uint8, pos int64) map[string]any {
		t.Helper()
		f := strings.Split(string(newLaneRenderer(&l, lane).render(pos)), "\n")
		var m map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(f[2], "data: ")), &m); err != nil {
			t.Fatalf("%q: %v", f[2], err)
		}
		return m
	}
	for _, c := range []struct {
		name     string
		mod      func(l *line)
		lane     uint8
		pos, why any
		eta      bool // a number, not null
	}{
		{"fifo", func(*line) {}, laneNormal, 4.0, nil, true},
		{"paused", func(l *line) { l.paused = true }, laneNormal, 4.0, "paused", false},
		{"sold out", func(l *line) { l.sale.soldOut = true }, laneNormal, 4.0, "sold_out", false},
		{"random", func(l *line) { l.sale.random = true }, laneNormal, nil, nil, false},
		{"random, priority lane", func(l *line) { l.sale.random = true }, lanePriority, 4.0, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := base
			c.mod(&l)
			m := data(l, c.lane, 4)
			if pos, has := m["position"]; !has || pos != c.pos || (m["eta_seconds"] != nil) != c.eta {
				t.Fatalf("position %v, eta %v; want %v, %v: %v", m["position"], m["eta_seconds"], c.pos, c.eta, m)
			}
			if m["paused"] != (c.why == "paused") || m["sold_out"] != (c.why == "sold_out") || m["waiting"] == nil {
				t.Fatalf("paused %v, sold_out %v, waiting %v: %v", m["paused"], m["sold_out"], m["waiting"], m)
			}
			if eta := l.etaOf(c.lane, 4); (eta >= 0) != c.eta {
				t.Fatalf("line ETA %v disagrees with the event's %v", eta, c.eta)
			}
		})
	}
}

// The pre-queue's size is counted live before the start and is the frozen list's after it.
func TestPrequeueSizeByPhase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		phase queue.DrawPhase
		want  int64
	}{{queue.DrawScheduled, 7}, {queue.DrawFrozen, 5}, {queue.DrawDone, 5}} {
		s := saleState{sched: queue.TickSchedule{Phase: string(c.phase), Prequeue: 7, N: 5}}
		if got := s.prequeueSize(); got != c.want {
			t.Errorf("phase %q: size %d, want %d", c.phase, got, c.want)
		}
	}
}
