package web

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/analytics"
)

// HistoryStore is what web needs of the queue history (implemented by *analytics.Store).
type HistoryStore interface {
	History(ctx context.Context, name string, from, to time.Time, step time.Duration) (analytics.HistoryAnswer, error)
	Report(ctx context.Context, name string) (analytics.Report, error)
}

// history answers GET /admin/api/queues/{queue}/history?from&to&step.
func (s *Server) history(c *fiber.Ctx) error {
	name := c.Params("queue")
	if err := s.historyQueue(c, name); err != nil {
		return err
	}
	from, to, step, err := analytics.ParseRange(c.Query("from"), c.Query("to"), c.Query("step"), time.Now())
	if err != nil {
		return historyError(err)
	}
	a, err := s.d.Analytics.History(c.UserContext(), name, from, to, step)
	if err != nil {
		return historyError(err)
	}
	return c.JSON(a)
}

// report answers GET /admin/api/queues/{queue}/report (?format=json|csv).
func (s *Server) report(c *fiber.Ctx) error {
	name := c.Params("queue")
	format := c.Query("format", "json")
	if format != "json" && format != "csv" {
		return &Error{Status: 422, Code: "invalid_format", Field: "format", Message: "format must be json or csv."}
	}
	if err := s.historyQueue(c, name); err != nil {
		return err
	}
	rp, err := s.d.Analytics.Report(c.UserContext(), name)
	if err != nil {
		return historyError(err)
	}
	if format == "json" {
		return c.JSON(rp)
	}
	var b bytes.Buffer
	if err := rp.WriteCSV(&b); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+name+`-report.csv"`)
	return c.Send(b.Bytes())
}

// historyQueue checks that the history can be answered: a database, and the queue exists
// in Redis (an invalid name is unknown too; the name is then safe in a file name).
func (s *Server) historyQueue(c *fiber.Ctx, name string) error {
	if s.d.Analytics == nil {
		return historyUnavailable()
	}
	_, err := s.d.Settings.Settings(c.UserContext(), name)
	return err
}

func historyUnavailable() *Error {
	return &Error{Status: 503, Code: "database_unavailable", RetryAfter: 2,
		Message: "The history is unavailable right now (PostgreSQL). Try again shortly."}
}

// historyError maps the analytics errors; the rest go to the error handler.
func historyError(err error) error {
	var re *analytics.RangeError
	switch {
	case errors.As(err, &re):
		return &Error{Status: 422, Code: "invalid_range", Field: re.Field, Message: re.Message}
	case errors.Is(err, analytics.ErrUnavailable):
		return historyUnavailable()
	}
	return err
}
