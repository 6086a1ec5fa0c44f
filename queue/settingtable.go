package queue

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"
)

// The table of a queue's settings: one row per setting holds everything the code reads
// about it — its Go field, its field in the queue's Redis hash, its admin API key and unit,
// its range and default, and how the dashboard edits it. Reading a queue's hash
// (ParseSettings), writing a patch (Put), applying one (SettingsPatch.Apply), the range
// checks (Settings.Validate), the admin API's bodies and answers (web) and the dashboard's
// settings form all read the rows; adding a setting is a field of Settings and of
// SettingsPatch, a row here and the code that acts on it.

// SettingKind is the type of a setting's value.
type SettingKind int

// Setting kinds: the Go field's type, the admin API's JSON value and the stored form.
const (
	KindFloat    SettingKind = iota // float64; a JSON number; stored as its shortest decimal
	KindInt                         // int64 or int; a JSON integer
	KindBool                        // bool; stored "1" / "0"
	KindDuration                    // time.Duration; a JSON integer in Unit; stored in milliseconds
	KindText                        // string shown to buyers; JSON null or "" clears it
	KindChoice                      // a string type with Choices; stored as is
	KindList                        // []string; a JSON array; stored as that JSON
	KindTime                        // *time.Time; RFC 3339 or null; stored in Unix milliseconds (0: none)
	KindObject                      // string holding a JSON object; the admin API's value is that object ({} or null clears); stored as that JSON
)

// Setting is one row of the table.
type Setting struct {
	JSON string      // key in the admin API's bodies and answers
	Go   string      // field of Settings and of SettingsPatch
	Hash string      // field of the queue's cfg hash in Redis
	Kind SettingKind // type of the value
	// Unit is a KindDuration setting's JSON unit (time.Second: token_ttl_seconds).
	Unit time.Duration
	// Min and Max bound the JSON value (in Unit for durations) when Ranged (a list: its
	// length); Refusal is the message of the 422 for a value outside them. Without Ranged
	// they only bound the dashboard's input (a rule between settings checks the value).
	Ranged   bool
	Min, Max float64
	Refusal  string
	// Choices are a KindChoice setting's values. Without a Default, "" is accepted too and
	// means the first. ChoiceLabel+choice is each one's message key in a dashboard form.
	Choices     []string
	ChoiceLabel string
	// Default is the value of a new queue (nil: the zero value). Absent says what a queue
	// stored without the setting (by an older release) reads: true, the default; false, the
	// zero value.
	Default any
	Absent  bool
	// Scripted: the value is written by a script of its own (the schedule), not by Put.
	Scripted bool
	// Form is the dashboard form that edits the setting: "settings" (generated from these
	// rows), "sale" or "branding" (their own markup); "" none. Label and Hint are message
	// keys; Step, TestID, Wide and AutoOnly shape the generated field.
	Form     string
	Label    string
	Hint     string
	Step     string
	TestID   string
	Wide     bool
	AutoOnly bool // shown only in the auto rate mode

	index int // of the field in Settings; SettingsPatch's is patchIndex
	patch int
}

// SettingsTable lists the queue settings in the order the admin API's bodies name them.
func SettingsTable() []Setting { return slices.Clone(settingsTable) }

var settingsTable = []Setting{
	{JSON: "rate_per_second", Go: "RatePerSecond", Hash: "rate", Kind: KindFloat, Default: 5.0,
		Ranged: true, Min: 0, Max: MaxRatePerSecond, Refusal: fmt.Sprintf("rate_per_second must be between 0 and %d.", MaxRatePerSecond),
		Form: "settings", Label: "admin_rate", Step: "any"},
	{JSON: "max_active", Go: "MaxActive", Hash: "max_active", Kind: KindInt,
		Ranged: true, Min: 0, Max: MaxMaxActive, Refusal: fmt.Sprintf("max_active must be between 0 (no cap) and %d.", MaxMaxActive),
		Form: "settings", Label: "admin_max_active", Step: "1"},
	{JSON: "token_ttl_seconds", Go: "TokenTTL", Hash: "ttl_ms", Kind: KindDuration, Unit: time.Second, Default: 5 * time.Minute,
		Ranged: true, Min: MinTokenTTL.Seconds(), Max: MaxTokenTTL.Seconds(),
		Refusal: fmt.Sprintf("token_ttl_seconds must be between %d and %d.", int(MinTokenTTL.Seconds()), int(MaxTokenTTL.Seconds())),
		Form:    "settings", Label: "admin_ttl", Step: "1"},
	{JSON: "paused", Go: "Paused", Hash: "paused", Kind: KindBool},
	{JSON: "closed", Go: "Closed", Hash: "closed", Kind: KindBool},
	{JSON: "places_per_ip", Go: "PlacesPerIP", Hash: "places_per_ip", Kind: KindInt, Default: int64(DefaultPlacesPerIP), Absent: true,
		Ranged: true, Min: 0, Max: MaxPlacesPerIP, Refusal: fmt.Sprintf("places_per_ip must be between 0 (no limit) and %d.", MaxPlacesPerIP),
		Form: "settings", Label: "admin_places_per_ip", Step: "1", TestID: "places-per-ip"},
	{JSON: "pow_difficulty", Go: "PowDifficulty", Hash: "pow_difficulty", Kind: KindInt,
		Ranged: true, Min: 0, Max: MaxPowDifficulty, Refusal: fmt.Sprintf("pow_difficulty must be between 0 (off) and %d bits.", MaxPowDifficulty),
		Form: "settings", Label: "admin_pow_difficulty", Hint: "admin_pow_hint", Step: "1", TestID: "pow-difficulty", Wide: true},
	{JSON: "priority_share", Go: "PriorityShare", Hash: "priority_share", Kind: KindFloat, Default: DefaultPriorityShare, Absent: true,
		Ranged: true, Min: 0, Max: 1, Refusal: "priority_share must be between 0 and 1.",
		Form: "settings", Label: "admin_priority_share_label", Step: "0.01", TestID: "priority-share"},
	{JSON: "allowed_origins", Go: "AllowedOrigins", Hash: "allowed_origins", Kind: KindList,
		Ranged: true, Min: 0, Max: MaxAllowedOrigins, Refusal: fmt.Sprintf("allowed_origins holds at most %d origins.", MaxAllowedOrigins),
		Form: "settings", Label: "admin_allowed_origins", Hint: "admin_allowed_origins_hint", TestID: "allowed-origins", Wide: true},
	{JSON: "max_active_share_per_ip", Go: "MaxActiveSharePerIP", Hash: "max_active_share_per_ip", Kind: KindFloat,
		Default: DefaultMaxActiveSharePerIP, Absent: true,
		Ranged: true, Min: 0, Max: 1, Refusal: "max_active_share_per_ip must be between 0 (no share cap) and 1.",
		Form: "settings", Label: "admin_share_per_ip", Hint: "admin_share_per_ip_hint", Step: "0.01", TestID: "share-per-ip"},
	{JSON: "starts_at", Go: "StartsAt", Hash: "starts_ms", Kind: KindTime, Scripted: true, Form: "sale"},
	{JSON: "ends_at", Go: "EndsAt", Hash: "ends_ms", Kind: KindTime, Form: "sale"},
	{JSON: "method", Go: "Method", Hash: "method", Kind: KindChoice, Form: "sale",
		Choices: []string{string(MethodFIFO), string(MethodRandom), string(MethodPassthrough), string(MethodReject)},
		Refusal: "method must be fifo, random, passthrough or reject."},
	{JSON: "auto_redirect", Go: "AutoRedirect", Hash: "auto_redirect", Kind: KindBool,
		Form: "settings", Label: "admin_auto_redirect", TestID: "auto-redirect", Wide: true},
	{JSON: "brand_name", Go: "BrandName", Hash: "brand_name", Kind: KindText, Form: "branding"},
	{JSON: "brand_color", Go: "BrandColor", Hash: "brand_color", Kind: KindText, Form: "branding"},
	{JSON: "brand_message", Go: "BrandMessage", Hash: "brand_message", Kind: KindText, Form: "branding"},
	{JSON: "support_url", Go: "SupportURL", Hash: "support_url", Kind: KindText, Form: "branding"},
	{JSON: "messages", Go: "Messages", Hash: "messages", Kind: KindObject},
	{JSON: "rate_mode", Go: "RateMode", Hash: "rate_mode", Kind: KindChoice, Default: RateFixed,
		Choices: []string{string(RateFixed), string(RateAuto)}, ChoiceLabel: "admin_rate_", Refusal: "rate_mode must be fixed or auto.",
		Form: "settings", Label: "admin_rate_mode_label", TestID: "rate-mode-select"},
	{JSON: "auto_min", Go: "AutoMin", Hash: "auto_min", Kind: KindFloat, Default: 1.0, Absent: true, Min: 0.001, Max: MaxRatePerSecond,
		Form: "settings", Label: "admin_auto_min", Step: "any", TestID: "auto-min", AutoOnly: true},
	{JSON: "auto_max", Go: "AutoMax", Hash: "auto_max", Kind: KindFloat, Default: 100.0, Absent: true, Min: 0.001, Max: MaxRatePerSecond,
		Form: "settings", Label: "admin_auto_max", Step: "any", TestID: "auto-max", AutoOnly: true},
	{JSON: "auto_target_p95_ms", Go: "AutoTargetP95", Hash: "auto_target_ms", Kind: KindDuration, Unit: time.Millisecond,
		Default: DefaultAutoTarget, Absent: true,
		Ranged: true, Min: float64(MinAutoTarget.Milliseconds()), Max: float64(MaxAutoTarget.Milliseconds()),
		Refusal: fmt.Sprintf("auto_target_p95_ms must be between %d and %d.", MinAutoTarget.Milliseconds(), MaxAutoTarget.Milliseconds()),
		Form:    "settings", Label: "admin_auto_target", Step: "1", TestID: "auto-target", AutoOnly: true},
	{JSON: "token_ttl_min_seconds", Go: "TokenTTLMin", Hash: "ttl_min_ms", Kind: KindDuration, Unit: time.Second,
		Min: 0, Max: MaxTokenTTL.Seconds(),
		Refusal: fmt.Sprintf("token_ttl_min_seconds must be 0 (fixed TTL) or between %d and token_ttl_seconds.", int(MinTokenTTL.Seconds())),
		Form:    "settings", Label: "admin_ttl_min", Step: "1", TestID: "ttl-min"},
	{JSON: "token_ttl_halve_at", Go: "TokenTTLHalveAt", Hash: "ttl_halve_at", Kind: KindInt, Default: int64(DefaultTokenTTLHalveAt), Absent: true,
		Ranged: true, Min: 1, Max: MaxTokenTTLHalveAt,
		Refusal: fmt.Sprintf("token_ttl_halve_at must be between 1 and %d waiting users.", MaxTokenTTLHalveAt),
		Form:    "settings", Label: "admin_ttl_halve", Step: "1", TestID: "ttl-halve"},
}

// The order of the dashboard's generated settings form (its fields are rows of the table;
// this is only where each goes).
var settingsFormOrder = []string{"rate_mode", "rate_per_second", "max_active", "auto_min", "auto_max", "auto_target_p95_ms",
	"token_ttl_seconds", "token_ttl_min_seconds", "token_ttl_halve_at", "places_per_ip", "max_active_share_per_ip",
	"priority_share", "pow_difficulty", "allowed_origins", "auto_redirect"}

// SettingsForm is the rows of the dashboard's settings form, in the form's order.
func SettingsForm() []Setting {
	out := make([]Setting, 0, len(settingsFormOrder))
	for _, name := range settingsFormOrder {
		if s, ok := SettingByJSON(name); ok && s.Form == "settings" {
			out = append(out, s)
		}
	}
	return out
}

// SettingByJSON is the row of admin API key name.
func SettingByJSON(name string) (Setting, bool) {
	for _, s := range settingsTable {
		if s.JSON == name {
			return s, true
		}
	}
	return Setting{}, false
}

var (
	settingsType = reflect.TypeFor[Settings]()
	patchType    = reflect.TypeFor[SettingsPatch]()
	durationType = reflect.TypeFor[time.Duration]()
	timePtrType  = reflect.TypeFor[*time.Time]()
)

// The rows are checked against the two structs once, at start: a row naming a field that
// does not exist, or of another type than its kind, stops the program before it serves.
func init() {
	for i := range settingsTable {
		s := &settingsTable[i]
		f, ok := settingsType.FieldByName(s.Go)
		pf, pok := patchType.FieldByName(s.Go)
		if !ok || !pok || len(f.Index) != 1 || len(pf.Index) != 1 {
			panic("queue: settings table: " + s.Go + " is not a field of Settings and SettingsPatch")
		}
		want := f.Type
		if s.Kind != KindTime {
			want = reflect.PointerTo(f.Type)
		}
		if pf.Type != want || !kindFits(s.Kind, f.Type) {
			panic("queue: settings table: " + s.Go + " has a type its kind does not take")
		}
		if s.Default != nil && reflect.TypeOf(s.Default).ConvertibleTo(f.Type) == false {
			panic("queue: settings table: the default of " + s.Go + " is not a " + f.Type.String())
		}
		s.index, s.patch = f.Index[0], pf.Index[0]
	}
}

func kindFits(k SettingKind, t reflect.Type) bool {
	switch k {
	case KindFloat:
		return t.Kind() == reflect.Float64
	case KindInt:
		return (t.Kind() == reflect.Int64 || t.Kind() == reflect.Int) && t != durationType
	case KindBool:
		return t.Kind() == reflect.Bool
	case KindDuration:
		return t == durationType
	case KindText, KindChoice, KindObject:
		return t.Kind() == reflect.String
	case KindList:
		return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String
	case KindTime:
		return t == timePtrType
	}
	return false
}

func (s Setting) field(st *Settings) reflect.Value {
	return reflect.ValueOf(st).Elem().Field(s.index)
}

func (s Setting) patchField(p *SettingsPatch) reflect.Value {
	return reflect.ValueOf(p).Elem().Field(s.patch)
}

// Value is the setting's value in st.
func (s Setting) Value(st Settings) any { return s.field(&st).Interface() }

// Set reports whether patch p sets the setting.
func (s Setting) Set(p SettingsPatch) bool { return !s.patchField(&p).IsNil() }

// SetPatch makes p set the setting to v, which must be of the Settings field's type (a
// time.Time for a KindTime setting, whose zero value clears it).
func (s Setting) SetPatch(p *SettingsPatch, v any) {
	f := s.patchField(p)
	nv := reflect.New(f.Type().Elem())
	nv.Elem().Set(reflect.ValueOf(v).Convert(f.Type().Elem()))
	f.Set(nv)
}

// JSONValue is the setting's value in st as the admin API answers it: durations in the
// setting's unit, times as RFC 3339 (nil: none), an empty list as [], a choice left empty
// as its first.
func (s Setting) JSONValue(st Settings, timeFormat string) any {
	v := s.field(&st)
	switch s.Kind {
	case KindDuration:
		return int64(time.Duration(v.Int()) / s.Unit)
	case KindTime:
		if v.IsNil() {
			return nil
		}
		return v.Interface().(*time.Time).UTC().Format(timeFormat)
	case KindList:
		if v.Len() == 0 {
			return []string{}
		}
	case KindObject:
		o := map[string]any{}
		if v.String() != "" {
			_ = json.Unmarshal([]byte(v.String()), &o)
		}
		return o
	case KindChoice:
		if v.String() == "" {
			return s.Choices[0]
		}
		return v.String()
	}
	return v.Interface()
}

// defaultInto sets st's field to the default (or zero) value.
func (s Setting) defaultInto(st *Settings) {
	f := s.field(st)
	if s.Default == nil {
		f.SetZero()
		return
	}
	f.Set(reflect.ValueOf(s.Default).Convert(f.Type()))
}

// apply copies the patch's value, if set, into st.
func (s Setting) apply(p *SettingsPatch, st *Settings) {
	pf := s.patchField(p)
	if pf.IsNil() {
		return
	}
	f := s.field(st)
	switch s.Kind {
	case KindTime:
		f.Set(reflect.ValueOf(optTime(*pf.Interface().(*time.Time))))
	case KindFloat:
		f.SetFloat(positiveZero(pf.Elem().Float()))
	default:
		f.Set(pf.Elem())
	}
}

// stored is the setting's value in st as its Redis hash holds it.
func (s Setting) stored(st *Settings) string {
	f := s.field(st)
	switch s.Kind {
	case KindFloat:
		return strconv.FormatFloat(f.Float(), 'f', -1, 64)
	case KindInt:
		return strconv.FormatInt(f.Int(), 10)
	case KindBool:
		return boolStr(f.Bool())
	case KindDuration:
		return strconv.FormatInt(time.Duration(f.Int()).Milliseconds(), 10)
	case KindChoice:
		if f.String() == "" {
			return s.Choices[0]
		}
		return f.String()
	case KindList:
		b, _ := json.Marshal(f.Interface())
		return string(b)
	case KindTime:
		return strconv.FormatInt(msOf(f.Interface().(*time.Time)), 10)
	}
	return f.String()
}

// load reads the setting from a queue's hash into st (absent: Absent's rule).
func (s Setting) load(m map[string]string, st *Settings) {
	v, ok := m[s.Hash]
	if !ok {
		if s.Absent {
			s.defaultInto(st)
		}
		if s.Kind == KindChoice && s.field(st).String() == "" {
			s.field(st).SetString(s.Choices[0])
		}
		return
	}
	f := s.field(st)
	switch s.Kind {
	case KindFloat:
		x, _ := strconv.ParseFloat(v, 64)
		f.SetFloat(positiveZero(x))
	case KindInt:
		x, _ := strconv.ParseInt(v, 10, 64)
		f.SetInt(x)
	case KindBool:
		f.SetBool(v == "1")
	case KindDuration:
		x, _ := strconv.ParseInt(v, 10, 64)
		f.SetInt(int64(time.Duration(x) * time.Millisecond))
	case KindChoice:
		if v == "" {
			v = s.Choices[0]
		}
		f.SetString(v)
	case KindList:
		var l []string
		if v != "" {
			_ = json.Unmarshal([]byte(v), &l)
		}
		f.Set(reflect.ValueOf(l))
	case KindTime:
		f.Set(reflect.ValueOf(msTime(v)))
	default:
		f.SetString(v)
	}
}

// inRange reports whether a ranged setting's value in st lies within its bounds (NaN never
// does); a list's length is what is bounded.
func (s Setting) inRange(st *Settings) bool {
	f := s.field(st)
	var x float64
	switch s.Kind {
	case KindFloat:
		x = f.Float()
	case KindInt:
		x = float64(f.Int())
	case KindDuration:
		x = float64(f.Int()) / float64(s.Unit)
	case KindList:
		x = float64(f.Len())
	default:
		return true
	}
	return x >= s.Min && x <= s.Max
}

// validChoice reports whether a choice setting's value in st is one of its choices.
func (s Setting) validChoice(st *Settings) bool {
	v := s.field(st).String()
	if v == "" {
		return s.Default == nil
	}
	return slices.Contains(s.Choices, v)
}
