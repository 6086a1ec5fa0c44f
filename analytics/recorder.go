package analytics

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// Step is the recording step: rows are written for 10-s steps aligned to wall-clock
// multiples of 10 s.
const Step = 10 * time.Second

const (
	// markEvery is the finest spacing of the tail marks: joiners are placed in time to
	// within it (a mark taken sooner moves the last mark's tail instead, so a wait may read
	// up to this much long, never short).
	markEvery = 500 * time.Millisecond
	// maxMarks bounds one queue's marks: 7,200 marks of 500 ms cover an hour of steady
	// joining; the sequences of older joiners still waiting are not measured.
	maxMarks = 7200
	// leadGap: a queue not ticked here for this long was (or may have been) led elsewhere,
	// so what this instance knew of its line is dropped.
	leadGap = 3 * time.Second
	// flushDelay is how long after a step's end its rows are written (the last tick of the
	// step has been observed by then).
	flushDelay = 300 * time.Millisecond
	// maxPending bounds the finished steps waiting to be written (a stuck database).
	maxPending = 10000
	// retentionEvery is how often expired rows are deleted.
	retentionEvery = 5 * time.Minute
	// warnEvery: a database outage logs one warning per minute, however many rows it drops.
	warnEvery = time.Minute
)

// mark says that at time at the normal line's tail (the last sequence handed out) was tail.
type mark struct {
	at   time.Time
	tail int64
}

// tracker is what the recorder knows of one queue it leads.
type tracker struct {
	marks    []mark // tails in time order; tails never go down (a reset clears them)
	head     int64
	haveHead bool
	lastAt   time.Time
	cur      *stepAcc
}

// stepAcc accumulates one queue's step.
type stepAcc struct {
	queue   string
	start   time.Time
	waiting int64 // peak over the step's ticks, every lane
	hist    histogram
	samples []float64 // the first exactSamples waits, for exact p50/p95
}

// Recorder records the history of the queues this instance leads: a queue.TickObserver
// (ObserveTick only updates memory under a mutex) whose Run goroutine writes each finished
// step, rolls minutes up and deletes expired rows.
//
// Wait times: per queue it keeps marks (time, normal-line tail), at most one per 500 ms. A
// sequence s admitted by a tick (previous Head < s ≤ Head) joined at the first mark whose
// tail ≥ s; its wait is the tick's time minus that mark's. Sequences at or below the first
// mark's tail — joined before this instance led the queue, or older than the marks kept (an
// hour) — are not measured, and neither are the priority and bypass lanes. Pre-queue
// members get their sequences at the draw, so their wait counts from the draw.
type Recorder struct {
	st *Store

	mu      sync.Mutex
	queues  map[string]*tracker
	pending []*stepAcc // finished steps not yet written

	lastWarn      time.Time // Run's goroutine only
	lastRetention time.Time
	soldLogs      map[string]string // Run's goroutine only: the sold-out log written per queue (soldLogKey)
}

// NewRecorder returns the recorder of st.
func NewRecorder(st *Store) *Recorder {
	return &Recorder{st: st, queues: map[string]*tracker{}, soldLogs: map[string]string{}}
}

// ObserveTick implements queue.TickObserver.
func (r *Recorder) ObserveTick(name string, at time.Time, res queue.TickResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tr := r.queues[name]
	if tr == nil || at.Sub(tr.lastAt) > leadGap {
		tr = &tracker{cur: r.takeCur(tr)}
		r.queues[name] = tr
	}
	tr.lastAt = at
	start := at.Truncate(Step)
	if tr.cur != nil && !tr.cur.start.Equal(start) {
		r.finish(tr.cur)
		tr.cur = nil
	}
	if tr.cur == nil {
		tr.cur = &stepAcc{queue: name, start: start}
	}
	acc := tr.cur
	acc.waiting = max(acc.waiting, res.Waiting+res.WaitingPriority+res.WaitingBypass)
	tr.observeLine(at, res.Head, res.Tail, res.Seqs, acc)
}

// takeCur keeps a dropped tracker's step (its ticks happened; only the line is forgotten).
func (r *Recorder) takeCur(tr *tracker) *stepAcc {
	if tr == nil {
		return nil
	}
	return tr.cur
}

// finish queues acc for writing (mu held).
func (r *Recorder) finish(acc *stepAcc) {
	if len(r.pending) >= maxPending {
		return // the database has been away for long: newest steps are dropped
	}
	r.pending = append(r.pending, acc)
}

// observeLine records the tail and measures the sequences admitted by this tick: seqs, the
// tick's own list of the normal line's (in FIFO order or the lottery's picks; the admission
// loop always runs the admit.lua of its own binary, so the list is always there).
func (tr *tracker) observeLine(at time.Time, head, tail int64, seqs []int64, acc *stepAcc) {
	n := len(tr.marks)
	switch {
	case n > 0 && tail < tr.marks[n-1].tail, tr.haveHead && head < tr.head:
		// The line was reset (the queue made again): start over.
		tr.marks, tr.haveHead = tr.marks[:0], false
		n = 0
	}
	switch {
	case n == 0:
		tr.marks = append(tr.marks, mark{at, tail})
	case tail > tr.marks[n-1].tail && n >= 2 && at.Sub(tr.marks[n-1].at) < markEvery:
		tr.marks[n-1].tail = tail // joined since the last mark: counted from it
	case tail > tr.marks[n-1].tail:
		tr.marks = append(tr.marks, mark{at, tail})
	}
	if len(tr.marks) > maxMarks {
		tr.marks = slices.Delete(tr.marks, 0, maxMarks/8)
	}
	for _, s := range seqs {
		// Only sequences after the first mark's tail have a known join time (and none on the
		// first tick this instance sees).
		if !tr.haveHead || s <= tr.marks[0].tail {
			continue
		}
		j := sort.Search(len(tr.marks), func(i int) bool { return tr.marks[i].tail >= s })
		if j == len(tr.marks) {
			continue
		}
		w := at.Sub(tr.marks[j].at).Seconds()
		acc.hist.add(w)
		if len(acc.samples) < exactSamples {
			acc.samples = append(acc.samples, w)
		}
	}
	tr.head, tr.haveHead = head, true
	// Marks wholly behind the head are done with; the last of them stays as the base.
	k := sort.Search(len(tr.marks), func(i int) bool { return tr.marks[i].tail > head })
	if k > 256 {
		tr.marks = slices.Delete(tr.marks, 0, k-1)
	}
}

// Run writes each step's rows after it ends, until ctx ends; then it writes the steps
// recorded so far (the current one too: a leader that takes over in the same step adds to
// its row).
func (r *Recorder) Run(ctx context.Context) error {
	for {
		now := r.st.now()
		boundary := now.Truncate(Step).Add(Step)
		t := time.NewTimer(boundary.Add(flushDelay).Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.st.cfg.QueryTimeout)
			r.flush(fctx, boundary)
			cancel()
			return nil
		case <-t.C:
		}
		r.flush(ctx, boundary)
		if boundary.Truncate(time.Minute).Equal(boundary) {
			if err := r.st.rollup(ctx, boundary); err != nil {
				r.warn(err, "history: minute rollup failed")
			}
		}
		if now := r.st.now(); now.Sub(r.lastRetention) >= retentionEvery {
			r.lastRetention = now
			if err := r.st.deleteExpired(ctx, now); err != nil {
				r.warn(err, "history: deleting expired rows failed")
			}
		}
	}
}

// flush writes the rows of every step that ended by boundary.
func (r *Recorder) flush(ctx context.Context, boundary time.Time) {
	r.mu.Lock()
	done := r.pending
	r.pending = nil
	for name, tr := range r.queues {
		if tr.cur != nil && tr.cur.start.Before(boundary) {
			done = append(done, tr.cur)
			tr.cur = nil
		}
		if tr.cur == nil && boundary.Sub(tr.lastAt) > 2*Step {
			delete(r.queues, name) // not led here any more
		}
	}
	r.mu.Unlock()
	if len(done) == 0 {
		return
	}
	rows, err := r.rows(ctx, done)
	if err == nil {
		err = r.st.writeSteps(ctx, rows)
	}
	if err != nil {
		r.warn(err, "history: steps not recorded")
		return
	}
	// Only a written log counts as recorded: after a failed write the next step carries it again.
	for _, row := range rows {
		if row.sellouts != nil {
			r.soldLogs[row.queue] = row.soldLogKey
		}
	}
}

// rows reads each queue's counters once and the instances' streams once for all queues.
func (r *Recorder) rows(ctx context.Context, done []*stepAcc) ([]stepRow, error) {
	ctx, cancel := context.WithTimeout(ctx, r.st.cfg.QueryTimeout)
	defer cancel()
	streams := map[string]int64{}
	ins, err := r.st.ins.Instances(ctx)
	if err != nil {
		return nil, err
	}
	for _, in := range ins {
		for q, n := range in.Queues {
			streams[q] += n
		}
	}
	stats := map[string]queue.QueueStats{}
	rows := make([]stepRow, 0, len(done))
	for _, acc := range done {
		st, ok := stats[acc.queue]
		if !ok {
			st, err = r.st.src.Stats(ctx, acc.queue)
			if err != nil {
				continue // deleted meanwhile, or Redis away: this step is not recorded
			}
			stats[acc.queue] = st
		}
		row := stepRow{queue: acc.queue, t: acc.start.UTC(), waiting: acc.waiting, prequeue: st.Prequeue,
			sse: streams[acc.queue], joined: st.Joined, admitted: st.AdmittedTotal, abandoned: st.Abandoned,
			expired: st.Expired, left: st.Left, dropped: st.Dropped, hist: acc.hist, rate: st.RatePerSecond,
			reason: st.RateReason}
		if k := soldLogKey(st.SoldOutPeriods); k != r.soldLogs[acc.queue] {
			row.sellouts, row.soldLogKey = sellouts(st), k // remembered once written (flush)
		}
		if n := len(acc.samples); n > 0 && int64(n) == acc.hist.count() {
			p50, p95 := exactQuantile(acc.samples, 0.5), exactQuantile(acc.samples, 0.95)
			row.p50, row.p95 = &p50, &p95
		} else if n > 0 {
			p50, _ := acc.hist.quantile(0.5)
			p95, _ := acc.hist.quantile(0.95)
			row.p50, row.p95 = &p50, &p95
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// warn logs err at most once per warnEvery (Run's goroutine only).
func (r *Recorder) warn(err error, msg string) {
	if now := r.st.now(); now.Sub(r.lastWarn) >= warnEvery {
		r.lastWarn = now
		r.st.cfg.Log.Warn().Err(err).Msg(msg + " (logged once a minute while it lasts)")
	}
}

// sellouts are the queue's logged sold-out periods (queue.QueueStats.SoldOutPeriods).
func sellouts(st queue.QueueStats) []SoldOutPeriod {
	out := make([]SoldOutPeriod, 0, len(st.SoldOutPeriods))
	for _, p := range st.SoldOutPeriods {
		sp := SoldOutPeriod{From: p.From.UTC()}
		if !p.To.IsZero() {
			to := p.To.UTC()
			sp.To = &to
		}
		out = append(out, sp)
	}
	return out
}

// soldLogKey sums up a queue's sold-out log: when it changes, the log is written again.
func soldLogKey(ps []queue.SoldOutPeriod) string {
	if len(ps) == 0 {
		return ""
	}
	l := ps[len(ps)-1]
	return fmt.Sprint(len(ps), l.From.UnixMilli(), l.To.UnixMilli())
}
