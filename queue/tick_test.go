package queue_test

import (
	"testing"

	"github.com/waitroom/waitroom/queue"
)

// During a rolling deploy an instance reads ticks written by the release before it (no
// "v") and by the release after it (a higher "v", fields it does not know).
func TestDecodeTickAcrossVersions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, msg string
		v         int
	}{
		{"first release, no version", `{"ev":7,"tick":3,"head":5,"tail":9,"waiting":4,"now":1700000000000,"rate":5,"arate":4.5,"paused":false,"adm":[{"t":"id1","k":"tok","x":1700000300000,"s":5}],"gone":[6],"exp":["id0"]}`, 0},
		{"this release", `{"v":1,"ev":7,"tick":3,"head":5,"tail":9,"waiting":4,"now":1700000000000,"rate":5,"arate":4.5,"paused":false,"adm":[{"t":"id1","k":"tok","x":1700000300000,"s":5}],"gone":[6],"exp":["id0"]}`, 1},
		{"a later release with new fields", `{"v":9,"ev":7,"tick":3,"head":5,"tail":9,"waiting":4,"now":1700000000000,"rate":5,"arate":4.5,"paused":false,"adm":[{"t":"id1","k":"tok","x":1700000300000,"s":5,"lane":"priority"}],"gone":[6],"exp":["id0"],"sold_out":true}`, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := queue.DecodeTick([]byte(tc.msg))
			if err != nil {
				t.Fatal(err)
			}
			if m.V != tc.v || m.Ev != 7 || m.Head != 5 || m.Tail != 9 || m.Waiting != 4 || m.ARate != 4.5 ||
				len(m.Adm) != 1 || m.Adm[0] != (queue.Admission{Ticket: "id1", Token: "tok", Exp: 1700000300000, Seq: 5}) ||
				len(m.Gone) != 1 || m.Gone[0] != 6 || len(m.Exp) != 1 || m.Exp[0] != "id0" {
				t.Fatalf("decoded %+v", m)
			}
		})
	}
	if _, err := queue.DecodeTick([]byte(`{"ev":"seven"}`)); err == nil {
		t.Fatal("a malformed tick decoded without error")
	}
}
