package main

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/freeport"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/notify/smtptest"
	"github.com/waitroom/waitroom/queue/redistest"
)

// notifyErr is the error shape with its field.
type notifyErr struct {
	Error struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"error"`
}

// startMailInstance starts an instance that sends reminders to inbox, on a port chosen
// first so that WR_PUBLIC_URL can name it.
func startMailInstance(t *testing.T, id, redisURL, db string, inbox *smtptest.Inbox, extra map[string]string) *instance {
	t.Helper()
	port, err := freeport.Get()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := map[string]string{"WR_ADDR": addr, "WR_PUBLIC_URL": "http://" + addr,
		"WR_SMTP_URL": "smtp://" + inbox.Addr + "?from=rooms%40example.com", "WR_NOTIFY_NEAR": "2"}
	for k, v := range extra {
		env[k] = v
	}
	return startInProcess(t, id, tolerantEnv(redisURL, db, env))
}

// noRedirect is a client with its own cookie jar (a second browser) that does not follow
// redirects, its requests checked against docs/openapi.yaml.
func noRedirect(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: specTransport{base: http.DefaultTransport}, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestNotifyEmailReminders: a buyer gives an address and gets the near-door and the turn
// messages from a real SMTP server's point of view; each link, in another browser, brings
// the place or the token back once; a look (GET) spends nothing; bad addresses, the limits,
// an instance without e-mail, and no address in any log line.
func TestNotifyEmailReminders(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	db := testDB(t)
	inbox := smtptest.StartInbox(t)
	// Behind a trusted proxy (the test), so the limits' subtest can come from an address of
	// its own; requests without the header are 127.0.0.1's.
	in := startMailInstance(t, "mail", rs.URL(), db, inbox, map[string]string{"WR_PROXY_HEADER": "X-Forwarded-For", "WR_TRUSTED_PROXIES": "127.0.0.1"})
	// The instance without e-mail has a Redis of its own: on the same one it could take the
	// lead of the queue's admission, and the reminders are scanned by the leader (an instance
	// without WR_SMTP_URL scans nothing: docs/OPERATIONS.md, every instance the same setting).
	plain := startInProcess(t, "nomail", tolerantEnv(redistest.Start(t, redistest.Single()).URL(), db, nil))
	const q = "mailq"
	for _, i := range []*instance{in, plain} {
		if res := admin(t, i, "PUT", "/admin/api/queues/"+q, map[string]any{"paused": true, "rate_per_second": 2, "places_per_ip": 0, "token_ttl_seconds": 120}); res.StatusCode >= 300 {
			t.Fatalf("PUT queue: %d %s", res.StatusCode, readAll(res))
		}
	}
	tickets := joinUsers(t, in, q, 5, 1) // in order: sequences 1…5
	const addr = "Ana.Buyer+drop@Example.com"
	notifyURL := in.url + "/api/queues/" + q + "/notify"

	t.Run("bad addresses are 422 field email and keep nothing", func(t *testing.T) {
		for _, body := range []any{map[string]any{"email": "ana"}, map[string]any{"email": "Ana <a@example.com>"}, map[string]any{"email": 5},
			map[string]any{"email": strings.Repeat("a", 250) + "@example.com"}, map[string]any{"email": "a@example.com\r\nBcc: b@example.com"}} {
			var e notifyErr
			res := call(t, "POST", notifyURL, tickets[3], body, &e)
			if res.StatusCode != 422 || e.Error.Field != "email" {
				t.Errorf("%v: %d %+v, want 422 field email", body, res.StatusCode, e)
			}
		}
		var e notifyErr
		if res := call(t, "POST", notifyURL, tickets[3], map[string]any{"mail": addr}, &e); res.StatusCode != 422 || e.Error.Code != "unknown_field" {
			t.Errorf("unknown key: %d %+v", res.StatusCode, e)
		}
		if res := call(t, "POST", notifyURL, "", map[string]any{"email": addr}, &e); res.StatusCode != 401 {
			t.Errorf("no ticket: %d, want 401", res.StatusCode)
		}
	})

	// The fourth and the fifth register (the fifth leaves: its address is deleted).
	if res := call(t, "POST", notifyURL, tickets[3], map[string]any{"email": addr}, nil); res.StatusCode != 204 {
		t.Fatalf("notify: %d %s", res.StatusCode, readAll(res))
	}
	if res := call(t, "POST", notifyURL, tickets[4], map[string]any{"email": "leaver@example.com"}, nil); res.StatusCode != 204 {
		t.Fatalf("notify: %d %s", res.StatusCode, readAll(res))
	}
	rdb := rs.Client()
	// The queue's keys share its slot: on a cluster KEYS goes to the master that holds it.
	mailKeys := func() int {
		ctx := context.Background()
		pattern := "wr:{q:" + q + "}:mail:*"
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			var n atomic.Int64 // the masters are asked side by side
			err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				keys, err := m.Keys(ctx, pattern).Result()
				n.Add(int64(len(keys)))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return int(n.Load())
		}
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	if n := mailKeys(); n != 2 {
		t.Fatalf("%d registrations in Redis, want 2", n)
	}
	if res := call(t, "DELETE", in.url+"/api/queues/"+q+"/ticket", tickets[4], nil, nil); res.StatusCode != 204 {
		t.Fatalf("leave: %d", res.StatusCode)
	}
	if n := mailKeys(); n != 1 {
		t.Errorf("%d registrations after one place left, want 1", n)
	}

	t.Run("the page offers the field only where e-mail is configured", func(t *testing.T) {
		if page := readAll(call(t, "GET", in.url+"/q/"+q, "", nil, nil)); !strings.Contains(page, `id="email-form"`) {
			t.Error("no address field on the waiting page of the instance with e-mail")
		}
		if page := readAll(call(t, "GET", plain.url+"/q/"+q, "", nil, nil)); strings.Contains(page, `id="email-form"`) {
			t.Error("an address field on the waiting page of the instance without e-mail")
		}
		var e notifyErr
		if res := call(t, "POST", plain.url+"/api/queues/"+q+"/notify", tickets[0], map[string]any{"email": addr}, &e); res.StatusCode != 404 || e.Error.Code != "notify_unavailable" {
			t.Errorf("without e-mail: %d %+v, want 404 notify_unavailable", res.StatusCode, e)
		}
	})

	// The line moves: 2 per second from the first; near at sequence − head ≤ 2, then the turn.
	// Places 1–3 keep streams… they need none: a status poll is their sign of life, and the
	// registered fourth is held anyway. The line first stops with two admitted (max_active 2,
	// their tokens live): the fourth is near and not yet in, for as long as it takes the
	// leader's scan (at most one a second) to see it. Left to run at 2 a second, the near
	// window was one second, and a scan late by that much (two clusters' tests beside a CPU
	// hog, 2026-12-03) found the place admitted: one message, the turn's, as designed.
	if res := admin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"paused": false, "max_active": 2}); res.StatusCode >= 300 {
		t.Fatalf("unpause: %d", res.StatusCode)
	}
	// An upper bound, not a verdict (it takes seconds): if the wait fails, the log says where
	// the reminders were — the line's head, the indexes, the place, the sender's counters and
	// the instance's warnings and its notify, admission and wake lines.
	waiting := true
	defer func() {
		if !waiting || !t.Failed() {
			return
		}
		ctx := context.Background()
		k := rstore.KeysFor(q)
		var st joinResp
		call(t, "GET", in.url+"/api/queues/"+q+"/status", tickets[3], nil, &st)
		var lines []string
		for _, l := range strings.Split(in.logs.String(), "\n") {
			if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) || strings.Contains(l, "notify") || strings.Contains(l, "admission") || strings.Contains(l, "wake") {
				lines = append(lines, l)
			}
		}
		lines = lines[max(0, len(lines)-60):]
		metrics := readAll(call(t, "GET", in.url+"/metrics", "", nil, nil))
		t.Logf("%d messages in the inbox; head %q, mailq %v, mailnear %v, the fourth place %+v; sent %s, failed %s\n%s",
			len(inbox.Messages()), rdb.HGet(ctx, k.Clock(), "head").Val(), rdb.ZRangeWithScores(ctx, k.MailQ(), 0, -1).Val(),
			rdb.ZRangeWithScores(ctx, k.MailNear(), 0, -1).Val(), st, metricLine(metrics, "waitroom_notify_sent_total"),
			metricLine(metrics, "waitroom_notify_failed_total"), strings.Join(lines, "\n"))
	}()
	testwait.For(t, 2*time.Minute, "the near message", func() bool { return len(inbox.Messages()) >= 1 })
	if res := admin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"max_active": 0}); res.StatusCode >= 300 {
		t.Fatalf("max_active 0: %d", res.StatusCode)
	}
	testwait.For(t, 2*time.Minute, "the turn message", func() bool { return len(inbox.Messages()) >= 2 })
	waiting = false
	msgs := inbox.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	want := strings.ToLower(addr[strings.IndexByte(addr, '@'):])
	links := map[string]string{}
	for i, m := range msgs {
		kind := m.Header.Get("X-Waitroom-Reminder")
		t.Logf("message %d: From %q To %q Subject %q Date %q Message-ID %q Auto-Submitted %q Content-Type %q kind %q", i,
			m.Header.Get("From"), m.Header.Get("To"), m.Header.Get("Subject"), m.Header.Get("Date"), m.Header.Get("Message-ID"),
			m.Header.Get("Auto-Submitted"), m.Header.Get("Content-Type"), kind)
		if !strings.HasSuffix(m.To, want) || m.Header.Get("From") != "<rooms@example.com>" || m.Header.Get("Auto-Submitted") != "auto-generated" {
			t.Errorf("message %d headers: to %q, %v", i, m.To, m.Header)
		}
		link := smtptest.LinkPattern.FindString(m.Body)
		if !strings.HasPrefix(link, in.url+"/q/"+q+"/back/") {
			t.Fatalf("message %d link %q, want one under %s", i, link, in.url)
		}
		t.Logf("message %d link: %s", i, link)
		links[kind] = link
	}
	if links["near"] == "" || links["turn"] == "" || msgs[0].Header.Get("X-Waitroom-Reminder") != "near" {
		t.Fatalf("want near then turn, got %v", links)
	}
	if n := mailKeys(); n != 0 {
		t.Errorf("%d registrations after the turn's message, want 0", n)
	}
	// The sender counted them (waitroom_notify_sent_total, by kind).
	testwait.For(t, 10*time.Second, "the sent counters", func() bool {
		m := readAll(call(t, "GET", in.url+"/metrics", "", nil, nil))
		return strings.Contains(m, `waitroom_notify_sent_total{kind="near"} 1`) && strings.Contains(m, `waitroom_notify_sent_total{kind="turn"} 1`)
	})
	// Admitted now: there is nothing to remind this place of.
	var ne notifyErr
	if res := call(t, "POST", notifyURL, tickets[3], map[string]any{"email": addr}, &ne); res.StatusCode != 409 || ne.Error.Code != "not_waiting" {
		t.Errorf("notify after the turn: %d %+v, want 409 not_waiting", res.StatusCode, ne)
	}

	t.Run("a link restores the place once in another browser; a look spends nothing", func(t *testing.T) {
		for _, kind := range []string{"near", "turn"} {
			second := noRedirect(t)
			for range 2 { // a mail scanner's GETs
				res := callVia(t, second, "GET", links[kind], "", nil, nil)
				if body := readAll(res); res.StatusCode != 200 || !strings.Contains(body, `method="post"`) {
					t.Fatalf("%s link GET: %d", kind, res.StatusCode)
				}
			}
			res := callVia(t, second, "POST", links[kind], "", nil, nil, "Origin", in.url)
			if res.StatusCode != 303 || res.Header.Get("Location") != "/q/"+q {
				t.Fatalf("%s link POST: %d Location %q", kind, res.StatusCode, res.Header.Get("Location"))
			}
			var st joinResp
			callVia(t, second, "GET", in.url+"/api/queues/"+q+"/status", "", nil, &st)
			if st.Ticket != tickets[3] || st.State != "admitted" || st.Token == "" {
				t.Errorf("%s link: the second browser's status is %+v, want the fourth place admitted with its token", kind, st)
			}
			res = callVia(t, second, "POST", links[kind], "", nil, nil, "Origin", in.url)
			if body := readAll(res); res.StatusCode != 410 || !strings.Contains(body, `data-state="spent"`) {
				t.Errorf("%s link replayed: %d, want 410 and the spent page", kind, res.StatusCode)
			}
			if res := callVia(t, second, "GET", links[kind], "", nil, nil); res.StatusCode != 410 {
				t.Errorf("%s link GET after its use: %d, want 410", kind, res.StatusCode)
			}
			// A third browser with the replayed link gets no cookie.
			third := noRedirect(t)
			if res := callVia(t, third, "POST", links[kind], "", nil, nil, "Origin", in.url); res.StatusCode != 410 || len(res.Cookies()) > 0 {
				t.Errorf("%s link in a third browser: %d cookies %v", kind, res.StatusCode, res.Cookies())
			}
		}
	})

	t.Run("rate limits: per address, then per client address", func(t *testing.T) {
		if res := admin(t, in, "PUT", "/admin/api/queues/"+q, map[string]any{"paused": true}); res.StatusCode >= 300 {
			t.Fatalf("pause: %d", res.StatusCode)
		}
		more := joinUsers(t, in, q, 1, 1)
		fromClient := []string{"X-Forwarded-For", "192.0.2.10"} // a client address of its own
		same := "limit@example.com"
		codes := []int{}
		for range 4 {
			codes = append(codes, call(t, "POST", notifyURL, more[0], map[string]any{"email": same}, nil, fromClient...).StatusCode)
		}
		res := call(t, "POST", notifyURL, more[0], map[string]any{"email": same}, nil, fromClient...)
		if got := res.Header.Get("X-RateLimit-Scope"); res.StatusCode != 429 || got != "email" {
			t.Errorf("the same address again: %d scope %q (earlier %v), want 429 email", res.StatusCode, got, codes)
		}
		var last *http.Response
		for i := range 8 {
			last = call(t, "POST", notifyURL, more[0], map[string]any{"email": "other" + strconv.Itoa(i) + "@example.com"}, nil, fromClient...)
			if last.StatusCode == 429 {
				break
			}
		}
		if last.StatusCode != 429 || last.Header.Get("X-RateLimit-Scope") != "ip" || last.Header.Get("Retry-After") == "" {
			t.Errorf("many addresses from one client: %d scope %q, want 429 ip", last.StatusCode, last.Header.Get("X-RateLimit-Scope"))
		}
	})

	// No address reaches a log line: neither instance's log (debug level) holds one.
	for _, l := range []string{in.logs.String(), plain.logs.String()} {
		low := strings.ToLower(l)
		for _, a := range []string{strings.ToLower(addr), "ana.buyer", "leaver@", "limit@example.com", "other0@"} {
			if strings.Contains(low, a) {
				t.Errorf("a log line holds %q", a)
			}
		}
	}
	// Nor does a link's code (a bearer of the place until spent): the access log names it :code.
	for kind, link := range links {
		if code := link[strings.LastIndexByte(link, '/')+1:]; strings.Contains(in.logs.String(), code) {
			t.Errorf("the %s link's code is in a log line", kind)
		}
	}
	if !strings.Contains(in.logs.String(), `"path":"/q/`+q+`/back/:code"`) {
		t.Error("no log line of a link's page: the check above saw nothing")
	}
	// The check is not vacuous: the notify requests were logged (debug level), without their body.
	var notifyLines []string
	for _, line := range strings.Split(in.logs.String(), "\n") {
		if strings.Contains(line, "/notify") {
			notifyLines = append(notifyLines, line)
		}
	}
	if len(notifyLines) == 0 {
		t.Error("no log line of a notify request: the log was not captured")
	} else {
		t.Logf("a notify request's log line: %s", notifyLines[0])
	}
	t.Logf("log lines checked: %d and %d (%d of notify requests)", strings.Count(in.logs.String(), "\n"), strings.Count(plain.logs.String(), "\n"), len(notifyLines))
}
