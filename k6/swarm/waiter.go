package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
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

	// Reconnecting streams (-mode storm). state is read by the status reporter.
	state          atomic.Int32
	retryHint      time.Duration // the server's last "retry:" (0 = none seen)
	downAt         time.Time     // when the live stream ended (zero while live)
	afterReconnect bool          // the next event is the first of a reconnected stream
	admOnStream    bool          // an admitted event arrived on the current stream
	token          string        // the first token seen
	tokenIssued    int64         // its issuance (token_expires_at − TTL), unix ms
	tokenChanged   bool          // a later admitted event carried another token
	reconnects     int           // streams opened after the first one
	reconns        []reconnRecord

	// Drop day (written by the waiter's goroutine; read by the process after it reported
	// its first event, or after the streams ended).
	drop    dropRec
	joinPre bool // the join answered state "prequeue"
}

// Waiter states, as the status reporter counts them.
const (
	wsNew  int32 = iota // joining, or opening its first stream
	wsDown              // its stream ended; reconnecting
	wsLive              // a stream is open and has delivered its first event
	wsDone              // admitted and gone to the order page (-leave-admitted)
	wsLost              // the server no longer knows the ticket (401/404): given up
)

// streamEnd is how one stream request ended.
type streamEnd struct {
	kind       endKind
	status     int // HTTP status when kind is endStatus
	retryAfter int // its Retry-After (seconds), -1 if none
	gotEvent   bool
}

type endKind int

const (
	endStopped endKind = iota // closed by the swarm (phase change, stop)
	endNoConn                 // no HTTP answer: dial failed, reset, timeout
	endStatus                 // answered, but not 200
	endShed                   // 200, then the end before any event: the server's "full, retry later"
	endDropped                // ended after events (the instance went away, or closed it)
	endLeft                   // admitted: the user left for the order page (-leave-admitted)
)

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
	rc, _, ok := w.joinOnce(ctx)
	return rc, ok
}

// joinOnce is one join attempt on w.target (the waiter's ticket, if it has one, is sent
// along, so a repeated join keeps the place). r is the answer when there was one.
func (w *waiter) joinOnce(ctx context.Context) (*rawConn, response, bool) {
	c := w.c
	rc, err := dialRaw(ctx, c.src, c.hostports[w.target])
	if err != nil {
		c.st.err(errorKind("join", response{}, err))
		return nil, response{retryAfter: -1}, false
	}
	w.joinStart = time.Since(c.start)
	t0 := time.Now()
	r, err := rc.do("POST", "/api/queues/"+c.cfg.Queue+"/join", w.ticket, 10*time.Second)
	w.joinEnd = time.Since(c.start)
	if err != nil || (r.status != 201 && r.status != 200) {
		c.st.err(errorKind("join", r, err))
		rc.close()
		return nil, r, false
	}
	c.st.joinLat.add(time.Since(t0))
	tk, ok := jsonStr(r.body, "ticket")
	if !ok {
		c.st.err("join_bad_body")
		rc.close()
		return nil, r, false
	}
	w.ticket = string(tk)
	if p, ok := jsonInt(r.body, "position"); ok {
		w.lastPos = p
	}
	if s, ok := jsonStr(r.body, "state"); ok && string(s) == "prequeue" && !w.joinPre {
		w.joinPre = true
		c.st.joinPrequeue.Add(1)
	}
	if c.cfg.DropDay {
		if d, ok := jsonStr(r.body, "draw_id"); ok {
			w.drop.DrawID = string(d)
		}
	}
	if !r.keepAlive {
		rc.close()
		if rc, err = dialRaw(ctx, c.src, c.hostports[w.target]); err != nil {
			c.st.err(errorKind("join", response{}, err))
			return nil, r, false
		}
	}
	return rc, r, true
}

// runStream opens the stream on rc (or a new connection) and reads it until the
// connection ends. connected is called once, after the first event was parsed.
func (w *waiter) runStream(ctx context.Context, rc *rawConn, dialStart time.Time, connected func(ok bool)) streamEnd {
	c := w.c
	once := func(ok bool) {
		if connected != nil {
			connected(ok)
			connected = nil
		}
	}
	defer once(false)
	end := streamEnd{retryAfter: -1}
	if rc == nil {
		var err error
		if rc, err = dialRaw(ctx, c.src, c.hostports[w.target]); err != nil {
			c.st.err(errorKind("stream", response{}, err))
			w.healthy = false
			end.kind = endNoConn
			return end
		}
	}
	if !w.setConn(rc) {
		rc.close()
		return end // endStopped
	}
	r, err := rc.openStream("/api/queues/"+c.cfg.Queue+"/stream", w.ticket, 15*time.Second)
	if err != nil || r.status != 200 {
		c.st.err(errorKind("stream", r, err))
		w.healthy = false
		rc.close()
		end.kind, end.status, end.retryAfter = endStatus, r.status, r.retryAfter
		if err != nil {
			end.kind = endNoConn
		}
		return end
	}
	w.healthy = true
	w.admOnStream = false
	first := true
	for {
		line, err := rc.br.ReadSlice('\n')
		if err != nil {
			end.gotEvent = !first
			switch {
			case w.stopped():
				end.kind = endStopped
			case first && c.cfg.Reconnect && !isTimeout(err):
				// 200 and the end without an event: the server's "full, come back after
				// retry" (a retry field and nothing else).
				end.kind = endShed
			default:
				kind := "stream_dropped"
				if isTimeout(err) {
					kind = "stream_first_event_timeout"
				}
				c.st.err(kind)
				w.healthy = false
				end.kind = endDropped
				if first {
					end.kind = endNoConn
				} else if c.cfg.DropDay && w.drop.EndAt == 0 {
					w.drop.EndAt = time.Now().UnixNano()
					c.ended.Add(1)
				}
			}
			rc.close()
			return end
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
				w.up()
				once(true)
			}
			if w.admitted && c.cfg.LeaveAdmitted {
				// A real client leaves for the order page with its token.
				w.state.Store(wsDone)
				end.kind, end.gotEvent = endLeft, true
				rc.close()
				return end
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
		case bytes.HasPrefix(line, []byte("retry:")):
			if ms, err := strconv.Atoi(string(bytes.TrimSpace(line[6:]))); err == nil && ms >= 0 {
				w.retryHint = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// up marks the waiter live after the first event of a stream; after a reconnect, the
// time it was without a stream is recorded.
func (w *waiter) up() {
	c := w.c
	prev := w.state.Swap(wsLive)
	now := time.Now()
	if !w.downAt.IsZero() {
		c.st.reconnectLat.add(now.Sub(w.downAt))
		w.downAt = time.Time{}
	}
	if prev != wsLive {
		for {
			last := c.lastUp.Load()
			if now.UnixNano() <= last || c.lastUp.CompareAndSwap(last, now.UnixNano()) {
				break
			}
		}
	}
	if prev == wsDone || prev == wsLost {
		w.state.Store(prev)
	}
}

// streamLoop keeps the waiter's stream open the way a browser does: after a stream ends it
// waits for the server's retry hint (and, after failures, an exponential back-off with
// jitter, or a 429/503's Retry-After), then opens the stream again with the same ticket on
// another live instance, as a load balancer in front of them would send it. Without
// -reconnect it is one runStream.
func (w *waiter) streamLoop(ctx context.Context, rc *rawConn, dialStart time.Time, connected func(ok bool)) {
	c := w.c
	fails := 0
	for {
		end := w.runStream(ctx, rc, dialStart, connected)
		connected, rc = nil, nil
		if !c.cfg.Reconnect || end.kind == endStopped || w.stopped() || ctx.Err() != nil {
			return
		}
		if end.kind == endLeft {
			return
		}
		if end.gotEvent {
			fails = 0 // it was live (EventSource's onopen resets the count)
		}
		var delay time.Duration
		switch end.kind {
		case endDropped:
			c.st.drops.Add(1)
			delay = w.hint()
		case endShed:
			c.st.sheds.Add(1)
			fails++
			delay = max(w.hint(), backoff(fails-1))
		case endNoConn:
			c.st.connFails.Add(1)
			c.markDown(w.target)
			fails++
			delay = backoff(fails - 1)
		case endStatus:
			switch end.status {
			case 401, 403, 404, 410:
				// The place is gone: a browser would join as a new user; for the checks the
				// user is lost.
				c.st.lost.Add(1)
				w.state.Store(wsLost)
				return
			}
			fails++
			delay = backoff(fails - 1)
			if end.retryAfter >= 0 && (end.status == 429 || end.status == 503) {
				delay = retryDelay(end.retryAfter)
			}
		}
		if w.state.Load() == wsLive {
			w.state.Store(wsDown)
		}
		if w.downAt.IsZero() {
			w.downAt = time.Now()
		}
		if !c.sleep(ctx, delay) || w.stopped() {
			return
		}
		w.target = c.pickTarget(w.target)
		w.afterReconnect = true
		w.reconnects++
		c.st.reconnects.Add(1)
		dialStart = time.Now()
	}
}

// hint is the server's last retry, or EventSource's usual default when none was seen.
func (w *waiter) hint() time.Duration {
	if w.retryHint > 0 {
		return w.retryHint
	}
	return 3 * time.Second
}

// backoff is the waiting page's back-off for the n-th (0-based) failure in a row
// (static/assets/waitroom.js backoffMs): a cap doubling from 1 s to 30 s, jittered over
// its upper half.
func backoff(n int) time.Duration {
	capMS := min(30000.0, 1000*float64(int64(1)<<min(n, 10)))
	return time.Duration(capMS/2+rand.Float64()*capMS/2) * time.Millisecond
}

// retryDelay is the waiting page's wait after a 429/503 (waitroom.js retryDelayMs): the
// Retry-After (at least 1 s) plus up to as much again (at most 3 s) of jitter.
func retryDelay(retryAfter int) time.Duration {
	base := float64(max(1, retryAfter)) * 1000
	return time.Duration(base+rand.Float64()*min(base, 3000)) * time.Millisecond
}

// arrive is a new user during the storm: it joins (on 503, again after the Retry-After
// with jitter, on another instance), then streams like the others.
func (w *waiter) arrive(ctx context.Context) {
	c := w.c
	t0 := time.Now()
	fails := 0
	for {
		if w.stopped() || ctx.Err() != nil {
			return
		}
		rc, r, ok := w.joinOnce(ctx)
		if ok {
			c.st.arrivalJoinLat.add(time.Since(t0))
			w.streamLoop(ctx, rc, t0, nil)
			return
		}
		fails++
		var delay time.Duration
		switch {
		case r.status == 503:
			c.st.join503.Add(1)
			delay = retryDelay(r.retryAfter)
		case r.status == 0:
			c.markDown(w.target)
			delay = backoff(fails - 1)
		default:
			delay = backoff(fails - 1)
		}
		if !c.sleep(ctx, delay) {
			return
		}
		w.target = c.pickTarget(w.target)
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
	afterReconnect := w.afterReconnect
	w.afterReconnect = false
	if w.drop.First == 0 {
		w.drop.First = eventKind(w.event)
	}
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
		null := !ok && bytes.HasPrefix(valueOf(w.data, "position"), []byte("null")) // a random queue's
		if ok || null {
			if mark := c.mark.Load(); mark == 0 || now.UnixNano() < mark {
				w.drop.Early++ // before the parent's "watch" (a drop day's start)
			} else if w.drop.PosAt == 0 {
				// The first position since "watch" (in a draw: the drawn place).
				w.drop.PosAt, w.drop.Pos, w.drop.PosNull = now.UnixNano(), pos, null
				if !server.IsZero() {
					w.drop.PosSrv = server.UnixNano()
				}
				c.gotPos.Add(1)
			}
		}
		if !ok {
			if !null {
				st.err("event_bad_position")
			}
			return
		}
		if afterReconnect && w.lastPosTick > 0 {
			w.reconns = append(w.reconns, reconnRecord{PrevTick: w.lastPosTick, PrevPos: w.lastPos, Tick: tick, Pos: pos})
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
		tok, _ := jsonStr(w.data, "token")
		if w.admitted {
			switch {
			case w.token != "" && string(tok) != w.token:
				w.tokenChanged = true
				st.tokenChanged.Add(1)
				st.dupAdmitted.Add(1)
			case c.cfg.Reconnect && !w.admOnStream:
				st.admittedResent.Add(1) // sent again on a new stream: same token, fine
			default:
				st.dupAdmitted.Add(1)
			}
			w.admOnStream = true
			return
		}
		w.admOnStream = true
		w.admitted, w.admTick = true, tick
		w.token = string(tok)
		if !server.IsZero() {
			st.admLat.add(now.Sub(server))
		}
		if exp, ok := jsonStr(w.data, "token_expires_at"); ok && c.cfg.TTL > 0 {
			if t, ok := parseServerTime(exp); ok {
				issued := t.Add(-c.cfg.TTL)
				w.tokenIssued = issued.UnixMilli()
				if afterReconnect {
					st.admIssueLatReconnect.add(now.Sub(issued)) // admitted while without a stream
				} else {
					st.admIssueLat.add(now.Sub(issued))
				}
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
	case "prequeue":
		st.prequeues.Add(1)
		w.drop.Pre++
	case "sold_out":
		st.soldOuts.Add(1)
		if w.drop.SoldAt != 0 {
			st.soldOutTwice.Add(1)
			return
		}
		w.drop.SoldAt = now.UnixNano()
		if !server.IsZero() {
			w.drop.SoldSrv = server.UnixNano()
		}
		c.gotSold.Add(1)
	case "closed":
		st.closedEv.Add(1)
	case "ping":
		// The heartbeat as an event (drop day), in place of the ": ping" comment.
		st.pings.Add(1)
		st.pingEvents.Add(1)
		if !w.lastPing.IsZero() {
			st.pingGap.add(now.Sub(w.lastPing))
		}
		w.lastPing = now
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
