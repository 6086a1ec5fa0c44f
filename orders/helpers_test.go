package orders_test

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
// This is the one place the package's tests sleep while polling, and it must be real time:
// what they wait for happens inside a real PostgreSQL server — a backend starting to wait
// for a row lock, a restarted server accepting connections — which no fake clock reaches,
// and goroutines blocked on its sockets are not durably blocked, so testing/synctest could
// not wait for them either.
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
