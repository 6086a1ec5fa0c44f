// Command aimdchart draws the auto rate controller's run (the CSV that
// server/TestAutoRateFindsTheKnee writes with WR_AIMD_CSV) as an SVG: the admission rate
// and the backend's p95 over time, the measured knee, the target and the moment the
// backend's capacity halved. k6/aimd.sh renders it to PNG with headless Chromium.
//
//	go run ./k6/aimdchart -csv run.csv -meta run.csv.meta > chart.svg   (or -knee 22 -target 1000 -halve 35)
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

type row struct {
	t, rate, p95 float64
}

func main() {
	path := flag.String("csv", "", "the series (seconds,rate_per_second,backend_p95_ms,…)")
	knee := flag.Float64("knee", 0, "the measured knee, orders/s (0: none)")
	target := flag.Float64("target", 0, "the p95 target, ms (0: none)")
	halve := flag.Float64("halve", 0, "seconds at which the backend's capacity halved (0: none)")
	title := flag.String("title", "Auto rate (AIMD) against a backend of known capacity", "chart title")
	meta := flag.String("meta", "", `the run's numbers ("knee 22", "target 1000", "halve 35" lines), instead of the flags`)
	flag.Parse()
	if *meta != "" {
		b, err := os.ReadFile(*meta)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, " ")
			n, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "knee":
				*knee = n
			case "target":
				*target = n
			case "halve":
				*halve = n
			}
		}
	}
	f, err := os.Open(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	rows, err := read(f)
	if err != nil || len(rows) == 0 {
		fmt.Fprintln(os.Stderr, "aimdchart: no rows:", err)
		os.Exit(1)
	}
	fmt.Print(draw(rows, *knee, *target, *halve, *title))
}

func read(r io.Reader) ([]row, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	var out []row
	for _, rec := range recs[1:] {
		if len(rec) < 3 {
			continue
		}
		t, e1 := strconv.ParseFloat(rec[0], 64)
		rate, e2 := strconv.ParseFloat(rec[1], 64)
		p95, e3 := strconv.ParseFloat(rec[2], 64)
		if e1 != nil || e2 != nil || e3 != nil {
			return nil, fmt.Errorf("bad row %v", rec)
		}
		out = append(out, row{t, rate, p95})
	}
	return out, nil
}

// draw lays the chart out: rate on the left axis (users/s), p95 on the right (ms), both
// against seconds since the auto mode was switched on.
func draw(rows []row, knee, target, halve float64, title string) string {
	const W, H, L, R, T, B = 1000.0, 520.0, 70.0, 80.0, 50.0, 60.0
	pw, ph := W-L-R, H-T-B
	tmax, rmax, pmax := 0.0, knee*1.3, target*1.5
	for _, r := range rows {
		tmax = max(tmax, r.t)
		rmax = max(rmax, r.rate*1.1)
		pmax = max(pmax, r.p95*1.1)
	}
	rmax, pmax = nice(rmax), nice(pmax)
	x := func(t float64) float64 { return L + pw*t/tmax }
	yr := func(v float64) float64 { return T + ph*(1-v/rmax) }
	yp := func(v float64) float64 { return T + ph*(1-v/pmax) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="DejaVu Sans, sans-serif" font-size="13">`, W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/><text x="%.0f" y="28" font-size="17" font-weight="bold">%s</text>`, L, title)
	// Grid and axes.
	for i := 0; i <= 5; i++ {
		v := rmax * float64(i) / 5
		y := yr(v)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/>`, L, L+pw, y, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#1f5fbf">%g</text>`, L-8, y+4, round1(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#c0392b">%g</text>`, L+pw+8, y+4, round1(pmax*float64(i)/5))
	}
	for s := 0.0; s <= tmax; s += tick(tmax) {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#f0f0f0"/><text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`,
			x(s), x(s), T, T+ph, x(s), T+ph+18, s)
	}
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`, L, T, pw, ph)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">seconds since rate_mode "auto"</text>`, L+pw/2, H-18)
	fmt.Fprintf(&b, `<text transform="translate(20 %.0f) rotate(-90)" text-anchor="middle" fill="#1f5fbf">admission rate (users/s)</text>`, T+ph/2)
	fmt.Fprintf(&b, `<text transform="translate(%.0f %.0f) rotate(90)" text-anchor="middle" fill="#c0392b">backend p95 (ms)</text>`, W-18, T+ph/2)
	// Reference lines.
	if knee > 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#1f5fbf" stroke-dasharray="6 4"/><text x="%.1f" y="%.1f" fill="#1f5fbf">knee %g/s</text>`,
			L, halveX(x, halve, L+pw), yr(knee), yr(knee), L+6, yr(knee)-6, knee)
		if halve > 0 {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#1f5fbf" stroke-dasharray="6 4"/><text x="%.1f" y="%.1f" fill="#1f5fbf">knee %g/s</text>`,
				x(halve), L+pw, yr(knee/2), yr(knee/2), x(halve)+6, yr(knee/2)-6, knee/2)
		}
	}
	if target > 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#c0392b" stroke-dasharray="2 4"/><text x="%.1f" y="%.1f" text-anchor="end" fill="#c0392b">p95 target %g ms</text>`,
			L, L+pw, yp(target), yp(target), L+pw-6, yp(target)-6, target)
	}
	if halve > 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#555"/><text x="%.1f" y="%.1f" fill="#555">service time doubled</text>`,
			x(halve), x(halve), T, T+ph, x(halve)+6, T+16)
	}
	// Series.
	var pr, pp strings.Builder
	for i, r := range rows {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&pr, "%s%.1f %.1f ", cmd, x(r.t), yr(r.rate))
		if r.p95 > 0 {
			fmt.Fprintf(&pp, "%s%.1f %.1f ", map[bool]string{true: "M", false: "L"}[pp.Len() == 0], x(r.t), yp(r.p95))
		}
	}
	fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="#c0392b" stroke-width="1.5" opacity="0.8"/>`, pp.String())
	fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="#1f5fbf" stroke-width="2.5"/>`, pr.String())
	fmt.Fprintf(&b, `<g transform="translate(%.0f 40)"><rect width="14" height="4" y="-4" fill="#1f5fbf"/><text x="20" y="0">rate (controller)</text><rect x="150" width="14" height="3" y="-4" fill="#c0392b"/><text x="170" y="0">backend p95</text></g>`, L+pw-300)
	b.WriteString(`</svg>`)
	return b.String()
}

func halveX(x func(float64) float64, halve, end float64) float64 {
	if halve > 0 {
		return x(halve)
	}
	return end
}

// nice rounds v up to a round number (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 × a power of ten).
func nice(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := 1.0
	for p*10 <= v {
		p *= 10
	}
	for p > v {
		p /= 10
	}
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func tick(tmax float64) float64 {
	switch {
	case tmax > 300:
		return 60
	case tmax > 120:
		return 30
	case tmax > 40:
		return 10
	}
	return 5
}

func round1(v float64) float64 { return float64(int(v*10+0.5)) / 10 }
