package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// rawConn is a minimal HTTP/1.1 client connection. The swarm speaks HTTP itself because
// net/http costs two goroutines and ~40 KB per connection, which at 15,000 connections per
// process would make the load tool heavier than the server it measures. One connection
// serves a waiter's join and then its stream (or its polls), as a browser's would.
type rawConn struct {
	nc   net.Conn
	br   *bufio.Reader
	host string
	// retryAfter is the Retry-After header (seconds) of the last answer read, -1 if none.
	retryAfter int
}

// errStatus0 marks a request that got no HTTP response (connection-level failure).
var errStatus0 = errors.New("no response")

func dialRaw(ctx context.Context, src net.IP, hostport string) (*rawConn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	if src != nil {
		d.LocalAddr = &net.TCPAddr{IP: src}
		d.Control = bindNoPort
	}
	nc, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("%w: dial: %v", errStatus0, err)
	}
	return &rawConn{nc: nc, br: bufio.NewReaderSize(nc, 2048), host: hostport}, nil
}

func (c *rawConn) close() { _ = c.nc.Close() }

// response is what the swarm keeps of an answer.
type response struct {
	status     int
	body       []byte
	keepAlive  bool
	retryAfter int // Retry-After in seconds, -1 if none
}

func (c *rawConn) writeRequest(method, path, bearer string, timeout time.Duration) error {
	var b bytes.Buffer
	b.Grow(256 + len(bearer))
	b.WriteString(method)
	b.WriteByte(' ')
	b.WriteString(path)
	b.WriteString(" HTTP/1.1\r\nHost: ")
	b.WriteString(c.host)
	b.WriteString("\r\nUser-Agent: waitroom-swarm\r\n")
	if bearer != "" {
		b.WriteString("Authorization: Bearer ")
		b.WriteString(bearer)
		b.WriteString("\r\n")
	}
	if method == "POST" || method == "PUT" {
		b.WriteString("Content-Length: 0\r\n")
	}
	if strings.HasSuffix(path, "/stream") {
		b.WriteString("Accept: text/event-stream\r\n")
	}
	b.WriteString("\r\n")
	_ = c.nc.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.nc.Write(b.Bytes()); err != nil {
		return fmt.Errorf("%w: write: %v", errStatus0, err)
	}
	return nil
}

// readHead reads the status line and headers.
func (c *rawConn) readHead() (status int, length int, keepAlive bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, 0, false, fmt.Errorf("%w: read status: %v", errStatus0, err)
	}
	// HTTP/1.1 200 OK
	f := bytes.Fields(line)
	if len(f) < 2 || !bytes.HasPrefix(f[0], []byte("HTTP/1.")) {
		return 0, 0, false, fmt.Errorf("%w: bad status line %q", errStatus0, line)
	}
	status, err = strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, 0, false, fmt.Errorf("%w: bad status %q", errStatus0, f[1])
	}
	length, keepAlive = -1, true
	c.retryAfter = -1
	for {
		line, err = c.br.ReadSlice('\n')
		if err != nil {
			return 0, 0, false, fmt.Errorf("%w: read header: %v", errStatus0, err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			return status, length, keepAlive, nil
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			length, _ = strconv.Atoi(string(v))
		case bytes.EqualFold(k, []byte("Connection")):
			if bytes.EqualFold(v, []byte("close")) {
				keepAlive = false
			}
		case bytes.EqualFold(k, []byte("Retry-After")):
			if n, err := strconv.Atoi(string(v)); err == nil && n >= 0 {
				c.retryAfter = n
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			return 0, 0, false, fmt.Errorf("%w: chunked responses are not supported by the swarm", errStatus0)
		}
	}
}

// do sends one request and reads the whole answer (Content-Length bodies only).
func (c *rawConn) do(method, path, bearer string, timeout time.Duration) (response, error) {
	if err := c.writeRequest(method, path, bearer, timeout); err != nil {
		return response{}, err
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
	defer c.nc.SetReadDeadline(time.Time{})
	status, length, ka, err := c.readHead()
	if err != nil {
		return response{}, err
	}
	if length < 0 {
		return response{}, fmt.Errorf("%w: response without Content-Length", errStatus0)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(c.br, body); err != nil {
		return response{}, fmt.Errorf("%w: read body: %v", errStatus0, err)
	}
	return response{status: status, body: body, keepAlive: ka, retryAfter: c.retryAfter}, nil
}

// openStream sends the stream request; on 200 the reader is left at the event stream.
func (c *rawConn) openStream(path, bearer string, timeout time.Duration) (response, error) {
	if err := c.writeRequest("GET", path, bearer, timeout); err != nil {
		return response{}, err
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
	status, length, _, err := c.readHead()
	if err != nil {
		return response{}, err
	}
	if status == 200 {
		return response{status: 200}, nil
	}
	defer c.nc.SetReadDeadline(time.Time{})
	var body []byte
	if length > 0 && length < 1<<16 {
		body = make([]byte, length)
		_, _ = io.ReadFull(c.br, body)
	}
	return response{status: status, body: body, retryAfter: c.retryAfter}, nil
}

// errorKind names a failed request by class: status0 (no HTTP answer), 4xx or 5xx, with
// the error code of the JSON body when there is one.
func errorKind(op string, r response, err error) string {
	if err != nil {
		return op + "_status0"
	}
	class := "4xx"
	if r.status >= 500 {
		class = "5xx"
	} else if r.status < 400 {
		class = "unexpected_" + strconv.Itoa(r.status)
	}
	if code, ok := jsonStr(r.body, "code"); ok {
		return op + "_" + class + ":" + string(code)
	}
	return op + "_" + class + ":" + strconv.Itoa(r.status)
}

// checkLoopbackURL refuses any target that is not on this machine's loopback.
func checkLoopbackURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("target %q: want http://127.x.x.x:port", s)
	}
	return checkLoopbackHost(u.Hostname())
}

func checkLoopbackHost(h string) error {
	if h == "localhost" {
		return nil
	}
	ip := net.ParseIP(h)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: the swarm only targets 127.0.0.0/8 or ::1", h)
	}
	return nil
}

func hostPort(base string) string {
	u, _ := url.Parse(base)
	h := u.Host
	if u.Port() == "" {
		h = net.JoinHostPort(u.Hostname(), "80")
	}
	if u.Hostname() == "localhost" {
		h = net.JoinHostPort("127.0.0.1", u.Port())
	}
	return h
}
