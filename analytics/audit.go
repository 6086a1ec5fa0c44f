package analytics

// The audit log: every change an operator makes through the admin API, with who made it
// and the target's state before and after (table audit_log, migration 009_audit).
//
// Writing is asynchronous so that an admin change never waits for, or fails because of,
// the audit store: Record hands the entry to a buffered channel (AuditBuffer entries) that
// one goroutine drains, inserting up to AuditBatch entries per statement. When PostgreSQL
// fails, the batch is retried auditRetries times with a growing pause; after that — or when
// the buffer is full because the store has been down for a while — each lost entry is
// logged at error level with its whole content (message "audit entry lost"), so the record
// survives in the logs. The choice: an operator fixing a sale while PostgreSQL is down must
// not be blocked by the audit log; the price is that the log can miss entries, never
// silently.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// AuditEntry is one admin change.
type AuditEntry struct {
	At     time.Time
	Actor  string // the admin token's name
	Action string // queue.create, queue.update, product.update, keys.rotate, …
	Target string // queue:<name>, product:<id>, invite:<queue>/<prefix>, keys, limits
	Queue  string // the queue the change is about ("" = none: keys, limits)
	Before json.RawMessage
	After  json.RawMessage // nil = null
}

// Sizes of the audit writer.
const (
	// AuditBuffer is how many entries may wait to be written.
	AuditBuffer = 1024
	// AuditBatch is the most entries one INSERT writes.
	AuditBatch = 100
	// AuditMaxLimit is the most entries one List answers.
	AuditMaxLimit = 500
)

// auditRetries are the pauses before each retry of a failed batch.
var auditRetries = [...]time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second}

// auditTimeout bounds one insert or list statement.
const auditTimeout = 5 * time.Second

// AuditLog writes and reads the audit log. Its writer goroutine runs from NewAuditLog to
// Close.
type AuditLog struct {
	pool  *pgxpool.Pool
	log   zerolog.Logger
	in    chan AuditEntry
	flush chan chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// retries are the pauses before each retry of a failed batch (auditRetries; tests
	// shorten them).
	retries []time.Duration
}

// NewAuditLog starts the audit log's writer on pool (migrated by orders.Open: 009_audit).
func NewAuditLog(pool *pgxpool.Pool, log zerolog.Logger) *AuditLog {
	a := &AuditLog{pool: pool, log: log, in: make(chan AuditEntry, AuditBuffer), flush: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}), retries: auditRetries[:]}
	go a.run()
	return a
}

// Record queues e for writing; it never blocks. An entry that finds the buffer full, or
// comes after Close, is logged at error level instead (see the package note above).
func (a *AuditLog) Record(e AuditEntry) {
	select {
	case <-a.stop:
		a.lost(e, "the audit log is closed")
		return
	default:
	}
	select {
	case a.in <- e:
	default:
		a.lost(e, "the audit buffer is full")
	}
}

// Close stops accepting entries and writes the ones waiting, within ctx (what is still
// unwritten when ctx ends is logged as lost). Idempotent.
func (a *AuditLog) Close(ctx context.Context) {
	a.once.Do(func() { close(a.stop) })
	select {
	case <-a.done:
	case <-ctx.Done():
	}
}

// Flush waits until the entries recorded before it are written (or given up), within
// ctx: a list read right after a change on this instance then holds it.
func (a *AuditLog) Flush(ctx context.Context) {
	ack := make(chan struct{})
	select {
	case a.flush <- ack:
	case <-a.done:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-ack:
	case <-ctx.Done():
	}
}

func (a *AuditLog) run() {
	defer close(a.done)
	for {
		select {
		case e := <-a.in:
			a.write(a.drain(e))
		case ack := <-a.flush:
			for len(a.in) > 0 {
				a.write(a.drain(<-a.in))
			}
			close(ack)
		case <-a.stop:
			for len(a.in) > 0 {
				a.write(a.drain(<-a.in))
			}
			return
		}
	}
}

// drain takes first and whatever else waits, up to AuditBatch entries.
func (a *AuditLog) drain(first AuditEntry) []AuditEntry {
	batch := []AuditEntry{first}
	for len(batch) < AuditBatch {
		select {
		case e := <-a.in:
			batch = append(batch, e)
		default:
			return batch
		}
	}
	return batch
}

// write inserts batch, retrying; a batch that cannot be written is logged entry by entry.
func (a *AuditLog) write(batch []AuditEntry) {
	err := a.insert(batch)
	for i := 0; err != nil && i < len(a.retries); i++ {
		a.log.Warn().Err(err).Int("entries", len(batch)).Msg("audit: write failed; retrying")
		select {
		case <-time.After(a.retries[i]):
		case <-a.stop:
			// Shutting down: one last try without waiting.
			i = len(a.retries)
		}
		err = a.insert(batch)
	}
	if err != nil {
		for _, e := range batch {
			a.lost(e, err.Error())
		}
	}
}

func (a *AuditLog) insert(batch []AuditEntry) error {
	n := len(batch)
	at, actor, action, target := make([]time.Time, n), make([]string, n), make([]string, n), make([]string, n)
	q, before, after := make([]*string, n), make([]*string, n), make([]*string, n)
	for i, e := range batch {
		at[i], actor[i], action[i], target[i] = e.At, e.Actor, e.Action, e.Target
		if e.Queue != "" {
			q[i] = &batch[i].Queue
		}
		before[i], after[i] = auditJSON(e.Before), auditJSON(e.After)
	}
	ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
	defer cancel()
	_, err := a.pool.Exec(ctx, `INSERT INTO audit_log (at, actor, action, target, queue, before, after)
		SELECT t.at, t.actor, t.action, t.target, t.queue, t.before::jsonb, t.after::jsonb
		FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
		AS t(at, actor, action, target, queue, before, after)`, at, actor, action, target, q, before, after)
	if err != nil {
		return fmt.Errorf("audit: insert: %w", classify(err))
	}
	return nil
}

// auditJSON is a state as a jsonb parameter (nil: SQL NULL; JSON null is stored as NULL).
func auditJSON(raw json.RawMessage) *string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	s := string(raw)
	return &s
}

// lost logs an entry that will not reach the table, with everything it holds.
func (a *AuditLog) lost(e AuditEntry, why string) {
	a.log.Error().Str("why", why).Time("at", e.At).Str("actor", e.Actor).Str("action", e.Action).
		Str("target", e.Target).Str("queue", e.Queue).RawJSON("before", auditRaw(e.Before)).
		RawJSON("after", auditRaw(e.After)).Msg("audit entry lost")
}

func auditRaw(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	return raw
}

// List returns the newest limit entries (1…AuditMaxLimit), newest first; with queueName
// only the entries about that queue. Entries recorded on this instance before the call are
// written first (Flush, up to a second). ErrUnavailable when PostgreSQL does not answer.
func (a *AuditLog) List(ctx context.Context, limit int, queueName string) ([]AuditEntry, error) {
	if limit < 1 || limit > AuditMaxLimit {
		return nil, fmt.Errorf("audit: limit %d out of 1…%d", limit, AuditMaxLimit)
	}
	fctx, cancel := context.WithTimeout(ctx, time.Second)
	a.Flush(fctx)
	cancel()
	ctx, cancel = context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	const cols = `SELECT at, actor, action, target, coalesce(queue, ''), before, after FROM audit_log`
	var rows pgx.Rows
	var err error
	if queueName == "" {
		rows, err = a.pool.Query(ctx, cols+` ORDER BY at DESC, id DESC LIMIT $1`, limit)
	} else {
		rows, err = a.pool.Query(ctx, cols+` WHERE queue = $2 ORDER BY at DESC, id DESC LIMIT $1`, limit, queueName)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: list: %w", classify(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		var before, after []byte
		if err := r.Scan(&e.At, &e.Actor, &e.Action, &e.Target, &e.Queue, &before, &after); err != nil {
			return e, err
		}
		if before != nil {
			e.Before = before
		}
		if after != nil {
			e.After = after
		}
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: list: %w", classify(err))
	}
	return out, nil
}
