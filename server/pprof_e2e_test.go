package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/waitroom/waitroom/queue/redistest"
)

// TestPprofOnItsOwnAddress: with WR_PPROF_ADDR the profiler answers on that loopback
// address — its index, and a CPU profile of 1 s that is a gzip'd pprof protobuf with CPU
// samples — and the public port does not serve it.
func TestPprofOnItsOwnAddress(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "pprof", tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_PPROF_ADDR": "127.0.0.1:0"}))
	addr := pprofAddr(t, in)
	client := &http.Client{}

	get := func(url string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(testContext(t), "GET", url, nil)
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	if code, body := get("http://" + addr + "/debug/pprof/"); code != 200 || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("pprof index: %d %.200q", code, body)
	}
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/cmdline"} {
		if res := call(t, "GET", in.url+p, "", nil, nil); res.StatusCode != 404 {
			t.Errorf("public port GET %s: %d, want 404", p, res.StatusCode)
		}
	}

	code, body := get("http://" + addr + "/debug/pprof/profile?seconds=1")
	if code != 200 {
		t.Fatalf("CPU profile: %d %.200q", code, body)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("CPU profile is not gzip'd: %v", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("CPU profile: gunzip: %v", err)
	}
	strs, sampleTypes := profileStrings(t, raw)
	// A CPU profile's sample types are samples/count and cpu/nanoseconds (runtime/pprof).
	for _, want := range []string{"samples", "count", "cpu", "nanoseconds"} {
		if !slices.Contains(strs, want) {
			t.Errorf("CPU profile's string table lacks %q (has %d strings)", want, len(strs))
		}
	}
	if sampleTypes != 2 {
		t.Errorf("CPU profile has %d sample types, want 2", sampleTypes)
	}
}

// pprofAddr is the profiler's address from the instance's "pprof listening" line.
func pprofAddr(t *testing.T, in *instance) string {
	t.Helper()
	for _, l := range strings.Split(in.logs.String(), "\n") {
		if !strings.Contains(l, `"message":"pprof listening"`) {
			continue
		}
		var v struct{ Addr string }
		if json.Unmarshal([]byte(l), &v) == nil && v.Addr != "" {
			return v.Addr
		}
	}
	t.Fatal("no pprof listening line")
	return ""
}

// profileStrings decodes the top level of a pprof Profile message (github.com/google/pprof
// proto/profile.proto): it returns its string table (field 6) and the number of its sample
// types (field 1), failing on anything that is not a well-formed protobuf message.
func profileStrings(t *testing.T, b []byte) (strs []string, sampleTypes int) {
	t.Helper()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("profile: bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				t.Fatalf("profile: field %d: %v", num, protowire.ParseError(m))
			}
			switch num {
			case 1:
				sampleTypes++
			case 6:
				strs = append(strs, string(v))
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			t.Fatalf("profile: field %d: %v", num, protowire.ParseError(m))
		}
		b = b[m:]
	}
	return strs, sampleTypes
}

// TestPprofAddressMustBeLoopback: the profiler has no authentication, so an address off
// loopback (or on every interface) stops the start with one line naming the variable.
func TestPprofAddressMustBeLoopback(t *testing.T) {
	t.Parallel()
	for _, v := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "192.0.2.1:6060", "example.com:6060", "127.0.0.1"} {
		_, err := loadConfig(func(k string) string { return map[string]string{"WR_PPROF_ADDR": v}[k] })
		if err == nil || !strings.Contains(err.Error(), "WR_PPROF_ADDR") {
			t.Errorf("WR_PPROF_ADDR=%q: %v, want refused", v, err)
		}
	}
	for _, v := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:6060", "127.0.0.2:0"} {
		if _, err := loadConfig(func(k string) string { return map[string]string{"WR_PPROF_ADDR": v}[k] }); err != nil {
			t.Errorf("WR_PPROF_ADDR=%q: %v, want accepted", v, err)
		}
	}
}
