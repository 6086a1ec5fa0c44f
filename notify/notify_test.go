package notify_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/internal/rstore"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/notify"
	"github.com/waitroom/waitroom/notify/smtptest"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

// fixture is one Redis, a queue, a notifier sending to an inbox, and a captured log.
type fixture struct {
	rdb    redis.UniversalClient
	q      *queue.Queue
	a      *queue.Admitter
	store  *notify.Store
	n      *notify.Notifier
	inbox  *smtptest.Inbox
	signer *queue.Signer
	logs   *bytes.Buffer
	logMu  *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func newFixture(t *testing.T, grace time.Duration, cfg notify.Config) *fixture {
	t.Helper()
	return newFixtureOn(t, redistest.Start(t).Client(), grace, cfg)
}

// newFixtureOn is newFixture on the Redis rdb (miniredis: the zero-config server's).
func newFixtureOn(t *testing.T, rdb redis.UniversalClient, grace time.Duration, cfg notify.Config) *fixture {
	t.Helper()
	f := &fixture{rdb: rdb, q: queue.New(rdb, queue.Config{Grace: grace}, nil), inbox: smtptest.StartInbox(t),
		signer: queue.NewSigner([]byte("0123456789abcdef0123")), logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	f.a = queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "t"})
	sender, err := notify.ParseSMTP("smtp://" + f.inbox.Addr + "?from=" + "Rooms%20%3Crooms@example.com%3E")
	if err != nil {
		t.Fatal(err)
	}
	f.store = notify.NewStore(rdb, notify.Hold, 2*time.Second)
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://rooms.example.com"
	}
	cfg.Log = zerolog.New(lockedWriter{f.logMu, f.logs})
	f.n = notify.New(f.store, sender, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *fixture) logText() string {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return f.logs.String()
}

func ptr[T any](v T) *T { return &v }

// join places n new tickets in queue name and returns them with their raw forms.
func (f *fixture) join(t *testing.T, name string, n int) ([]queue.Ticket, []string) {
	t.Helper()
	var tks []queue.Ticket
	var raws []string
	for range n {
		tk, raw := f.signer.New(name)
		if _, _, err := f.q.Join(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
		tks, raws = append(tks, tk), append(raws, raw)
	}
	return tks, raws
}

// TestNotifyNearAndTurnOnceEach runs on redis-server and on miniredis, whose Lua and
// commands (ZADD GT, GETDEL) the zero-config server relies on.
func TestNotifyNearAndTurnOnceEach(t *testing.T) {
	t.Run("redis", func(t *testing.T) { testNearAndTurn(t, newFixture(t, -1, notify.Config{Near: 2, Retries: -1})) })
	t.Run("miniredis", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
		t.Cleanup(func() { _ = c.Close() })
		testNearAndTurn(t, newFixtureOn(t, c, -1, notify.Config{Near: 2, Retries: -1}))
	})
}

func testNearAndTurn(t *testing.T, f *fixture) {
	ctx := context.Background()
	const name = "mailq"
	if _, _, err := f.q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: ptr(1000.0), MaxActive: ptr(int64(1)), TokenTTL: ptr(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	tks, raws := f.join(t, name, 5)
	// The fifth place registers; the first is within near already.
	addr5, addr1 := "buyer.five@example.com", "one@example.org"
	if err := f.store.Register(ctx, name, tks[4].ID, raws[4], addr5, "en"); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Register(ctx, name, tks[0].ID, raws[0], addr1, "en"); err != nil {
		t.Fatal(err)
	}
	// max_active 1: one place is admitted at a time; its token is revoked to let the next in.
	// A scan runs after every tick, and once more to show that nothing is claimed twice.
	for i := range 5 {
		testwait.For(t, 10*time.Second, "place "+strconv.Itoa(i+1)+" admitted", func() bool {
			if _, err := f.a.TickOnce(ctx, name); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := f.n.Scan(ctx, name); err != nil {
					t.Fatal(err)
				}
			}
			p, err := f.q.TicketState(ctx, tks[i])
			return err == nil && p.State == queue.StateAdmitted
		})
		if _, err := f.q.RevokeTicketToken(ctx, tks[i]); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 10*time.Second, "four messages", func() bool { return len(f.inbox.Messages()) >= 4 })
	msgs := f.inbox.Messages()
	if len(msgs) != 4 {
		t.Fatalf("got %d messages, want 4 (near and turn for two places)", len(msgs))
	}
	kinds := map[string][]string{}
	for _, m := range msgs {
		kinds[m.To] = append(kinds[m.To], m.Header.Get("X-Waitroom-Reminder"))
		if got := m.Header.Get("From"); got != `"Rooms" <rooms@example.com>` && got != "Rooms <rooms@example.com>" {
			t.Errorf("From = %q", got)
		}
		if m.From != "rooms@example.com" {
			t.Errorf("MAIL FROM = %q", m.From)
		}
		if m.Header.Get("To") != "<"+m.To+">" || m.Header.Get("Auto-Submitted") != "auto-generated" || m.Header.Get("Message-ID") == "" || m.Header.Get("Date") == "" {
			t.Errorf("headers of the message to %s: %v", m.To, m.Header)
		}
		if !strings.Contains(m.Header.Get("Content-Type"), "charset=utf-8") {
			t.Errorf("Content-Type = %q", m.Header.Get("Content-Type"))
		}
		if !smtptest.LinkPattern.MatchString(m.Body) {
			t.Errorf("no link in the message to %s: %q", m.To, m.Body)
		}
	}
	for _, a := range []string{addr1, addr5} {
		if got := strings.Join(kinds[a], ","); got != "near,turn" {
			t.Errorf("messages to %s = %s, want near then turn", a, got)
		}
	}
	// The addresses are gone once the turn's message is claimed.
	if err := f.store.Register(ctx, name, tks[4].ID, raws[4], addr5, "en"); !errors.Is(err, notify.ErrNotWaiting) {
		t.Errorf("register after the turn: %v, want ErrNotWaiting", err)
	}
	for _, a := range []string{addr1, addr5, "buyer.five", "example.org"} {
		if strings.Contains(f.logText(), a) {
			t.Errorf("a log line holds %q:\n%s", a, f.logText())
		}
	}
}

func TestNotifyLinkSpentOnceAndOnlyByPost(t *testing.T) {
	f := newFixture(t, -1, notify.Config{Near: 5, Retries: -1})
	ctx := context.Background()
	const name = "links"
	if _, _, err := f.q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: ptr(0.0)}); err != nil {
		t.Fatal(err)
	}
	tks, raws := f.join(t, name, 1)
	if err := f.store.Register(ctx, name, tks[0].ID, raws[0], "a@example.com", "en"); err != nil {
		t.Fatal(err)
	}
	if err := f.n.Scan(ctx, name); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the near message", func() bool { return len(f.inbox.Messages()) == 1 })
	link := smtptest.LinkPattern.FindString(f.inbox.Messages()[0].Body)
	code := link[strings.LastIndexByte(link, '/')+1:]
	for range 2 { // looking is not spending
		live, err := f.store.LinkLive(ctx, name, code)
		if err != nil || !live {
			t.Fatalf("LinkLive = %v, %v; want true", live, err)
		}
	}
	raw, kind, err := f.store.SpendLink(ctx, name, code)
	if err != nil || raw != raws[0] || kind != notify.Near {
		t.Fatalf("SpendLink = %q, %q, %v; want the ticket, near", raw, kind, err)
	}
	if _, _, err := f.store.SpendLink(ctx, name, code); !errors.Is(err, notify.ErrLinkSpent) {
		t.Errorf("replayed link: %v, want ErrLinkSpent", err)
	}
	if live, _ := f.store.LinkLive(ctx, name, code); live {
		t.Error("a spent link is still live")
	}
	if _, _, err := f.store.SpendLink(ctx, name, "not-a-code"); !errors.Is(err, notify.ErrLinkSpent) {
		t.Errorf("malformed code: %v, want ErrLinkSpent", err)
	}
}

// TestNotifyRegisteredPlaceIsNotAbandoned runs on redis-server and on miniredis (touch.lua
// and join.lua's ZADD GT there).
func TestNotifyRegisteredPlaceIsNotAbandoned(t *testing.T) {
	cfg := notify.Config{Near: 1, Retries: -1}
	t.Run("redis", func(t *testing.T) { testNotAbandoned(t, newFixture(t, 300*time.Millisecond, cfg)) })
	t.Run("miniredis", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
		t.Cleanup(func() { _ = c.Close() })
		testNotAbandoned(t, newFixtureOn(t, c, 300*time.Millisecond, cfg))
	})
}

func testNotAbandoned(t *testing.T, f *fixture) {
	ctx := context.Background()
	const name = "hold"
	if _, _, err := f.q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: ptr(1.0), Paused: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	tks, raws := f.join(t, name, 2)
	if err := f.store.Register(ctx, name, tks[1].ID, raws[1], "held@example.com", "en"); err != nil {
		t.Fatal(err)
	}
	// A sign of life (a status call) after the registration does not cut its hold short.
	if _, err := f.q.Status(ctx, tks[1]); err != nil {
		t.Fatal(err)
	}
	if err := f.q.Touch(ctx, name, []string{tks[1].ID}); err != nil {
		t.Fatal(err)
	}
	// The hold stands: the place's sign of life is still about a day ahead.
	if score, err := f.rdb.ZScore(ctx, rstore.KeysFor(name).Seen(), tks[1].ID).Result(); err != nil || time.UnixMilli(int64(score)).Before(time.Now().Add(23*time.Hour)) {
		t.Fatalf("the registered place's sign of life: %v %v, want about a day ahead", time.UnixMilli(int64(score)), err)
	}
	testwait.For(t, 10*time.Second, "the silent place without an address to be abandoned", func() bool {
		if _, err := f.a.TickOnce(ctx, name); err != nil {
			t.Fatal(err)
		}
		_, err := f.q.TicketState(ctx, tks[0]) // reads only: Status would be a sign of life
		return errors.Is(err, queue.ErrNoPlace)
	})
	if _, err := f.a.TickOnce(ctx, name); err != nil {
		t.Fatal(err)
	}
	if p, err := f.q.TicketState(ctx, tks[1]); err != nil || p.State != queue.StateWaiting {
		t.Fatalf("the registered place: %+v, %v; want it still waiting", p, err)
	}
	// Leaving forgets the address at once.
	if err := f.q.Leave(ctx, tks[1]); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Forget(ctx, name, tks[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := f.n.Scan(ctx, name); err != nil {
		t.Fatal(err)
	}
	if n := len(f.inbox.Messages()); n != 0 {
		t.Errorf("%d messages for a place that left", n)
	}
}

func TestNotifyRefusedRecipientIsNotLogged(t *testing.T) {
	f := newFixture(t, -1, notify.Config{Near: 5, Retries: 1, RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond})
	f.inbox.RejectRcpt.Store(true)
	ctx := context.Background()
	const name = "refused"
	if _, _, err := f.q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: ptr(0.0)}); err != nil {
		t.Fatal(err)
	}
	tks, raws := f.join(t, name, 1)
	const addr = "Secret.Person@Example.com"
	if err := f.store.Register(ctx, name, tks[0].ID, raws[0], addr, "en"); err != nil {
		t.Fatal(err)
	}
	if err := f.n.Scan(ctx, name); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the failure's log line", func() bool { return strings.Contains(f.logText(), "message not sent") })
	logs := strings.ToLower(f.logText())
	if !strings.Contains(logs, "<recipient>") {
		t.Errorf("the server's answer is not in the log line (redacted): %s", logs)
	}
	if strings.Contains(logs, strings.ToLower(addr)) || strings.Contains(logs, "secret.person") {
		t.Errorf("the address is in a log line: %s", logs)
	}
}

func TestCheckAddress(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 65) + "@example.com"
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"name@example.com", "name@example.com", true},
		{"Name.Tag+x@Example.COM", "Name.Tag+x@example.com", true},
		{"user@bücher.de", "user@bücher.de", true},
		{"", "", false},
		{"name", "", false},
		{"name@localhost", "", false},
		{"Bob <bob@example.com>", "", false},
		{"a@b@example.com", "", false},
		{"name@example.com\r\nBcc: x@example.com", "", false},
		{"name@[192.0.2.1]", "", false},
		{"name@-bad.example.com", "", false},
		{long, "", false},
		{"x@" + strings.Repeat("a", 250) + ".com", "", false},
		{"two@example.com, three@example.com", "", false},
	} {
		got, err := notify.CheckAddress(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("CheckAddress(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseSMTP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"smtp://mail.example.com?from=rooms@example.com", true},
		{"smtps://user:pw@mail.example.com:2465?from=rooms@example.com", true},
		{"smtp://mail.example.com?from=rooms@example.com&starttls=required", true},
		{"smtp://mail.example.com", false},
		{"http://mail.example.com?from=rooms@example.com", false},
		{"smtp://?from=rooms@example.com", false},
		{"smtp://mail.example.com?from=rooms@example.com&starttls=maybe", false},
	} {
		_, err := notify.ParseSMTP(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("ParseSMTP(%q): %v, want ok %v", tc.url, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("the error repeats the URL: %v", err)
		}
	}
}

// TestSMTPTransportSecurity: smtps:// speaks TLS from the first byte; smtp:// upgrades with
// STARTTLS when the server offers it, and with starttls=required refuses a server that does
// not. The server's certificate is checked (the test's own roots).
func TestSMTPTransportSecurity(t *testing.T) {
	t.Parallel()
	msg := []byte("From: <rooms@example.com>\r\nTo: <a@example.com>\r\nSubject: t\r\n\r\nhello\r\n")
	send := func(t *testing.T, url string, roots *x509.CertPool) error {
		t.Helper()
		s, err := notify.ParseSMTP(url)
		if err != nil {
			t.Fatal(err)
		}
		if roots != nil {
			s.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return s.Send(ctx, "a@example.com", msg)
	}
	for _, tc := range []struct {
		name    string
		mode    smtptest.Mode
		scheme  string
		query   string
		wantTLS bool
		wantErr bool
	}{
		{"smtps", smtptest.ImplicitTLS, "smtps", "", true, false},
		{"starttls offered", smtptest.StartTLS, "smtp", "", true, false},
		{"starttls required and offered", smtptest.StartTLS, "smtp", "&starttls=required", true, false},
		{"plain server, starttls required", smtptest.Plain, "smtp", "&starttls=required", false, true},
		{"plain server", smtptest.Plain, "smtp", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, roots := smtptest.StartInboxWith(t, tc.mode)
			err := send(t, tc.scheme+"://"+in.Addr+"?from=rooms%40example.com"+tc.query, roots)
			if tc.wantErr {
				if err == nil || len(in.Messages()) != 0 {
					t.Fatalf("sent (%v, %d messages), want a refusal", err, len(in.Messages()))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m := in.Messages(); len(m) != 1 || m[0].TLS != tc.wantTLS {
				t.Fatalf("messages %+v, want one with TLS %v", m, tc.wantTLS)
			}
		})
	}
	t.Run("an untrusted certificate is refused", func(t *testing.T) {
		in, _ := smtptest.StartInboxWith(t, smtptest.ImplicitTLS)
		if err := send(t, "smtps://"+in.Addr+"?from=rooms%40example.com", nil); err == nil || len(in.Messages()) != 0 {
			t.Fatalf("sent over TLS to a certificate nobody trusts: %v", err)
		}
	})
}
