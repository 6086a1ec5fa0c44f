package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue/redistest"
)

// Admin bodies over HTTP: every admin JSON body takes exactly its documented keys,
// case-sensitive (422 unknown_field naming the key), a key given twice is 400
// duplicate_key, and neither changes anything or lands in the audit log; a request that
// stores what was there is answered 200 and records nothing; the settings' loose values
// (ports, Unicode hosts, bidi controls, -0) are refused or normalised.
func TestAdminStrictBodies(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "strict", tolerantEnv(rs.URL(), testDB(t), nil))
	type answer struct {
		Error struct{ Code, Field, Message string } `json:"error"`
	}
	send := func(method, path, body string, want int) answer {
		t.Helper()
		var a answer
		if res := call(t, method, in.url+path, adminToken, body, &a); res.StatusCode != want {
			t.Fatalf("%s %s %s: %d %+v, want %d", method, path, body, res.StatusCode, a, want)
		}
		return a
	}
	// raw is the answer's body as sent (json.Unmarshal would read -0 as 0).
	raw := func(method, path, body string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(testContext(t), method, in.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := specClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		return string(b)
	}
	entries := func() int { return len(auditEntries(t, in, adminToken, "?limit=500")) }

	send("PUT", "/admin/api/queues/sq", `{"rate_per_second":2,"max_active":10}`, 201)
	send("PUT", "/admin/api/products/sp", `{"name":"S","queue":"sq","stock":5}`, 201)
	send("PUT", "/admin/api/limits", `{"join_global_burst":9}`, 200)
	// The state every refused request could have touched, read back (PUT {} answers the
	// queue's settings and, changing nothing, records nothing).
	state := func() string {
		return raw("PUT", "/admin/api/queues/sq", `{}`) + raw("GET", "/api/products/sp", "") +
			raw("GET", "/admin/api/limits", "") + raw("GET", "/admin/api/queues/sq/invites", "")
	}
	before, logged := state(), entries()

	t.Run("refused bodies change nothing", func(t *testing.T) {
		for _, c := range []struct {
			method, path, body string
			status             int
			code, field        string
		}{
			{"PUT", "/admin/api/queues/sq", `{"rate_per_second":1,"RATE_PER_SECOND":7}`, 422, "unknown_field", "RATE_PER_SECOND"},
			{"PUT", "/admin/api/queues/sq", `{"rate_per_secnd":9}`, 422, "unknown_field", "rate_per_secnd"},
			{"PUT", "/admin/api/queues/sq", `{"rate_per_second":1,"rate_per_second":7}`, 400, "duplicate_key", "rate_per_second"},
			{"PUT", "/admin/api/queues/sq", `{"allowed_origins":["https://a.example"],"paused":true,"paused":false}`, 400, "duplicate_key", "paused"},
			{"PUT", "/admin/api/queues/sq", `null`, 422, "invalid_field", ""},
			{"PUT", "/admin/api/products/sp", `{"stock":5,"Stock":7}`, 422, "unknown_field", "Stock"},
			{"PUT", "/admin/api/products/sp", `{"stock":1,"stock":2}`, 400, "duplicate_key", "stock"},
			{"PUT", "/admin/api/limits", `{"JOIN_GLOBAL_PER_SECOND":3}`, 422, "unknown_field", "JOIN_GLOBAL_PER_SECOND"},
			{"PUT", "/admin/api/limits", `{"join_global_burst":1,"join_global_burst":2}`, 400, "duplicate_key", "join_global_burst"},
			{"POST", "/admin/api/queues/sq/invites", `{"count":1,"lane":"bypass","LANE":"priority"}`, 422, "unknown_field", "LANE"},
			{"POST", "/admin/api/queues/sq/invites", `{"count":1,"lane":"bypass","lane":"priority"}`, 400, "duplicate_key", "lane"},
			{"PUT", "/admin/api/queues/sq", `{"allowed_origins":["https://shop.example:99999"]}`, 422, "invalid_settings", "allowed_origins"},
			{"PUT", "/admin/api/queues/sq", `{"allowed_origins":["https://shop.example:"]}`, 422, "invalid_settings", "allowed_origins"},
			{"PUT", "/admin/api/queues/sq", `{"allowed_origins":["https://shop.example:0443"]}`, 422, "invalid_settings", "allowed_origins"},
			{"PUT", "/admin/api/queues/sq", `{"allowed_origins":["https://a\u200d\u200d.example"]}`, 422, "invalid_settings", "allowed_origins"},
			{"PUT", "/admin/api/queues/sq", `{"brand_message":"pay at \u202eetis.live\u202c now"}`, 422, "invalid_settings", "brand_message"},
			{"PUT", "/admin/api/queues/sq", `{"brand_name":"\u2067Shop\u2069"}`, 422, "invalid_settings", "brand_name"},
		} {
			a := send(c.method, c.path, c.body, c.status)
			if a.Error.Code != c.code || a.Error.Field != c.field {
				t.Errorf("%s %s %s: %s field %q (%s), want %s field %q", c.method, c.path, c.body, a.Error.Code, a.Error.Field, a.Error.Message, c.code, c.field)
			}
		}
		if got := state(); got != before {
			t.Errorf("refused bodies changed the state:\n%s\nwas\n%s", got, before)
		}
		if n := entries(); n != logged {
			t.Errorf("refused bodies wrote %d audit entries", n-logged)
		}
	})

	t.Run("a request that stores what was there records nothing", func(t *testing.T) {
		send("PUT", "/admin/api/queues/sq", `{"rate_per_second":2,"max_active":10}`, 200)
		send("PUT", "/admin/api/products/sp", `{"stock":5}`, 200)
		send("PUT", "/admin/api/limits", `{"join_global_burst":9}`, 200)
		if n := entries(); n != logged {
			t.Errorf("unchanged requests wrote %d audit entries", n-logged)
		}
		png := brandingPNG(t, 8, 8)
		for range 2 { // the same bytes again: the same logo URL, no second entry
			if res := call(t, "PUT", in.url+"/admin/api/queues/sq/logo", adminToken, png, nil, "Content-Type", "image/png"); res.StatusCode != 200 {
				t.Fatalf("PUT logo: %d", res.StatusCode)
			}
		}
		if got := auditEntries(t, in, adminToken, "?limit=500"); len(got) != logged+1 || got[0].Action != "queue.logo.update" {
			t.Errorf("two PUTs of one logo: %d entries more, newest %+v", len(got)-logged, got[0])
		}
		logged++
		send("PUT", "/admin/api/queues/sq", `{"rate_per_second":-0}`, 200)
		got := auditEntries(t, in, adminToken, "?limit=1")
		if len(got) != 1 || got[0].Action != "queue.update" || num(got[0].Before["rate_per_second"]) != 2 || num(got[0].After["rate_per_second"]) != 0 {
			t.Errorf("the change 2 → 0: %+v", got)
		}
	})

	// What the release before could store (it refused none of these) is read as it is and
	// blocks no other change: pausing a queue must work whatever its brand_message holds.
	t.Run("values stored by the release before", func(t *testing.T) {
		err := rs.Client().HSet(context.Background(), "wr:{q:sq}:cfg", "rate", "-0", "brand_message", "x\u202ey",
			"allowed_origins", `["https://a.example:99999","https://bücher.example"]`).Err()
		if err != nil {
			t.Fatal(err)
		}
		got := raw("PUT", "/admin/api/queues/sq", `{"paused":true}`)
		for _, want := range []string{`"rate_per_second":0,`, `"paused":true`, "\"brand_message\":\"x\u202ey\""} {
			if !strings.Contains(got, want) {
				t.Errorf("answer without %s: %s", want, got)
			}
		}
		send("PUT", "/admin/api/queues/sq", `{"brand_message":"x\u202ey"}`, 422) // new values follow the rules
		send("PUT", "/admin/api/queues/sq", `{"brand_message":"","allowed_origins":[],"paused":false}`, 200)
	})

	t.Run("values normalised", func(t *testing.T) {
		got := raw("PUT", "/admin/api/queues/sq",
			`{"rate_per_second":-0,"priority_share":-0,"allowed_origins":["HTTPS://XN--BCHER-KVA.Example:443","http://[::1]:8080","https://bücher.example:8443"],"brand_message":"\u200fשלום\u200e"}`)
		for _, want := range []string{`"rate_per_second":0,`, `"priority_share":0,`, `"allowed_origins":["https://xn--bcher-kva.example","http://[::1]:8080","https://xn--bcher-kva.example:8443"]`} {
			if !strings.Contains(got, want) {
				t.Errorf("answer without %s: %s", want, got)
			}
		}
		if got := raw("PUT", "/admin/api/limits", `{"join_global_per_second":-0}`); !strings.Contains(got, `"join_global_per_second":0,`) {
			t.Errorf("limits: %s", got)
		}
	})
}
