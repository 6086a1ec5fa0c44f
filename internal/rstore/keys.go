// Package rstore is the one owner of the deployment's Redis keyspace: the names of every
// key and channel, the Lua scripts that run on them, the per-call deadline and the
// classification of Redis failures. The packages by noun above it (the line in queue, trust,
// topology, branding) read and write Redis only through the names and scripts given here,
// so one file says what lives where and on which Cluster slot.
package rstore

import (
	"regexp"
	"strings"
)

// validName is the shape of queue names and product ids in the public contract: what may
// stand between the braces of a hash tag.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidName reports whether s is a valid queue name (1–64 of A–Z a–z 0–9 _ -).
func ValidName(s string) bool { return validName.MatchString(s) }

// Keys names every Redis key of one queue. All of them share the hash tag {q:<name>}, so
// a queue lives on one Redis Cluster slot and its Lua scripts may touch all of them.
type Keys struct{ p string }

// keyPrefix starts every per-queue key: wr:{q:<name>}:…
const keyPrefix = "wr:{q:"

// KeysFor is the key names of queue name.
func KeysFor(name string) Keys { return Keys{p: keyPrefix + name + "}:"} }

func (k Keys) Cfg() string           { return k.p + "cfg" }
func (k Keys) Seq() string           { return k.p + "seq" }
func (k Keys) Waiting() string       { return k.p + "waiting" }
func (k Keys) Tickets() string       { return k.p + "tickets" }
func (k Keys) Seen() string          { return k.p + "seen" }
func (k Keys) Clock() string         { return k.p + "clock" }
func (k Keys) Active() string        { return k.p + "active" }
func (k Keys) Gone() string          { return k.p + "gone" }
func (k Keys) GoneNew() string       { return k.p + "gonenew" }
func (k Keys) Lease() string         { return k.p + "lease" }
func (k Keys) Fence() string         { return k.p + "fence" }
func (k Keys) Retire() string        { return k.p + "retire" }
func (k Keys) Ev() string            { return k.p + "ev" }
func (k Keys) Token(t string) string { return k.p + "token:" + t }
func (k Keys) Claim(t string) string { return k.p + "claim:" + t }

// Lines of invite holders (lanes, see invites.go): each has its own waiting ZSET and its own
// departure bookkeeping, named by the lane's letter ("p" priority, "b" bypass). Their
// sequence counters, heads and publication marks are fields of the clock hash (seq_p,
// head_p, pubtail_p, …), read by admit.lua's one HMGET, so a queue whose lanes were never
// used pays no extra Redis command per tick.
func (k Keys) LaneWaiting(l byte) string { return k.p + "waiting:" + string(l) }
func (k Keys) LaneGone(l byte) string    { return k.p + "gone:" + string(l) }
func (k Keys) LaneGoneNew(l byte) string { return k.p + "gonenew:" + string(l) }

// invites is the queue's invite codes: HASH code -> "lane:uses_left:expires_ms:max_uses:created_ms";
// inviteExp indexes them by expiry (ZSET code -> expires_ms), so expired codes are dropped
// when codes are created or listed (never by a timer: an idle queue costs nothing).
func (k Keys) Invites() string   { return k.p + "invites" }
func (k Keys) InviteExp() string { return k.p + "invitexp" }

// pow is the single-use record of a proof-of-work challenge (id "" when none is presented:
// the script must still be given a key of the queue's slot).
func (k Keys) Pow(id string) string { return k.p + "pow:" + id }
func (k Keys) Places(client string) string {
	return k.p + "places:" + client
}

// The e-mail reminders (package notify), beside the places they serve: mail is one
// ticket's registration (STRING: JSON address, language, ticket; TTL); mailq the normal
// line's registered tickets that have had no message yet (ZSET ticket -> sequence);
// mailnear those told they are near the door, and invite holders, who get only the turn's
// message (ZSET ticket -> sequence, 0 for an invite lane); maillink one single-use link
// (STRING: JSON ticket and kind; TTL).
func (k Keys) Mail(ticket string) string   { return k.p + "mail:" + ticket }
func (k Keys) MailQ() string               { return k.p + "mailq" }
func (k Keys) MailNear() string            { return k.p + "mailnear" }
func (k Keys) MailLink(code string) string { return k.p + "maillink:" + code }

// Channel is the pub/sub channel on which the leader publishes one message per tick
// (read them with Feed; exported for tests that watch the wire).
func Channel(name string) string { return KeysFor(name).p + "events" }

// QueueOfChannel is the inverse of Channel.
func QueueOfChannel(channel string) string {
	return strings.TrimSuffix(strings.TrimPrefix(channel, keyPrefix), "}:events")
}

// The schedule and the draw (schedule.go): pre is the pre-queue before the start (ZSET
// ticket -> join number); at the start it is renamed drawset, the frozen participant list
// the draw orders. draw is the draw's record (HASH: seed, commitment, base, n,
// participants hash, progress); drawOrder the drawn order (STRING: the draw ids' raw
// 32 bytes, concatenated in drawn order).
func (k Keys) Pre() string       { return k.p + "pre" }
func (k Keys) DrawSet() string   { return k.p + "drawset" }
func (k Keys) Draw() string      { return k.p + "draw" }
func (k Keys) DrawOrder() string { return k.p + "draworder" }

// soldLog is the log of the queue's sold-out periods (soldout.lua: LIST of "from[:to]" ms).
func (k Keys) SoldLog() string { return k.p + "soldlog" }

// queuesKey is the set of all queue names (a global key, outside any queue's slot).
const QueuesKey = "wr:queues"

// Per-queue keys read by one noun each.
func (k Keys) Logo() string                { return k.p + "logo" }   // HASH: the queue's logo (branding)
func (k Keys) Page() string                { return k.p + "page" }   // HASH: the queue's own page template (branding)
func (k Keys) Health() string              { return k.p + "health" } // HASH: per-instance health windows (topology)
func (k Keys) Revoked(token string) string { return k.p + "revoked:" + token }

// Global keys, outside any queue's slot.
const (
	InstancesKey = "wr:instances" // SET of instance ids (topology)
	AliveKey     = "wr:alive"     // ZSET instance id -> last sign of life, ms (topology)
	WakeChannel  = "wr:wake"      // pub/sub: a queue's settings changed (topology)
	// SigningKeysKey is the HASH of token signing keys (trust); FirstSigningKeyLock is the
	// lock the first instance takes to make a deployment's first key.
	SigningKeysKey      = "wr:signing-keys"
	FirstSigningKeyLock = "wr:signing-keys:first"
	LimitsKey           = "wr:limits"          // STRING: the live rate limits as JSON
	RejectedKey         = "wr:stats:ratelimit" // HASH: scope -> requests refused by a rate limit
	// LimiterPrefix starts the rate limiter's bucket keys unless its owner names another.
	LimiterPrefix = "wr:"
)

// InstanceKey is the HASH describing instance id (topology).
func InstanceKey(id string) string { return "wr:instance:" + id }

// A sharded pre-queue (queue/prequeue.go): before the start, the entries of a scheduled
// queue's pre-queue may spread over shards, each on its own hash tag {q:<name>~<tag>} so
// that each may sit on another Redis Cluster master. Shard 0 is the queue's own slot (the
// keys above); ShardKeysFor names the others'. '~' never appears in a queue name, so a
// shard's tag never equals a queue's.
type ShardKeys struct{ p string }

// ShardKeysFor is the key names of pre-queue shard tag of queue name.
func ShardKeysFor(name, tag string) ShardKeys {
	return ShardKeys{p: keyPrefix + name + "~" + tag + "}:"}
}

// Tag is the hash tag of the shard's slot (for slot lookups), without braces.
func (k ShardKeys) Tag() string { return k.p[len("wr:{") : len(k.p)-2] }

// pcfg is the shard's copy of the queue settings a pre-queue join reads (mirrored by the
// leader) and its own state: frozen (1 once the start froze it), joins (its join counter).
func (k ShardKeys) Cfg() string     { return k.p + "pcfg" }
func (k ShardKeys) Tickets() string { return k.p + "tickets" }
func (k ShardKeys) Pre() string     { return k.p + "pre" }
func (k ShardKeys) DrawSet() string { return k.p + "drawset" }
func (k ShardKeys) Pow(id string) string {
	return k.p + "pow:" + id
}
func (k ShardKeys) Places(client string) string { return k.p + "places:" + client }
