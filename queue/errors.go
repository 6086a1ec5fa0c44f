package queue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/waitroom/waitroom/internal/rstore"
)

// Errors returned by the queue; web maps them to the JSON error shape.
var (
	ErrQueueNotFound = errors.New("queue not found")
	ErrQueueClosed   = errors.New("queue closed to new joiners")
	ErrTicketInvalid = errors.New("ticket invalid")
	ErrNoPlace       = errors.New("ticket has no place in this queue")
	// ErrTooManyPlaces: the caller's address holds the queue's places_per_ip live places.
	ErrTooManyPlaces = errors.New("too many places from this address")
	// ErrPowInvalid: the proof of work presented at join is wrong, expired or was used
	// already (each challenge makes one place at most).
	ErrPowInvalid = errors.New("proof of work invalid")
	// ErrPowRequired: a new place in this queue needs a proof of work (or a proof for a
	// higher difficulty). Errors wrapping it are *PowRequiredError.
	ErrPowRequired = errors.New("proof of work required")
	// ErrInviteInvalid: the invite code presented at join is used up, expired, revoked or
	// of another queue.
	ErrInviteInvalid = errors.New("invite invalid")
	// ErrQueueEnded: the queue's sale ended (ends_at); places were dropped.
	ErrQueueEnded = errors.New("the sale has ended")
	// ErrSoldOut: every product the queue sells has stock 0; no new places.
	ErrSoldOut = errors.New("sold out")
	// ErrQueueNotOpen: the queue's method is reject (the sale is not open).
	ErrQueueNotOpen = errors.New("the sale is not open")
	// ErrQueueNotEmpty: a schedule cannot be set on a queue that has people waiting.
	ErrQueueNotEmpty = errors.New("queue not empty")
	// ErrDrawDone: the queue's start cannot change once its draw has begun.
	ErrDrawDone = errors.New("the draw has been done")
	// errStarting: a sharded pre-queue's start has come and it is not frozen yet (join.lua;
	// the join freezes it and tries again, prequeue.go).
	errStarting = errors.New("the draw is starting")
	// errSharded: a new entry of a sharded pre-queue reached the queue's own slot (join.lua),
	// from an instance that had not read the shards yet: it reads them and joins there.
	errSharded = errors.New("the pre-queue is sharded")
	// ErrInvalid: a setting out of range. Errors wrapping it are *InvalidError, whose
	// Message is written for the user.
	ErrInvalid = errors.New("invalid settings")
	// ErrUnavailable: Redis could not be reached or did not answer in time (down,
	// loading, failing over, the pool exhausted, the caller's deadline). Callers answer
	// 503 with Retry-After; the line itself is not changed by a failed call.
	ErrUnavailable = rstore.ErrUnavailable
)

// ErrNotLeader is returned by TickOnce when another loop holds the queue's lease.
var ErrNotLeader = errors.New("another instance holds the admission lease")

// errFenced: the lease is another owner's — taken by another loop during a multi-step job,
// or found so by admit.lua (its refusal FENCED).
var errFenced = errors.New("lease lost")

// refusals are the scripts' named refusals: a script answers redis.error_reply('CODE …'),
// and the code, its first word, is one of these (join.lua's and admit.lua's headers say
// when each is answered).
var refusals = map[string]error{
	"UNKNOWN_QUEUE":   ErrQueueNotFound,
	"CLOSED":          ErrQueueClosed,
	"NO_PLACE":        ErrNoPlace,
	"TOO_MANY_PLACES": ErrTooManyPlaces,
	"POW_INVALID":     ErrPowInvalid,
	"INVITE_INVALID":  ErrInviteInvalid,
	"ENDED":           ErrQueueEnded,
	"SOLD_OUT":        ErrSoldOut,
	"NOT_OPEN":        ErrQueueNotOpen,
	"FENCED":          errFenced,
	"STARTING":        errStarting,
	"SHARDED":         errSharded,
	"QUEUE_SLOT":      errMoved,     // pjoin.lua (prequeue.go)
	"IN_LINE":         errMovedLine, // pjoin.lua
	// POW_REQUIRED and POW_TOO_EASY carry the queue's difficulty: *PowRequiredError.
}

// refusal is the package error of a script's named refusal, or nil when err is not one.
func refusal(err error) error {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return nil
	}
	code, detail, _ := strings.Cut(re.Error(), " ")
	switch code {
	case "POW_REQUIRED", "POW_TOO_EASY": // "POW_REQUIRED 12 bits"
		bits, _, _ := strings.Cut(detail, " ")
		d, _ := strconv.Atoi(bits)
		return &PowRequiredError{Difficulty: d}
	}
	return refusals[code]
}

// InvalidError is a refused value: Field names the input (the JSON field), Message is a
// sentence for the user. It matches ErrInvalid with errors.Is.
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string        { return "invalid " + e.Field + ": " + e.Message }
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// PowRequiredError says a join needs a proof of work of Difficulty bits (the queue's
// setting when the join was refused). It matches ErrPowRequired with errors.Is.
type PowRequiredError struct{ Difficulty int }

func (e *PowRequiredError) Error() string {
	return fmt.Sprintf("proof of work of %d bits required", e.Difficulty)
}
func (e *PowRequiredError) Is(target error) bool { return target == ErrPowRequired }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// fail gives err the operation's context: a script's named refusal becomes its package
// error, as it is; anything else is classified by rstore.Fail.
func fail(op string, err error) error {
	if r := refusal(err); r != nil {
		return r
	}
	return rstore.Fail(op, err)
}
