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

// freeze is the draw's start, the step both join.lua and admit.lua take (whichever runs
// first after a scheduled queue's start). It is put before each of their texts here, not
// loaded as a Redis function: the in-process Redis does not run functions, and a function
// library is one per Redis, which two releases would overwrite in turn.
var freeze = source("freeze.lua")

func source(name string) string {
	b, err := luaFiles.ReadFile(path.Join("lua", name))
	if err != nil {
		panic("rstore: missing script " + name) // embedded at build time: cannot happen
	}
	return string(b)
}

// withPrelude is the text of a script that calls the shared prelude.
func withPrelude(body string) string { return freeze + "\n" + body }

// scripts maps each script file to the script Redis runs for it (with its prelude where it
// has one).
var scripts = map[string]*redis.Script{}

func script(name string, prelude bool) *redis.Script {
	text := source(name)
	if prelude {
		text = withPrelude(text)
	}
	s := redis.NewScript(text)
	scripts[name] = s
	return s
}

// The scripts, by what they do.
var (
	Join          = script("join.lua", true)
	Leave         = script("leave.lua", false)
	Admit         = script("admit.lua", true)
	Lease         = script("lease.lua", false)
	Snapshot      = script("snapshot.lua", false)
	Token         = script("token.lua", false)
	Touch         = script("touch.lua", false)
	Revoke        = script("revoke.lua", false)
	Schedule      = script("schedule.lua", false)
	DrawPlace     = script("drawplace.lua", false)
	DrawDone      = script("drawdone.lua", false)
	End           = script("end.lua", false)
	SoldOut       = script("soldout.lua", false)
	InvitesCreate = script("invites_create.lua", false)
	InvitesList   = script("invites_list.lua", false)
	InvitesRevoke = script("invites_revoke.lua", false)
	Limit         = script("limit.lua", false)
	// A sharded pre-queue (queue/prequeue.go): the shard's join, freeze, leave and draw step,
	// and the queue slot's freeze once every shard is counted.
	PJoin     = script("pjoin.lua", false)
	PFreeze   = script("pfreeze.lua", false)
	PLeave    = script("pleave.lua", false)
	PTake     = script("ptake.lua", false)
	FreezeAll = script("freezeall.lua", true)
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
