package queue

import (
	"strconv"
	"strings"
)

// State is where a ticket stands, as Place.State and the public "state" field say it.
type State string

// Ticket states.
const (
	StateWaiting  State = "waiting"  // has a place in line
	StateAdmitted State = "admitted" // holds a live admission token
	StateExpired  State = "expired"  // its token lapsed unused; it must join again
	StateUsed     State = "used"     // its token bought something
	// StatePrequeue: joined a scheduled queue before its start; its place is drawn at the
	// start (schedule.go).
	StatePrequeue State = "prequeue"
)

// storedState is a ticket's value in the queue's tickets hash. The format is read and
// written by this file and by the Lua scripts (join.lua, leave.lua, admit.lua,
// token.lua), and by instances of two releases side by side during a rolling deploy, so it
// only ever gains fields at the end (docs/UPGRADING.md, mixed versions):
//
//	"<code>:<seq>[:<token>:<exp_ms>:<extra>[:<iat_ms>[:<lane>]]]"
//
// code w (waiting), a (admitted; extra = the admission tick, iat_ms = the admission time,
// absent when a leader without signed tokens admitted it), e (expired unused; as a), u (used
// by an order; extra = the request key that used it). A reader without signed tokens splits
// at most five fields, so it sees "tick:iat" as extra and falls back to the line's tick.
//
// Pre-queue (scheduled queues): "q:<n>" — code q, n the member's join number in the
// pre-queue; the draw replaces it with "w:<seq>". An instance without schedules reads no
// known state from it (it is not waiting there), which is why a scheduled queue needs every
// instance on a release that knows schedules (docs/UPGRADING.md).
//
// Lanes (invites): a waiter of the priority or bypass line is "w:<seq>:::<lane>" — code w,
// seq its number in that lane's own sequence, token and exp empty, and the lane letter
// (p or b) in the fifth field (extra), which no other reader of a waiting state uses. An
// instance without lanes therefore reads a waiter (no crash, no refusal); it computes its
// position in the normal line from the lane's sequence, which is wrong there, and it does
// not admit from the lanes. When such a ticket is admitted the lane is kept as a seventh
// field ("a:<seq>:<token>:<exp>:<tick>:<iat>:p", so also in "e…"); readers that split
// fewer fields see it glued to iat_ms, which only a reader without signed tokens reads (and
// ignores, as said above). A normal place's state has no lane field.
type storedState struct {
	code  byte
	seq   int64
	token string
	exp   int64
	extra string
	iat   int64
	laneC byte // 0 normal, laneP, laneB
}

// Codes of storedState.
const (
	codeWaiting  = 'w'
	codeAdmitted = 'a'
	codeExpired  = 'e'
	codeUsed     = 'u'
	codePrequeue = 'q'
)

// Lane letters in stored states, keys and tick messages.
const (
	laneP byte = 'p' // priority
	laneB byte = 'b' // bypass
)

// laneOf maps a lane letter ("p", "b", "" for normal) to its Lane.
func laneOf(s string) Lane {
	switch s {
	case "p":
		return LanePriority
	case "b":
		return LaneBypass
	}
	return LaneNormal
}

// LaneOf is the Lane of a lane letter as tick messages carry it (Admission.Lane): "p",
// "b", or "" (the normal line).
func LaneOf(letter string) Lane { return laneOf(letter) }

// LaneLetter is the letter lane l is stored under (in keys, stored states, tick messages and
// invite codes' values): "p", "b", or "" for the normal line. It is the inverse of LaneOf.
func LaneLetter(l Lane) string {
	switch l {
	case LanePriority:
		return string(laneP)
	case LaneBypass:
		return string(laneB)
	}
	return ""
}

func parseState(s string) storedState {
	f := strings.SplitN(s, ":", 7)
	var st storedState
	if len(f[0]) == 1 {
		st.code = f[0][0]
	}
	if len(f) > 1 {
		st.seq, _ = strconv.ParseInt(f[1], 10, 64)
	}
	if len(f) > 2 {
		st.token = f[2]
	}
	if len(f) > 3 {
		st.exp, _ = strconv.ParseInt(f[3], 10, 64)
	}
	if len(f) > 4 {
		st.extra = f[4]
	}
	if len(f) > 5 {
		st.iat, _ = strconv.ParseInt(f[5], 10, 64)
	}
	switch {
	case st.code == codeWaiting && len(st.extra) == 1:
		st.laneC = st.extra[0]
	case (st.code == codeAdmitted || st.code == codeExpired) && len(f) > 6 && len(f[6]) == 1:
		st.laneC = f[6][0]
	}
	if st.laneC != laneP && st.laneC != laneB {
		st.laneC = 0
	}
	return st
}

// lane is the line the ticket waits or waited in.
func (st storedState) lane() Lane {
	if st.laneC == 0 {
		return LaneNormal
	}
	return laneOf(string(st.laneC))
}

// state is the public state of a stored ticket (an admitted one is not checked for
// expiry here).
func (st storedState) state() State {
	switch st.code {
	case codeWaiting:
		return StateWaiting
	case codeAdmitted:
		return StateAdmitted
	case codeExpired:
		return StateExpired
	case codeUsed:
		return StateUsed
	case codePrequeue:
		return StatePrequeue
	}
	return ""
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	case float64:
		return int64(x)
	}
	return 0
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	case float64:
		return x
	}
	return 0
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
