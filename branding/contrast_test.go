package branding_test

import (
	"math"
	"testing"

	"github.com/waitroom/waitroom/branding"
)

// TestBrandContrast: the WCAG ratios of known pairs.
func TestBrandContrast(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want float64
	}{
		{"#000000", "#ffffff", 21},
		{"#ffffff", "#ffffff", 1},
		{"#ffff00", "#ffffff", 1.07},
		{"#0b57d0", "#ffffff", 6.39},
		{"#3b82f6", "#ffffff", 3.68},
		{"#1A5FB4", "#f5f6f8", 5.82},
	} {
		if got := branding.ContrastRatio(c.a, c.b); math.Abs(got-c.want) > 0.02 {
			t.Errorf("%s on %s: %.3f, want %.2f", c.a, c.b, got, c.want)
		}
	}
	for _, bad := range []string{"red", "#12345", "#1234567", "123456", "#gggggg", ""} {
		if got := branding.ContrastRatio(bad, "#ffffff"); got != 0 {
			t.Errorf("%q: %v, want 0 (not a colour)", bad, got)
		}
	}
}
