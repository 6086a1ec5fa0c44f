package stream

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// Event payloads, as the public contract (API.md) names their fields. Position events are
// rendered by positionRenderer (below).
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

// prequeueData is the pre-queue event of a scheduled queue before its start. DrawID (the
// buyer's public id in the draw) is only in the event sent on connect: the later ones are
// rendered once for every pre-queue stream.
type prequeueData struct {
	StartsAt     *string `json:"starts_at"`
	PrequeueSize int64   `json:"prequeue_size"`
	SoldOut      bool    `json:"sold_out"`
	DrawID       string  `json:"draw_id,omitempty"`
	ServerTime   string  `json:"server_time"`
}

type closedData struct {
	Reason     string `json:"reason"`
	ServerTime string `json:"server_time"`
}

// timeData is the payload of events that say nothing but when (sold_out, ping).
type timeData struct {
	ServerTime string `json:"server_time"`
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

// admitTick is the tick a ticket was admitted at (stored with it), else the line's.
func admitTick(p queue.Place, fallback int64) int64 {
	if p.Tick > 0 {
		return p.Tick
	}
	return fallback
}

func admittedFrame(ev, tick int64, queueName, token string, exp time.Time) []byte {
	return frame(ev, "admitted", admittedData{
		Token: token, TokenExpiresAt: exp.UTC().Format(TimeFormat),
		Redirect: "/q/" + queueName + "/order", ServerTime: stamp(), Tick: tick,
	})
}

// positionRenderer renders position events of one line state; the JSON is written by
// hand (it is the fan-out's hot path: one event per changed waiter per second).
type positionRenderer struct {
	waiting int64
	noETA   bool    // paused or sold out: nobody is let in
	hidden  bool    // a lottery (method random): "position" and "eta_seconds" are null
	arate   float64 // the lane's share of the measured rate (for the ETA)
	rate    float64 // the lane's share of the configured rate (for the ETA)
	prefix  []byte
	suffix  []byte
}

// newPositionRenderer renders the normal line's position events.
func newPositionRenderer(l *line) *positionRenderer { return newLaneRenderer(l, laneNormal) }

// newLaneRenderer renders the position events of lane's line: its own waiting count and
// ETA (from the lane's share of the rate); a lane other than the normal one also says
// "lane" (absent = normal).
func newLaneRenderer(l *line, lane uint8) *positionRenderer {
	f := l.rateShare(lane)
	r := &positionRenderer{waiting: l.waitingIn(lane), noETA: l.paused || l.sale.soldOut, hidden: l.hidesPosition(lane),
		arate: l.arate * f, rate: l.rate * f}
	rate := l.rate
	if l.paused {
		rate = 0 // nobody is let in while paused
	}
	r.prefix = strconv.AppendInt([]byte("id: "), l.ev, 10)
	r.prefix = append(r.prefix, "\nevent: position\ndata: {\"position\":"...)
	if lane != laneNormal {
		r.suffix = append(r.suffix, ",\"lane\":\""...)
		r.suffix = append(r.suffix, laneName(lane)...)
		r.suffix = append(r.suffix, '"')
	}
	r.suffix = append(r.suffix, ",\"rate_per_second\":"...)
	r.suffix = strconv.AppendFloat(r.suffix, rate, 'f', -1, 64)
	r.suffix = append(r.suffix, ",\"admit_rate\":"...)
	r.suffix = strconv.AppendFloat(r.suffix, queue.RoundRate(l.real), 'f', -1, 64)
	r.suffix = append(r.suffix, ",\"paused\":"...)
	r.suffix = strconv.AppendBool(r.suffix, l.paused)
	r.suffix = append(r.suffix, ",\"sold_out\":"...)
	r.suffix = strconv.AppendBool(r.suffix, l.sale.soldOut)
	r.suffix = append(r.suffix, ",\"server_time\":\""...)
	r.suffix = append(r.suffix, stamp()...)
	r.suffix = append(r.suffix, "\",\"tick\":"...)
	r.suffix = strconv.AppendInt(r.suffix, l.tick, 10)
	r.suffix = append(r.suffix, "}\n\n"...)
	return r
}

// eta is the ETA of position pos, -1 when there is none (paused, sold out, no rate, no
// position shown).
func (r *positionRenderer) eta(pos int64) float64 {
	if r.noETA || r.hidden {
		return -1
	}
	return queue.ETA(pos, r.arate, r.rate)
}

func (r *positionRenderer) render(pos int64) []byte {
	b := make([]byte, 0, len(r.prefix)+len(r.suffix)+48)
	b = append(b, r.prefix...)
	if r.hidden {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, pos, 10)
	}
	b = append(b, ",\"waiting\":"...)
	b = strconv.AppendInt(b, r.waiting, 10)
	b = append(b, ",\"eta_seconds\":"...)
	if eta := r.eta(pos); eta >= 0 {
		b = strconv.AppendFloat(b, eta, 'f', -1, 64)
	} else {
		b = append(b, "null"...)
	}
	return append(b, r.suffix...)
}

func expiredFrame(ev, tick int64) []byte {
	return frame(ev, "expired", expiredData{ServerTime: stamp(), Tick: tick})
}

// prequeueFrame is the pre-queue event: the start (Unix ms; 0 unknown, sent as null), the
// pre-queue's size, sold out, and on connect the buyer's draw id.
func prequeueFrame(ev, startsMs, size int64, soldOut bool, drawID string) []byte {
	d := prequeueData{PrequeueSize: size, SoldOut: soldOut, DrawID: drawID, ServerTime: stamp()}
	if startsMs > 0 {
		s := time.UnixMilli(startsMs).UTC().Format(TimeFormat)
		d.StartsAt = &s
	}
	return frame(ev, "prequeue", d)
}

func soldOutFrame(ev int64) []byte { return frame(ev, "sold_out", timeData{ServerTime: stamp()}) }

// closedFrame ends a stream at the end of the sale (ends_at).
func closedFrame(ev int64) []byte {
	return frame(ev, "closed", closedData{Reason: "ended", ServerTime: stamp()})
}

// pingFrame is the heartbeat: an event, not a comment, so that pages can tell a silent
// stream (a proxy that dropped it without closing) from a quiet queue. now is a stamp().
func pingFrame(ev int64, now string) []byte { return frame(ev, "ping", timeData{ServerTime: now}) }
