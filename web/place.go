package web

import (
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/admission"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
)

// placeJSON is the body of join and status (API.md).
type placeJSON struct {
	Ticket string      `json:"ticket"`
	Queue  string      `json:"queue"`
	State  queue.State `json:"state"`
	// Position is null where no position exists: in the pre-queue (the draw gives it) and in
	// the normal line of a random queue (a lottery has no order).
	Position       *int64     `json:"position"`
	Waiting        int64      `json:"waiting"`
	ETASeconds     *float64   `json:"eta_seconds"`
	AdmitRate      float64    `json:"admit_rate"`
	Stream         string     `json:"stream"`
	Lane           queue.Lane `json:"lane"`
	SoldOut        bool       `json:"sold_out"`
	Token          string     `json:"token,omitempty"`
	TokenExpiresAt string     `json:"token_expires_at,omitempty"`
	// A pre-queue place (before a scheduled start): the start, the pre-queue's size and the
	// buyer's public id in the draw (the hex SHA-256 of the ticket id, never the ticket).
	StartsAt     string `json:"starts_at,omitempty"`
	PrequeueSize *int64 `json:"prequeue_size,omitempty"`
	DrawID       string `json:"draw_id,omitempty"`
}

func (s *Server) placeBody(t queue.Ticket, raw string, p queue.Place) placeJSON {
	out := placeJSON{Ticket: raw, Queue: p.Queue, State: p.State, Waiting: p.Waiting,
		AdmitRate: queue.RoundRate(p.RealRate), Stream: "/api/queues/" + p.Queue + "/stream", Lane: p.Lane, SoldOut: p.SoldOut}
	if out.Lane == "" {
		out.Lane = queue.LaneNormal
	}
	switch {
	case p.State == queue.StatePrequeue:
		out.PrequeueSize, out.DrawID = &p.PrequeueSize, p.DrawID
		if !p.StartsAt.IsZero() {
			out.StartsAt = p.StartsAt.UTC().Format(stream.TimeFormat)
		}
	case p.State == queue.StateWaiting && p.Method == queue.MethodRandom && out.Lane == queue.LaneNormal:
		// Admission picks at random from the normal line: no position, no estimate (the
		// invite lanes keep their order).
	default:
		pos := p.Position
		out.Position = &pos
		if eta := p.ETA(); eta >= 0 {
			out.ETASeconds = &eta
		}
	}
	if p.State == queue.StateAdmitted {
		out.Token = s.handOut(t, p)
		out.TokenExpiresAt = p.TokenExpiresAt.UTC().Format(stream.TimeFormat)
	}
	return out
}

// handOut is the admission token as it is handed to the ticket's holder: signed (JWS)
// unless signed tokens are off.
func (s *Server) handOut(t queue.Ticket, p queue.Place) string {
	var iat int64
	if !p.TokenIssuedAt.IsZero() {
		iat = p.TokenIssuedAt.UnixMilli()
	}
	return s.hand(t.Queue, t.ID, p.Token, iat, p.TokenExpiresAt.UnixMilli())
}

// HandOut is the hand-out function of keys for the hub and the HTTP answers: the signed
// token, or the bare one when keys is nil. A signing failure (no key this instance can
// use) hands out the bare token, which the guards still accept, and is logged.
func HandOut(keys *admission.KeyRing, log zerolog.Logger) func(queueName, ticket, jti string, iatMs, expMs int64) string {
	return func(queueName, ticket, jti string, iatMs, expMs int64) string {
		if keys == nil {
			return jti
		}
		tok, err := keys.IssueMs(queueName, ticket, jti, iatMs, expMs)
		if err != nil {
			log.Error().Err(err).Msg("admission: cannot sign a token; handing out the bare one")
			return jti
		}
		return tok
	}
}
