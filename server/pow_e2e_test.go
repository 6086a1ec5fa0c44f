package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

type powChallenge struct {
	Challenge  string `json:"challenge"`
	Difficulty int    `json:"difficulty"`
	ExpiresAt  string `json:"expires_at"`
}

// powAnswer is a join's answer: a place, or an error (with a challenge on 428).
type powAnswer struct {
	joinResp
	Error struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"error"`
	Challenge *powChallenge `json:"challenge"`
}

// solvePow finds a nonce for challenge c in Go, as a client would.
func solvePow(t *testing.T, c powChallenge) map[string]any {
	t.Helper()
	for i := 0; i < 1<<30; i++ {
		n := strconv.FormatInt(int64(i), 36)
		if queue.PowSolves(c.Challenge, n, c.Difficulty) {
			return map[string]any{"pow": map[string]any{"challenge": c.Challenge, "nonce": n}}
		}
	}
	t.Fatalf("no solution for %+v", c)
	return nil
}

func powJoin(t *testing.T, in *instance, q, ticket string, body any) (int, powAnswer) {
	t.Helper()
	var a powAnswer
	res := call(t, "POST", in.url+"/api/queues/"+q+"/join", ticket, body, &a)
	return res.StatusCode, a
}

// TestPowJoin drives proof of work at join through the HTTP API (every request and answer
// checked against docs/openapi.yaml by the harness): the challenge endpoint, 428 with a
// challenge, a solution solved in Go, single use, expiry, a live raise of the difficulty,
// rejoin without a proof, and bad bodies.
func TestPowJoin(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	env := tolerantEnv(rs.URL(), testDB(t), nil)
	in := startInProcess(t, "pow", env)
	// Rate 0: nobody is admitted, so places stay live for the rejoin checks.
	mustAdmin(t, in, "PUT", "/admin/api/queues/pw", map[string]any{"rate_per_second": 0, "places_per_ip": 0, "pow_difficulty": 12})

	t.Run("challenge endpoint", func(t *testing.T) {
		var e errResp
		if res := call(t, "POST", in.url+"/api/queues/nope/challenge", "", nil, &e); res.StatusCode != 404 || e.Error.Code != "queue_not_found" {
			t.Fatalf("unknown queue: %d %s", res.StatusCode, e.Error.Code)
		}
		var c powChallenge
		res := call(t, "POST", in.url+"/api/queues/pw/challenge", "", nil, &c)
		exp, err := time.Parse(time.RFC3339, c.ExpiresAt)
		if res.StatusCode != 200 || c.Difficulty != 12 || err != nil || !strings.HasPrefix(c.Challenge, "pw.") {
			t.Fatalf("challenge: %d %+v (%v)", res.StatusCode, c, err)
		}
		if left := time.Until(exp); left < 100*time.Second || left > 121*time.Second {
			t.Fatalf("challenge expires in %v, want about 2 min", left)
		}
		if res.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("Cache-Control %q", res.Header.Get("Cache-Control"))
		}
	})

	var first powAnswer
	var firstSolution map[string]any
	t.Run("join without a proof is 428 with a challenge, the solution makes a place", func(t *testing.T) {
		st, a := powJoin(t, in, "pw", "", nil)
		if st != 428 || a.Error.Code != "pow_required" || a.Challenge == nil || a.Challenge.Difficulty != 12 {
			t.Fatalf("join without pow: %d %+v", st, a)
		}
		if res := call(t, "POST", in.url+"/api/queues/pw/join", "", nil, nil); res.Header.Get("Set-Cookie") != "" {
			t.Fatal("a 428 set a ticket cookie")
		}
		firstSolution = solvePow(t, *a.Challenge)
		st, first = powJoin(t, in, "pw", "", firstSolution)
		if st != 201 || first.Ticket == "" || first.State != "waiting" || first.Position != 1 {
			t.Fatalf("join with the solution: %d %+v", st, first)
		}
	})

	t.Run("the same solution again, by a fresh client, is refused", func(t *testing.T) {
		st, a := powJoin(t, in, "pw", "", firstSolution)
		if st != 422 || a.Error.Code != "pow_invalid" || a.Error.Field != "pow" {
			t.Fatalf("replay: %d %+v", st, a)
		}
	})

	t.Run("rejoin of a live place with the same ticket needs no proof", func(t *testing.T) {
		st, a := powJoin(t, in, "pw", first.Ticket, nil)
		if st != 200 || a.Position != 1 || a.State != "waiting" {
			t.Fatalf("rejoin: %d %+v", st, a)
		}
	})

	t.Run("expired, forged, other-queue and wrong solutions are refused", func(t *testing.T) {
		// Challenges are stateless: one signed with the deployment secret but already
		// expired is what a slow client would bring back.
		secret := queue.NewSigner([]byte(env["WR_SECRET"]))
		mint := func(s *queue.Signer, q string, at time.Time) powChallenge {
			c := s.NewChallenge(q, 12, at)
			return powChallenge{Challenge: c.Challenge, Difficulty: c.Difficulty}
		}
		other := queue.NewSigner([]byte("another-deployment-secret"))
		wrong := solvePow(t, mint(secret, "pw", time.Now()))
		wrong["pow"].(map[string]any)["nonce"] = "not-a-solution-" + strconv.Itoa(int(time.Now().UnixNano()%1000))
		for name, body := range map[string]any{
			"expired":     solvePow(t, mint(secret, "pw", time.Now().Add(-queue.PowChallengeTTL-time.Second))),
			"forged":      solvePow(t, mint(other, "pw", time.Now())),
			"other queue": solvePow(t, mint(secret, "pw2", time.Now())),
			"empty nonce": map[string]any{"pow": map[string]any{"challenge": mint(secret, "pw", time.Now()).Challenge, "nonce": ""}},
		} {
			if st, a := powJoin(t, in, "pw", "", body); st != 422 || a.Error.Code != "pow_invalid" {
				t.Errorf("%s: %d %+v", name, st, a)
			}
		}
		// A nonce that is not a solution: refused unless it happens to solve (1 in 4096).
		n := wrong["pow"].(map[string]any)
		if !queue.PowSolves(n["challenge"].(string), n["nonce"].(string), 12) {
			if st, a := powJoin(t, in, "pw", "", wrong); st != 422 || a.Error.Code != "pow_invalid" {
				t.Errorf("wrong nonce: %d %+v", st, a)
			}
		}
	})

	t.Run("a live raise: a proof of the old difficulty gets 428 at the new one", func(t *testing.T) {
		var c powChallenge
		call(t, "POST", in.url+"/api/queues/pw/challenge", "", nil, &c)
		old := solvePow(t, c)
		mustAdmin(t, in, "PUT", "/admin/api/queues/pw", map[string]any{"pow_difficulty": 14})
		st, a := powJoin(t, in, "pw", "", old)
		if st != 428 || a.Error.Code != "pow_required" || a.Challenge == nil || a.Challenge.Difficulty != 14 {
			t.Fatalf("old proof after the raise: %d %+v", st, a)
		}
		st, b := powJoin(t, in, "pw", "", solvePow(t, *a.Challenge))
		if st != 201 || b.Position != 2 {
			t.Fatalf("proof at 14 bits: %d %+v", st, b)
		}
		// The earlier place still needs nothing.
		if st, a := powJoin(t, in, "pw", first.Ticket, nil); st != 200 {
			t.Fatalf("rejoin after the raise: %d %+v", st, a)
		}
	})

	t.Run("bad bodies", func(t *testing.T) {
		huge, _ := json.Marshal(map[string]any{"invite": strings.Repeat("x", 70<<10)})
		for _, tc := range []struct {
			name, body string
			status     int
			code       string
		}{
			{"malformed JSON", `{"pow":`, 400, "malformed_json"},
			{"not an object", `[1]`, 400, "malformed_json"},
			{"unknown field", `{"pow":{"challenge":"a","nonce":"b"},"difficulty":0}`, 400, "bad_request"},
			{"half a proof", `{"pow":{"challenge":"a"}}`, 422, "pow_invalid"},
			{"huge", string(huge), 413, "body_too_large"},
		} {
			var e errResp
			res := call(t, "POST", in.url+"/api/queues/pw/join", "", tc.body, &e)
			if res.StatusCode != tc.status || e.Error.Code != tc.code {
				t.Errorf("%s: %d %s, want %d %s", tc.name, res.StatusCode, e.Error.Code, tc.status, tc.code)
			}
		}
	})

	t.Run("difficulty 0: a join with no body works as before", func(t *testing.T) {
		mustAdmin(t, in, "PUT", "/admin/api/queues/pw", map[string]any{"pow_difficulty": 0})
		if st, a := powJoin(t, in, "pw", "", nil); st != 201 {
			t.Fatalf("join without pow at difficulty 0: %d %+v", st, a)
		}
		var c powChallenge
		if res := call(t, "POST", in.url+"/api/queues/pw/challenge", "", nil, &c); res.StatusCode != 200 || c.Difficulty != 0 {
			t.Fatalf("challenge at difficulty 0: %d %+v", res.StatusCode, c)
		}
	})
}
