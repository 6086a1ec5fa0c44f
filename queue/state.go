package queue

import (
	"strconv"
	"strings"
)

// ticketState is the parsed value of a ticket in the tickets hash:
// "state:seq[:token:exp_ms:extra]" with state w (waiting), a (admitted), e (expired
// unused), u (used by an order; extra = the request key that used it).
type ticketState struct {
	state string
	seq   int64
	token string
	exp   int64
	extra string
}

func parseState(s string) ticketState {
	f := strings.SplitN(s, ":", 5)
	var st ticketState
	if len(f) > 0 {
		st.state = f[0]
	}
	if len(f) > 1 {
		st.seq, _ = strconv.ParseInt(f[1], 10, 64)
	}
	if len(f) > 2 {
		st.token = f[2]
	}
	if len(f) > 3 {
		st.exp, _ = strconv.ParseInt(f[3], 10, 64)
	}
	if len(f) > 4 {
		st.extra = f[4]
	}
	return st
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	case float64:
		return int64(x)
	}
	return 0
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	case float64:
		return x
	}
	return 0
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
