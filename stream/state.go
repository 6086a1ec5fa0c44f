package stream

import (
	"encoding/json"
	"sort"

	"github.com/waitroom/waitroom/queue"
)

// tickMsg is the message the admission leader publishes once per tick (see queue/admit.lua).
type tickMsg struct {
	Ev      int64       `json:"ev"`
	Tick    int64       `json:"tick"`
	Head    int64       `json:"head"`
	Tail    int64       `json:"tail"`
	Waiting int64       `json:"waiting"`
	Now     int64       `json:"now"`
	Rate    float64     `json:"rate"`
	ARate   float64     `json:"arate"`
	Paused  bool        `json:"paused"`
	Adm     []admission `json:"adm"`
	Gone    []int64     `json:"gone"`
	Exp     []string    `json:"exp"`
}

type admission struct {
	Ticket string `json:"t"`
	Token  string `json:"k"`
	Exp    int64  `json:"x"`
	Seq    int64  `json:"s"`
}

func decodeTick(b []byte) (tickMsg, error) {
	var m tickMsg
	err := json.Unmarshal(b, &m)
	return m, err
}

// line is this instance's copy of one queue's state, enough to compute the exact position
// of any local waiter without asking Redis: position = seq − head − departures in (head, seq).
type line struct {
	synced  bool
	ev      int64
	tick    int64
	head    int64
	tail    int64
	waiting int64
	rate    float64
	arate   float64
	paused  bool
	gone    []int64 // sorted departed sequences above head
}

func (l *line) reset(s queue.Snapshot) {
	l.synced = true
	l.ev, l.tick, l.head, l.tail, l.waiting = s.Ev, s.Tick, s.Head, s.Tail, s.Waiting
	l.rate, l.arate, l.paused = s.Rate, s.AdmitRate, s.Paused
	l.gone = l.gone[:0]
	for _, g := range s.Gone {
		if g > l.head {
			l.gone = append(l.gone, g)
		}
	}
	sort.Slice(l.gone, func(i, j int) bool { return l.gone[i] < l.gone[j] })
}

// apply advances the line by one tick message; the caller has checked m.Ev == l.ev+1.
func (l *line) apply(m tickMsg) {
	l.ev, l.tick, l.head, l.tail, l.waiting = m.Ev, m.Tick, m.Head, m.Tail, m.Waiting
	l.rate, l.arate, l.paused = m.Rate, m.ARate, m.Paused
	for _, g := range m.Gone {
		i := sort.Search(len(l.gone), func(i int) bool { return l.gone[i] >= g })
		if i < len(l.gone) && l.gone[i] == g {
			continue
		}
		l.gone = append(l.gone, 0)
		copy(l.gone[i+1:], l.gone[i:])
		l.gone[i] = g
	}
	i := sort.Search(len(l.gone), func(i int) bool { return l.gone[i] > l.head })
	l.gone = append(l.gone[:0], l.gone[i:]...)
}

// position of the waiter with sequence seq: 1 + the users still waiting ahead of it, or 0
// when seq is at or below the head (admitted or gone).
func (l *line) position(seq int64) int64 {
	if seq <= l.head {
		return 0
	}
	below := sort.Search(len(l.gone), func(i int) bool { return l.gone[i] >= seq })
	return seq - l.head - int64(below)
}

func (l *line) eta(pos int64) float64 {
	if l.paused {
		return -1
	}
	return queue.ETA(pos, l.arate, l.rate)
}
