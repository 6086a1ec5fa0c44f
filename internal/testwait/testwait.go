// Package testwait is the one place the project's tests poll in real time.
//
// What they wait for happens in real servers — Redis TIME and key TTLs, PostgreSQL backends
// waiting for a lock or starting up, instances admitting over their sockets — which no
// fake clock reaches, and goroutines blocked on sockets are not durably blocked, so
// testing/synctest could not wait for them either. Logic that only needs a clock is tested
// on synctest's fake clock instead (stream/shard_test.go).
package testwait

import (
	"testing"
	"time"
)

// pollEvery is how often For looks again.
const pollEvery = 10 * time.Millisecond

// For polls cond until it holds and fails the test, naming what it waited for, if it still
// does not after timeout. cond runs on the test's goroutine (it may call t.Fatal) and is
// checked once more after the deadline, so a test descheduled past it does not fail a
// condition that already holds.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			if cond() {
				return
			}
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pollEvery)
	}
}
