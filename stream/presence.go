package stream

import (
	"context"
	"time"

	"github.com/waitroom/waitroom/topology"
)

// Timings of the presence and report loops.
const (
	// goneFlushEvery: how soon a closed stream's ticket gets its last sign of life, so its
	// abandonment grace starts when the stream closed.
	goneFlushEvery = 2 * time.Second
	// touchBatch tickets go in one Touch call (one ZADD).
	touchBatch = 1000
	// touchTimeout and reportTimeout bound one Redis call of these loops.
	touchTimeout  = 2 * time.Second
	reportTimeout = time.Second
)

// presenceLoop keeps the places of open streams alive (abandonment works from the last
// sign of life) and records when a stream closed, so the grace starts then. One ZADD per
// touchBatch tickets per PresenceEvery: a sign-of-life cost, not a per-tick cost.
func (h *Hub) presenceLoop(ctx context.Context) {
	full := time.NewTicker(h.cfg.PresenceEvery)
	defer full.Stop()
	quick := time.NewTicker(goneFlushEvery)
	defer quick.Stop()
	for {
		select {
		case <-ctx.Done():
			h.flushGone(context.WithoutCancel(ctx))
			return
		case <-quick.C:
			h.flushGone(ctx)
		case <-full.C:
			h.touchAll(ctx)
		}
	}
}

func (h *Hub) flushGone(ctx context.Context) {
	h.mu.Lock()
	gone := h.gone
	h.gone = map[string][]string{}
	h.mu.Unlock()
	for q, ids := range gone {
		h.touch(ctx, q, ids)
	}
}

func (h *Hub) touchAll(ctx context.Context) {
	for _, qh := range h.queueList() {
		qh.mu.Lock()
		ids := make([]string, 0, len(qh.conns))
		for c := range qh.conns {
			// A pre-queue place does not expire before the start (the grace starts when the
			// draw places it), so it needs no sign of life: an idle pre-queue costs nothing.
			if !c.admitted && !c.pre {
				ids = append(ids, c.ticket)
			}
		}
		qh.mu.Unlock()
		h.touch(ctx, qh.name, ids)
	}
}

func (h *Hub) touch(ctx context.Context, q string, ids []string) {
	for len(ids) > 0 {
		n := min(len(ids), touchBatch)
		tctx, cancel := context.WithTimeout(ctx, touchTimeout)
		if err := h.src.Touch(tctx, q, ids[:n]); err != nil && ctx.Err() == nil {
			h.log.Warn().Err(err).Str("queue", q).Msg("stream: presence")
		}
		cancel()
		ids = ids[n:]
	}
}

// reportLoop publishes this instance's stream count in the instance registry; an instance
// that dies stops renewing it and drops out of the admin view within CountTTL.
func (h *Hub) reportLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.CountEvery)
	defer t.Stop()
	for {
		h.report(ctx)
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
			_ = h.registry.RemoveInstance(dctx, h.cfg.Instance)
			cancel()
			return
		case <-t.C:
		}
	}
}

func (h *Hub) report(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	in := topology.Instance{ID: h.cfg.Instance, SSEConnections: h.Count(), MaxStreams: h.cfg.MaxStreams,
		MaxConnections: h.cfg.MaxConns, StartedAt: h.startedAt.UTC(), LastSeen: time.Now().UTC()}
	if h.cfg.Connections != nil {
		in.Connections = h.cfg.Connections()
	}
	// Open streams per queue (the history's sse_connections sums them over instances).
	for _, qh := range h.queueList() {
		qh.mu.Lock()
		n := len(qh.conns)
		qh.mu.Unlock()
		if n > 0 {
			if in.Queues == nil {
				in.Queues = map[string]int64{}
			}
			in.Queues[qh.name] = int64(n)
		}
	}
	if err := h.registry.ReportInstance(ctx, in, h.cfg.CountTTL); err != nil && ctx.Err() == nil {
		h.log.Debug().Err(err).Msg("stream: report instance")
	}
}
