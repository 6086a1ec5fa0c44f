package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// SMTP sends messages to one SMTP server, named by a URL:
//
//	smtp://[user:pass@]host[:port]?from=rooms@example.com   port 587 by default; STARTTLS
//	                                                         when the server offers it
//	smtp://…?from=…&starttls=required                        refuse a server without STARTTLS
//	smtps://[user:pass@]host[:port]?from=…                   TLS from the first byte, port 465
//
// from is the sender address (a display name is allowed: "Waiting room <rooms@example.com>",
// URL-encoded). With a user, the password is sent with AUTH PLAIN, which net/smtp allows
// only over TLS or to localhost.
type SMTP struct {
	addr     string // host:port
	host     string
	implicit bool // smtps
	needTLS  bool // starttls=required
	auth     smtp.Auth
	from     *mail.Address
	// TLS is the client's TLS configuration (nil: the system's roots, ServerName = host);
	// tests set their own roots.
	TLS *tls.Config
}

// ParseSMTP reads an SMTP URL (see SMTP). Its errors never repeat the URL (it holds a
// password).
func ParseSMTP(raw string) (*SMTP, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	s := &SMTP{}
	port := "587"
	switch u.Scheme {
	case "smtp":
	case "smtps":
		s.implicit, port = true, "465"
	default:
		return nil, errors.New("the scheme must be smtp or smtps")
	}
	s.host = u.Hostname()
	if s.host == "" {
		return nil, errors.New("no host")
	}
	if p := u.Port(); p != "" {
		port = p
	}
	s.addr = net.JoinHostPort(s.host, port)
	q := u.Query()
	switch q.Get("starttls") {
	case "", "auto":
	case "required":
		s.needTLS = true
	default:
		return nil, errors.New("starttls must be auto or required")
	}
	from, err := mail.ParseAddress(q.Get("from"))
	if err != nil {
		return nil, errors.New("from= must be the sender's address")
	}
	s.from = from
	if u.User != nil {
		pass, _ := u.User.Password()
		s.auth = smtp.PlainAuth("", u.User.Username(), pass, s.host)
	}
	return s, nil
}

// From is the sender's address (the From header).
func (s *SMTP) From() *mail.Address { return s.from }

// Send delivers msg (a whole RFC 5322 message) to one recipient. ctx bounds the whole
// exchange: the connection's deadline is ctx's.
func (s *SMTP) Send(ctx context.Context, to string, msg []byte) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	d := net.Dialer{Deadline: deadline}
	var conn net.Conn
	var err error
	if s.implicit {
		conn, err = (&tls.Dialer{NetDialer: &d, Config: s.tlsConfig()}).DialContext(ctx, "tcp", s.addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", s.addr)
	}
	if err != nil {
		return fmt.Errorf("smtp dial: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		return fmt.Errorf("smtp greeting: %w", err)
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		return fmt.Errorf("smtp hello: %w", err)
	}
	if !s.implicit {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(s.tlsConfig()); err != nil {
				return fmt.Errorf("smtp starttls: %w", err)
			}
		} else if s.needTLS {
			return errors.New("smtp: the server does not offer STARTTLS")
		}
	}
	if s.auth != nil {
		if err := c.Auth(s.auth); err != nil {
			return fmt.Errorf("smtp auth: %w", err)
		}
	}
	if err := c.Mail(s.from.Address); err != nil {
		return fmt.Errorf("smtp mail from: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("smtp rcpt: %w", redact(err, to))
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp data: %w", redact(err, to))
	}
	return c.Quit()
}

func (s *SMTP) tlsConfig() *tls.Config {
	if s.TLS != nil {
		c := s.TLS.Clone()
		if c.ServerName == "" {
			c.ServerName = s.host
		}
		return c
	}
	return &tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12}
}

// redact takes the recipient's address out of a server's answer (servers often repeat
// it), so that an error may be logged.
func redact(err error, addr string) error {
	if err == nil || addr == "" || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(addr)) {
		return err
	}
	var te *textproto.Error
	if errors.As(err, &te) {
		return &textproto.Error{Code: te.Code, Msg: strings.ReplaceAll(strings.ToLower(te.Msg), strings.ToLower(addr), "<recipient>")}
	}
	return errors.New(strings.ReplaceAll(strings.ToLower(err.Error()), strings.ToLower(addr), "<recipient>"))
}
