package queue

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// Every setting of Settings has a row, and only the read-only state has none: a field
// added without a row would be neither stored, read, patched nor shown.
func TestEverySettingHasARow(t *testing.T) {
	t.Parallel()
	readOnly := []string{"Name", "SoldOut", "Ended", "DrawPhase", "RateReason"}
	rows := map[string]bool{}
	for _, row := range settingsTable {
		if rows[row.Go] {
			t.Fatalf("two rows for %s", row.Go)
		}
		rows[row.Go] = true
	}
	st := reflect.TypeFor[Settings]()
	for i := range st.NumField() {
		name := st.Field(i).Name
		if !rows[name] && !slices.Contains(readOnly, name) {
			t.Errorf("Settings.%s has no row in the settings table", name)
		}
	}
	pt := reflect.TypeFor[SettingsPatch]()
	for i := range pt.NumField() {
		if name := pt.Field(i).Name; !rows[name] {
			t.Errorf("SettingsPatch.%s has no row in the settings table", name)
		}
	}
	for _, name := range settingsFormOrder {
		if row, ok := SettingByJSON(name); !ok || row.Form != "settings" || row.Label == "" {
			t.Errorf("settings form field %q: no row of form settings with a label", name)
		}
	}
	for _, row := range settingsTable {
		if row.Form == "settings" && !slices.Contains(settingsFormOrder, row.JSON) {
			t.Errorf("%s is edited in the settings form but has no place in it", row.JSON)
		}
	}
}

// A queue's settings written to its hash read back the same, every row of them; a hash
// without a setting reads the row's rule for queues stored before it existed.
func TestSettingsStoreAndLoad(t *testing.T) {
	t.Parallel()
	start, end := time.UnixMilli(1_900_000_000_000).UTC(), time.UnixMilli(1_900_000_360_000).UTC()
	in := Settings{Name: "q", RatePerSecond: 12.5, MaxActive: 40, TokenTTL: 90 * time.Second, Paused: true, Closed: true,
		PlacesPerIP: 0, MaxActiveSharePerIP: 0, PowDifficulty: 19, PriorityShare: 0, AllowedOrigins: []string{"https://a.example"},
		StartsAt: &start, EndsAt: &end, Method: MethodRandom, AutoRedirect: true, BrandName: "Shop", BrandColor: "#1a5fb4",
		BrandMessage: "Hi", SupportURL: "/help", RateMode: RateAuto, AutoMin: 2, AutoMax: 50, AutoTargetP95: 750 * time.Millisecond,
		TokenTTLMin: 30 * time.Second, TokenTTLHalveAt: 5000}
	m := map[string]string{}
	for _, row := range settingsTable {
		m[row.Hash] = row.stored(&in)
	}
	if got := ParseSettings("q", m); !reflect.DeepEqual(got, in) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, in)
	}

	// An empty hash field by field: the queue made before the setting existed.
	old := ParseSettings("q", map[string]string{"rate": "5"})
	def := DefaultSettings("q")
	for _, row := range settingsTable {
		got := row.Value(old)
		want := reflect.Zero(reflect.TypeOf(got)).Interface()
		if row.Absent {
			want = row.Value(def)
		}
		if row.Kind == KindChoice {
			want = reflect.ValueOf(row.Choices[0]).Convert(reflect.TypeOf(got)).Interface()
		}
		if row.Hash == "rate" {
			want = 5.0
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s absent from the hash reads %v, want %v", row.JSON, got, want)
		}
	}
}

// A patch sets what it names and nothing else; the table's range check refuses each
// ranged setting one step outside its bounds, with the row's message.
func TestSettingsPatchAndRanges(t *testing.T) {
	t.Parallel()
	base := DefaultSettings("q")
	for _, row := range settingsTable {
		if row.Kind == KindTime || row.Kind == KindText || row.Kind == KindChoice || row.Kind == KindList {
			continue
		}
		var p SettingsPatch
		want := row.Value(base)
		switch row.Kind {
		case KindFloat:
			want = row.Min + 0.5
		case KindInt:
			want = reflect.ValueOf(int64(row.Min) + 1).Convert(reflect.TypeOf(want)).Interface()
		case KindBool:
			want = !want.(bool)
		case KindDuration:
			want = time.Duration(row.Min+1) * row.Unit
		}
		row.SetPatch(&p, want)
		got := p.Apply(base)
		if row.Value(got) != want {
			t.Errorf("%s: patched to %v, got %v", row.JSON, want, row.Value(got))
		}
		for _, other := range settingsTable {
			if other.Go != row.Go && !reflect.DeepEqual(other.Value(got), other.Value(base)) {
				t.Errorf("patching %s changed %s", row.JSON, other.JSON)
			}
		}
		if !row.Ranged || row.Kind == KindList {
			continue
		}
		for _, bad := range []float64{row.Min - 1, row.Max + 1} {
			s := base
			v := row.field(&s)
			switch row.Kind {
			case KindFloat:
				v.SetFloat(bad)
			case KindInt:
				v.SetInt(int64(bad))
			case KindDuration:
				v.SetInt(int64(time.Duration(bad) * row.Unit))
			}
			err := s.Validate()
			ie, ok := err.(*InvalidError)
			if !ok || ie.Field != row.JSON || ie.Message != row.Refusal {
				t.Errorf("%s = %v: got %v, want the row's refusal %q", row.JSON, bad, err, row.Refusal)
			}
		}
	}
}
