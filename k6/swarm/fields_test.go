package main

import (
	"testing"
	"time"
)

func TestFields(t *testing.T) {
	t.Parallel()
	b := []byte(`{"position":42,"waiting":100,"eta_seconds":null,"ticket":"x","tick":7,"server_time":"2026-01-02T03:04:05.678Z"}`)
	if v, ok := jsonInt(b, "position"); !ok || v != 42 {
		t.Fatalf("position = %d %v", v, ok)
	}
	if v, ok := jsonInt(b, "tick"); !ok || v != 7 {
		t.Fatalf("tick = %d %v (must not match ticket)", v, ok)
	}
	if _, ok := jsonInt(b, "eta_seconds"); ok {
		t.Fatal("null read as a number")
	}
	s, ok := jsonStr(b, "server_time")
	if !ok {
		t.Fatal("server_time missing")
	}
	ts, ok := parseServerTime(s)
	want := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)
	if !ok || !ts.Equal(want) {
		t.Fatalf("server_time = %v, want %v", ts, want)
	}
	if _, ok := jsonStr(b, "missing"); ok {
		t.Fatal("missing key found")
	}
}

func TestHistQuantiles(t *testing.T) {
	t.Parallel()
	var h hist
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	s := h.snapshot()
	var m histJSON
	m.merge(s)
	m.merge(s)
	if m.N != 2000 {
		t.Fatalf("n = %d", m.N)
	}
	for _, c := range []struct{ q, want float64 }{{.5, 500}, {.99, 990}, {1, 1000}} {
		got := m.quantileMS(c.q)
		if got < c.want*0.97 || got > c.want*1.03 {
			t.Errorf("q%.2f = %.1f ms, want ~%.0f", c.q, got, c.want)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:80", "http://127.3.4.5:9"} {
		if err := checkLoopbackURL(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"http://10.0.0.1:80", "http://example.com", "https://8.8.8.8", "ftp://127.0.0.1"} {
		if err := checkLoopbackURL(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestFIFOCheck(t *testing.T) {
	t.Parallel()
	// Tick 10: A at 1, B at 2, C at 3. Tick 11 admits 2 (A, B), tick 12 admits C.
	counts := map[int64]int64{11: 2, 12: 1}
	recs := []admRecord{{PosTick: 10, Pos: 1, AdmTick: 11}, {PosTick: 10, Pos: 2, AdmTick: 11}, {PosTick: 10, Pos: 3, AdmTick: 12}}
	if bad := fifoViolations(recs, counts); bad != 0 {
		t.Fatalf("violations = %d, want 0", bad)
	}
	recs = append(recs, admRecord{PosTick: 10, Pos: 4, AdmTick: 11}) // 4th in line admitted among the first 2
	if bad := fifoViolations(recs, counts); bad != 1 {
		t.Fatalf("violations = %d, want 1", bad)
	}
}
