package queue_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue"
)

// Branding text with a bidi embedding, override or isolate is refused naming its field;
// the direction marks (LRM, RLM, ALM) are right-to-left text's ordinary tools and stay.
func TestSettingsBrandRefusesBidiControls(t *testing.T) {
	t.Parallel()
	for _, r := range []rune{0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069} {
		for _, field := range []string{"brand_message", "brand_name"} {
			text := "pay at " + string(r) + "etis.live"
			p := queue.SettingsPatch{BrandMessage: &text}
			if field == "brand_name" {
				p = queue.SettingsPatch{BrandName: &text}
			}
			err := p.Validate()
			var ie *queue.InvalidError
			if !errors.As(err, &ie) || ie.Field != field || !strings.Contains(ie.Message, "bidirectional") {
				t.Errorf("%s with U+%04X: %v", field, r, err)
			}
		}
	}
	for _, ok := range []string{"\u200fשלום\u200e 123", "مرحبا \u061c1", "Line one\nline two"} {
		p := queue.SettingsPatch{BrandMessage: &ok}
		if err := p.Validate(); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
		if err := p.Apply(queue.DefaultSettings("q")).Validate(); err != nil {
			t.Errorf("%q refused by the settings: %v", ok, err)
		}
	}
}

// A rate or share of -0 is 0: stored and answered without the sign.
func TestSettingsNegativeZeroIsZero(t *testing.T) {
	t.Parallel()
	nz := math.Copysign(0, -1)
	s := queue.SettingsPatch{RatePerSecond: &nz, PriorityShare: &nz}.Apply(queue.DefaultSettings("q"))
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.RatePerSecond != 0 || math.Signbit(s.RatePerSecond) || math.Signbit(s.PriorityShare) {
		t.Fatalf("rate %v, share %v: want 0 without a sign", s.RatePerSecond, s.PriorityShare)
	}
}
