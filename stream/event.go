package stream

import (
	"encoding/json"
	"strconv"
	"time"
)

// Event payloads, as the public contract (API.md) names their fields. Position events are
// rendered by positionRenderer (hub.go).
type admittedData struct {
	Token          string `json:"token"`
	TokenExpiresAt string `json:"token_expires_at"`
	Redirect       string `json:"redirect"`
	ServerTime     string `json:"server_time"`
	Tick           int64  `json:"tick"`
}

type expiredData struct {
	ServerTime string `json:"server_time"`
	Tick       int64  `json:"tick"`
}

// TimeFormat is RFC 3339 with milliseconds, as every event's server_time.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

func stamp() string { return time.Now().UTC().Format(TimeFormat) }

// frame renders one SSE event: id, event name and a one-line JSON data field.
func frame(id int64, name string, data any) []byte {
	b, _ := json.Marshal(data)
	out := make([]byte, 0, len(b)+48)
	out = append(out, "id: "...)
	out = strconv.AppendInt(out, id, 10)
	out = append(out, "\nevent: "...)
	out = append(out, name...)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// ParseLastEventID reads a Last-Event-ID header; anything but a non-negative decimal
// number below 2^62 is ignored (0, false).
func ParseLastEventID(s string) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n >= 1<<62 {
		return 0, false
	}
	return n, true
}

func etaPtr(v float64) *float64 {
	if v < 0 {
		return nil
	}
	return &v
}
