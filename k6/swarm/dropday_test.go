package main

import (
	"reflect"
	"testing"
)

func TestPermutationOf(t *testing.T) {
	t.Parallel()
	const t0 = 1000
	rec := func(pos int64, at int64) dropRec { return dropRec{Pos: pos, PosAt: at} }
	t.Run("ok", func(t *testing.T) {
		pc := permutationOf([]dropRec{rec(2, t0+1), rec(1, t0+5), rec(3, t0)}, t0, 3)
		if !pc.OK || pc.Received != 3 || pc.Distinct != 3 {
			t.Fatalf("%+v", pc)
		}
	})
	t.Run("duplicates, missing, out of range, null, before the call", func(t *testing.T) {
		recs := []dropRec{rec(1, t0+1), rec(1, t0+2), rec(9, t0+3), {PosNull: true, PosAt: t0 + 4}, rec(3, t0-1), {}}
		pc := permutationOf(recs, t0, 4)
		want := &permCheck{Expected: 4, Received: 4, Distinct: 1, Duplicates: 1, Missing: 3, OutOfRange: 1, Null: 1,
			DuplicateSample: []int64{1}, MissingSample: []int64{2, 3, 4}, missing: []int64{2, 3, 4}}
		if !reflect.DeepEqual(pc, want) {
			t.Fatalf("got %+v\nwant %+v", pc, want)
		}
	})
}

func TestPermutationExplain(t *testing.T) {
	t.Parallel()
	const t0 = 1000
	recs := []dropRec{
		{Pos: 1, PosAt: t0 + 1, First: evPrequeue, DrawID: "a"},
		{First: evPrequeue, EndAt: t0 - 5, DrawID: "b"}, // stream ended before the start
		{DrawID: "c"},                    // stream never opened
		{First: evPrequeue, DrawID: "d"}, // open, got nothing: a real miss
	}
	pc := permutationOf(recs, t0, 5)
	pc.explain(recs, t0, []string{"a", "B", "c", "d"}) // place 5 has no line
	if pc.Missing != 4 || pc.MissingNoStream != 2 || pc.MissingOpen != 1 || pc.MissingUnknown != 1 || pc.OKOpen {
		t.Fatalf("%+v", pc)
	}
	recs = recs[:3]
	pc = permutationOf(recs, t0, 3)
	pc.explain(recs, t0, []string{"a", "b", "c"})
	if pc.OK || !pc.OKOpen || pc.MissingNoStream != 2 {
		t.Fatalf("%+v", pc)
	}
}

func TestOrderCheckOf(t *testing.T) {
	t.Parallel()
	order := []string{"AA", "bb", "cc"}
	recs := []dropRec{
		{Pos: 1, PosAt: 10, DrawID: "aa"}, // rank 1: right
		{Pos: 3, PosAt: 10, DrawID: "bb"}, // rank 2: wrong
		{Pos: 3, PosAt: 10, DrawID: "dd"}, // not in the order
		{Pos: 2, PosAt: 10},               // no draw_id
		{Pos: 3, PosAt: 1, DrawID: "cc"},  // before the call: not checked
	}
	oc := orderCheckOf(recs, 5, order, "")
	if oc.Lines != 3 || oc.Checked != 2 || oc.Mismatched != 1 || oc.Unknown != 1 || oc.Note == "" {
		t.Fatalf("%+v", oc)
	}
	if oc := orderCheckOf(recs, 5, nil, "404"); oc.Note != "404" || oc.Checked != 0 {
		t.Fatalf("%+v", oc)
	}
}

func TestEventKind(t *testing.T) {
	t.Parallel()
	for ev, want := range map[string]uint8{"prequeue": evPrequeue, "position": evPosition, "sold_out": evOther, "ping": evOther} {
		if got := eventKind([]byte(ev)); got != want {
			t.Errorf("%s: %d, want %d", ev, got, want)
		}
	}
}

func TestFindNamed(t *testing.T) {
	t.Parallel()
	v := map[string]any{"queues": []any{map[string]any{"name": "a", "waiting": 1.0}, map[string]any{"name": "b", "prequeue": 7.0}}}
	if m := findNamed(v, "b"); m == nil || m["prequeue"] != 7.0 {
		t.Fatalf("%v", m)
	}
	if m := findNamed(v, "c"); m != nil {
		t.Fatalf("%v", m)
	}
}
