package web

import (
	"context"
	"slices"

	"github.com/waitroom/waitroom/static"
)

// The zero-config demo's queues (docs/API.md "Demo data"). The server makes them when
// WR_DEMO is on; the pages introduce them by name: the index says in a sentence what each
// line is, and each one's waiting page says it too and links to the other.
const (
	// DemoQueue is the demo's empty line: a visitor goes straight in.
	DemoQueue = "demo"
	// CrowdQueue is the demo's line with a simulated crowd ahead of the visitor (package
	// crowd keeps it).
	CrowdQueue = "demo-crowd"
)

// demoNote is the index's sentence about queue name: what a demo line is ("" for every
// other queue).
func demoNote(name string, t map[string]string) string {
	switch name {
	case DemoQueue:
		return t["index_demo_empty"]
	case CrowdQueue:
		return t["index_demo_crowd"]
	}
	return ""
}

// demoPage fills in the demo part of queue name's waiting page: which demo line it is and,
// when the other one exists, the link to it. Whether it exists is read from the shared
// snapshot (snapshot.go), as the index reads it: the page costs no Redis command more than
// any other queue's; when the snapshot cannot be read the page goes without the link.
func (s *Server) demoPage(ctx context.Context, name string, data *static.QueuePage) {
	var other string
	switch name {
	case DemoQueue:
		data.Demo, other = static.DemoEmpty, CrowdQueue
	case CrowdQueue:
		data.Demo, other = static.DemoCrowd, DemoQueue
	default:
		return
	}
	v, err := s.snapshotView(ctx, false, ownNone)
	if err != nil {
		return
	}
	if slices.ContainsFunc(v.entries, func(e snapEntry) bool { return e.name == other }) {
		data.DemoSwitch = "/q/" + other
	}
}
