package web

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/branding"
	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

// TestNoScriptRefreshBounds: the no-script page's refresh grows with the distance to the
// door, is never faster than the per-ticket status limit (nor 5 s), and always stays below
// the presence grace (at most half of it).
func TestNoScriptRefreshBounds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		eta        float64
		statusRate float64
		grace      time.Duration
		want       int
	}{
		{"at the door: the floor", 0, 2, time.Minute, 5},
		{"near: a tenth of the ETA, floored", 30, 2, time.Minute, 5},
		{"a tenth of the ETA", 120, 2, time.Minute, 12},
		{"far: half the grace", 3600, 2, time.Minute, 30},
		{"unknown ETA: half the grace", -1, 2, time.Minute, 30},
		{"a slow status limit raises the floor", 10, 0.1, time.Minute, 10},
		{"status limit off: the 5 s floor", 10, 0, time.Minute, 5},
		{"a short grace caps it", 3600, 2, 20 * time.Second, 10},
		{"a long grace lets it grow", 3600, 2, 10 * time.Minute, 300},
		{"a limit slower than half the grace: the grace wins", 100, 0.02, time.Minute, 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := refreshEvery(c.eta, c.statusRate, c.grace)
			if got != c.want {
				t.Fatalf("refreshEvery(%v, %v, %v) = %d, want %d", c.eta, c.statusRate, c.grace, got, c.want)
			}
			if 2*time.Duration(got)*time.Second > c.grace {
				t.Errorf("%d s is more than half the grace %v", got, c.grace)
			}
			if c.statusRate > 0 && float64(got) < 1/c.statusRate && 1/c.statusRate <= c.grace.Seconds()/2 {
				t.Errorf("%d s is faster than the status limit %v/s", got, c.statusRate)
			}
		})
	}
	// Monotone: further from the door, never a faster refresh.
	prev := 0
	for eta := 0.0; eta < 5000; eta += 7 {
		got := refreshEvery(eta, 2, time.Minute)
		if got < prev {
			t.Fatalf("ETA %v s: refresh %d s after %d s for a shorter ETA", eta, got, prev)
		}
		prev = got
	}
}

// startNoScript serves a Server (cfgs[0], else a grace of 60 s) on a private Redis with
// the queues open (paused: its places wait), closed, pow and later (its sale starts in an
// hour: a pre-queue), and a status limit of statusRate per ticket (burst 10; 2 under 1/s). It
// returns the base URL and a reader of a sorted set's score.
func startNoScript(t *testing.T, statusRate float64, cfgs ...Config) (string, func(key, member string) (float64, error)) {
	t.Helper()
	rs := redistest.Start(t)
	rdb := rs.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	q := queue.New(rdb, queue.Config{}, nil)
	paused, closed, pow, zero := true, true, 8, int64(0)
	start := time.Now().Add(time.Hour)
	for name, p := range map[string]queue.SettingsPatch{
		"open":   {Paused: &paused, PlacesPerIP: &zero},
		"closed": {Closed: &closed},
		"pow":    {PowDifficulty: &pow},
		"later":  {StartsAt: &start, PlacesPerIP: &zero},
	} {
		if _, _, err := q.Put(ctx, name, p); err != nil {
			t.Fatal(err)
		}
	}
	lim := queue.DefaultLimits()
	lim.StatusPerTicket, lim.StatusPerTicketBurst = statusRate, 10
	if statusRate < 1 {
		lim.StatusPerTicketBurst = 2
	}
	cfg := Config{Grace: time.Minute}
	if len(cfgs) > 0 {
		cfg = cfgs[0]
	}
	s, err := New(cfg, Deps{
		Line: q, Tokens: q, Settings: q, SoldOut: q,
		Logos:   branding.New(rstore.New(rdb, q.OpTimeout())),
		Signer:  queue.NewSigner([]byte("nojs-test-secret-0123456789abcdef")),
		Limiter: queue.NewLimiter(rdb, "wr:"), Limits: q.LiveLimits(lim),
		Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
	})
	score := func(key, member string) (float64, error) { return rdb.ZScore(ctx, key, member).Result() }
	return "http://" + ln.Addr().String(), score
}

func newJar(t *testing.T) *cookiejar.Jar {
	t.Helper()
	j, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var (
	refreshRE = regexp.MustCompile(`data-refresh="(\d+)"`)
	stateRE   = regexp.MustCompile(`<div id="place" data-queue="[^"]*" data-state="([a-z_]+)" data-reason="([a-z_]*)"`)
)

// page is one answer of the no-script routes: its status, the #place state and reason,
// the refresh (0 none), the body.
type page struct {
	status         int
	state, reason  string
	refresh        int
	body, location string
	cookies        []*http.Cookie
}

func nojsDo(t *testing.T, client *http.Client, req *http.Request) page {
	t.Helper()
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	p := page{status: res.StatusCode, body: string(b), location: res.Header.Get("Location"), cookies: res.Cookies()}
	if m := stateRE.FindStringSubmatch(p.body); m != nil {
		p.state, p.reason = m[1], m[2]
	}
	if h := res.Header.Get("Refresh"); h != "" {
		p.refresh, _ = strconv.Atoi(h)
		if m := refreshRE.FindStringSubmatch(p.body); m == nil || m[1] != h {
			t.Errorf("Refresh: %s, but the page says data-refresh %v", h, m)
		}
	}
	return p
}

func formPost(t *testing.T, base, queueName string, hdr ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/q/"+queueName+"/join", strings.NewReader(url.Values{"invite": {""}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestNoScriptFormJoin: the form route's answers — refused for an unknown, a closed and a
// proof-of-work queue and for a post from another site (each a page with its status and
// reason, never a place); joined from this site's page, with the ticket cookie HttpOnly,
// SameSite=Lax, not Secure over plain HTTP, and a place page that shows the position and
// refreshes within the bounds; the same browser joining again keeps its place.
func TestNoScriptFormJoin(t *testing.T) {
	t.Parallel()
	base, score := startNoScript(t, 2)
	same := []string{"Sec-Fetch-Site", "same-origin", "Origin", "null"}
	for _, c := range []struct {
		name, queue   string
		hdr           []string
		status        int
		state, reason string
	}{
		{"unknown queue", "nope", same, 404, "refused", "queue_not_found"},
		{"malformed queue name", "bad%20name", same, 404, "refused", "queue_not_found"},
		{"closed queue", "closed", same, 423, "refused", "queue_closed"},
		{"proof-of-work queue: scripts needed", "pow", same, 428, "pow", ""},
		{"cross-site post (fetch metadata)", "open", []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}, 403, "cross_site", ""},
		{"same-site post (a sibling host)", "open", []string{"Sec-Fetch-Site", "same-site", "Origin", "https://shop.example"}, 403, "cross_site", ""},
		{"another origin, no fetch metadata", "open", []string{"Origin", "https://evil.example"}, 403, "cross_site", ""},
		{"an opaque origin, no fetch metadata", "open", []string{"Origin", "null"}, 403, "cross_site", ""},
		{"another site's referer", "open", []string{"Referer", "https://evil.example/x"}, 403, "cross_site", ""},
		{"nothing says where from", "open", nil, 403, "cross_site", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := nojsDo(t, noRedirect, formPost(t, base, c.queue, c.hdr...))
			if p.status != c.status || p.state != c.state || p.reason != c.reason {
				t.Fatalf("status %d state %q reason %q, want %d %q %q\n%.600s", p.status, p.state, p.reason, c.status, c.state, c.reason, p.body)
			}
			if len(p.cookies) > 0 || p.location != "" {
				t.Errorf("a refused join set cookies %v or redirected to %q", p.cookies, p.location)
			}
			if c.state == "pow" && strings.Contains(p.body, `id="place-join"`) {
				t.Error("a proof-of-work queue offers the no-script join form")
			}
		})
	}

	t.Run("joined from this site", func(t *testing.T) {
		for _, hdr := range [][]string{same, {"Origin", base}, {"Referer", base + "/q/open"}} {
			p := nojsDo(t, noRedirect, formPost(t, base, "open", hdr...))
			if p.status != http.StatusSeeOther || p.location != "/q/open/place" {
				t.Fatalf("%v: status %d location %q, want 303 /q/open/place\n%.600s", hdr, p.status, p.location, p.body)
			}
			var ticket *http.Cookie
			for _, ck := range p.cookies {
				if ck.Name == "wr_ticket_open" {
					ticket = ck
				}
			}
			if ticket == nil || !ticket.HttpOnly || ticket.Secure || ticket.SameSite != http.SameSiteLaxMode || ticket.MaxAge <= 0 || ticket.MaxAge > ticketCookieAge {
				t.Fatalf("%v: ticket cookie %+v: want HttpOnly, SameSite=Lax, not Secure over http, Max-Age ≤ a day", hdr, ticket)
			}
		}
	})

	t.Run("the place page shows the position and touches presence", func(t *testing.T) {
		jar := newJar(t)
		client := &http.Client{Jar: jar}
		p := nojsDo(t, client, formPost(t, base, "open", same...)) // follows the 303
		if p.status != 200 || p.state != "waiting" {
			t.Fatalf("after the join: status %d state %q\n%.800s", p.status, p.state, p.body)
		}
		if !strings.Contains(p.body, `data-position="`) || !strings.Contains(p.body, `id="place-ahead"`) || !strings.Contains(p.body, `id="place-eta"`) {
			t.Errorf("no position, ahead or ETA on the page:\n%.1500s", p.body)
		}
		if p.refresh < nojsMinRefresh || p.refresh >= 60 {
			t.Errorf("refresh %d s: want within [5, 60) (status limit 2/s, grace 60 s)", p.refresh)
		}
		var raw string
		for _, ck := range jar.Cookies(mustURL(t, base)) {
			if ck.Name == "wr_ticket_open" {
				raw = ck.Value
			}
		}
		id := strings.Split(raw, ".")[1]
		before, err := score("wr:{q:open}:seen", id)
		if err != nil {
			t.Fatalf("the joined place has no sign of life: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // Redis TIME in ms must move on
		req, _ := http.NewRequest("GET", base+"/q/open/place", nil)
		p2 := nojsDo(t, client, req)
		if p2.state != "waiting" {
			t.Fatalf("refresh: state %q", p2.state)
		}
		after, err := score("wr:{q:open}:seen", id)
		if err != nil || after <= before {
			t.Errorf("a refresh of the place page is no sign of life: seen %v → %v (%v)", before, after, err)
		}
		// Joining again from the same browser keeps the place (and its number).
		p3 := nojsDo(t, client, formPost(t, base, "open", same...))
		if p3.state != "waiting" || positionOf(p3.body) != positionOf(p.body) {
			t.Errorf("joined again: state %q position %q, had %q", p3.state, positionOf(p3.body), positionOf(p.body))
		}
	})

	t.Run("leaving by the form; not from another site", func(t *testing.T) {
		client := &http.Client{Jar: newJar(t)}
		if p := nojsDo(t, client, formPost(t, base, "open", same...)); p.state != "waiting" || !strings.Contains(p.body, `action="/q/open/leave"`) {
			t.Fatalf("joined: state %q, leave form: %v", p.state, strings.Contains(p.body, `action="/q/open/leave"`))
		}
		leave := func(hdr ...string) page {
			req := formPost(t, base, "open", hdr...)
			req.URL.Path = "/q/open/leave"
			return nojsDo(t, client, req)
		}
		if p := leave("Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"); p.status != 403 || p.state != "cross_site" {
			t.Fatalf("a cross-site leave: status %d state %q", p.status, p.state)
		}
		req, _ := http.NewRequest("GET", base+"/q/open/place", nil)
		if p := nojsDo(t, client, req); p.state != "waiting" {
			t.Fatalf("after a refused leave: state %q, want still waiting", p.state)
		}
		if p := leave(same...); p.status != 200 || p.state != "left" || !strings.Contains(p.body, `id="place-join"`) {
			t.Fatalf("leave: status %d state %q\n%.800s", p.status, p.state, p.body)
		}
		req, _ = http.NewRequest("GET", base+"/q/open/place", nil)
		if p := nojsDo(t, client, req); p.state != "gone" || p.refresh != 0 {
			t.Errorf("after leaving: state %q refresh %d, want gone and no refresh", p.state, p.refresh)
		}
	})

	t.Run("no ticket: a join form", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/q/open/place", nil)
		p := nojsDo(t, noRedirect, req)
		if p.status != 200 || p.state != "none" || !strings.Contains(p.body, `action="/q/open/join"`) || p.refresh != 0 {
			t.Errorf("status %d state %q refresh %d\n%.600s", p.status, p.state, p.refresh, p.body)
		}
		req, _ = http.NewRequest("GET", base+"/q/pow/place", nil)
		if p := nojsDo(t, noRedirect, req); p.state != "pow" || strings.Contains(p.body, `id="place-join"`) {
			t.Errorf("pow queue: state %q, form offered: %v", p.state, strings.Contains(p.body, `id="place-join"`))
		}
		req, _ = http.NewRequest("GET", base+"/q/nope/place", nil)
		if p := nojsDo(t, noRedirect, req); p.status != 404 || p.reason != "queue_not_found" {
			t.Errorf("unknown queue: %d %q", p.status, p.reason)
		}
	})

	t.Run("the waiting page: a noscript join, or none for proof of work", func(t *testing.T) {
		res, err := http.Get(base + "/q/open?invite=AAAA-BBBB")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		body := string(b)
		i, j := strings.Index(body, "<noscript>"), strings.Index(body, "</noscript>")
		if i < 0 || j < i || !strings.Contains(body[i:j], `action="/q/open/join"`) || !strings.Contains(body[i:j], `value="AAAA-BBBB"`) {
			t.Fatalf("no <noscript> join form with the invite:\n%.3000s", body)
		}
		if len(res.Cookies()) > 0 {
			t.Errorf("the waiting page sets cookies %v for script users", res.Cookies())
		}
		res, err = http.Get(base + "/q/pow")
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(res.Body)
		res.Body.Close()
		if body := string(b); !strings.Contains(body, `data-pow="true"`) || strings.Contains(body, `id="nojs-join-form"`) {
			t.Errorf("proof-of-work queue: want the need-scripts notice and no form")
		}
	})
}

// TestNoScriptStatusLimit: a place page reloaded faster than the per-ticket status limit is
// refused with a page that comes back by itself after the Retry-After (the place is kept),
// and a slow limit makes the refresh slower.
func TestNoScriptStatusLimit(t *testing.T) {
	t.Parallel()
	base, _ := startNoScript(t, 0.1) // one status call per 10 s, burst 2
	client := &http.Client{Jar: newJar(t)}
	p := nojsDo(t, client, formPost(t, base, "open", "Sec-Fetch-Site", "same-origin"))
	if p.state != "waiting" || p.refresh < 10 || p.refresh >= 60 {
		t.Fatalf("state %q refresh %d: want waiting, within [10, 60) for a limit of 0.1/s", p.state, p.refresh)
	}
	var busy page
	for range 3 {
		req, _ := http.NewRequest("GET", base+"/q/open/place", nil)
		if busy = nojsDo(t, client, req); busy.status == 429 {
			break
		}
	}
	if busy.status != 429 || busy.state != "busy" || busy.refresh < 1 {
		t.Fatalf("reloaded past the limit: status %d state %q refresh %d\n%.600s", busy.status, busy.state, busy.refresh, busy.body)
	}
}

func positionOf(body string) string {
	m := regexp.MustCompile(`data-position="(\d+)"`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestNoScriptPrequeueAndTLS: before a scheduled start the place page shows the pre-queue
// and its start, and comes back within the bounds; behind a trusted proxy that says https
// the ticket cookie is Secure (as the API's join decides).
func TestNoScriptPrequeueAndTLS(t *testing.T) {
	t.Parallel()
	base, _ := startNoScript(t, 2, Config{Grace: time.Minute, ProxyHeader: "X-Forwarded-For", TrustedProxies: []string{"127.0.0.1"}})
	client := &http.Client{Jar: newJar(t)}
	p := nojsDo(t, client, formPost(t, base, "later", "Sec-Fetch-Site", "same-origin"))
	if p.status != 200 || p.state != "prequeue" || !strings.Contains(p.body, `id="place-starts" datetime="`) {
		t.Fatalf("pre-queue: status %d state %q\n%.1500s", p.status, p.state, p.body)
	}
	if p.refresh < nojsMinRefresh || p.refresh > 30 {
		t.Errorf("pre-queue refresh %d s: want within [5, 30]", p.refresh)
	}
	res := nojsDo(t, noRedirect, formPost(t, base, "later", "Sec-Fetch-Site", "same-origin", "X-Forwarded-Proto", "https"))
	var secure bool
	for _, ck := range res.cookies {
		if ck.Name == "wr_ticket_later" {
			secure = ck.Secure && ck.HttpOnly && ck.SameSite == http.SameSiteLaxMode
		}
	}
	if res.status != http.StatusSeeOther || !secure {
		t.Errorf("behind a TLS proxy: status %d, cookies %v: want 303 and a Secure, HttpOnly, SameSite=Lax ticket cookie", res.status, res.cookies)
	}
	// The Origin of a browser without fetch metadata must name the scheme the client used.
	res = nojsDo(t, noRedirect, formPost(t, base, "later", "Origin", strings.Replace(base, "http://", "https://", 1)))
	if res.status != 403 || res.state != "cross_site" {
		t.Errorf("an https Origin over plain http: status %d state %q, want 403 cross_site", res.status, res.state)
	}
}
