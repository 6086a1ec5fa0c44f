package web

import (
	"context"
	"time"

	"github.com/waitroom/waitroom/branding"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/topology"
	"github.com/waitroom/waitroom/trust"
)

// The interfaces below are what web needs of the waiting room's stores, one per noun. Each
// lists only the methods web calls, so a store that moves out of package queue (invites,
// logos, wakes, instances) satisfies its interface unchanged. Today *queue.Queue
// implements them all.

// Line is the waiting line: places (join, status, leave, signs of life), a queue's live
// counts and overviews, its draw, and the Redis budget and readiness that every request-path
// call shares.
type Line interface {
	JoinWith(ctx context.Context, t queue.Ticket, o queue.JoinOptions) (queue.Place, bool, error)
	Status(ctx context.Context, t queue.Ticket) (queue.Place, error)
	Leave(ctx context.Context, t queue.Ticket) error
	// IDFits says which ids a new ticket (or proof-of-work challenge) of the queue may have:
	// those of the pre-queue shard the join must land in (nil: any).
	IDFits(ctx context.Context, name, client, powID string) func(id string) bool
	// TicketState and Touch serve the streams: the state at connect, then signs of life.
	TicketState(ctx context.Context, t queue.Ticket) (queue.Place, error)
	Touch(ctx context.Context, queueName string, ids []string) error
	Stats(ctx context.Context, name string) (queue.QueueStats, error)
	// Probes and Overviews are what the shared snapshot reads (snapshot.go).
	Probes(ctx context.Context, names []string) (map[string]queue.Probe, error)
	Overviews(ctx context.Context, names []string) (map[string]queue.Overview, int, error)
	Draw(ctx context.Context, name string) (queue.DrawInfo, error)
	DrawOrder(ctx context.Context, name string) (string, error)
	Ping(ctx context.Context) error
	// OpTimeout is the per-call Redis deadline, which the rate limits borrow (limits.go).
	OpTimeout() time.Duration
}

// Tokens are the admission tokens: the guards claim, check, consume and release them
// (TokenStore, the part admission.Gate needs), the admin API revokes them.
type Tokens interface {
	TokenStore
	RevokeToken(ctx context.Context, name, token string) (queue.Revocation, error)
	RevokeTicketToken(ctx context.Context, t queue.Ticket) (queue.Revocation, error)
}

// QueueSettings are the queues' settings and the list of queues that they make exist.
//
// PowDifficulty is here rather than in an interface of its own: pow_difficulty is a setting
// like any other (a row of the settings table, changed by Put). The method reads that one
// field alone, with one command, because a challenge (the first step of a join) needs
// nothing else.
type QueueSettings interface {
	Settings(ctx context.Context, name string) (queue.Settings, error)
	Put(ctx context.Context, name string, p queue.SettingsPatch) (queue.Settings, bool, error)
	Names(ctx context.Context) ([]string, error)
	PowDifficulty(ctx context.Context, name string) (int, error)
}

// Invites are the queues' invite codes (the admin API's invites routes).
type Invites interface {
	CreateInvites(ctx context.Context, name string, spec trust.InviteSpec) ([]trust.Invite, error)
	Invites(ctx context.Context, name string) ([]trust.Invite, error)
	RevokeInvite(ctx context.Context, name, code string) error
}

// Logos are the queues' logos (branding.go) and own page templates (pagetemplate.go);
// LogoETag names a logo's URL without reading it.
type Logos interface {
	PutLogo(ctx context.Context, name, typ string, data []byte) (branding.Logo, error)
	Logo(ctx context.Context, name string) (branding.Logo, error)
	LogoETag(ctx context.Context, name string) (string, error)
	DeleteLogo(ctx context.Context, name string) (bool, error)
	PutPage(ctx context.Context, name, src string, origins []string) (branding.Page, error)
	Page(ctx context.Context, name string) (branding.Page, error)
	DeletePage(ctx context.Context, name string) (bool, error)
}

// Wakes tells the shared snapshot which queues changed (snapshot.go).
type Wakes interface {
	WatchWakes(ctx context.Context, woke func(name string), subscribed func())
}

// Instances lists the deployment's live instances (the admin stats).
type Instances interface {
	Instances(ctx context.Context) ([]topology.Instance, error)
}
