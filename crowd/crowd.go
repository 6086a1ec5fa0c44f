// Package crowd keeps a simulated crowd waiting in one queue, so that a visitor of the demo
// sees a line move: a place in the tens or hundreds that counts down, an ETA, and the turn a
// minute or two later. The simulated waiters are cheap — they join through package queue
// directly (no HTTP request, no stream), are kept alive with one touch per pass for all of
// them, and give up their admission token as soon as they are admitted.
//
// Several instances may each run a Crowd on the same queue without the crowd growing: every
// pass tops the line up to Size from the queue's own counts in Redis, and names its new
// waiters after the line's tail (Snapshot.Tail), so two instances that top up at the same
// time make the same tickets — a join of a ticket that already has a place returns that place.
// Only a real visitor who joins while a top-up runs can shift the names; the line is then
// one visitor longer, which is what it is anyway. A pass slow enough that the tickets it
// names were let in meanwhile makes new places beyond the crowd; its instance's next pass
// gives those back.
package crowd

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/queue"
)

// Line is what the crowd needs of the waiting line (*queue.Queue has it).
type Line interface {
	Join(ctx context.Context, t queue.Ticket) (queue.Place, bool, error)
	Snapshot(ctx context.Context, name string) (queue.Snapshot, error)
	Touch(ctx context.Context, queue string, ids []string) error
	Leave(ctx context.Context, t queue.Ticket) error
}

// Config says which queue holds the crowd and how large it is. Zero fields take the
// documented defaults.
type Config struct {
	// Queue is the queue the crowd waits in. The crowd assumes it admits first come, first
	// served (method fifo): a waiter whose sequence the line's head has passed was admitted.
	Queue string
	// Size is how many people the crowd keeps waiting, real visitors included: the line is
	// topped up to it, never beyond.
	Size int
	// Every is how often the crowd is topped up and its waiters are kept alive (1 s). It must
	// be well under the queue's abandonment grace (WR_GRACE, at least 5 s).
	Every time.Duration
	Log   zerolog.Logger
}

// MaxSize is the largest crowd: its waiters are kept alive with one touch per pass, and one
// touch takes about a thousand tickets.
const MaxSize = 1000

// idPrefix starts every simulated waiter's ticket id. A real ticket's id is 22 characters
// of base64url (queue.Signer), so no real ticket is ever named like one.
const idPrefix = "crowd-"

// Crowd keeps Config.Size people waiting in Config.Queue (Run).
type Crowd struct {
	line Line
	cfg  Config
	// members are the simulated waiters this Crowd knows to be waiting: ticket id → its
	// sequence in the line. Only Run's goroutine (or a test's Step) touches it.
	members map[string]int64
}

// New returns a Crowd on line; Run starts it.
func New(line Line, cfg Config) *Crowd {
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	cfg.Size = min(max(cfg.Size, 0), MaxSize)
	return &Crowd{line: line, cfg: cfg, members: map[string]int64{}}
}

// Run keeps the crowd until ctx ends: one Step at once and one every Config.Every. A failing
// pass (Redis away, the queue closed or deleted) is logged once and retried every pass.
func (c *Crowd) Run(ctx context.Context) error {
	log := c.cfg.Log.With().Str("queue", c.cfg.Queue).Int("crowd", c.cfg.Size).Logger()
	log.Info().Msg("crowd: keeping a simulated crowd waiting")
	t := time.NewTicker(c.cfg.Every)
	defer t.Stop()
	failing := false
	for {
		err := c.Step(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			log.Warn().Err(err).Msg("crowd: cannot keep the simulated crowd; trying again every pass")
		case err == nil && failing:
			log.Info().Msg("crowd: keeping the simulated crowd again")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Step is one pass: the waiters the line's head has passed give up their tokens and are
// forgotten, the others are kept alive, and the line is topped up to Config.Size.
func (c *Crowd) Step(ctx context.Context) error {
	s, err := c.line.Snapshot(ctx, c.cfg.Queue)
	if err != nil {
		return err
	}
	gone := make(map[int64]bool, len(s.Gone))
	for _, seq := range s.Gone {
		gone[seq] = true
	}
	alive := make([]string, 0, len(c.members))
	for id, seq := range c.members {
		switch {
		case seq <= s.Head:
			// Admitted (or swept): the token goes back at once rather than lingering among the
			// queue's live tokens until it lapses. Another instance's crowd may have given it
			// back already (ErrNoPlace).
			if err := c.line.Leave(ctx, c.ticket(id)); err != nil && !errors.Is(err, queue.ErrNoPlace) {
				return err
			}
			delete(c.members, id)
		case gone[seq]:
			delete(c.members, id) // left the line some other way (an operator's revoke, say)
		default:
			alive = append(alive, id)
		}
	}
	if len(alive) > 0 {
		if err := c.line.Touch(ctx, c.cfg.Queue, alive); err != nil {
			return err
		}
	}
	// A pass that joins long after it read the counts (a slow pass on a busy machine, while
	// another instance's crowd topped up and people were let in) can name tickets that were
	// let in and gave their tokens back meanwhile: their joins make new places, and the line
	// holds more than Size — for good, once admission pauses. This Crowd's next pass gives
	// back those of its waiters whose place is beyond Size (behind the whole crowd); a real
	// visitor's place never is, so no visitor is overtaken or sent away.
	if s.Waiting > int64(c.cfg.Size) {
		departed := slices.Sorted(maps.Keys(gone))
		trimmed := false
		for _, id := range alive {
			seq := c.members[id]
			ahead, _ := slices.BinarySearch(departed, seq) // departed places between the head and seq
			if seq-s.Head-int64(ahead) <= int64(c.cfg.Size) {
				continue
			}
			if err := c.line.Leave(ctx, c.ticket(id)); err != nil && !errors.Is(err, queue.ErrNoPlace) {
				return err
			}
			delete(c.members, id)
			trimmed = true
		}
		if trimmed {
			return nil
		}
	}
	// The line ends at Tail with Waiting people in it; the crowd's next waiters are named
	// Tail+1, Tail+2, …: any instance reading the same counts names the same tickets.
	for i := int64(1); i <= int64(c.cfg.Size)-s.Waiting; i++ {
		id := idPrefix + strconv.FormatInt(s.Tail+i, 10)
		p, _, err := c.line.Join(ctx, c.ticket(id))
		if err != nil {
			return err
		}
		switch {
		case p.State == queue.StateWaiting:
			c.members[id] = p.Seq
		case p.Token != "":
			// Let in by the join itself (a passthrough queue under its cap): not a waiter.
			if err := c.line.Leave(ctx, c.ticket(id)); err != nil && !errors.Is(err, queue.ErrNoPlace) {
				return err
			}
		}
	}
	return nil
}

func (c *Crowd) ticket(id string) queue.Ticket { return queue.Ticket{Queue: c.cfg.Queue, ID: id} }
