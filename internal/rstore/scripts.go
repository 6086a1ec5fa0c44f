package rstore

import (
	"embed"
	"path"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts of the deployment. Each runs on one queue's slot (its keys share the
// queue's hash tag, keys.go) or on the global limiter keys; every script's header says what
// it reads, writes and answers. A rolling deploy runs two releases side by side, each with
// its own script text under its own SHA (EVALSHA, and EVAL when Redis does not know it
// yet), so what passes between a script and its caller may change from one release to the
// next; what the scripts store in Redis and the tick message they publish may not.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// The preludes: shared Lua functions put before the texts of the scripts that call them (not
// loaded as Redis functions: the in-process Redis does not run functions, and a function
// library is one per Redis, which two releases would overwrite in turn). freeze.lua is the
// draw's start, the step join.lua, admit.lua and freezeall.lua take; places.lua is the
// per-address cap of join.lua and pjoin.lua; bulk.lua the chunked variadic calls of a draw
// batch (drawplace.lua, ptake.lua).
var (
	freeze = source("freeze.lua")
	places = source("places.lua")
	bulk   = source("bulk.lua")
)

func source(name string) string {
	b, err := luaFiles.ReadFile(path.Join("lua", name))
	if err != nil {
		panic("rstore: missing script " + name) // embedded at build time: cannot happen
	}
	return string(b)
}

// scripts maps each script file to the script Redis runs for it (with its preludes where it
// has some).
var scripts = map[string]*redis.Script{}

func script(name string, preludes ...string) *redis.Script {
	text := source(name)
	for i := len(preludes) - 1; i >= 0; i-- {
		text = preludes[i] + "\n" + text
	}
	s := redis.NewScript(text)
	scripts[name] = s
	return s
}

// The scripts, by what they do.
var (
	Join          = script("join.lua", freeze, places)
	Leave         = script("leave.lua")
	Admit         = script("admit.lua", freeze)
	Lease         = script("lease.lua")
	Snapshot      = script("snapshot.lua")
	Token         = script("token.lua")
	Touch         = script("touch.lua")
	Revoke        = script("revoke.lua")
	Schedule      = script("schedule.lua")
	DrawPlace     = script("drawplace.lua", bulk)
	DrawDone      = script("drawdone.lua")
	End           = script("end.lua")
	SoldOut       = script("soldout.lua")
	InvitesCreate = script("invites_create.lua")
	InvitesList   = script("invites_list.lua")
	InvitesRevoke = script("invites_revoke.lua")
	Limit         = script("limit.lua")
	// The e-mail reminders (package notify): a registration, the leader's scan for due
	// messages, and the forgetting of a place's address.
	MailJoin   = script("mailjoin.lua")
	MailScan   = script("mailscan.lua")
	MailForget = script("mailforget.lua")
	// A sharded pre-queue (queue/prequeue.go): the shard's join, freeze, leave and draw step,
	// and the queue slot's freeze once every shard is counted.
	PJoin     = script("pjoin.lua", places)
	PFreeze   = script("pfreeze.lua")
	PLeave    = script("pleave.lua")
	PTake     = script("ptake.lua", bulk)
	FreezeAll = script("freezeall.lua", freeze)
)

// Scripts is every script file (without the prelude, which never runs alone) and the script
// Redis runs for it, for tests that check each one ran on a cluster with keys.
func Scripts() map[string]*redis.Script {
	out := make(map[string]*redis.Script, len(scripts))
	for k, v := range scripts {
		out[k] = v
	}
	return out
}
