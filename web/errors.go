package web

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/orders"
	"github.com/waitroom/waitroom/queue"
)

// Error is an error with its HTTP status and public code; the error handler renders it as
// {"error":{"code","message"}}.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter int    // seconds; sets Retry-After when > 0
	Scope      string // X-RateLimit-Scope on 429
	Field      string // the input a 422 is about ("" when not one field)
	Line       int    // the line of the input a 422 is about (a page template), 0 when none
	Close      bool   // answer with Connection: close (the client should come back on a new connection)
}

// localShed marks a request answered by shedding load (logged at debug, not as a failure).
const localShed = "wr_shed"

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

// body is the JSON error shape of the public contract.
type body struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field,omitempty"`
		Line    int    `json:"line,omitempty"`
	} `json:"error"`
}

// ErrorHandler is the one place where errors become HTTP responses, in the JSON error shape.
// A shop that puts Guard on its own Fiber app sets it as that app's fiber.Config
// ErrorHandler, so the guard's refusals keep their status and code. 5xx never carry
// internals: they are logged with the request id and answered with a generic sentence.
func ErrorHandler(log zerolog.Logger) fiber.ErrorHandler { return handleError(log) }

func handleError(log zerolog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		e := mapError(err)
		if e.Code == "body_too_large" && isLogoUpload(c) {
			// Past branding.MaxLogoBytes Fiber refuses the body before putLogo runs; the answer
			// names the logo's limit, as putLogo's own does.
			e = errLogoTooLarge()
		}
		switch {
		case e.Status >= 500 && e.Code == "instance_full":
			// Shedding at the stream budget is the instance working as meant; /metrics counts it.
			c.Locals(localShed, true)
		case e.Status >= 500:
			log.Error().Err(err).Str("request_id", requestID(c)).Str("path", logPath(c)).Int("status", e.Status).Msg("request failed")
		}
		// An error is never cached, whatever the handler had allowed before it failed.
		c.Set(fiber.HeaderCacheControl, "no-store")
		if e.RetryAfter > 0 {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(e.RetryAfter))
		}
		if e.Scope != "" {
			c.Set("X-RateLimit-Scope", e.Scope)
		}
		if e.Close {
			c.Set(fiber.HeaderConnection, "close")
		}
		var b body
		b.Error.Code, b.Error.Message, b.Error.Field, b.Error.Line = e.Code, e.Message, e.Field, e.Line
		return c.Status(e.Status).JSON(b)
	}
}

func mapError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusNotFound:
			return errorf(404, "not_found", "No such resource.")
		case fiber.StatusMethodNotAllowed:
			return errorf(405, "method_not_allowed", "Method not allowed on this resource.")
		case fiber.StatusRequestEntityTooLarge:
			return errorf(413, "body_too_large", "The request body is larger than 64 KiB.")
		case fiber.StatusRequestHeaderFieldsTooLarge:
			return errorf(431, "headers_too_large", "The request headers are too large.")
		case fiber.StatusRequestTimeout:
			return errorf(408, "request_timeout", "The request took too long to arrive.")
		case fiber.StatusBadRequest:
			return errorf(400, "bad_request", "Malformed request.")
		}
		if fe.Code < 500 {
			return errorf(fe.Code, "http_"+strconv.Itoa(fe.Code), fe.Message)
		}
	}
	switch {
	case errors.Is(err, queue.ErrQueueNotFound):
		return errorf(404, "queue_not_found", "No such queue.")
	case errors.Is(err, queue.ErrQueueClosed):
		return errorf(423, "queue_closed", "This queue is closed to new joiners.")
	case errors.Is(err, queue.ErrQueueNotOpen):
		// The queue's method is reject: the same code as closed (a page shows the same
		// thing), with a message that says why.
		return errorf(423, "queue_closed", "The sale is not open.")
	case errors.Is(err, queue.ErrQueueEnded):
		// Its own code: unlike closed, an ended sale never opens again (the page stops).
		return errorf(423, "queue_ended", "The sale has ended.")
	case errors.Is(err, queue.ErrSoldOut):
		return errorf(423, "sold_out", "Sold out.")
	case errors.Is(err, queue.ErrNoDraw):
		return errorf(404, "no_draw", "This queue has no draw: it has no scheduled start.")
	case errors.Is(err, queue.ErrQueueNotEmpty):
		return errorf(409, "queue_not_empty", "People are waiting in this queue: a start can only be set while the line is empty.")
	case errors.Is(err, queue.ErrDrawDone):
		return errorf(409, "draw_done", "The sale has started: its start cannot change any more.")
	case errors.Is(err, queue.ErrTicketInvalid):
		return errorf(401, "ticket_invalid", "The ticket is missing, malformed or forged.")
	case errors.Is(err, queue.ErrTooManyPlaces):
		// Final: the page and waitroom.js do not retry it (Retry-After is only the contract's
		// rule for every 429).
		return &Error{Status: 429, Code: "too_many_places", Scope: "ip", RetryAfter: 60,
			Message: "Too many places in this queue are held from your address."}
	case errors.Is(err, queue.ErrPowInvalid):
		return &Error{Status: 422, Code: "pow_invalid", Field: "pow",
			Message: "The proof of work is wrong, expired or was used already; solve a new challenge."}
	case errors.Is(err, queue.ErrInviteInvalid):
		return &Error{Status: 422, Code: "invite_invalid", Field: "invite",
			Message: "This invite code is used up, expired, revoked or not for this queue."}
	case errors.Is(err, queue.ErrNoPlace):
		return errorf(404, "ticket_not_found", "This ticket has no place in this queue; join again.")
	case errors.Is(err, queue.ErrInvalid):
		return invalidError("invalid_settings", err)
	case errors.Is(err, orders.ErrNotFound):
		return errorf(404, "product_not_found", "No such product.")
	case errors.Is(err, orders.ErrSoldOut):
		return errorf(409, "sold_out", "Sold out: the stock cannot cover this quantity.")
	case errors.Is(err, orders.ErrInvalid):
		return invalidError("invalid_order", err)
	case errors.Is(err, orders.ErrQuantityLimit):
		var le *orders.QuantityLimitError
		errors.As(err, &le)
		msg := fmt.Sprintf("At most %d per order (max_per_order).", le.Max)
		if le.Limit == "max_per_ticket" {
			msg = fmt.Sprintf("At most %d per buyer (max_per_ticket); %d already bought with this ticket.", le.Max, le.Bought)
		}
		return &Error{Status: 422, Code: "quantity_limit", Field: "quantity", Message: msg}
	case errors.Is(err, orders.ErrIdempotencyConflict):
		return errorf(422, "idempotency_conflict", "This Idempotency-Key was already used for a different request.")
	case errors.Is(err, orders.ErrUnavailable):
		return &Error{Status: 503, Code: "database_unavailable", Message: "Orders are unavailable right now; your token is kept. Try again shortly.", RetryAfter: 2}
	case errors.Is(err, queue.ErrUnconfirmed):
		// The token exists but no replica holds it yet: handing it out now could tell a buyer
		// of a token a failover takes back. The page asks again (join, status, stream).
		return &Error{Status: 503, Code: "replica_lagging", Message: "Your admission is being confirmed. Try again in a moment.", RetryAfter: 1}
	case errors.Is(err, queue.ErrUnavailable):
		return &Error{Status: 503, Code: "queue_unavailable", Message: "The waiting room is unavailable right now. Try again shortly.", RetryAfter: 2}
	}
	return errorf(500, "internal", "Something went wrong on our side.")
}

// invalidError is the 422 for a refused value: the message and field come from the
// package's typed error, written for the user.
func invalidError(code string, err error) *Error {
	e := &Error{Status: 422, Code: code, Message: "Invalid value."}
	var qe *queue.InvalidError
	var oe *orders.InvalidError
	switch {
	case errors.As(err, &qe):
		e.Message, e.Field = qe.Message, qe.Field
	case errors.As(err, &oe):
		e.Message, e.Field = oe.Message, oe.Field
	}
	return e
}
