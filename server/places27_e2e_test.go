package main

import (
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue/redistest"
)

// TestPlacesShareOfMaxActive: one address cannot take a passthrough queue. With max_active
// 20 and the default max_active_share_per_ip (0.1), the test client's address (127.0.0.1)
// is admitted twice and then refused (429 too_many_places, scope ip, a message a buyer
// understands) while its admissions live; the setting, raised to 0.25, lets it hold 5.
func TestPlacesShareOfMaxActive(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "share", tolerantEnv(rs.URL(), testDB(t), nil))
	var st struct {
		Share *float64 `json:"max_active_share_per_ip"`
	}
	if res := call(t, "PUT", in.url+"/admin/api/queues/pt", adminToken,
		map[string]any{"method": "passthrough", "max_active": 20, "rate_per_second": 1000}, &st); res.StatusCode != 201 || st.Share == nil || *st.Share != 0.1 {
		t.Fatalf("PUT: %d, max_active_share_per_ip %v; want 201 and the default 0.1", res.StatusCode, st.Share)
	}
	joins := func(n int) (admitted int, refusals []errResp) {
		t.Helper()
		for range n {
			var out struct {
				joinResp
				errResp
			}
			res := call(t, "POST", in.url+"/api/queues/pt/join", "", nil, &out)
			switch res.StatusCode {
			case 201:
				if out.State != "admitted" {
					t.Fatalf("join: state %q, want admitted (passthrough, room left)", out.State)
				}
				admitted++
			case 429:
				if res.Header.Get("X-RateLimit-Scope") != "ip" || out.Error.Code != "too_many_places" {
					t.Fatalf("join refused: scope %q, %+v", res.Header.Get("X-RateLimit-Scope"), out.errResp)
				}
				refusals = append(refusals, out.errResp)
			default:
				t.Fatalf("join: %d", res.StatusCode)
			}
		}
		return admitted, refusals
	}
	a, r := joins(4)
	if a != 2 || len(r) != 2 {
		t.Fatalf("4 joins from one address: %d admitted, %d refused; want 2 and 2 (a tenth of max_active 20)", a, len(r))
	}
	if m := r[0].Error.Message; !strings.Contains(m, "one internet address") || !strings.Contains(m, "until it leaves the line or its admission is used or expires") {
		t.Fatalf("the refusal's message %q does not say what counts", m)
	}
	if res := call(t, "PUT", in.url+"/admin/api/queues/pt", adminToken, map[string]any{"max_active_share_per_ip": 0.25}, &st); res.StatusCode != 200 || st.Share == nil || *st.Share != 0.25 {
		t.Fatalf("PUT share 0.25: %d %v", res.StatusCode, st.Share)
	}
	if a, r = joins(4); a != 3 || len(r) != 1 {
		t.Fatalf("share 0.25: %d more admitted, %d refused; want 3 (5 in all) and 1", a, len(r))
	}
	if res := admin(t, in, "PUT", "/admin/api/queues/pt", map[string]any{"max_active_share_per_ip": 1.5}); res.StatusCode != 422 {
		t.Fatalf("share 1.5: %d, want 422", res.StatusCode)
	}
}
