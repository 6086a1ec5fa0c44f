package main

import (
	"bufio"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second} {
		for range 200 {
			d := backoff(n)
			if d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, want/2, want)
			}
		}
	}
	for range 200 {
		if d := retryDelay(2); d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("retryDelay(2) = %v, want 2–4 s", d)
		}
		if d := retryDelay(0); d < time.Second || d > 2*time.Second {
			t.Fatalf("retryDelay(0) = %v, want 1–2 s (at least 1 s)", d)
		}
		if d := retryDelay(10); d < 10*time.Second || d > 13*time.Second {
			t.Fatalf("retryDelay(10) = %v, want 10–13 s (jitter at most 3 s)", d)
		}
	}
}

func TestReconnPositionErrors(t *testing.T) {
	t.Parallel()
	// Ticks 5 and 6 admit 2 and 3.
	counts := map[int64]int64{5: 2, 6: 3, 9: 1}
	recs := []reconnRecord{
		{PrevTick: 4, PrevPos: 10, Tick: 6, Pos: 5},         // 10 − 5 = 5: exact
		{PrevTick: 5, PrevPos: 10, Tick: 6, Pos: 7},         // 10 − 3 = 7: exact
		{PrevTick: 4, PrevPos: 10, Tick: 6, Pos: 6},         // wrong
		{PrevTick: 4, PrevPos: 3, Tick: 6, Pos: 1, Adm: 6},  // admitted by then: the server says 1, skipped
		{PrevTick: 6, PrevPos: 8, Tick: 8, Pos: 8},          // nothing admitted between: exact
		{PrevTick: 6, PrevPos: 8, Tick: 9, Pos: 8, Adm: 12}, // tick 9 admitted one: wrong
	}
	wrong, checked := reconnPositionErrors(recs, counts)
	if wrong != 2 || checked != 5 {
		t.Fatalf("wrong %d, checked %d; want 2 of 5", wrong, checked)
	}
}

func TestAdmittedRows(t *testing.T) {
	t.Parallel()
	ttl := 300 * time.Second
	rows := map[string]string{
		"w1": "w:17",
		"a1": "a:12:tok-a:1800000300000:41",
		"e1": "e:13:tok-e:1800000300000:42",
		"u1": "u:14:tok-u:1800000300000:req",
		"x1": "garbage",
	}
	got := admittedRows(rows, ttl)
	if len(got) != 3 {
		t.Fatalf("got %d admitted rows, want 3: %v", len(got), got)
	}
	a := got["a1"]
	if a.Token != "tok-a" || a.Tick != 41 || !a.Issued.Equal(time.UnixMilli(1800000000000)) {
		t.Fatalf("a1 = %+v", a)
	}
	if got["e1"].Tick != 42 || got["u1"].Token != "tok-u" || got["u1"].Tick != 0 {
		t.Fatalf("e1 = %+v, u1 = %+v", got["e1"], got["u1"])
	}
}

func TestReadRESP(t *testing.T) {
	t.Parallel()
	in := "*4\r\n$2\r\nk1\r\n$5\r\nv:1:2\r\n$2\r\nk2\r\n$-1\r\n"
	v, err := readRESP(bufio.NewReader(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 4 || arr[1] != "v:1:2" || arr[3] != nil {
		t.Fatalf("got %#v", v)
	}
	if _, err := readRESP(bufio.NewReader(strings.NewReader("-ERR nope\r\n"))); err == nil {
		t.Fatal("an error reply must be an error")
	}
	if v, _ := readRESP(bufio.NewReader(strings.NewReader(":42\r\n"))); v != int64(42) {
		t.Fatalf("integer: %#v", v)
	}
}

func TestPickTarget(t *testing.T) {
	t.Parallel()
	c := &child{hostports: []string{"a", "b", "c"}, downUntil: make([]atomic.Int64, 3)}
	c.markDown(1)
	for range 100 {
		if got := c.pickTarget(0); got != 2 {
			t.Fatalf("pickTarget(0) = %d with 1 down, want 2", got)
		}
	}
	c.markDown(2)
	for range 100 {
		if got := c.pickTarget(0); got == 0 {
			t.Fatal("with every other target down, still another one, not the current")
		}
	}
	one := &child{hostports: []string{"a"}, downUntil: make([]atomic.Int64, 1)}
	if got := one.pickTarget(0); got != 0 {
		t.Fatalf("one target: %d", got)
	}
}

func TestParseStormFlags(t *testing.T) {
	t.Parallel()
	base := []string{"-mode", "storm", "-targets", "http://127.0.0.1:1,http://127.0.0.1:2", "-n", "10"}
	if _, err := parseFlags(base); err == nil {
		t.Fatal("storm without -pids must be refused")
	}
	if _, err := parseFlags(append(base, "-pids", "100,101", "-kill", "leader")); err == nil {
		t.Fatal("-kill leader without -instance-ids and -redis must be refused")
	}
	o, err := parseFlags(append(base, "-pids", "100,101", "-kill", "2"))
	if err != nil || o.PIDs[1] != 101 {
		t.Fatalf("valid storm flags: %v %+v", err, o.PIDs)
	}
	if _, err := parseFlags(append(base, "-pids", "100,101", "-kill", "3")); err == nil {
		t.Fatal("-kill beyond the targets must be refused")
	}
	f, err := parseFlags([]string{"-mode", "flood", "-n", "10", "-partial", `GET / HTTP/1.1\r\nHost: x\r\n`})
	if err != nil || f.Partial != "GET / HTTP/1.1\r\nHost: x\r\n" {
		t.Fatalf("flood -partial escapes: %v %q", err, f.Partial)
	}
	if _, err := parseFlags([]string{"-mode", "flood", "-n", "10", "-partial", `GET / HTTP/1.1\r\n\r\n`}); err == nil {
		t.Fatal("a finished request is no flood")
	}
}
