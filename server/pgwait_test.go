package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/queue/redistest"
)

// TestStartWaitsForPostgres starts the server while PostgreSQL at DATABASE_URL is down (its
// port refuses connections) and opens it once the server has said it waits: the server comes
// up, ready, and its log says it waited — without the password. The port is one the test
// holds all along (a socket bound to it, not listening: a connection is refused, and no other
// process can take the port meanwhile), which then listens and relays to a PostgreSQL that
// ran all along (stopping and restarting one could find its port taken by a test beside).
func TestStartWaitsForPostgres(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	door := closedDoor(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	u.Host = fmt.Sprintf("127.0.0.1:%d", door.port)
	dbURL := u.String()
	rs := redistest.Start(t)
	in := launchInProcess(t, "pgwait", tolerantEnv(rs.URL(), dbURL, nil))
	waitForLog(t, in, "PostgreSQL does not accept connections yet")
	door.open(t, target)
	if err := in.ready(); err != nil {
		t.Fatal(err)
	}
	if res := call(t, "GET", in.url+"/readyz", "", nil, nil); res.StatusCode != 200 {
		t.Fatalf("readyz after PostgreSQL came: %d", res.StatusCode)
	}
	logs := in.logs.String()
	if !strings.Contains(logs, `"message":"PostgreSQL accepts connections"`) {
		t.Fatalf("no line saying PostgreSQL answered after the wait:\n%s", logs)
	}
	if pw, _ := u.User.Password(); pw == "" || strings.Contains(logs, pw) {
		t.Fatalf("the password is empty or in the log")
	}
}

// TestWaitPostgresGivesUp: an address that accepts and drops every connection (a
// PostgreSQL that never comes) is tried again until the bound, then the error names the
// database, the bound, the attempts and the last failure — not the password.
func TestWaitPostgresGivesUp(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan int, 1)
	go func() {
		n := 0
		for {
			c, err := ln.Accept()
			if err != nil {
				accepted <- n
				return
			}
			n++
			_ = c.Close()
		}
	}()
	var log bytes.Buffer
	err = waitPostgres(context.Background(), "postgres://app:pw-not-logged@"+ln.Addr().String()+"/shop?sslmode=disable", 2*time.Second, zerolog.New(&log))
	_ = ln.Close()
	n := <-accepted
	target := ln.Addr().String() + "/shop"
	if err == nil || !strings.Contains(err.Error(), "within 2s") || !strings.Contains(err.Error(), target) ||
		!strings.Contains(err.Error(), "attempts") || strings.Contains(err.Error()+log.String(), "pw-not-logged") {
		t.Fatalf("error %v: want one naming %s, the bound and the attempts, without the password", err, target)
	}
	if n < 2 || strings.Count(log.String(), "trying again") != 1 {
		t.Fatalf("%d connections, log %q: want it tried more than once and said so once", n, log.String())
	}
}

// TestWaitPostgresRefusalEndsAtOnce: a refusal that waiting cannot change — a wrong
// password, a database that does not exist — ends the wait at the first attempt.
func TestWaitPostgresRefusalEndsAtOnce(t *testing.T) {
	t.Parallel()
	good, err := url.Parse(testDB(t))
	if err != nil {
		t.Fatal(err)
	}
	wrongPW := *good
	wrongPW.User = url.UserPassword(good.User.Username(), "wrong-password")
	noDB := *good
	noDB.Path = "/no_such_database"
	for name, tc := range map[string]struct {
		url  *url.URL
		want string
	}{
		"wrong password": {&wrongPW, "28P01"},
		"no database":    {&noDB, "3D000"},
	} {
		t.Run(name, func(t *testing.T) {
			var log bytes.Buffer
			err := waitPostgres(context.Background(), tc.url.String(), time.Minute, zerolog.New(&log))
			if err == nil || !strings.Contains(err.Error(), "refuses the connection") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v: want a refusal with SQLSTATE %s", err, tc.want)
			}
			if log.Len() != 0 {
				t.Fatalf("retried: %s", log.String())
			}
		})
	}
	var log bytes.Buffer
	if err := waitPostgres(context.Background(), good.String(), time.Minute, zerolog.New(&log)); err != nil || log.Len() != 0 {
		t.Fatalf("a PostgreSQL that answers: %v, log %q", err, log.String())
	}
}

// TestPgRetryable: what waiting can change, and what it cannot.
func TestPgRetryable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"refused, wrapped", fmt.Errorf("failed to connect: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"name not resolved yet", &net.DNSError{Err: "no such host", Name: "postgres", IsNotFound: true}, true},
		{"attempt timed out", fmt.Errorf("connect: %w", context.DeadlineExceeded), true},
		{"reset", syscall.ECONNRESET, true},
		{"starting up", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"wrong password", &pgconn.PgError{Code: "28P01"}, false},
		{"no such role", &pgconn.PgError{Code: "28000"}, false},
		{"no such database", &pgconn.PgError{Code: "3D000"}, false},
		{"tls refused", errors.New("server refused TLS connection"), false},
	} {
		if got := pgRetryable(tc.err); got != tc.want {
			t.Errorf("%s (%v): retryable %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// waitForLog waits until the instance's log holds text, failing if it exits first.
func waitForLog(t *testing.T, in *instance, text string) {
	t.Helper()
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	for {
		logs, changed := in.logs.since(0)
		if strings.Contains(logs, text) {
			return
		}
		select {
		case <-changed:
		case err := <-in.done:
			in.done <- err
			t.Fatalf("instance %s exited before logging %q: %v\n%s", in.id, text, err, logs)
		case <-deadline.C:
			t.Fatalf("instance %s did not log %q within %v\n%s", in.id, text, startTimeout, logs)
		}
	}
}

// door is a loopback port the test holds: bound but not listening (connections are refused)
// until open, then a relay to a target address.
type door struct {
	fd   int
	port int
}

func closedDoor(t *testing.T) *door {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		t.Fatal(err)
	}
	d := &door{fd: fd, port: sa.(*syscall.SockaddrInet4).Port}
	t.Cleanup(func() {
		if d.fd >= 0 {
			_ = syscall.Close(d.fd)
		}
	})
	return d
}

// open makes the door listen on its port and relay every connection to target.
func (d *door) open(t *testing.T, target string) {
	t.Helper()
	if err := syscall.Listen(d.fd, 128); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(d.fd), "door")
	d.fd = -1                      // f owns it now
	ln, err := net.FileListener(f) // a copy of the descriptor
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	serveGate(t, ln, target)
}
