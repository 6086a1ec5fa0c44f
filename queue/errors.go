package queue

import "errors"

// Errors returned by the queue; web maps them to the JSON error shape.
var (
	ErrQueueNotFound = errors.New("queue not found")
	ErrQueueClosed   = errors.New("queue closed to new joiners")
	ErrTicketInvalid = errors.New("ticket invalid")
	ErrNoPlace       = errors.New("ticket has no place in this queue")
	ErrInvalid       = errors.New("invalid settings")
)

// ErrNotLeader is returned by TickOnce when another loop holds the queue's lease.
var ErrNotLeader = errors.New("another instance holds the admission lease")
