package trust

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
)

// Invites let an operator hand out codes that put their holders in a lane of their own:
// queue.LaneBypass (admitted before anyone else, at the next ticks, within the queue's rate
// and max_active) or queue.LanePriority (a line that gets priority_share of every tick's
// admissions). A code is good for MaxUses places until it expires or is revoked, in its
// queue only.
//
// Storage (internal/rstore/keys.go): one HASH per queue, code ->
// "lane:uses_left:expires_ms:max_uses:created_ms", and a ZSET code -> expires_ms that lets
// expired codes be dropped when codes are created or listed; both keys expire with the last
// code. Nothing runs on a timer, so invites add no Redis command to an idle queue. join.lua
// checks a code and spends one use in the same step that makes the place (queue's join,
// which does not go through this package).

// ErrInviteNotFound: no live invite code of that name in the queue (never made, revoked,
// used up or expired).
var ErrInviteNotFound = errors.New("invite not found")

// Limits of CreateInvites.
const (
	MaxInvitesPerCall = 10000
	MaxInviteUses     = 1_000_000
	DefaultInviteTTL  = 7 * 24 * time.Hour
	MaxInviteTTL      = 90 * 24 * time.Hour
)

// inviteCodeBytes is the randomness of a code: 128 bits, 22 characters of base64url.
const inviteCodeBytes = 16

// Invite is one invite code.
type Invite struct {
	Code      string
	Lane      queue.Lane // queue.LaneBypass or queue.LanePriority
	UsesLeft  int64
	MaxUses   int64
	ExpiresAt time.Time
	CreatedAt time.Time
}

// InviteSpec says which codes CreateInvites makes.
type InviteSpec struct {
	Count     int        // 1…MaxInvitesPerCall
	Lane      queue.Lane // queue.LaneBypass or queue.LanePriority
	MaxUses   int64      // places each code makes, 1…MaxInviteUses (0 = 1)
	ExpiresAt time.Time  // in the future, at most MaxInviteTTL ahead (zero = DefaultInviteTTL from now)
}

// Validate refuses a spec out of range with a *queue.InvalidError naming the JSON field.
func (s InviteSpec) Validate(now time.Time) error {
	switch {
	case s.Count < 1 || s.Count > MaxInvitesPerCall:
		return invalid("count", "count must be between 1 and %d.", MaxInvitesPerCall)
	case s.Lane != queue.LaneBypass && s.Lane != queue.LanePriority:
		return invalid("lane", "lane must be \"bypass\" or \"priority\".")
	case s.MaxUses < 0 || s.MaxUses > MaxInviteUses:
		return invalid("max_uses", "max_uses must be between 1 and %d.", MaxInviteUses)
	case !s.ExpiresAt.IsZero() && !s.ExpiresAt.After(now):
		return invalid("expires_at", "expires_at must be in the future.")
	case s.ExpiresAt.After(now.Add(MaxInviteTTL)):
		return invalid("expires_at", "expires_at must be at most %d days ahead.", int(MaxInviteTTL.Hours()/24))
	}
	return nil
}

// CreateInvites makes spec.Count new codes for queue name (queue.ErrQueueNotFound when it
// does not exist, a *queue.InvalidError for a spec out of range).
func (s *Store) CreateInvites(ctx context.Context, name string, spec InviteSpec) ([]Invite, error) {
	now := time.Now()
	if spec.MaxUses == 0 {
		spec.MaxUses = 1
	}
	if spec.ExpiresAt.IsZero() {
		spec.ExpiresAt = now.Add(DefaultInviteTTL)
	}
	if err := spec.Validate(now); err != nil {
		return nil, err
	}
	if !rstore.ValidName(name) {
		return nil, queue.ErrQueueNotFound
	}
	exp := spec.ExpiresAt.UnixMilli()
	args := make([]any, 3, 3+spec.Count)
	args[0], args[1], args[2] = queue.LaneLetter(spec.Lane), spec.MaxUses, exp
	out := make([]Invite, spec.Count)
	for i := range out {
		code, err := newCode()
		if err != nil {
			return nil, fmt.Errorf("invite code: %w", err)
		}
		args = append(args, code)
		out[i] = Invite{Code: code, Lane: spec.Lane, UsesLeft: spec.MaxUses, MaxUses: spec.MaxUses,
			ExpiresAt: time.UnixMilli(exp)}
	}
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	created, err := rstore.InvitesCreate.Run(ctx, s.st.Client(), []string{k.Cfg(), k.Invites(), k.InviteExp()}, args...).Int64()
	switch {
	case err != nil:
		return nil, rstore.Fail("create invites "+name, err)
	case created == -1:
		return nil, queue.ErrQueueNotFound
	case created == -2:
		return nil, invalid("expires_at", "expires_at must be in the future.")
	}
	for i := range out {
		out[i].CreatedAt = time.UnixMilli(created)
	}
	return out, nil
}

// Invites lists queue name's live codes (not revoked, not expired, uses left), oldest
// first.
func (s *Store) Invites(ctx context.Context, name string) ([]Invite, error) {
	if !rstore.ValidName(name) {
		return nil, queue.ErrQueueNotFound
	}
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	res, err := rstore.InvitesList.Run(ctx, s.st.Client(), []string{k.Cfg(), k.Invites(), k.InviteExp()}).Slice()
	if err != nil {
		return nil, rstore.Fail("list invites "+name, err)
	}
	if len(res) == 0 {
		return nil, queue.ErrQueueNotFound
	}
	now, _ := res[0].(int64) // Redis TIME in ms, or -1: no such queue
	if now < 0 {
		return nil, queue.ErrQueueNotFound
	}
	out := make([]Invite, 0, (len(res)-1)/2)
	for i := 1; i+1 < len(res); i += 2 {
		code, _ := res[i].(string)
		v, _ := res[i+1].(string)
		inv, ok := parseInvite(code, v)
		if ok && inv.UsesLeft > 0 && inv.ExpiresAt.UnixMilli() > now {
			out = append(out, inv)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].Code < out[j].Code
	})
	return out, nil
}

// RevokeInvite deletes a code of queue name: it makes no more places (places taken with
// it stay). ErrInviteNotFound when the queue has no live code of that name.
func (s *Store) RevokeInvite(ctx context.Context, name, code string) error {
	if !rstore.ValidName(name) {
		return queue.ErrQueueNotFound
	}
	ctx, cancel := s.st.Bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	if !queue.ValidInviteCode(code) {
		// Still tell an unknown queue from an unknown code.
		n, err := s.st.Client().Exists(ctx, k.Cfg()).Result()
		switch {
		case err != nil:
			return rstore.Fail("read queue "+name, err)
		case n == 0:
			return queue.ErrQueueNotFound
		}
		return ErrInviteNotFound
	}
	n, err := rstore.InvitesRevoke.Run(ctx, s.st.Client(), []string{k.Cfg(), k.Invites(), k.InviteExp()}, code).Int64()
	switch {
	case err != nil:
		return rstore.Fail("revoke invite "+name, err)
	case n == -1:
		return queue.ErrQueueNotFound
	case n == 0:
		return ErrInviteNotFound
	}
	return nil
}

// parseInvite reads one stored code.
func parseInvite(code, v string) (Invite, bool) {
	f := strings.Split(v, ":")
	if len(f) < 5 || len(f[0]) != 1 {
		return Invite{}, false
	}
	uses, err1 := strconv.ParseInt(f[1], 10, 64)
	exp, err2 := strconv.ParseInt(f[2], 10, 64)
	maxUses, err3 := strconv.ParseInt(f[3], 10, 64)
	created, err4 := strconv.ParseInt(f[4], 10, 64)
	lane := queue.LaneOf(f[0])
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || lane == queue.LaneNormal {
		return Invite{}, false
	}
	return Invite{Code: code, Lane: lane, UsesLeft: uses, MaxUses: maxUses,
		ExpiresAt: time.UnixMilli(exp), CreatedAt: time.UnixMilli(created)}, true
}

// newCode is a random invite code: 128 bits, URL-safe (base64url, no padding).
func newCode() (string, error) {
	var b [inviteCodeBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
