package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// metricsSample is one scrape of an instance's /metrics: every series' value by its full
// name with labels.
type metricsSample map[string]float64

var httpc = &http.Client{Timeout: 10 * time.Second}

func scrape(base string) (metricsSample, error) {
	resp, err := httpc.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
	out := metricsSample{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// sum adds every series of metric name (all label sets); ok is false when there is none.
func (m metricsSample) sum(name string) (float64, bool) {
	var s float64
	found := false
	for k, v := range m {
		if k == name || (strings.HasPrefix(k, name) && len(k) > len(name) && k[len(name)] == '{') {
			s += v
			found = true
		}
	}
	return s, found
}

// first returns the first metric of names present (servers differ in which Go memory
// series they export).
func (m metricsSample) first(names ...string) (float64, string) {
	for _, n := range names {
		if v, ok := m.sum(n); ok {
			return v, n
		}
	}
	return 0, ""
}

// scrapeAll scrapes every target; a failed target is reported and left out.
func scrapeAll(targets []string) []metricsSample {
	out := make([]metricsSample, len(targets))
	for i, t := range targets {
		m, err := scrape(t)
		if err != nil {
			warnf("scrape %s: %v", t, err)
			m = metricsSample{}
		}
		out[i] = m
	}
	return out
}

func total(ms []metricsSample, names ...string) float64 {
	var s float64
	for _, m := range ms {
		v, _ := m.first(names...)
		s += v
	}
	return s
}

// redisStats is what INFO commandstats tells: calls per command, counting the commands
// that Lua scripts run as well as the scripts themselves (Redis 7 counts both, and so does
// total_commands_processed). The swarm's own INFO calls are left out.
type redisStats struct {
	Calls map[string]float64
	CPU   float64 // used_cpu_user + used_cpu_sys, seconds
}

// calls is every command Redis executed; scripts counts EVAL/EVALSHA/FCALL runs.
func (r redisStats) calls() (all, scripts float64) {
	for k, v := range r.Calls {
		switch k {
		case "info":
			continue
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
			scripts += v
		}
		all += v
	}
	return all, scripts
}

// redisInfoAll sums INFO commandstats and CPU over several servers (a cluster's masters).
func redisInfoAll(addrs []string) (redisStats, error) {
	out := redisStats{Calls: map[string]float64{}}
	for _, a := range addrs {
		st, err := redisInfo(a)
		if err != nil {
			return out, fmt.Errorf("%s: %w", a, err)
		}
		for k, v := range st.Calls {
			out.Calls[k] += v
		}
		out.CPU += st.CPU
	}
	return out, nil
}

// redisInfo reads INFO stats and INFO commandstats over a plain RESP connection.
func redisInfo(addr string) (redisStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return redisStats{}, err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(nc)
	info := func(section string) (string, error) {
		cmd := fmt.Sprintf("*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n", len(section), section)
		if _, err := nc.Write([]byte(cmd)); err != nil {
			return "", err
		}
		head, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		if len(head) < 2 || head[0] != '$' {
			return "", fmt.Errorf("INFO %s: unexpected reply %q", section, head)
		}
		n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
		if err != nil {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	out := redisStats{Calls: map[string]float64{}}
	s, err := info("cpu")
	if err != nil {
		return out, err
	}
	for _, line := range strings.Split(s, "\r\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				out.CPU += f
			}
		}
	}
	s, err = info("commandstats")
	if err != nil {
		return out, err
	}
	for _, line := range strings.Split(s, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range bytes.Split([]byte(rest), []byte(",")) {
			if v, ok := bytes.CutPrefix(kv, []byte("calls=")); ok {
				out.Calls[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseFloat(string(v), 64)
			}
		}
	}
	return out, nil
}

// machineBusy reads /proc/stat: seconds of CPU time all cores spent busy since boot.
// Windows report it next to the server's own CPU, so load from anything else on the box
// (other tests, the load generator) is visible.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0
	}
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += n
	}
	return busy / 100 // USER_HZ
}

// procCPU reads /proc/<pid>/stat: user + system CPU seconds of one process (0 if gone).
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100 // USER_HZ
}

// serverQuantiles are quantiles of a server histogram over one window, interpolated
// linearly inside a bucket as Prometheus' histogram_quantile does.
type serverQuantiles struct {
	N     float64 `json:"n"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
}

// histQuantiles reads histogram name's buckets at a and b, summed over every instance. An
// instance whose scrape failed at either end, or whose buckets went down (it restarted), is
// left out rather than counted with its whole history or a negative delta.
func histQuantiles(a, b sample, name string) serverQuantiles {
	return labelQuantiles(a.m, b.m, name, "")
}

// labelQuantiles is histQuantiles over the series of histogram name whose labels include
// sel (e.g. `route="/api/queues/:queue/join"`; "" = a histogram without labels), with the
// instances' scrapes a (before) and b (after) in the same order.
func labelQuantiles(am, bm []metricsSample, name, sel string) serverQuantiles {
	counts := map[float64]float64{} // le → observations in the window
	prefix := name + "_bucket{"
	buckets := func(m metricsSample) map[float64]float64 {
		out := map[float64]float64{}
		for k, v := range m {
			if !strings.HasPrefix(k, prefix) || (sel != "" && !strings.Contains(k, sel)) {
				continue
			}
			i := strings.Index(k, `le="`)
			if i < 0 || (sel == "" && i != len(prefix)) {
				continue
			}
			if le, err := strconv.ParseFloat(strings.TrimSuffix(k[i+4:], `"}`), 64); err == nil {
				out[le] += v
			}
		}
		return out
	}
	for i := 0; i < len(am) && i < len(bm); i++ {
		before, after := buckets(am[i]), buckets(bm[i])
		if len(before) == 0 || len(before) != len(after) {
			continue
		}
		ok := true
		for le, v := range after {
			if w, found := before[le]; !found || v < w {
				ok = false
			}
		}
		if !ok {
			continue
		}
		for le, v := range after {
			counts[le] += v - before[le]
		}
	}
	les := make([]float64, 0, len(counts))
	for le := range counts {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 || counts[les[len(les)-1]] <= 0 {
		return serverQuantiles{}
	}
	n := counts[les[len(les)-1]] // the +Inf bucket holds every observation
	q := func(p float64) float64 {
		rank := p * n
		lower, below := 0.0, 0.0
		for _, le := range les {
			c := counts[le]
			if c >= rank {
				if math.IsInf(le, 1) {
					return lower * 1000 // beyond the last finite bound: report that bound
				}
				if c == below {
					return le * 1000
				}
				return 1000 * (lower + (le-lower)*(rank-below)/(c-below))
			}
			lower, below = le, c
		}
		return lower * 1000
	}
	return serverQuantiles{N: n, P50MS: round(q(0.5), 2), P99MS: round(q(0.99), 2)}
}

// procSched sums /proc/<pid>/task/*/schedstat over every thread of a process: seconds on a
// CPU and seconds runnable but waiting for one (the run queue). Both 0 when it is gone.
func procSched(pid int) (run, wait float64) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		r, _ := strconv.ParseFloat(f[0], 64)
		w, _ := strconv.ParseFloat(f[1], 64)
		run += r / 1e9
		wait += w / 1e9
	}
	return run, wait
}

// cpuPressure reads /proc/pressure/cpu: seconds during which at least one runnable task
// waited for a CPU ("some"), since boot; 0 without PSI.
func cpuPressure() float64 {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "total="); ok {
			us, _ := strconv.ParseFloat(v, 64)
			return us / 1e6
		}
	}
	return 0
}
