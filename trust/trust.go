// Package trust keeps what a deployment hands out to be trusted: the invite codes that put
// their holders in a lane of a queue (invites.go), and the token-signing keys every
// instance shares (signingkeys.go, sealed by admission). It reads and writes Redis through
// internal/rstore's key names and scripts, and imports queue only for the line's types
// (Lane, the code shape a join accepts, the queue errors); queue does not import it: a join
// spends an invite inside Redis (join.lua), not through this package.
package trust

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
)

// Store keeps the invites and the signing keys in Redis.
type Store struct {
	st *rstore.Store
}

// New returns a Store on st (its client and per-call deadline).
func New(st *rstore.Store) *Store { return &Store{st: st} }

// NewFromClient returns a Store on rdb whose calls take at most opTimeout each (default
// 1 s). It is New for programs outside this module, which cannot import internal/rstore: an
// app that guards its own routes reads the deployment's signing keys through it (docs/INTEGRATION.md,
// "Protecting your own API with the admission token").
func NewFromClient(rdb redis.UniversalClient, opTimeout time.Duration) *Store {
	return New(rstore.New(rdb, opTimeout))
}

// invalid is a refused value, as queue reports its own, so one mapping answers both.
func invalid(field, format string, args ...any) error {
	return &queue.InvalidError{Field: field, Message: fmt.Sprintf(format, args...)}
}
