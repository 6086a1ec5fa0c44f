// Package smtptest is an in-process SMTP server for tests (github.com/emersion/go-smtp):
// it accepts every message (or refuses every recipient) and keeps what it received.
package smtptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
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
	TLS      bool   // the message came over TLS (smtps, or after STARTTLS)
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

// StartInbox starts the SMTP server (no TLS) on a loopback port, closed when the test ends.
func StartInbox(t testing.TB) *Inbox {
	t.Helper()
	in, _ := StartInboxWith(t, Plain)
	return in
}

// Mode is how the server speaks TLS.
type Mode int

// The modes of StartInboxWith.
const (
	Plain       Mode = iota // no TLS
	StartTLS                // plain, offering STARTTLS
	ImplicitTLS             // TLS from the first byte (smtps)
)

// StartInboxWith starts the SMTP server in mode on a loopback port (a certificate for
// 127.0.0.1 made here), closed when the test ends; roots trusts that certificate.
func StartInboxWith(t testing.TB, mode Mode) (in *Inbox, roots *x509.CertPool) {
	t.Helper()
	in = &Inbox{}
	s := smtp.NewServer(in)
	s.Domain = "localhost"
	s.AllowInsecureAuth = true
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	s.ErrorLog = log.New(io.Discard, "", 0) // a refused handshake is a test's expectation, not noise
	var cfg *tls.Config
	if mode != Plain {
		cfg, roots = selfSigned(t)
		s.TLSConfig = cfg
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if mode == ImplicitTLS {
		ln = tls.NewListener(ln, cfg)
	}
	in.Addr = ln.Addr().String()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return in, roots
}

// selfSigned makes a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t testing.TB) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "smtptest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, roots
}

// Messages is what has arrived so far.
func (in *Inbox) Messages() []Received {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Received(nil), in.got...)
}

// NewSession implements smtp.Backend.
func (in *Inbox) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{in: in, conn: c}, nil
}

type session struct {
	in       *Inbox
	conn     *smtp.Conn
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
	_, isTLS := s.conn.TLSConnectionState()
	s.in.got = append(s.in.got, Received{From: s.from, To: s.to, Header: m.Header, Body: string(body), TLS: isTLS})
	s.in.mu.Unlock()
	return nil
}
func (s *session) Reset()        {}
func (s *session) Logout() error { return nil }
