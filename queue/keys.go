package queue

import (
	"regexp"
)

// validName is the shape of queue names and product ids in the public contract.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidName reports whether s is a valid queue name (1–64 of A–Z a–z 0–9 _ -).
func ValidName(s string) bool { return validName.MatchString(s) }

// keys names every Redis key of one queue. All of them share the hash tag {q:<name>}, so
// a queue lives on one Redis Cluster slot and its Lua scripts may touch all of them.
type keys struct{ p string }

// keyPrefix starts every per-queue key: wr:{q:<name>}:…
const keyPrefix = "wr:{q:"

func keysFor(name string) keys { return keys{p: keyPrefix + name + "}:"} }

func (k keys) cfg() string           { return k.p + "cfg" }
func (k keys) seq() string           { return k.p + "seq" }
func (k keys) waiting() string       { return k.p + "waiting" }
func (k keys) tickets() string       { return k.p + "tickets" }
func (k keys) seen() string          { return k.p + "seen" }
func (k keys) clock() string         { return k.p + "clock" }
func (k keys) active() string        { return k.p + "active" }
func (k keys) gone() string          { return k.p + "gone" }
func (k keys) goneNew() string       { return k.p + "gonenew" }
func (k keys) lease() string         { return k.p + "lease" }
func (k keys) fence() string         { return k.p + "fence" }
func (k keys) retire() string        { return k.p + "retire" }
func (k keys) ev() string            { return k.p + "ev" }
func (k keys) token(t string) string { return k.p + "token:" + t }
func (k keys) claim(t string) string { return k.p + "claim:" + t }

// Lines of invite holders (lanes, see invites.go): each has its own waiting ZSET and its own
// departure bookkeeping, named by the lane's letter ("p" priority, "b" bypass). Their
// sequence counters, heads and publication marks are fields of the clock hash (seq_p,
// head_p, pubtail_p, …), read by admit.lua's one HMGET, so a queue whose lanes were never
// used pays no extra Redis command per tick.
func (k keys) laneWaiting(l byte) string { return k.p + "waiting:" + string(l) }
func (k keys) laneGone(l byte) string    { return k.p + "gone:" + string(l) }
func (k keys) laneGoneNew(l byte) string { return k.p + "gonenew:" + string(l) }

// invites is the queue's invite codes: HASH code -> "lane:uses_left:expires_ms:max_uses:created_ms";
// inviteExp indexes them by expiry (ZSET code -> expires_ms), so expired codes are dropped
// when codes are created or listed (never by a timer: an idle queue costs nothing).
func (k keys) invites() string   { return k.p + "invites" }
func (k keys) inviteExp() string { return k.p + "invitexp" }

// pow is the single-use record of a proof-of-work challenge (id "" when none is presented:
// the script must still be given a key of the queue's slot).
func (k keys) pow(id string) string { return k.p + "pow:" + id }
func (k keys) places(client string) string {
	return k.p + "places:" + client
}

// Channel is the pub/sub channel on which the leader publishes one message per tick
// (read them with Feed; exported for tests that watch the wire).
func Channel(name string) string { return keysFor(name).p + "events" }

// The schedule and the draw (schedule.go): pre is the pre-queue before the start (ZSET
// ticket -> join number); at the start it is renamed drawset, the frozen participant list
// the draw orders. draw is the draw's record (HASH: seed, commitment, base, n,
// participants hash, progress); drawOrder the drawn order (STRING: the draw ids' raw
// 32 bytes, concatenated in drawn order).
func (k keys) pre() string       { return k.p + "pre" }
func (k keys) drawSet() string   { return k.p + "drawset" }
func (k keys) draw() string      { return k.p + "draw" }
func (k keys) drawOrder() string { return k.p + "draworder" }

// soldLog is the log of the queue's sold-out periods (soldout.lua: LIST of "from[:to]" ms).
func (k keys) soldLog() string { return k.p + "soldlog" }

// queuesKey is the set of all queue names (a global key, outside any queue's slot).
const queuesKey = "wr:queues"
