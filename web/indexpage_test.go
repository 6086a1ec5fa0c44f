package web

import (
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
)

func TestIndexStatePrecedence(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	sched := func(s queue.Settings) queue.Settings {
		s.DrawPhase, s.StartsAt = queue.DrawScheduled, at(time.Hour)
		return s
	}
	cases := []struct {
		name string
		st   queue.Settings
		want string
	}{
		{"open", queue.Settings{}, "open"},
		{"paused", queue.Settings{Paused: true}, "paused"},
		{"scheduled", sched(queue.Settings{}), "scheduled"},
		{"scheduled beats paused", sched(queue.Settings{Paused: true}), "scheduled"},
		{"a start that passed is open (the next join draws)", queue.Settings{DrawPhase: queue.DrawScheduled, StartsAt: at(-time.Second)}, "open"},
		{"drawing is open", queue.Settings{DrawPhase: queue.DrawFrozen, StartsAt: at(-time.Second)}, "open"},
		{"sold out", queue.Settings{SoldOut: true}, "sold_out"},
		{"sold out beats scheduled", sched(queue.Settings{SoldOut: true}), "sold_out"},
		{"closed", queue.Settings{Closed: true}, "closed"},
		{"reject is closed", queue.Settings{Method: queue.MethodReject}, "closed"},
		{"closed beats sold out", queue.Settings{Closed: true, SoldOut: true}, "closed"},
		{"ended flag", queue.Settings{Ended: true}, "ended"},
		{"ends_at passed", queue.Settings{EndsAt: at(-time.Millisecond)}, "ended"},
		{"ends_at now", queue.Settings{EndsAt: at(0)}, "ended"},
		{"ends_at ahead", queue.Settings{EndsAt: at(time.Second)}, "open"},
		{"ended beats closed and reject", queue.Settings{EndsAt: at(-time.Minute), Closed: true, Method: queue.MethodReject}, "ended"},
	}
	for _, c := range cases {
		if got := IndexState(c.st, now); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestIndexListsEndedForADay(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	for _, c := range []struct {
		st   queue.Settings
		want bool
	}{
		{queue.Settings{EndsAt: at(-time.Minute)}, true},
		{queue.Settings{EndsAt: at(-23 * time.Hour)}, true},
		{queue.Settings{EndsAt: at(-24 * time.Hour)}, false},
		{queue.Settings{Ended: true}, false}, // no ends_at left to date it
		{queue.Settings{Closed: true}, true},
	} {
		if got := indexListed(c.st, IndexState(c.st, now), now); got != c.want {
			t.Errorf("%+v: listed %v, want %v", c.st, got, c.want)
		}
	}
}

func TestPollEvery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rate float64
		want int
	}{{0, 1}, {-1, 1}, {2, 1}, {1, 1}, {0.5, 2}, {0.3, 4}, {100, 1}} {
		if got := pollEvery(c.rate); got != c.want {
			t.Errorf("pollEvery(%v) = %d, want %d", c.rate, got, c.want)
		}
	}
}
