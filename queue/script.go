package queue

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The contract between the Go code and its two largest scripts, join.lua and admit.lua:
// the modes they take, the JSON objects they answer, and the prelude they share. Their
// refusals are named (redis.error_reply('CODE …')) and mapped in errors.go.
//
// A rolling deploy runs two releases side by side, each with its own script text under its
// own SHA (EVALSHA, and EVAL when Redis does not know it yet), so what passes between a script
// and its caller may change from one release to the next; what the scripts store in Redis
// and the tick message they publish may not, and do not.

// tickPublish is how admit.lua sends a tick message: the first letter of its ARGV[8] (the
// script's PUBLISH_* constants).
type tickPublish string

const (
	publishPlain   tickPublish = "p" // PUBLISH from the script
	publishSharded tickPublish = "s" // SPUBLISH from the script (a Redis Cluster: the queue's slot)
	publishBoth    tickPublish = "b" // both (a rolling deploy between the two)
	// publishReturn: the script returns the message, and the caller publishes it once a
	// replica has acknowledged the tick (WAIT cannot run in a script).
	publishReturn tickPublish = "r"
)

// restWhenIdle, after the publish mode in admit.lua's ARGV[8], lets a tick that finds the
// queue idle put it to rest (the script's REST_WHEN_IDLE).
const restWhenIdle = "i"

// leaseMode is lease.lua's ARGV[3] (the script's TAKE, RELEASE and CHECK).
type leaseMode string

const (
	// leaseTake takes or keeps the lease even if the queue rests, ending the rest; the
	// answer is the fencing token, or 0 when another owner holds the lease.
	leaseTake leaseMode = "0"
	// leaseRelease lets the lease go if the caller holds it.
	leaseRelease leaseMode = "1"
	// leaseCheckRest takes or keeps the lease unless the queue really rests; the answer is
	// {fence, starts_ms, ends_ms}, fence -2 when it rests (leaseCheck).
	leaseCheckRest leaseMode = "2"
)

// joinMode is join.lua's ARGV[2] (the script's JOIN and STATUS).
type joinMode string

const (
	joinPlace  joinMode = "1" // give the ticket a place, or answer the one it has
	joinStatus joinMode = "0" // only read the ticket's place (NO_PLACE when it has none)
)

// admitAnswer is admit.lua's answer (its header says what each field is).
type admitAnswer struct {
	Admitted  int64     `json:"admitted"`
	Ev        int64     `json:"ev"`
	Waiting   int64     `json:"waiting"`
	Head      int64     `json:"head"`
	Tail      int64     `json:"tail"`
	Active    int64     `json:"active"`
	Tick      int64     `json:"tick"`
	RateMilli int64     `json:"rate_milli"`
	Expired   int64     `json:"expired"`
	Abandoned int64     `json:"abandoned"`
	WaitingP  int64     `json:"waiting_p"`
	WaitingB  int64     `json:"waiting_b"`
	AdmittedP int64     `json:"admitted_p"`
	AdmittedB int64     `json:"admitted_b"`
	Phase     DrawPhase `json:"phase"`
	EndDue    bool      `json:"end_due"`
	Rested    bool      `json:"rested"`
	StartsMs  int64     `json:"starts_ms"`
	EndsMs    int64     `json:"ends_ms"`
	Message   string    `json:"message"`
	Seqs      []int64   `json:"seqs"`
}

// result is the TickResult the answer describes (Acks and Held are the caller's).
func (a admitAnswer) result() TickResult {
	r := TickResult{Admitted: a.Admitted, Ev: a.Ev, Waiting: a.Waiting, Active: a.Active, Tick: a.Tick, Head: a.Head,
		Tail: a.Tail, Expired: a.Expired, Abandoned: a.Abandoned,
		WaitingPriority: a.WaitingP, WaitingBypass: a.WaitingB, AdmittedPriority: a.AdmittedP, AdmittedBypass: a.AdmittedB,
		Phase: knownPhase(a.Phase), EndDue: a.EndDue, Rested: a.Rested, StartsAt: msTimeOrZero(a.StartsMs),
		EndsAt: msTimeOrZero(a.EndsMs), rate: float64(a.RateMilli) / 1000}
	r.Rate = r.rate
	if len(a.Seqs) > 0 {
		r.Seqs = a.Seqs
	}
	return r
}

// joinAnswer is join.lua's answer (its header says what each field is).
type joinAnswer struct {
	Created      bool   `json:"created"`
	State        State  `json:"state"`
	Seq          int64  `json:"seq"`
	Position     int64  `json:"position"`
	Waiting      int64  `json:"waiting"`
	Lane         string `json:"lane"`
	OtherWaiting int64  `json:"other_waiting"`
	Token        string `json:"token"`
	ExpMs        int64  `json:"exp_ms"`
	IatMs        int64  `json:"iat_ms"`
	PrequeueSize int64  `json:"prequeue_size"`
	ARateMilli   int64  `json:"arate_milli"`
	RealMilli    int64  `json:"real_milli"`
	RateMilli    int64  `json:"rate_milli"`
	ShareMilli   int64  `json:"share_milli"`
	Paused       bool   `json:"paused"`
	SoldOut      bool   `json:"sold_out"`
	Method       Method `json:"method"`
	StartsMs     int64  `json:"starts_ms"`
	Woke         bool   `json:"woke"`
}

// place is the Place of queue's ticket the answer describes (DrawID is the caller's).
func (a joinAnswer) place(queue string) Place {
	p := Place{Queue: queue, State: a.State, Lane: laneOf(a.Lane), Seq: a.Seq, Position: a.Position, Waiting: a.Waiting,
		AdmitRate: float64(a.ARateMilli) / 1000, RealRate: float64(a.RealMilli) / 1000, Rate: float64(a.RateMilli) / 1000,
		Paused: a.Paused, Token: a.Token, StartsAt: msTimeOrZero(a.StartsMs), PrequeueSize: a.PrequeueSize,
		SoldOut: a.SoldOut, Method: a.Method}
	if a.ExpMs > 0 {
		p.TokenExpiresAt = time.UnixMilli(a.ExpMs)
		p.TokenIssuedAt = msTimeOrZero(a.IatMs)
	}
	if p.State == StateWaiting {
		p.rateCut = 1 - LaneShare(p.Lane, float64(a.ShareMilli)/1000, a.OtherWaiting)
	}
	return p
}

// errUnexpected wraps a script answer of the wrong shape.
var errUnexpected = errors.New("unexpected script answer")

// decodeAnswer reads a script's JSON answer into v; what names the call.
func decodeAnswer(what, text string, v any) error {
	if err := json.Unmarshal([]byte(text), v); err != nil {
		return fmt.Errorf("%s: %w: %w", what, errUnexpected, err)
	}
	return nil
}

// knownPhase is ph, or DrawNone for a value that is not a draw phase.
func knownPhase(ph DrawPhase) DrawPhase {
	switch ph {
	case DrawScheduled, DrawFrozen, DrawDone:
		return ph
	}
	return DrawNone
}

// msTimeOrZero is the instant ms (Unix ms), or the zero time for 0 and below.
func msTimeOrZero(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
