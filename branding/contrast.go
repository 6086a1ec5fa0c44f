package branding

import (
	"math"
	"regexp"
	"strconv"
)

// MinContrast is WCAG 2's AA ratio for normal text: a brand colour must reach it with white
// text on it (the buttons) and on the page's background (links, highlights).
const MinContrast = 4.5

// rgbHex is the one colour form the contrast is computed for; it is also the only form a
// queue's brand_color is stored in (package queue checks that), so a stored colour always
// has a ratio.
var rgbHex = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// ContrastRatio is the WCAG 2 contrast ratio of two #rrggbb colours (1 to 21), or 0 when
// either is not one.
func ContrastRatio(a, b string) float64 {
	la, ok1 := luminance(a)
	lb, ok2 := luminance(b)
	if !ok1 || !ok2 {
		return 0
	}
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// luminance is the WCAG relative luminance of a #rrggbb colour.
func luminance(c string) (float64, bool) {
	if !rgbHex.MatchString(c) {
		return 0, false
	}
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		v, _ := strconv.ParseUint(c[1+2*i:3+2*i], 16, 8)
		s := float64(v) / 255
		if s <= 0.04045 {
			s /= 12.92
		} else {
			s = math.Pow((s+0.055)/1.055, 2.4)
		}
		l += w * s
	}
	return l, true
}
