package web

import (
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/stream"
)

// placeJSON is the body of join and status (API.md).
type placeJSON struct {
	Ticket         string      `json:"ticket"`
	Queue          string      `json:"queue"`
	State          queue.State `json:"state"`
	Position       int64       `json:"position"`
	Waiting        int64       `json:"waiting"`
	ETASeconds     *float64    `json:"eta_seconds"`
	AdmitRate      float64     `json:"admit_rate"`
	Stream         string      `json:"stream"`
	Lane           queue.Lane  `json:"lane"`
	Token          string      `json:"token,omitempty"`
	TokenExpiresAt string      `json:"token_expires_at,omitempty"`
}

func (s *Server) placeBody(t queue.Ticket, raw string, p queue.Place) placeJSON {
	out := placeJSON{Ticket: raw, Queue: p.Queue, State: p.State, Position: p.Position, Waiting: p.Waiting,
		AdmitRate: p.AdmitRate, Stream: "/api/queues/" + p.Queue + "/stream", Lane: p.Lane}
	if out.Lane == "" {
		out.Lane = queue.LaneNormal
	}
	if eta := p.ETA(); eta >= 0 {
		out.ETASeconds = &eta
	}
	if p.State == queue.StateAdmitted {
		out.Token = s.handOut(t, p)
		out.TokenExpiresAt = p.TokenExpiresAt.UTC().Format(stream.TimeFormat)
	}
	return out
}

// handOut is the admission token as it is handed to the ticket's holder.
func (s *Server) handOut(t queue.Ticket, p queue.Place) string {
	return p.Token
}
