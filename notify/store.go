package notify

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rstore"
)

// Errors of the store.
var (
	// ErrNotWaiting: the ticket has no waiting place in the queue (never joined, left,
	// admitted already): there is nothing to remind it of.
	ErrNotWaiting = errors.New("the ticket has no waiting place")
	// ErrLinkSpent: the link is unknown, used already or expired.
	ErrLinkSpent = errors.New("the link has been used or has expired")
)

// Kind is which reminder a message or link is.
type Kind string

// The reminders.
const (
	Near Kind = "near" // the place is within the near-door position
	Turn Kind = "turn" // the place has been admitted
)

// Hold is how long a registration lasts at most, and how long it keeps its waiting place
// from being abandoned for want of an open stream: a day, the longest a ticket cookie
// keeps a place. At the turn the place is admitted (no longer subject to abandonment) and
// its token's TTL runs as for everyone.
const Hold = 24 * time.Hour

// Store keeps the registrations and links in Redis, beside the places (every key in the
// queue's hash tag, internal/rstore). rdb may be a Cluster client: each call touches one
// queue's slot.
type Store struct {
	rdb     redis.UniversalClient
	hold    time.Duration
	timeout time.Duration
}

// NewStore returns a Store whose registrations (and the places' protection from
// abandonment) last hold, each call bounded by timeout.
func NewStore(rdb redis.UniversalClient, hold, timeout time.Duration) *Store {
	return &Store{rdb: rdb, hold: hold, timeout: timeout}
}

// registration is what a place registered: the address, the page's language and the raw
// signed ticket, which a link gives back to the browser that spends it.
type registration struct {
	Addr   string `json:"a"`
	Lang   string `json:"l"`
	Ticket string `json:"r"`
}

func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// Register stores addr (checked by CheckAddress) for the waiting place of ticket id in
// queue name, raw being the signed ticket. ErrNotWaiting when there is no such place.
func (s *Store) Register(ctx context.Context, name, id, raw, addr, lang string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	b, err := json.Marshal(registration{Addr: addr, Lang: lang, Ticket: raw})
	if err != nil {
		return err
	}
	k := rstore.KeysFor(name)
	err = rstore.MailJoin.Run(ctx, s.rdb, []string{k.Tickets(), k.Seen(), k.MailQ(), k.MailNear(), k.Mail(id)},
		id, b, s.hold.Milliseconds()).Err()
	if err != nil && strings.HasPrefix(err.Error(), "NOT_WAITING") {
		return ErrNotWaiting
	}
	if err != nil {
		return fmt.Errorf("register reminder: %w", err)
	}
	return nil
}

// Forget deletes the registrations of tickets ids of queue name (their places ended), in
// one call.
func (s *Store) Forget(ctx context.Context, name string, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	keys := []string{k.MailQ(), k.MailNear()}
	args := make([]any, len(ids))
	for i, id := range ids {
		keys = append(keys, k.Mail(id))
		args[i] = id
	}
	if err := rstore.MailForget.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("forget reminders: %w", err)
	}
	return nil
}

// scanAnswer is mailscan.lua's answer.
type scanAnswer struct {
	Near []string `json:"near"`
	Turn []struct {
		Ticket string `json:"t"`
		Exp    int64  `json:"x"` // the token's expiry, ms
	} `json:"turn"`
	Gone []string `json:"gone"`
}

// scan claims the reminders due in queue name: places within near of the door, places
// admitted, and the registrations of places that ended.
func (s *Store) scan(ctx context.Context, name string, near, limit int) (scanAnswer, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	text, err := rstore.MailScan.Run(ctx, s.rdb, []string{k.MailQ(), k.MailNear(), k.Tickets(), k.Clock()}, near, limit).Text()
	if err != nil {
		return scanAnswer{}, fmt.Errorf("scan reminders %s: %w", name, err)
	}
	var a scanAnswer
	if text == "[]" {
		return a, nil // nothing due: an empty table, which miniredis's cjson writes as an array
	}
	if err := json.Unmarshal([]byte(text), &a); err != nil {
		return scanAnswer{}, fmt.Errorf("scan reminders %s: %w", name, err)
	}
	return a, nil
}

// registrations reads the registrations of ids (one MGET: the keys share the queue's
// slot); a ticket whose registration has gone is left out.
func (s *Store) registrations(ctx context.Context, name string, ids []string) (map[string]registration, error) {
	out := make(map[string]registration, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	k := rstore.KeysFor(name)
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = k.Mail(id)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("read reminders %s: %w", name, err)
	}
	for i, v := range vals {
		text, ok := v.(string)
		if !ok {
			continue
		}
		var r registration
		if json.Unmarshal([]byte(text), &r) == nil && r.Addr != "" {
			out[ids[i]] = r
		}
	}
	return out, nil
}

// link is what a link's key holds: the ticket it gives back and the reminder it came with.
type link struct {
	Ticket string `json:"r"`
	Kind   Kind   `json:"k"`
}

// codeLen is the length of a link's code: 32 random bytes, base64url without padding.
const codeLen = 43

// newLink makes a single-use link for raw that expires after ttl, and returns its code.
func (s *Store) newLink(ctx context.Context, name, raw string, kind Kind, ttl time.Duration) (string, error) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	code := base64.RawURLEncoding.EncodeToString(b[:])
	v, err := json.Marshal(link{Ticket: raw, Kind: kind})
	if err != nil {
		return "", err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.rdb.Set(ctx, rstore.KeysFor(name).MailLink(code), v, ttl).Err(); err != nil {
		return "", fmt.Errorf("make link %s: %w", name, err)
	}
	return code, nil
}

// ValidCode reports whether code has the shape of a link's code (anything else is never
// looked up).
func ValidCode(code string) bool {
	if len(code) != codeLen {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(code)
	return err == nil
}

// LinkLive reports whether the link with code is still unspent and unexpired (without
// spending it: a GET of the link's page).
func (s *Store) LinkLive(ctx context.Context, name, code string) (bool, error) {
	if !ValidCode(code) {
		return false, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	n, err := s.rdb.Exists(ctx, rstore.KeysFor(name).MailLink(code)).Result()
	if err != nil {
		return false, fmt.Errorf("read link %s: %w", name, err)
	}
	return n == 1, nil
}

// SpendLink spends the link with code once (GETDEL): it returns the raw ticket and the
// reminder's kind, or ErrLinkSpent.
func (s *Store) SpendLink(ctx context.Context, name, code string) (string, Kind, error) {
	if !ValidCode(code) {
		return "", "", ErrLinkSpent
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	text, err := s.rdb.GetDel(ctx, rstore.KeysFor(name).MailLink(code)).Result()
	if errors.Is(err, redis.Nil) {
		return "", "", ErrLinkSpent
	}
	if err != nil {
		return "", "", fmt.Errorf("spend link %s: %w", name, err)
	}
	var l link
	if err := json.Unmarshal([]byte(text), &l); err != nil || l.Ticket == "" {
		return "", "", ErrLinkSpent
	}
	return l.Ticket, l.Kind, nil
}
