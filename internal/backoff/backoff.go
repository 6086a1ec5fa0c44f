// Package backoff is the exponential back-off of the loops that re-read a Redis connection
// after an error (the tick feed, the wake channel).
package backoff

import (
	"context"
	"time"
)

// Backoff is a delay that doubles after every Wait up to Max and starts again at Min after
// Reset. The zero value is unusable; set Min and Max.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Reset starts the delay again at Min (after a success).
func (b *Backoff) Reset() { b.cur = 0 }

// Wait sleeps the current delay, then doubles it; it reports false when ctx ended first.
func (b *Backoff) Wait(ctx context.Context) bool {
	if b.cur < b.Min {
		b.cur = b.Min
	}
	t := time.NewTimer(b.cur)
	defer t.Stop()
	b.cur = min(2*b.cur, b.Max)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
