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

// For looks again after firstPoll, then each wait half as long again as the one before, up
// to maxPoll: a condition that holds soon is seen soon, and a long wait does not poll at
// 100 Hz. A poll is rarely free — a status request through an instance under the race
// detector, a script evaluated in a Chromium tab — and with eight tests waiting side by side
// the 10 ms pace this had was a few hundred requests a second of background load on 2 cores.
const (
	firstPoll = 10 * time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

// Backoff returns the wait after one of firstPoll..maxPoll (the pace of For, for loops that
// poll on their own: pass 0 first).
func Backoff(prev time.Duration) time.Duration {
	if prev <= 0 {
		return firstPoll
	}
	return min(maxPoll, prev+prev/2)
}

// For polls cond until it holds and fails the test, naming what it waited for, if it still
// does not after timeout. cond runs on the test's goroutine (it may call t.Fatal) and is
// checked once more after the deadline, so a test descheduled past it does not fail a
// condition that already holds.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	poll(t, timeout, what, cond, Backoff)
}

// Every polls cond every interval (not faster) until it holds, as For does otherwise: for a
// condition known to take seconds whose poll is dear (several /metrics pages and a
// PostgreSQL query through instances under the race detector), where For's 50-ms pace
// spent most of the test's CPU polling.
func Every(t testing.TB, interval, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	poll(t, timeout, what, cond, func(time.Duration) time.Duration { return interval })
}

// poll is For and Every: next gives the wait after the one before (0 first).
func poll(t testing.TB, timeout time.Duration, what string, cond func() bool, next func(time.Duration) time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var wait time.Duration
	for !cond() {
		if time.Now().After(deadline) {
			if cond() {
				return
			}
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		wait = next(wait)
		time.Sleep(wait)
	}
}
