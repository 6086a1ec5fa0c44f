package stream_test

import (
	"testing"
	"time"
)

// pollEvery is how often waitFor looks again.
const pollEvery = 10 * time.Millisecond

// waitFor polls cond until it holds and fails the test, naming what it waited for, if it
// still does not after timeout. cond runs on the test's goroutine (it may call t.Fatal)
// and is checked once more after every sleep, so a test descheduled past the deadline does
// not fail a condition that already holds.
//
// This is the one place the hub tests (hub_test.go) sleep while polling, and it must be
// real time: their hub runs against a real redis-server (admissions by Redis TIME, a
// subscriber blocked on a socket), which testing/synctest can neither fake nor wait for.
// The writers' timing itself is proved on a fake clock, in shard_test.go.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pollEvery)
	}
}
