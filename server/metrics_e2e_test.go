package main

import (
	"runtime"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/waitroom/waitroom/queue/redistest"
)

// scrape reads the instance's /metrics as metric families.
func scrape(t *testing.T, in *instance) map[string]*dto.MetricFamily {
	t.Helper()
	res := call(t, "GET", in.url+"/metrics", "", nil, nil)
	if res.StatusCode != 200 {
		t.Fatalf("/metrics: %d", res.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	return fams
}

// labelsOf renders a series' labels as name=value pairs, sorted as the exposition sorts them.
func labelsOf(m *dto.Metric) string {
	var b []string
	for _, l := range m.GetLabel() {
		b = append(b, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(b, ",")
}

// TestMetricsAtStart: before anything has happened, /metrics already has waitroom_build_info
// (1, labelled with the build's version, revision and Go release) and every series of the
// labelled counters whose label values are known in advance, at 0 — so rate() and alerts
// see the first event of each.
func TestMetricsAtStart(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "metrics", tolerantEnv(rs.URL(), testDB(t), nil))
	fams := scrape(t, in)

	bi := fams["waitroom_build_info"]
	if bi == nil || len(bi.GetMetric()) != 1 {
		t.Fatalf("waitroom_build_info: %v", bi)
	}
	m := bi.GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if m.GetGauge().GetValue() != 1 || labels["go_version"] != runtime.Version() || labels["version"] == "" || labels["revision"] == "" || len(labels) != 3 {
		t.Errorf("waitroom_build_info %v = %v", labels, m.GetGauge().GetValue())
	}

	want := map[string][]string{
		"sse_disconnects_total": {"reason=client_closed", "reason=write_error", "reason=slow_client", "reason=shutdown", "reason=no_place", "reason=ended"},
		"ratelimit_rejected_total": {"path=/api/queues/join,scope=ip", "path=/api/queues/join,scope=global", "path=/api/orders,scope=user",
			"path=/api/orders,scope=ip", "path=/api/orders,scope=global", "path=/api/queues/status,scope=user", "path=/api/queues/stream,scope=ip"},
		"sse_refused_total":        {"reason=full", "reason=ip_cap"},
		"http_accept_errors_total": {"reason=too_many_open_files", "reason=aborted", "reason=no_memory", "reason=other"},
		"order_outcomes_total": {"result=created", "result=replayed", "result=sold_out", "result=not_found", "result=invalid", "result=conflict",
			"result=token_used", "result=unavailable", "result=error"},
		"order_retries_total": {"reason=deadlock", "reason=unknown_outcome"},
	}
	for name, series := range want {
		have := map[string]float64{}
		for _, m := range fams[name].GetMetric() {
			have[labelsOf(m)] = m.GetCounter().GetValue()
		}
		for _, s := range series {
			v, ok := have[s]
			if !ok {
				t.Errorf("%s{%s} is not there at start (have %v)", name, s, have)
			} else if v != 0 {
				t.Errorf("%s{%s} = %v at start, want 0", name, s, v)
			}
		}
	}
}
