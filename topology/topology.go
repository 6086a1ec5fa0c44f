// Package topology is what the instances of a deployment know of each other through Redis:
// the instance registry (who is live, with how many streams: the admin view, the history),
// the live set that spreads queue leadership (Alive), the wake channel that tells every
// instance a queue changed, and the guarded backend's health windows that every instance
// writes and the auto rate controller merges. It keeps no queue state of its own and does
// not import queue; queue imports it.
package topology

import "github.com/waitroom/waitroom/internal/rstore"

// Topology reads and writes the deployment's topology in Redis.
type Topology struct {
	st *rstore.Store
}

// New returns a Topology on st. Its calls take st's per-call deadline, but for WatchWakes,
// which lasts until its ctx ends, and PublishWake, which keeps its caller's.
func New(st *rstore.Store) *Topology { return &Topology{st: st} }
