package rstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUnavailable: Redis could not be reached or did not answer in time (down, loading,
// failing over, the pool exhausted, the caller's deadline). Callers answer 503 with
// Retry-After; nothing stored is changed by a failed call.
var ErrUnavailable = errors.New("queue store unavailable")

// Store is a Redis client with the deployment's per-call deadline.
type Store struct {
	rdb       redis.UniversalClient
	opTimeout time.Duration
}

// New returns a Store on rdb whose calls take at most opTimeout each (default 1 s; the
// client must have ContextTimeoutEnabled so that the deadline also cuts a read from a
// stalled server).
func New(rdb redis.UniversalClient, opTimeout time.Duration) *Store {
	if opTimeout <= 0 {
		opTimeout = time.Second
	}
	return &Store{rdb: rdb, opTimeout: opTimeout}
}

// Client is the Redis client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// OpTimeout is the per-call deadline.
func (s *Store) OpTimeout() time.Duration { return s.opTimeout }

// Bound gives ctx the per-call deadline unless it already has an earlier one.
func (s *Store) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opTimeout)
}

// Fail gives err the operation's context and, when it is a failure to reach Redis rather
// than a refusal by Redis, marks it ErrUnavailable. It is the one place that classifies
// go-redis errors (a noun maps its scripts' named refusals before calling it).
func Fail(op string, err error) error {
	if Unreachable(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Unreachable reports whether err is a failure to reach Redis (as opposed to an answer).
func Unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) ||
		redis.IsLoadingError(err) || redis.IsMasterDownError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsReadOnlyError(err) ||
		redis.IsOOMError(err) || redis.IsMaxClientsError(err) || redis.HasErrorPrefix(err, "BUSY")
}
