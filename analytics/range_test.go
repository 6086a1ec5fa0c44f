package analytics

import (
	"errors"
	"testing"
	"time"
)

func TestParseRange(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ok := []struct {
		name, from, to, step string
		wantFrom, wantTo     time.Time
		wantStep             time.Duration
	}{
		{"defaults: the last hour in 10-s steps", "", "", "", now.Add(-time.Hour), now, 10 * time.Second},
		{"a day: 720 points of 120 s", "2026-11-30T12:00:00Z", "", "", now.Add(-24 * time.Hour), now, 120 * time.Second},
		{"a week back: minutes at least", "2026-11-24T12:00:00Z", "2026-11-24T13:00:00Z", "", now.Add(-7 * 24 * time.Hour), now.Add(-7*24*time.Hour + time.Hour), time.Minute},
		{"an explicit step", "2026-12-01T11:00:00+01:00", "", "30", now.Add(-2 * time.Hour), now, 30 * time.Second},
		{"13 hours: 65 s rounded up to whole minutes", "2026-11-30T23:00:00Z", "", "", now.Add(-13 * time.Hour), now, 120 * time.Second},
		{"90 days in minutes", "2026-09-02T12:00:00Z", "", "900", now.Add(-90 * 24 * time.Hour), now, 900 * time.Second},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			from, to, step, err := ParseRange(c.from, c.to, c.step, now)
			if err != nil || !from.Equal(c.wantFrom) || !to.Equal(c.wantTo) || step != c.wantStep {
				t.Errorf("got %v %v %v %v, want %v %v %v", from, to, step, err, c.wantFrom, c.wantTo, c.wantStep)
			}
		})
	}
	bad := []struct{ name, from, to, step, field string }{
		{"reversed", "2026-12-01T11:00:00Z", "2026-12-01T10:00:00Z", "", "from"},
		{"empty range", "2026-12-01T11:00:00Z", "2026-12-01T11:00:00Z", "", "from"},
		{"over 90 days", "2026-09-01T00:00:00Z", "", "3600", "from"},
		{"a bad from", "yesterday", "", "", "from"},
		{"a bad to", "", "2026-12-01 10:00", "", "to"},
		{"step 5", "", "", "5", "step"},
		{"step 15", "", "", "15", "step"},
		{"step 90: not whole minutes", "", "", "90", "step"},
		{"step not a number", "", "", "1m", "step"},
		{"too many points", "2026-11-29T12:00:00Z", "", "10", "step"},
		{"10-s steps past 48 h", "2026-11-28T12:00:00Z", "2026-11-28T13:00:00Z", "10", "step"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := ParseRange(c.from, c.to, c.step, now)
			var re *RangeError
			if !errors.As(err, &re) || re.Field != c.field || re.Message == "" {
				t.Errorf("error %v, want a RangeError on %s", err, c.field)
			}
		})
	}
}

func TestHistogramQuantiles(t *testing.T) {
	t.Parallel()
	var h histogram
	if _, ok := h.quantile(0.5); ok {
		t.Error("an empty histogram has a quantile")
	}
	cases := []struct {
		name    string
		samples []float64
		q, want float64
	}{
		{"within one bucket, linear", []float64{3, 3, 3, 3}, 0.5, 3.5}, // (2, 5]: 2 + 3 × 2/4
		{"the first bucket starts at 0", []float64{0.1, 0.2}, 1, 0.5},
		{"+Inf answers its lower bound", []float64{5000}, 0.5, 3600},
		{"a bound belongs to its bucket", []float64{10}, 1, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h histogram
			for _, s := range c.samples {
				h.add(s)
			}
			if got, ok := h.quantile(c.q); !ok || got != c.want {
				t.Errorf("q%v = %v, want %v", c.q, got, c.want)
			}
		})
	}
	if got := exactQuantile([]float64{5, 1, 4, 2, 3}, 0.5); got != 3 {
		t.Errorf("exact p50 %v, want 3", got)
	}
	if got := exactQuantile([]float64{5, 1, 4, 2, 3}, 0.95); got != 5 {
		t.Errorf("exact p95 %v, want 5", got)
	}
}
