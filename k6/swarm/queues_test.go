package main

import (
	"reflect"
	"testing"
)

func TestQueuesFlags(t *testing.T) {
	t.Parallel()
	o, err := parseFlags([]string{"-mode", "stream", "-queue", "q", "-queues", "20", "-n", "20000",
		"-redis", "127.0.0.1:7001, 127.0.0.1:7002,127.0.0.1:7003", "-redis-replicas", "127.0.0.1:7004"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Procs != 20 {
		t.Errorf("procs %d, want 20 (one queue per process)", o.Procs)
	}
	if want := []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}; !reflect.DeepEqual(o.RedisAddrs, want) || o.Redis != want[0] {
		t.Errorf("redis %v / %q", o.RedisAddrs, o.Redis)
	}
	if len(o.RedisRepl) != 1 {
		t.Errorf("replicas %v", o.RedisRepl)
	}
	names := queueNames(o)
	if len(names) != 20 || names[0] != "q-0001" || names[19] != "q-0020" {
		t.Errorf("names %v", names)
	}
	o, err = parseFlags([]string{"-mode", "stream", "-queue", "q", "-queues", "3", "-n", "40000", "-per-proc", "15000"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Procs != 3 {
		t.Errorf("procs %d, want 3", o.Procs)
	}
	if got := queueNames(options{Queue: "q", Mode: "stream"}); !reflect.DeepEqual(got, []string{"q"}) {
		t.Errorf("one queue: %v", got)
	}
	if _, err := parseFlags([]string{"-mode", "idlequeues", "-queues", "0", "-redis", "127.0.0.1:1", "-admin-token", "x"}); err != nil {
		t.Errorf("idlequeues -queues 0: %v", err)
	}
	if _, err := parseFlags([]string{"-mode", "spread", "-queues", "0", "-redis", "127.0.0.1:1", "-admin-token", "x"}); err == nil {
		t.Error("spread -queues 0 accepted")
	}
	if _, err := parseFlags([]string{"-redis", "10.0.0.1:6379"}); err == nil {
		t.Error("a non-loopback -redis accepted")
	}
}

func TestFIFOPerQueue(t *testing.T) {
	t.Parallel()
	r := &run{o: options{Mode: "stream", Queue: "q", Queues: 2}}
	// Both queues admit at their own tick 5; mixed together their records would disagree.
	res := []childResult{
		{Index: 0, Queue: "q-0001", AdmCounts: map[int64]int64{5: 1}, AdmRecs: []admRecord{{PosTick: 4, Pos: 1, AdmTick: 5}}},
		{Index: 1, Queue: "q-0002", AdmCounts: map[int64]int64{5: 1}, AdmRecs: []admRecord{{PosTick: 4, Pos: 1, AdmTick: 5}}},
	}
	rep := r.report(connectedMsg{}, memory{}, res, map[string]float64{"q-0001": 1, "q-0002": 1})
	if rep.Checks.FIFOViolations != 0 || !rep.Checks.FIFOComplete || rep.Checks.FIFORecords != 2 {
		t.Errorf("checks %+v", rep.Checks)
	}
	rep = r.report(connectedMsg{}, memory{}, res, map[string]float64{"q-0001": 1, "q-0002": 2})
	if rep.Checks.FIFOComplete {
		t.Errorf("a queue with an unseen admission called complete: %+v", rep.Checks)
	}
}
