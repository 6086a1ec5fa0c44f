package queue

import (
	"fmt"
	"testing"
)

func TestAssignSpreadsEvenly(t *testing.T) {
	t.Parallel()
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("event-%04d", i)
	}
	ids := []string{"wr-a1", "wr-b2", "wr-c3", "wr-d4"}
	got := assign(names, ids)
	if len(got) != len(names) {
		t.Fatalf("%d of %d queues assigned", len(got), len(names))
	}
	count := map[string]int{}
	for _, id := range got {
		count[id]++
	}
	for _, id := range ids {
		// 250 ± 15 % is the must; the bounded load gives ⌈1000/4⌉ + 2 % at most.
		if c := count[id]; c < 213 || c > 287 {
			t.Errorf("%s leads %d of 1000 queues, want 250 ± 15 %%: %v", id, c, count)
		}
	}
	t.Logf("1000 queues over 4 instances: %v", count)

	// The same inputs in another order give the same answer (every instance computes it).
	rev := append([]string(nil), names...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	again := assign(rev, []string{ids[3], ids[1], ids[0], ids[2]})
	for q, id := range got {
		if again[q] != id {
			t.Fatalf("queue %s: %s, then %s with the inputs reordered", q, id, again[q])
		}
	}

	// An instance leaving moves its own queues and few others.
	after := assign(names, ids[:3])
	moved := 0
	for q, id := range got {
		if id != ids[3] && after[q] != id {
			moved++
		}
	}
	if moved > 150 {
		t.Errorf("%d queues of the 3 remaining instances moved when the 4th left", moved)
	}
	t.Logf("4th instance left: %d of its queues moved (all), %d others moved", count[ids[3]], moved)
	if assign(names, nil) != nil {
		t.Error("no live instance: want no assignment")
	}
}
