package main

import (
	"os"
	"strings"
	"sync"
	"testing"
)

// The OpenAPI check's events (a byte per checked request or response, a line per failure
// outside a test) come from every parallel test's goroutines at once; the parent's totals
// must still be exact, and each failure line whole.
func TestOpenAPIEventsExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := &specChecker{events: w}
	const senders, each = 32, 1000
	long := "f" + strings.Repeat("x", 5000) + "\n" // cut to one write below PIPE_BUF
	type result struct {
		q, r    int
		orphans []string
	}
	got := make(chan result, 1)
	go func() {
		var res result
		res.q, res.r, res.orphans = readEvents(r)
		got <- res
	}()
	var wg sync.WaitGroup
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				s.count('q')
				s.count('r')
				s.count('r')
				if j%100 == 0 {
					if i%2 == 0 {
						s.send(long)
					} else {
						s.send("fshort mismatch " + strings.Repeat("y", 50) + "\n")
					}
				}
			}
		}()
	}
	wg.Wait()
	w.Close()
	res := <-got
	if res.q != senders*each || res.r != 2*senders*each {
		t.Errorf("counted %d requests and %d responses, want %d and %d", res.q, res.r, senders*each, 2*senders*each)
	}
	if want := senders * each / 100; len(res.orphans) != want {
		t.Errorf("%d failure lines, want %d", len(res.orphans), want)
	}
	for _, o := range res.orphans {
		if o != strings.Repeat("x", 3989)+"…" && o != "short mismatch "+strings.Repeat("y", 50) {
			t.Fatalf("a failure line arrived mixed with other events: %.80q…", o)
		}
	}
}
