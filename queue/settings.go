package queue

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom/internal/rstore"
)

// Settings are the live knobs of one queue, stored in Redis so every instance sees a
// change at once.
type Settings struct {
	Name          string        `json:"name"`
	RatePerSecond float64       `json:"rate_per_second"`
	MaxActive     int64         `json:"max_active"` // 0 = no cap
	TokenTTL      time.Duration `json:"-"`
	Paused        bool          `json:"paused"`
	Closed        bool          `json:"closed"`
	PlacesPerIP   int64         `json:"places_per_ip"` // live places one client address may hold; 0 = no limit
	// MaxActiveSharePerIP is the share (0..1) of max_active one client address may hold as
	// live places where max_active > 0 (at least 1; 0 = no share cap; places.go).
	MaxActiveSharePerIP float64 `json:"max_active_share_per_ip"`
	// PowDifficulty is the proof-of-work a new place costs: leading zero bits of
	// SHA-256(challenge ":" nonce); 0 = none.
	PowDifficulty int `json:"pow_difficulty"`
	// PriorityShare is the share (0..1) of every tick's admissions that goes to the
	// priority line (invites of lane "priority").
	PriorityShare float64 `json:"priority_share"`
	// AllowedOrigins are the exact origins (scheme://host[:port]) whose pages may use this
	// queue across origins (CORS) and receive its buyers back (return_to); empty = none.
	AllowedOrigins []string `json:"allowed_origins"`
	// StartsAt schedules the sale (nil: none): before it joiners wait in a pre-queue whose
	// order is drawn at the start (schedule.go). EndsAt ends it: every place is dropped.
	StartsAt *time.Time `json:"starts_at"`
	EndsAt   *time.Time `json:"ends_at"`
	Method   Method     `json:"method"`
	// AutoRedirect: at admission the waiting page goes to the order page (or the redirect
	// flow's return_to) by itself.
	AutoRedirect bool `json:"auto_redirect"`
	// Branding of the waiting and order pages (brand.go): plain text and a checked colour
	// and link, so nothing a queue's admin types can run in a buyer's page. "" = none.
	BrandName    string `json:"brand_name"`
	BrandColor   string `json:"brand_color"` // #rrggbb, lower case
	BrandMessage string `json:"brand_message"`
	SupportURL   string `json:"support_url"` // https://… or a same-origin path "/…"
	// Messages replaces texts of the queue's buyer pages per language: a JSON object
	// {"<lang>": {"<key>": "text"}} ("" = none; messages.go). The keys and placeholders are
	// checked against the message catalogue by the admin API (web).
	Messages string `json:"messages"`
	// RateMode is how the rate is set: RateFixed (the operator's number) or RateAuto (the
	// controller, package autorate, moves it between AutoMin and AutoMax, keeping the protected
	// backend's p95 latency under AutoTargetP95; RatePerSecond is then its current rate).
	RateMode      RateMode      `json:"rate_mode"`
	AutoMin       float64       `json:"auto_min"`
	AutoMax       float64       `json:"auto_max"`
	AutoTargetP95 time.Duration `json:"-"`
	// The adaptive token TTL: with TokenTTLMin > 0 a token issued while W users wait lives
	// max(TokenTTLMin, TokenTTL × H / (H + W)), H = TokenTTLHalveAt (EffectiveTTL).
	TokenTTLMin     time.Duration `json:"-"`
	TokenTTLHalveAt int64         `json:"token_ttl_halve_at"`

	// Read-only state (not set by a patch).
	SoldOut   bool      `json:"sold_out"` // every product the queue sells has stock 0 (SetSoldOut)
	Ended     bool      `json:"ended"`    // ends_at has passed and the line was dropped
	DrawPhase DrawPhase `json:"-"`
	// RateReason says why the rate last changed (written by the auto controller; "" else).
	RateReason string `json:"rate_reason"`
}

// RateMode is how a queue's admission rate is set.
type RateMode string

// Rate modes.
const (
	RateFixed RateMode = "fixed"
	RateAuto  RateMode = "auto"
)

// EffectiveTTL is the lifetime of a token issued while waiting users wait (the adaptive
// TTL when TokenTTLMin > 0; admit.lua computes the same in the tick).
func (s Settings) EffectiveTTL(waiting int64) time.Duration {
	if s.TokenTTLMin <= 0 || s.TokenTTLHalveAt <= 0 || waiting <= 0 {
		return s.TokenTTL
	}
	h := float64(s.TokenTTLHalveAt)
	ms := int64(float64(s.TokenTTL.Milliseconds()) * h / (h + float64(waiting)))
	return max(time.Duration(ms)*time.Millisecond, s.TokenTTLMin)
}

// Method is how a queue lets people in.
type Method string

// Queueing methods.
const (
	// MethodFIFO admits in order of arrival (the default).
	MethodFIFO Method = "fifo"
	// MethodRandom admits randomly chosen waiters each tick (a lottery: no positions).
	MethodRandom Method = "random"
	// MethodPassthrough admits a joiner at once while nobody waits, max_active and the
	// rate allow; otherwise the line forms FIFO and drains back by itself.
	MethodPassthrough Method = "passthrough"
	// MethodReject refuses every join (the sale is not open).
	MethodReject Method = "reject"
)

// Valid reports whether m is one of the methods.
func (m Method) Valid() bool {
	switch m {
	case MethodFIFO, MethodRandom, MethodPassthrough, MethodReject:
		return true
	}
	return false
}

// DrawPhase is where a scheduled queue's draw stands.
type DrawPhase string

// Draw phases (the cfg hash's "draw" field).
const (
	DrawNone      DrawPhase = ""  // not scheduled
	DrawScheduled DrawPhase = "s" // before the start: joiners enter the pre-queue
	DrawFrozen    DrawPhase = "f" // started: the participant list is frozen, places being drawn
	DrawDone      DrawPhase = "d" // every participant has its place; the seed is revealed
)

// SettingsPatch is a partial update; nil fields keep their value (or the default when
// the queue is created).
type SettingsPatch struct {
	RatePerSecond  *float64
	MaxActive      *int64
	TokenTTL       *time.Duration
	Paused         *bool
	Closed         *bool
	PlacesPerIP    *int64
	PowDifficulty  *int
	PriorityShare  *float64
	AllowedOrigins *[]string
	// StartsAt and EndsAt: a pointer to the zero time clears the value.
	StartsAt *time.Time
	EndsAt   *time.Time
	Method   *Method
	// AutoRedirect: nil keeps the value (false when the queue is created).
	AutoRedirect *bool
	// Branding: nil keeps the value, "" clears it.
	BrandName    *string
	BrandColor   *string
	BrandMessage *string
	SupportURL   *string
	Messages     *string
	// Rate mode and the auto controller's bounds and target; the adaptive TTL.
	RateMode        *RateMode
	AutoMin         *float64
	AutoMax         *float64
	AutoTargetP95   *time.Duration
	TokenTTLMin     *time.Duration
	TokenTTLHalveAt *int64
	// MaxActiveSharePerIP: nil keeps the value (DefaultMaxActiveSharePerIP when created).
	MaxActiveSharePerIP *float64
}

// Limits of the settings accepted by Put.
const (
	MaxRatePerSecond = 100000
	MaxMaxActive     = 100_000_000
	MaxPlacesPerIP   = 1_000_000
	// DefaultPlacesPerIP is generous enough that a carrier's NAT (many buyers behind one
	// address) is not punished, and small enough that one script cannot hold a line.
	DefaultPlacesPerIP = 100
	// DefaultMaxActiveSharePerIP: one address holds at most a tenth of max_active (places.go).
	DefaultMaxActiveSharePerIP = 0.1
	// MaxPowDifficulty is far beyond any sane setting (2^32 hashes is minutes of a
	// desktop's time); it only bounds the input.
	MaxPowDifficulty     = 32
	DefaultPriorityShare = 0.5
	MinTokenTTL          = 10 * time.Second
	MaxAllowedOrigins    = 32
	MaxTokenTTL          = 24 * time.Hour
	// The auto controller's target latency bounds and the adaptive TTL's halving length.
	MinAutoTarget          = 10 * time.Millisecond
	MaxAutoTarget          = 60 * time.Second
	DefaultAutoTarget      = 500 * time.Millisecond
	DefaultTokenTTLHalveAt = 1000
	MaxTokenTTLHalveAt     = 100_000_000
)

// DefaultSettings are used for fields left out when a queue is created (the table's
// defaults).
func DefaultSettings(name string) Settings {
	s := Settings{Name: name}
	for _, row := range settingsTable {
		row.defaultInto(&s)
	}
	return s
}

// Validate refuses a setting out of range with an *InvalidError naming the field: first
// each setting's own range or choices (the table), then the rules between settings.
func (s Settings) Validate() error {
	for _, row := range settingsTable {
		if (row.Ranged && !row.inRange(&s)) || (row.Kind == KindChoice && !row.validChoice(&s)) {
			return invalid(row.JSON, "%s", row.Refusal)
		}
	}
	switch {
	case s.Method == MethodPassthrough && s.MaxActive <= 0:
		return invalid("method", "passthrough needs max_active > 0 (the cap at which a line forms).")
	case s.StartsAt != nil && s.EndsAt != nil && !s.StartsAt.Before(*s.EndsAt):
		return invalid("starts_at", "starts_at must be before ends_at.")
	}
	if err := s.validateBrand(); err != nil {
		return err
	}
	if err := validateMessages(s.Messages); err != nil {
		return err
	}
	switch {
	case s.TokenTTLMin != 0 && (s.TokenTTLMin < MinTokenTTL || s.TokenTTLMin > s.TokenTTL):
		row, _ := SettingByJSON("token_ttl_min_seconds")
		return invalid(row.JSON, "%s", row.Refusal)
	case !(s.AutoMin > 0 && s.AutoMin <= MaxRatePerSecond):
		return invalid("auto_min", "auto_min must be above 0 and at most %d.", MaxRatePerSecond)
	case !(s.AutoMax >= s.AutoMin && s.AutoMax <= MaxRatePerSecond):
		return invalid("auto_max", "auto_max must be at least auto_min and at most %d.", MaxRatePerSecond)
	}
	return nil
}

// Apply returns s with the fields the patch sets.
func (p SettingsPatch) Apply(s Settings) Settings {
	for _, row := range settingsTable {
		row.apply(&p, &s)
	}
	if p.BrandColor != nil {
		s.BrandColor = strings.ToLower(*p.BrandColor)
	}
	return s
}

// optTime is t as an optional time: nil for the zero time.
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.Truncate(time.Millisecond)
	return &t
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// Put creates queue name or changes its settings; it returns the result and whether the
// queue was created.
func (q *Queue) Put(ctx context.Context, name string, p SettingsPatch) (Settings, bool, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if !ValidName(name) {
		return Settings{}, false, invalid("name", "Queue names are 1-64 characters of A-Z a-z 0-9 _ -.")
	}
	cur, err := q.Settings(ctx, name)
	created := errors.Is(err, ErrQueueNotFound)
	if err != nil && !created {
		return Settings{}, false, err
	}
	if created {
		cur = DefaultSettings(name)
	}
	if err := p.normalizeOrigins(); err != nil {
		return Settings{}, false, err
	}
	// Rules for new values only: a stored value that a rule refuses (written by an older
	// release) must not block a change of another setting (pausing a sale, say).
	if err := p.Validate(); err != nil {
		return Settings{}, false, err
	}
	prev := cur
	cur = p.Apply(cur)
	if err := cur.Validate(); err != nil {
		return Settings{}, false, err
	}
	if err := p.checkTimes(prev, cur, time.Now()); err != nil {
		return Settings{}, false, err
	}
	k := rstore.KeysFor(name)
	if p.StartsAt != nil && !sameTime(prev.StartsAt, cur.StartsAt) {
		ph, err := q.schedule(ctx, name, cur.StartsAt)
		if err != nil {
			return Settings{}, false, err
		}
		cur.DrawPhase = ph
	}
	// Write only what the patch names (every field when creating), so two partial
	// updates at once cannot undo each other. The start is written by the schedule above.
	var fields []any
	for _, row := range settingsTable {
		if !row.Scripted && (created || row.Set(p)) {
			fields = append(fields, row.Hash, row.stored(&cur))
		}
	}
	if p.RateMode != nil && *p.RateMode != prev.RateMode {
		reason := ""
		if cur.RateMode == RateAuto {
			reason = "auto mode on: starting from " + strconv.FormatFloat(cur.RatePerSecond, 'f', -1, 64) + "/s"
		}
		fields = append(fields, "rate_reason", reason)
	}
	// In auto mode the rate must lie within the bounds: an operator's rate or new bounds
	// move it inside them at once.
	if cur.RateMode == RateAuto && (cur.RatePerSecond < cur.AutoMin || cur.RatePerSecond > cur.AutoMax) {
		cur.RatePerSecond = min(max(cur.RatePerSecond, cur.AutoMin), cur.AutoMax)
		fields = append(fields, "rate", strconv.FormatFloat(cur.RatePerSecond, 'f', -1, 64))
	}
	if len(fields) > 0 {
		err = q.rdb.HSet(ctx, k.Cfg(), fields...).Err()
	}
	if err != nil {
		return Settings{}, false, fail("put queue "+name, err)
	}
	if err := q.rdb.SAdd(ctx, rstore.QueuesKey, name).Err(); err != nil {
		return Settings{}, false, fail("register queue "+name, err)
	}
	if cur.DrawPhase == DrawScheduled {
		// A sharded pre-queue's shards read their copy of the settings (prequeue.go): the
		// change reaches them now, not at the leader's next copy.
		if err := q.syncShards(ctx, name, true); err != nil {
			return Settings{}, false, err
		}
	}
	// A new queue's loops start at once on every instance, and a resting queue's leader
	// looks at the new settings (a schedule to keep, an end to reach).
	_ = q.topo.Wake(ctx, name)
	return cur, created, nil
}

// normalizeOrigins puts the allowed origins the patch sets in their canonical form, each
// once.
func (p *SettingsPatch) normalizeOrigins() error {
	if p.AllowedOrigins == nil {
		return nil
	}
	norm := make([]string, 0, len(*p.AllowedOrigins))
	for _, o := range *p.AllowedOrigins {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return err
		}
		if !slices.Contains(norm, n) {
			norm = append(norm, n)
		}
	}
	p.AllowedOrigins = &norm
	return nil
}

// checkTimes refuses a new start or end that does not lie ahead of now (re-sending an
// unchanged value is always accepted), and a new end of a sale that has ended.
func (p SettingsPatch) checkTimes(prev, cur Settings, now time.Time) error {
	if p.StartsAt != nil && !sameTime(prev.StartsAt, cur.StartsAt) && cur.StartsAt != nil && !cur.StartsAt.After(now) {
		return invalid("starts_at", "starts_at must be in the future.")
	}
	if p.EndsAt != nil && !sameTime(prev.EndsAt, cur.EndsAt) && cur.EndsAt != nil && !cur.EndsAt.After(now) {
		return invalid("ends_at", "ends_at must be in the future.")
	}
	if p.EndsAt != nil && cur.EndsAt != nil && prev.Ended {
		return invalid("ends_at", "The sale has ended; make a new queue for a new sale.")
	}
	return nil
}

// Ensure creates queue name with s unless it exists (demo data at start).
func (q *Queue) Ensure(ctx context.Context, s Settings) error {
	// Fields the caller left zero where zero is not valid take the defaults.
	def := DefaultSettings(s.Name)
	if s.RateMode == "" {
		s.RateMode = def.RateMode
	}
	if s.AutoMin == 0 && s.AutoMax == 0 {
		s.AutoMin, s.AutoMax = def.AutoMin, def.AutoMax
	}
	if s.AutoTargetP95 == 0 {
		s.AutoTargetP95 = def.AutoTargetP95
	}
	if s.TokenTTLHalveAt == 0 {
		s.TokenTTLHalveAt = def.TokenTTLHalveAt
	}
	_, err := q.Settings(ctx, s.Name)
	if !errors.Is(err, ErrQueueNotFound) {
		return err
	}
	// Every setting the table has, the times only when given.
	var p SettingsPatch
	for _, row := range settingsTable {
		if row.Kind == KindTime {
			if t := row.Value(s).(*time.Time); t != nil {
				row.SetPatch(&p, *t)
			}
			continue
		}
		row.SetPatch(&p, row.Value(s))
	}
	_, _, err = q.Put(ctx, s.Name, p)
	return err
}

// Settings returns the settings of queue name, or ErrQueueNotFound.
func (q *Queue) Settings(ctx context.Context, name string) (Settings, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	if !ValidName(name) {
		return Settings{}, ErrQueueNotFound
	}
	m, err := q.rdb.HGetAll(ctx, rstore.KeysFor(name).Cfg()).Result()
	if err != nil {
		return Settings{}, fail("read queue "+name, err)
	}
	if len(m) == 0 {
		return Settings{}, ErrQueueNotFound
	}
	return ParseSettings(name, m), nil
}

// ParseSettings reads a queue's cfg hash (as HGETALL returns it): every setting of the
// table, then the state the scripts keep beside them. It is exported for the auto rate
// controller, which reads the hash inside a transaction of its own.
func ParseSettings(name string, m map[string]string) Settings {
	s := Settings{Name: name, RateReason: m["rate_reason"], SoldOut: m["sold_out"] == "1", Ended: m["ended"] == "1",
		DrawPhase: DrawPhase(m["draw"])}
	for _, row := range settingsTable {
		row.load(m, &s)
	}
	return s
}

// RateFields are the cfg hash's fields and values (HSET arguments) for a rate and the
// sentence saying why it is what it is: the auto rate controller writes them inside a
// transaction of its own, and the admission tick reads them at its next step.
func RateFields(rate float64, reason string) []any {
	return []any{"rate", strconv.FormatFloat(rate, 'f', -1, 64), "rate_reason", reason}
}

// Names lists every queue, sorted.
func (q *Queue) Names(ctx context.Context) ([]string, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	names, err := q.rdb.SMembers(ctx, rstore.QueuesKey).Result()
	if err != nil {
		return nil, fail("list queues", err)
	}
	sortStrings(names)
	return names, nil
}

func boolStr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// msOf is t in Unix ms, 0 for none (the stored form of starts_ms and ends_ms).
func msOf(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixMilli()
}

// msTime reads a stored time in Unix ms (0 or absent: none).
func msTime(v string) *time.Time {
	ms, _ := strconv.ParseInt(v, 10, 64)
	if ms <= 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}
