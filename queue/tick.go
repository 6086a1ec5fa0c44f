package queue

import (
	"encoding/json"
	"fmt"
)

// TickVersion is the version of the tick message this build writes (field "v"). A
// message without "v" is version 0; it has the same fields.
// Readers accept every version up to TickVersion and ignore fields they do not know, so
// during a rolling deploy old and new instances read each other's ticks; a change that
// old readers cannot ignore needs a new version and one release in which both are written.
const TickVersion = 1

// Tick is the message the admission leader publishes once per tick of one queue (see
// admit.lua, which writes it): enough for every instance to advance its copy of the line
// and to hand the tokens to its own streams. Pub/sub is at-most-once; Ev numbers the
// messages so a reader that sees a gap resyncs from Snapshot.
type Tick struct {
	V       int         `json:"v"`       // message version (0: absent)
	Ev      int64       `json:"ev"`      // event number, +1 per published message
	Tick    int64       `json:"tick"`    // admission tick number
	Head    int64       `json:"head"`    // highest sequence admitted
	Tail    int64       `json:"tail"`    // highest sequence handed out
	Waiting int64       `json:"waiting"` // users still waiting after this tick
	Now     int64       `json:"now"`     // Redis TIME of the tick, Unix ms
	Rate    float64     `json:"rate"`    // configured users/s
	ARate   float64     `json:"arate"`   // measured users/s (moving average)
	Paused  bool        `json:"paused"`
	Adm     []Admission `json:"adm"`  // tickets admitted by this tick
	Gone    []int64     `json:"gone"` // sequences that left (leave, abandonment) since the last message
	Exp     []string    `json:"exp"`  // tickets whose token lapsed unused
	// Lanes are the invite lanes' lines, present once a lane has been used in the queue
	// (absent: no lane has had a waiter, or the leader does not know lanes — a reader then
	// keeps its lanes as they were). Head, Tail, Waiting and Gone above are the normal
	// line's only. A field of version 1 that readers without it ignore.
	Lanes *TickLanes `json:"lanes,omitempty"`
	// Drop day, fields of version 1 that readers without them ignore: the schedule while the
	// queue has one; sold out; the method when not fifo; the end of the sale.
	Sched   *TickSchedule `json:"sched,omitempty"`
	SoldOut bool          `json:"so,omitempty"`
	Method  string        `json:"m,omitempty"`
	Ended   bool          `json:"end,omitempty"`
	// Real is what was really admitted per second over about the last 5 s (0 while paused or
	// empty); ARate is the ETA's estimate. Absent from a leader that does not measure it.
	Real *float64 `json:"real,omitempty"`
}

// TickSchedule is a scheduled queue's state in a tick message.
type TickSchedule struct {
	Starts   int64  `json:"starts"` // the start, Unix ms
	Prequeue int64  `json:"pq"`     // the pre-queue's size (before the start)
	Phase    string `json:"phase"`  // "s" scheduled, "f" drawing, "d" drawn (DrawPhase)
	// The sequences the draw gives: Base+1 … Base+N (known from the start).
	Base int64 `json:"base"`
	N    int64 `json:"n"`
}

// TickLanes is the invite lanes' part of a tick message.
type TickLanes struct {
	Share float64 `json:"share"` // the queue's priority_share at this tick
	// P (priority) and B (bypass): absent while that lane has never had a waiter.
	P *LaneState `json:"p,omitempty"`
	B *LaneState `json:"b,omitempty"`
}

// Admission is one ticket admitted by a tick.
type Admission struct {
	Ticket string `json:"t"`
	Token  string `json:"k"`
	Exp    int64  `json:"x"` // token expiry, Unix ms
	Seq    int64  `json:"s"`
	// IssuedAt is the admission time, Unix ms (the token's iat); 0 from a leader that does
	// not record it (see IssuedAt).
	IssuedAt int64 `json:"i"`
	// Lane is the line the ticket was admitted from: "p" priority, "b" bypass, absent for
	// the normal line (Seq is then a sequence of that lane; see LaneOf).
	Lane string `json:"l,omitempty"`
}

// DecodeTick parses a tick message of any version (newer versions only add fields, which
// this build ignores).
func DecodeTick(b []byte) (Tick, error) {
	var m Tick
	if err := json.Unmarshal(b, &m); err != nil {
		return Tick{}, fmt.Errorf("decode tick: %w", err)
	}
	return m, nil
}
