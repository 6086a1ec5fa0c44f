package backoff

import (
	"context"
	"testing"
	"time"
)

func TestBackoffDoublesUpToMaxAndResets(t *testing.T) {
	t.Parallel()
	b := Backoff{Min: time.Millisecond, Max: 4 * time.Millisecond}
	ctx := context.Background()
	var got []time.Duration
	for range 4 {
		if !b.Wait(ctx) {
			t.Fatal("Wait ended early")
		}
		got = append(got, b.cur)
	}
	want := []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays after each wait %v, want %v", got, want)
		}
	}
	b.Reset()
	b.Wait(ctx)
	if b.cur != 2*time.Millisecond {
		t.Fatalf("after Reset the next delay is %v", b.cur)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if (&Backoff{Min: time.Hour, Max: time.Hour}).Wait(cctx) {
		t.Fatal("Wait on an ended context reported true")
	}
}
