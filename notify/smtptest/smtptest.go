// Package smtptest is an in-process SMTP server for tests (github.com/emersion/go-smtp):
// it accepts every message (or refuses every recipient) and keeps what it received.
package smtptest

import (
	"io"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// LinkPattern finds a reminder's link in a message body.
var LinkPattern = regexp.MustCompile(`https?://\S+/q/[\w-]+/back/[\w-]+`)

// Received is one message the test's SMTP server accepted.
type Received struct {
	From, To string
	Header   mail.Header
	Body     string // quoted-printable decoded
}

// Inbox is an in-process SMTP server (github.com/emersion/go-smtp) that keeps what it
// receives. RejectRcpt makes it refuse every recipient with a 550 that repeats the address (as
// real servers do).
type Inbox struct {
	Addr string
	// RejectRcpt, when set, refuses every recipient.
	RejectRcpt atomic.Bool
	mu         sync.Mutex
	got        []Received
}

// StartInbox starts the SMTP server on a loopback port, closed when the test ends.
func StartInbox(t testing.TB) *Inbox {
	t.Helper()
	in := &Inbox{}
	s := smtp.NewServer(in)
	s.Domain = "localhost"
	s.AllowInsecureAuth = true
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	in.Addr = ln.Addr().String()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return in
}

// Messages is what has arrived so far.
func (in *Inbox) Messages() []Received {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Received(nil), in.got...)
}

// NewSession implements smtp.Backend.
func (in *Inbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{in: in}, nil }

type session struct {
	in       *Inbox
	from, to string
}

// Mail, Rcpt, Data, Reset and Logout implement smtp.Session.
func (s *session) Mail(from string, _ *smtp.MailOptions) error { s.from = from; return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.in.RejectRcpt.Load() {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "mailbox " + to + " unavailable"}
	}
	s.to = to
	return nil
}
func (s *session) Data(r io.Reader) error {
	m, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		return err
	}
	s.in.mu.Lock()
	s.in.got = append(s.in.got, Received{From: s.from, To: s.to, Header: m.Header, Body: string(body)})
	s.in.mu.Unlock()
	return nil
}
func (s *session) Reset()        {}
func (s *session) Logout() error { return nil }
