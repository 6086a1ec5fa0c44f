package orders

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinels. Callers test them with errors.Is; every error this package returns wraps one
// of them, except unexpected internal failures (which callers should treat as 500).
var (
	// ErrNotFound: no such product.
	ErrNotFound = errors.New("not found")
	// ErrSoldOut: the stock cannot cover the quantity (stock never goes below zero).
	ErrSoldOut = errors.New("sold out")
	// ErrUnavailable: PostgreSQL is down or unreachable, no pooled connection was free
	// within Config.AcquireTimeout, a query ran out of time, or an order's outcome could
	// not be determined. Nothing was changed that a retry with the same Idempotency-Key
	// would duplicate. Callers answer 503 with Retry-After.
	ErrUnavailable = errors.New("database unavailable")
	// ErrInvalid: bad input. Errors matching it are *InvalidError, whose Message is
	// written for the user (no internals) and may be shown as is.
	ErrInvalid = errors.New("invalid input")
	// ErrIdempotencyConflict: the Idempotency-Key was first used for a different request
	// (another product, quantity or ticket).
	ErrIdempotencyConflict = errors.New("idempotency key was already used for a different request")
	// ErrQuantityLimit: the order is over one of the product's per-buyer caps. Errors
	// matching it are *QuantityLimitError.
	ErrQuantityLimit = errors.New("over the per-buyer limit")
	// ErrTokenUsed: the admission token (OrderRequest.TokenID) already bought an order,
	// under another Idempotency-Key (or none). Nothing changed. The token store may have
	// forgotten the use (a Redis failover loses the last writes): the order store is the
	// durable record. Errors matching it from PlaceOrder are *TokenUsedError.
	ErrTokenUsed = errors.New("admission token already used")
)

// TokenUsedError says which order a token already bought: OrderID, and the
// Idempotency-Key it was placed with ("" when none), so that the caller can mark the
// token used again in the token store under that key (its repeats stay answerable).
type TokenUsedError struct {
	OrderID        string
	IdempotencyKey string
}

func (e *TokenUsedError) Error() string {
	return "admission token already used by order " + e.OrderID
}

func (e *TokenUsedError) Is(target error) bool { return target == ErrTokenUsed }

// QuantityLimitError says which per-buyer cap an order is over: Limit is "max_per_order"
// or "max_per_ticket", Max its value, Bought what the ticket has already bought.
type QuantityLimitError struct {
	Limit  string
	Max    int
	Bought int
}

func (e *QuantityLimitError) Error() string {
	return fmt.Sprintf("quantity over %s (%d)", e.Limit, e.Max)
}

func (e *QuantityLimitError) Is(target error) bool { return target == ErrQuantityLimit }

// errRetry marks a definite failure that is safe and useful to retry: deadlock or
// serialization failure. The transaction was rolled back.
var errRetry = errors.New("transaction aborted, retry")

// errUnknownOutcome marks a COMMIT whose result never reached us.
var errUnknownOutcome = errors.New("commit outcome unknown")

// InvalidError is refused input: Field names it (the JSON field), Message is a sentence
// for the user. It matches ErrInvalid with errors.Is.
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string        { return "invalid " + e.Field + ": " + e.Message }
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// invalid returns an *InvalidError for field with a user-facing message.
func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// classify maps driver and server errors onto the package sentinels. It is the one place
// that knows PostgreSQL error codes.
func classify(err error) error {
	if err == nil || isSentinel(err) || errors.Is(err, errRetry) || errors.Is(err, errUnknownOutcome) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		code, class := pgErr.Code, pgErr.Code
		if len(class) > 2 {
			class = class[:2]
		}
		switch {
		case code == "23505" && pgErr.ConstraintName == tokenIndex:
			// unique_violation on the token: the insert's ON CONFLICT DO NOTHING normally
			// takes it; an insert without it lands here.
			return fmt.Errorf("%w: %w", ErrTokenUsed, err)
		case code == "23503": // foreign_key_violation: the order names no existing product
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		case code == "23514" && pgErr.ConstraintName == "products_stock_check":
			return fmt.Errorf("%w: %w", ErrSoldOut, err)
		case code == "23514", code == "22001", code == "22003", code == "22P02":
			// check_violation, string too long, numeric out of range, bad text
			// representation: input the validation should have caught.
			return invalid("", "A value is out of range.")
		case code == "40P01", code == "40001": // deadlock_detected, serialization_failure
			return fmt.Errorf("%w: %w", errRetry, err)
		case class == "08", // connection_exception
			class == "53",                                     // insufficient_resources (too_many_connections …)
			code == "57P01", code == "57P02", code == "57P03", // admin/crash shutdown, cannot_connect_now
			code == "57014", // query_canceled (our deadline)
			code == "25006", // read_only_sql_transaction (a standby after failover)
			code == "55P03": // lock_not_available (lock_timeout)
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	if isConnectionTrouble(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// tokenIndex is the unique index of orders.token_id (migration 007).
const tokenIndex = "orders_token_id_key"

func isSentinel(err error) bool {
	for _, s := range []error{ErrNotFound, ErrSoldOut, ErrUnavailable, ErrInvalid, ErrIdempotencyConflict, ErrQuantityLimit, ErrTokenUsed} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// isConnectionTrouble reports errors of reaching or talking to the server (as opposed to
// the server refusing a statement).
func isConnectionTrouble(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) ||
		pgconn.Timeout(err) ||
		pgconn.SafeToRetry(err) ||
		errors.As(err, &connectErr) ||
		errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, pgconn.ErrConnClosed)
}

// outcome names the result label of order_outcomes_total for a PlaceOrder result.
func outcome(replayed bool, err error) string {
	switch {
	case err == nil && replayed:
		return "replayed"
	case err == nil:
		return "created"
	case errors.Is(err, ErrSoldOut):
		return "sold_out"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case errors.Is(err, ErrIdempotencyConflict):
		return "conflict"
	case errors.Is(err, ErrQuantityLimit):
		return "quantity_limit"
	case errors.Is(err, ErrTokenUsed):
		return "token_used"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	default:
		return "error"
	}
}
