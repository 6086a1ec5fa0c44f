package analytics

import (
	"fmt"
	"strconv"
	"time"
)

const (
	// MaxRange is the longest history range (the minute rows' retention).
	MaxRange = 90 * 24 * time.Hour
	// MaxPoints is the most steps a history range may span.
	MaxPoints = 10000
	// defaultPoints is the most steps of a range whose step is chosen by default.
	defaultPoints = 720
)

// RangeError is a history range refused: Field is from, to or step.
type RangeError struct {
	Field   string
	Message string
}

func (e *RangeError) Error() string { return e.Field + ": " + e.Message }

// ParseRange validates a history request's from, to and step (each "" when not given) at
// now: to defaults to now, from to to − 1 h, step to the smallest multiple of 10 s that
// gives at most 720 steps, a multiple of 60 s from a minute up (at least a minute when the
// range reaches back past the 10-s rows' 48 h). Refused: an unparsable time (RFC 3339),
// from ≥ to, a range over 90 days, a step not a whole multiple of 10 s, a step of a minute
// or more that is not a whole number of minutes (steps of a minute and up are made of
// minute rows, which cannot be split), more than 10,000 steps, a step under a minute for a
// range reaching back more than 48 h.
func ParseRange(fromS, toS, stepS string, now time.Time) (from, to time.Time, step time.Duration, err error) {
	to = now
	if toS != "" {
		if to, err = time.Parse(time.RFC3339, toS); err != nil {
			return from, to, 0, &RangeError{"to", "to is not an RFC 3339 time (e.g. 2026-12-01T10:00:00Z)."}
		}
	}
	from = to.Add(-time.Hour)
	if fromS != "" {
		if from, err = time.Parse(time.RFC3339, fromS); err != nil {
			return from, to, 0, &RangeError{"from", "from is not an RFC 3339 time (e.g. 2026-12-01T09:00:00Z)."}
		}
	}
	from, to = from.UTC(), to.UTC()
	switch {
	case !from.Before(to):
		return from, to, 0, &RangeError{"from", "from must be before to."}
	case to.Sub(from) > MaxRange:
		return from, to, 0, &RangeError{"from", "The range may span at most 90 days."}
	}
	old := from.Before(now.Add(-keep10s))
	span := to.Sub(from)
	if stepS == "" {
		secs := (int64((span+defaultPoints*time.Second-1)/(defaultPoints*time.Second)) + 9) / 10 * 10
		if secs > 60 {
			secs = (secs + 59) / 60 * 60
		}
		step = time.Duration(max(secs, 10)) * time.Second
		if old && step < time.Minute {
			step = time.Minute
		}
		return from, to, step, nil
	}
	secs, perr := strconv.ParseInt(stepS, 10, 64)
	switch {
	case perr != nil || secs < 10 || secs%10 != 0:
		return from, to, 0, &RangeError{"step", "step must be a whole number of seconds, a multiple of 10 and at least 10."}
	case secs > 60 && secs%60 != 0:
		return from, to, 0, &RangeError{"step", "A step of a minute or more must be a whole number of minutes (a multiple of 60)."}
	case secs > int64(MaxRange/time.Second):
		return from, to, 0, &RangeError{"step", "step may be at most 90 days."}
	}
	step = time.Duration(secs) * time.Second
	switch {
	case (span+step-1)/step > MaxPoints:
		return from, to, 0, &RangeError{"step", fmt.Sprintf("This range and step give more than %d points; choose a longer step.", MaxPoints)}
	case old && step < time.Minute:
		return from, to, 0, &RangeError{"step", "10-second steps are kept 48 hours: a range reaching further back needs a step of at least 60."}
	}
	return from, to, step, nil
}
