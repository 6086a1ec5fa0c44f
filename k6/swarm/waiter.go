package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"sync"
	"time"
)

// waiter is one simulated user: a join, then a stream (or a poll loop) on its own
// connection from the process's source address.
type waiter struct {
	c      *child
	index  int // global index across processes
	target int
	ticket string

	joinStart, joinEnd time.Duration
	healthy            bool

	mu   sync.Mutex // guards conn against close from the control goroutine
	conn *rawConn
	stop bool

	// Written only by the waiter's own goroutine.
	lastPos, lastPosTick int64
	lastPosAt            time.Time
	lastPosEpoch         int64
	lastPing             time.Time
	admTick              int64
	admitted             bool
	data                 []byte
	event                []byte
}

func (w *waiter) setConn(rc *rawConn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop {
		return false
	}
	w.conn = rc
	return true
}

// shut closes the waiter's connection from outside (phase change or stop).
func (w *waiter) shut() {
	w.mu.Lock()
	w.stop = true
	if w.conn != nil {
		w.conn.close()
		w.conn = nil
	}
	w.mu.Unlock()
}

func (w *waiter) stopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stop
}

// join takes a place. The connection is kept for what follows when the server allows.
func (w *waiter) join(ctx context.Context) (*rawConn, bool) {
	c := w.c
	rc, err := dialRaw(ctx, c.src, c.hostports[w.target])
	if err != nil {
		c.st.err(errorKind("join", response{}, err))
		return nil, false
	}
	w.joinStart = time.Since(c.start)
	t0 := time.Now()
	r, err := rc.do("POST", "/api/queues/"+c.cfg.Queue+"/join", "", 10*time.Second)
	w.joinEnd = time.Since(c.start)
	if err != nil || (r.status != 201 && r.status != 200) {
		c.st.err(errorKind("join", r, err))
		rc.close()
		return nil, false
	}
	c.st.joinLat.add(time.Since(t0))
	tk, ok := jsonStr(r.body, "ticket")
	if !ok {
		c.st.err("join_bad_body")
		rc.close()
		return nil, false
	}
	w.ticket = string(tk)
	if p, ok := jsonInt(r.body, "position"); ok {
		w.lastPos = p
	}
	if !r.keepAlive {
		rc.close()
		if rc, err = dialRaw(ctx, c.src, c.hostports[w.target]); err != nil {
			c.st.err(errorKind("join", response{}, err))
			return nil, false
		}
	}
	return rc, true
}

// runStream opens the stream on rc (or a new connection) and reads it until the
// connection ends. connected is called once, after the first event was parsed.
func (w *waiter) runStream(ctx context.Context, rc *rawConn, dialStart time.Time, connected func(ok bool)) {
	c := w.c
	once := func(ok bool) {
		if connected != nil {
			connected(ok)
			connected = nil
		}
	}
	defer once(false)
	if rc == nil {
		var err error
		if rc, err = dialRaw(ctx, c.src, c.hostports[w.target]); err != nil {
			c.st.err(errorKind("stream", response{}, err))
			w.healthy = false
			return
		}
	}
	if !w.setConn(rc) {
		rc.close()
		return
	}
	r, err := rc.openStream("/api/queues/"+c.cfg.Queue+"/stream", w.ticket, 15*time.Second)
	if err != nil || r.status != 200 {
		c.st.err(errorKind("stream", r, err))
		w.healthy = false
		rc.close()
		return
	}
	w.healthy = true
	first := true
	for {
		line, err := rc.br.ReadSlice('\n')
		if err != nil {
			if !w.stopped() {
				kind := "stream_dropped"
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					kind = "stream_first_event_timeout"
				}
				c.st.err(kind)
				w.healthy = false
			}
			rc.close()
			return
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if len(w.event) == 0 && len(w.data) == 0 {
				continue
			}
			w.dispatch()
			w.event, w.data = w.event[:0], w.data[:0]
			if first {
				first = false
				_ = rc.nc.SetReadDeadline(time.Time{})
				c.st.connectLat.add(time.Since(dialStart))
				once(true)
			}
		case line[0] == ':':
			now := time.Now()
			c.st.pings.Add(1)
			if !w.lastPing.IsZero() {
				c.st.pingGap.add(now.Sub(w.lastPing))
			}
			w.lastPing = now
		case bytes.HasPrefix(line, []byte("data:")):
			if len(w.data) > 0 {
				w.data = append(w.data, '\n')
			}
			w.data = append(w.data, bytes.TrimPrefix(line[5:], []byte(" "))...)
		case bytes.HasPrefix(line, []byte("event:")):
			w.event = append(w.event[:0], bytes.TrimSpace(line[6:])...)
		}
	}
}

func (w *waiter) dispatch() {
	c, st := w.c, w.c.st
	now := time.Now()
	var server time.Time
	if s, ok := jsonStr(w.data, "server_time"); ok {
		server, _ = parseServerTime(s)
	}
	tick, _ := jsonInt(w.data, "tick")
	switch string(w.event) {
	case "position":
		st.positions.Add(1)
		if w.admitted {
			st.posAfterAdmitted.Add(1)
			return
		}
		if !server.IsZero() {
			st.posLat.add(now.Sub(server))
			st.groupAdd(groupKey{w.target, tick}, server, now)
		}
		pos, ok := jsonInt(w.data, "position")
		if !ok {
			st.err("event_bad_position")
			return
		}
		switch {
		case w.lastPosTick > 0 && pos > w.lastPos:
			st.monoViolations.Add(1)
		case w.lastPosTick == 0 && w.lastPos > 0 && pos > w.lastPos:
			st.joinToStreamUp.Add(1) // the stream's first position is above the join answer's
		}
		epoch := c.epoch.Load()
		if c.active.Load() && epoch == w.lastPosEpoch && !w.lastPosAt.IsZero() {
			gap := now.Sub(w.lastPosAt)
			st.gapAll.add(gap)
			if pos <= c.cfg.Front {
				st.gapFront.add(gap)
			}
		}
		w.lastPos, w.lastPosTick, w.lastPosAt, w.lastPosEpoch = pos, tick, now, epoch
	case "admitted":
		st.admitted.Add(1)
		if w.admitted {
			st.dupAdmitted.Add(1)
			return
		}
		w.admitted, w.admTick = true, tick
		if !server.IsZero() {
			st.admLat.add(now.Sub(server))
		}
		if exp, ok := jsonStr(w.data, "token_expires_at"); ok && c.cfg.TTL > 0 {
			if t, ok := parseServerTime(exp); ok {
				st.admIssueLat.add(now.Sub(t.Add(-c.cfg.TTL)))
			}
		}
		var rec *admRecord
		if w.lastPosTick > 0 {
			rec = &admRecord{PosTick: w.lastPosTick, Pos: w.lastPos, AdmTick: tick}
		}
		st.admission(tick, rec)
	case "expired":
		st.expired.Add(1)
		if !server.IsZero() {
			st.expLat.add(now.Sub(server))
		}
	default:
		st.other.Add(1)
	}
}

// runPoll asks /status every interval until stopped or admitted, on a kept-alive
// connection (re-dialled after an error), as a client without streams would.
func (w *waiter) runPoll(ctx context.Context, rc *rawConn, offset time.Duration) {
	c, st := w.c, w.c.st
	interval := c.cfg.PollEvery
	next := time.Now().Add(offset)
	lastPos := int64(0)
	for {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				if rc != nil {
					rc.close()
				}
				return
			case <-time.After(d):
			}
		}
		next = next.Add(interval)
		if w.stopped() {
			if rc != nil {
				rc.close()
			}
			return
		}
		if rc == nil {
			var err error
			if rc, err = dialRaw(ctx, c.src, c.hostports[w.target]); err != nil {
				st.err(errorKind("poll", response{}, err))
				continue
			}
			if !w.setConn(rc) {
				rc.close()
				return
			}
		}
		t0 := time.Now()
		r, err := rc.do("GET", "/api/queues/"+c.cfg.Queue+"/status", w.ticket, 10*time.Second)
		if err != nil || r.status != 200 {
			if !w.stopped() {
				st.err(errorKind("poll", r, err))
			}
			rc.close()
			rc = nil
			continue
		}
		now := time.Now()
		st.polls.Add(1)
		st.pollLat.add(now.Sub(t0))
		if !r.keepAlive {
			rc.close()
			rc = nil
		}
		state, _ := jsonStr(r.body, "state")
		if string(state) == "admitted" {
			st.pollAdmitted.Add(1)
			if exp, ok := jsonStr(r.body, "token_expires_at"); ok && c.cfg.TTL > 0 {
				if t, ok := parseServerTime(exp); ok {
					st.pollIssueLat.add(now.Sub(t.Add(-c.cfg.TTL)))
				}
			}
			if rc != nil {
				rc.close()
			}
			return // a real client leaves for the order page
		}
		if pos, ok := jsonInt(r.body, "position"); ok {
			if lastPos > 0 && pos > lastPos {
				st.pollMonoViolations.Add(1)
			}
			lastPos = pos
		}
	}
}

// jsonLine writes v as one "@tag {json}" line for the parent.
func jsonLine(tag string, v any) []byte {
	b, _ := json.Marshal(v)
	return append(append([]byte("@"+tag+" "), b...), '\n')
}
