package queue

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/waitroom/waitroom/internal/rstore"
)

// heldTick is a tick whose writes an attached replica had not acknowledged within
// AckTimeout: its message (the admissions, the line's new state) is kept here instead of
// being published, and the queue's loop runs no further tick until a replica holds it.
// Nobody learns of its admissions meanwhile: streams hear nothing, and token reads
// (confirm) answer ErrUnconfirmed. Admission slows by the time held, visibly
// (queue_admission_held, the dashboard's queue card), instead of telling buyers of tokens a
// failover could take back.
type heldTick struct {
	msg      string
	ev       int64
	admitted int64
	since    time.Time
	counted  time.Time // held time is counted up to here (queue_admission_held_seconds_total)
	tries    int
}

// heldField is the field of the queue's clock hash that says, to every instance's dashboard,
// that admission is held: the time (unix ms) of the leader's last try. The try's harmless
// write is this field itself; a leader that dies while holding leaves a time that stops
// moving, which the overview reads as no longer held after heldStale.
const heldField = "held_ms"

// heldStale is how old a held_ms may be and still mean "held" (the leader tries every tick
// interval plus AckTimeout).
const heldStale = 3 * time.Second

// hold keeps tick r's message msg of queue name until a replica acknowledges it.
func (a *Admitter) hold(name, msg string, r TickResult, log zerolog.Logger) {
	now := time.Now()
	a.mu.Lock()
	a.holds[name] = &heldTick{msg: msg, ev: r.Ev, admitted: r.Admitted, since: now, counted: now}
	a.mu.Unlock()
	a.q.m.held.WithLabelValues(name).Set(1)
	a.q.m.heldTicks.WithLabelValues(name).Inc()
	log.Warn().Str("queue", name).Int64("ev", r.Ev).Int64("admitted", r.Admitted).Int64("acks", r.Acks).
		Msg("admission: a replica did not acknowledge the tick in time; holding it (no tick, no token handed out) until one does")
}

func (a *Admitter) heldOf(name string) *heldTick {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.holds[name]
}

// holding reports whether queue name still has a held tick after one more try to have it
// acknowledged: one harmless write in the queue's slot and WAIT on the same connection
// (the replication stream is ordered: the acknowledgement covers the held tick). Once a
// replica holds it — or the master has no replica left to promote — its message goes out
// and admission resumes.
func (a *Admitter) holding(ctx context.Context, name string, log zerolog.Logger) bool {
	h := a.heldOf(name)
	if h == nil {
		return false
	}
	h.tries++
	want := a.q.ackWant(ctx, name)
	ok, alone := want == 0, want == 0
	acks, ev, err := a.q.ackHeld(ctx, name, want)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn().Err(err).Str("queue", name).Msg("admission: confirm the held tick")
			a.q.ReloadTopology(ctx)
		}
		a.q.m.heldSeconds.WithLabelValues(name).Add(time.Since(h.counted).Seconds())
		h.counted = time.Now()
		return true
	}
	if ev != h.ev {
		// The master that answers does not hold the tick (a failover took it back, with
		// nothing told of it): its message must never go out.
		a.dropHeld(name, log)
		return false
	}
	if want > 0 {
		switch {
		case acks >= int64(want):
			ok = true
		default:
			var first bool
			ok, alone, first = a.q.shortfall(ctx, name, acks)
			if first {
				log.Warn().Str("queue", name).Msg("admission: the Redis master has no replica; admissions go out unconfirmed until one is attached")
			}
		}
	}
	now := time.Now()
	a.q.m.heldSeconds.WithLabelValues(name).Add(now.Sub(h.counted).Seconds())
	h.counted = now
	if !ok {
		return true
	}
	a.mu.Lock()
	if a.holds[name] != h {
		a.mu.Unlock()
		return a.heldOf(name) != nil
	}
	delete(a.holds, name)
	a.mu.Unlock()
	a.q.m.held.WithLabelValues(name).Set(0)
	if alone && h.admitted > 0 {
		a.q.m.unconfirmed.WithLabelValues(name).Add(float64(h.admitted))
	}
	if err := a.q.publishTick(ctx, name, h.msg); err != nil {
		log.Warn().Err(err).Str("queue", name).Msg("admission: publish tick") // streams see the gap and resync
	}
	_ = a.q.rdb.HDel(ctx, rstore.KeysFor(name).Clock(), heldField).Err() // the dashboard's line; heldStale covers a failure
	log.Info().Str("queue", name).Int64("ev", h.ev).Int64("admitted", h.admitted).Int("tries", h.tries).
		Dur("held", now.Sub(h.since)).Bool("unconfirmed", alone).Msg("admission: held tick released")
	return false
}

// ackHeld is ackWrite for a held tick: the try's time in heldField (the dashboard's line),
// the event counter (the tick is still there: ev is the tick's own), then WAIT for want
// replicas (none when want is 0).
func (q *Queue) ackHeld(ctx context.Context, name string, want int) (acks, ev int64, err error) {
	k := rstore.KeysFor(name)
	n, err := q.noRetryNode(ctx, k.Clock())
	if err != nil {
		return 0, 0, err
	}
	pipe := n.Pipeline()
	pipe.HSet(ctx, k.Clock(), heldField, strconv.FormatInt(time.Now().UnixMilli(), 10))
	e := pipe.Get(ctx, k.Ev())
	var w *redis.Cmd
	if want > 0 {
		w = pipe.Do(ctx, "WAIT", want, q.cfg.AckTimeout.Milliseconds())
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return 0, 0, err
	}
	ev, _ = e.Int64()
	if w != nil {
		acks = toInt(w.Val())
	}
	return acks, ev, nil
}

// dropHeld forgets queue name's held tick (the lease is gone): its message is never
// published. Its admissions stand in Redis; streams see the gap in event numbers and
// resync, and token reads confirm before handing a token out.
func (a *Admitter) dropHeld(name string, log zerolog.Logger) {
	a.mu.Lock()
	h := a.holds[name]
	delete(a.holds, name)
	a.mu.Unlock()
	if h == nil {
		return
	}
	a.q.m.held.WithLabelValues(name).Set(0)
	a.q.m.heldSeconds.WithLabelValues(name).Add(time.Since(h.counted).Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_ = a.q.rdb.HDel(ctx, rstore.KeysFor(name).Clock(), heldField).Err()
	cancel()
	log.Warn().Str("queue", name).Int64("ev", h.ev).Dur("held", time.Since(h.since)).Msg("admission: lease lost while holding a tick; its message is dropped")
}

// Held lists the queues whose admission this Admitter holds for a replica's acknowledgement.
func (a *Admitter) Held() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.holds))
	for n := range a.holds {
		out = append(out, n)
	}
	sortStrings(out)
	return out
}
