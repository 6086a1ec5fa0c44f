//go:build unix

// unix only for the MSG_PEEK check on a hijacked connection (as stream/peek_unix.go).

package web

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/rs/zerolog"
)

// framingServer serves a Fiber app configured like New's (body and head limits, the JSON
// error handler, hijacked conns kept) on a loopback listener, through guardFraming when
// guarded. Every path but /hijack answers "METHOD PATH BODY", so a smuggled request
// shows up as an extra answer naming its path. Hijacked conns are sent on the channel.
func framingServer(tb testing.TB, guarded bool) (string, <-chan net.Conn) {
	tb.Helper()
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		BodyLimit:             64 << 10,
		ReadBufferSize:        8 << 10,
		// Generous: a request trickled a byte at a time on a busy machine takes seconds, and
		// no test here waits for these to end a connection.
		ReadTimeout:                  30 * time.Second,
		WriteTimeout:                 30 * time.Second,
		IdleTimeout:                  30 * time.Second,
		Immutable:                    true,
		ErrorHandler:                 handleError(zerolog.Nop()),
		DisablePreParseMultipartForm: true,
	})
	app.Server().KeepHijackedConns = true
	hijacked := make(chan net.Conn, 1)
	app.Get("/hijack", func(c *fiber.Ctx) error {
		c.Context().HijackSetNoResponse(true)
		c.Context().Hijack(func(nc net.Conn) {
			if u, ok := nc.(interface{ UnsafeConn() net.Conn }); ok { // as web's stream handler
				nc = u.UnsafeConn()
			}
			framingHijacked(nc)
			hijacked <- nc
		})
		return nil
	})
	app.All("/*", func(c *fiber.Ctx) error {
		return c.SendString(c.Method() + " " + c.Path() + " " + string(c.Body()))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	if guarded {
		ln = guardFraming(ln)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	tb.Cleanup(func() {
		_ = app.ShutdownWithTimeout(2 * time.Second)
		<-done
	})
	return ln.Addr().String(), hijacked
}

type framingClient struct {
	tb testing.TB
	c  net.Conn
	br *bufio.Reader
	// lenient: a failed write ends the sending quietly (the server may have closed the
	// connection in the middle of a request, and without the guard nothing drains it).
	lenient bool
	failed  bool
}

func framingDial(tb testing.TB, addr string) *framingClient {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return &framingClient{tb: tb, c: c, br: bufio.NewReader(c)}
}

func (r *framingClient) send(s string) {
	r.tb.Helper()
	if r.failed {
		return
	}
	if _, err := io.WriteString(r.c, s); err != nil {
		if !r.lenient {
			r.tb.Fatalf("write: %v", err)
		}
		r.failed = true
	}
}

// trickle sends s in pieces of n bytes, pausing between them so that the server reads
// them separately.
func (r *framingClient) trickle(s string, n int) {
	r.tb.Helper()
	for len(s) > 0 {
		k := min(n, len(s))
		r.send(s[:k])
		s = s[k:]
		time.Sleep(2 * time.Millisecond)
	}
}

// response reads one response (for a request of method; a HEAD has no body).
func (r *framingClient) response(method string) (*http.Response, string) {
	r.tb.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(r.br, &http.Request{Method: method})
	if err != nil {
		r.tb.Fatalf("reading a response: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		r.tb.Fatalf("reading a response body: %v", err)
	}
	return res, string(b)
}

// closed asserts that the server has closed the connection: the next read is io.EOF
// (not a reset, not a timeout, not another response).
func (r *framingClient) closed() {
	r.tb.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := r.br.ReadByte()
	if err != io.EOF {
		r.tb.Fatalf("after the answer: read %q, %v; want io.EOF", b, err)
	}
}

// ended asserts that the server has ended the connection, with a close or a reset (a
// refusal in the middle of a request, without the guard's lingering close), and sent
// nothing more.
func (r *framingClient) ended() {
	r.tb.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := r.br.ReadByte()
	if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		r.tb.Fatalf("after the answer: read %q, %v; want io.EOF or a reset", b, err)
	}
}

// framingRefused checks an answer of the guard (or of fasthttp's error handler) to a refused
// request: status, the JSON error shape, Connection: close.
func framingRefused(tb testing.TB, res *http.Response, body string, status int, code string) {
	tb.Helper()
	if res.StatusCode != status {
		tb.Fatalf("status %d, want %d (body %q)", res.StatusCode, status, body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		tb.Errorf("Content-Type %q, want application/json", ct)
	}
	if !res.Close {
		tb.Errorf("no Connection: close (headers %v)", res.Header)
	}
	var b struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil || b.Error.Code != code || b.Error.Message == "" {
		tb.Errorf("body %q (%v), want the JSON error shape with code %q", body, err, code)
	}
}

// framingRefusals are requests that must be refused (400 bad_request unless status says
// otherwise). Each ends with a request that would be served if the stream went on being
// parsed: it must never be answered. The guard refuses each itself, except those marked
// parser: fasthttp refuses them by itself, and the guard lets them through to it.
var framingRefusals = []struct {
	name   string
	req    string
	parser bool
	status int
	code   string
}{
	{name: "two different Content-Length headers", parser: true, req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde"},
	{name: "two equal Content-Length headers", parser: true, req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\nabc"},
	{name: "Content-Length list", req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc"},
	{name: "Content-Length not digits", req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc"},
	{name: "Content-Length empty", req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n"},
	{name: "Content-Length of 40 digits", req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: " + strings.Repeat("0", 39) + "3\r\n\r\nabc"},
	{name: "Content-Length with chunked", req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 36\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{name: "chunked with Content-Length", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
	{name: "Content-Length 0 with chunked", req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{name: "Transfer-Encoding gzip", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
	{name: "Transfer-Encoding gzip, chunked", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
	{name: "Transfer-Encoding identity", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nContent-Length: 3\r\n\r\nabc"},
	{name: "Transfer-Encoding identity alone", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\nabc"},
	{name: "Transfer-Encoding chunked twice", parser: true, req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{name: "Transfer-Encoding xchunked", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n"},
	{name: "Transfer-Encoding in HTTP/1.0", parser: true, req: "POST /a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{name: "request line without spaces", req: "HELLO\r\n\r\n"},
	{name: "unknown method", req: "FOO /a HTTP/1.1\r\nHost: x\r\n\r\n"},
	{name: "lower-case method", req: "get /a HTTP/1.1\r\nHost: x\r\n\r\n"},
	{name: "no HTTP version", req: "GET /a\r\nHost: x\r\n\r\n"},
	{name: "HTTP/9.9", req: "GET /a HTTP/9.9\r\nHost: x\r\n\r\n"},
	{name: "HTTP/1.2", req: "GET /a HTTP/1.2\r\nHost: x\r\n\r\n"},
	{name: "HTTP/2.0 over HTTP/1 framing", req: "GET /a HTTP/2.0\r\nHost: x\r\n\r\n"},
	{name: "two spaces in the request line", req: "GET  /a HTTP/1.1\r\nHost: x\r\n\r\n"},
	{name: "tab in the request line", req: "GET\t/a HTTP/1.1\r\nHost: x\r\n\r\n"},
	{name: "space in the target", req: "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n"},
	{name: "DEL in the target", parser: true, req: "GET /a\x7fb HTTP/1.1\r\nHost: x\r\n\r\n"},
	{name: "control byte in the target", parser: true, req: "GET /a\x01b HTTP/1.1\r\nHost: x\r\n\r\n"},
	{name: "CR without LF before the request line", parser: true, req: "\rGET /a HTTP/1.1\r\nHost: x\r\n\r\n"},
	{name: "binary garbage", req: "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"},
	{name: "space before the colon", req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length : 3\r\n\r\nabc"},
	{name: "space inside a field name", req: "GET /a HTTP/1.1\r\nHost: x\r\nX A: v\r\n\r\n"},
	{name: "obs-fold", req: "POST /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n Content-Length: 3\r\n\r\nabc"},
	{name: "obs-fold of a Content-Length value", req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n 3\r\n\r\nabc"},
	{name: "header line without a colon", req: "GET /a HTTP/1.1\r\nHost: x\r\njunk\r\n\r\n"},
	{name: "bare CR in a header line", parser: true, req: "GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\rContent-Length: 3\r\n\r\nabc"},
	{name: "NUL in a header value", parser: true, req: "GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"},
	{name: "two Host headers", parser: true, req: "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"},
	{name: "head ended by a bare LF", req: "GET /a HTTP/1.1\r\nHost: x\n\n"},
	{name: "head ended by LF CRLF", req: "GET /a HTTP/1.1\r\nHost: x\n\r\n"},
	{name: "LF in a chunk extension", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;a\nb\r\nabc\r\n0\r\n\r\n"},
	{name: "NUL in a chunk extension", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;a\x00\r\nabc\r\n0\r\n\r\n"},
	{name: "chunk-size line over 4 KiB", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;" + strings.Repeat("x", 5000) + "\r\nabc\r\n0\r\n\r\n"},
	{name: "chunk size not hex", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nx3\r\nabc\r\n0\r\n\r\n"},
	{name: "chunk data longer than its size", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n"},
	{name: "trailer ended by a bare LF", req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX: y\n\n"},
	{name: "NUL in a trailer value", parser: true, req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX: a\x00b\r\n\r\n"},
	{name: "head over 8 KiB", parser: true, req: "GET /a HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 9000) + "\r\n\r\n", status: 431, code: "headers_too_large"},
	{name: "trailer over 8 KiB", parser: true, req: "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX: " + strings.Repeat("t", 9000) + "\r\n\r\n", status: 431, code: "headers_too_large"},
}

const framingSmuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

// framingModes are the ways a refused request reaches the server: as the first request of
// a connection, behind a served request (after its answer), pipelined behind one in the
// same write, and in small pieces.
var framingModes = []struct {
	name string
	run  func(r *framingClient, req string)
}{
	{"first on the connection", func(r *framingClient, req string) { r.send(req) }},
	{"after a served request", func(r *framingClient, req string) {
		r.send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
		if res, body := r.response("GET"); res.StatusCode != 200 || body != "GET /first " {
			r.tb.Fatalf("first request: %d %q", res.StatusCode, body)
		}
		r.send(req)
	}},
	{"pipelined behind a served request", func(r *framingClient, req string) {
		r.send("POST /first HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi" + req)
		if res, body := r.response("POST"); res.StatusCode != 200 || body != "POST /first hi" {
			r.tb.Fatalf("first request: %d %q", res.StatusCode, body)
		}
	}},
	{"in pieces", func(r *framingClient, req string) { r.trickle(req, 7) }},
}

// TestFramingRefusesAmbiguousRequests sends each refused request in each of framingModes
// through the guard: it is answered 400 (JSON, Connection: close), the connection then
// ends with a close (not a reset), and the request hidden behind it is never served.
func TestFramingRefusesAmbiguousRequests(t *testing.T) {
	t.Parallel()
	addr, _ := framingServer(t, true)
	for _, tc := range framingRefusals {
		for _, m := range framingModes {
			if m.name == "in pieces" && len(tc.req) > 1000 {
				continue // a head near the size limit sent 7 bytes at a time adds nothing but time
			}
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				status, code := tc.status, tc.code
				if status == 0 {
					status, code = 400, "bad_request"
				}
				r := framingDial(t, addr)
				m.run(r, tc.req+framingSmuggled)
				res, body := r.response("GET")
				framingRefused(t, res, body, status, code)
				if strings.Contains(body, "smuggled") {
					t.Fatalf("the hidden request was served: %q", body)
				}
				r.closed()
			})
		}
	}
}

// TestFramingParserRefusesAlone: the requests the guard leaves to fasthttp (parser in
// framingRefusals), sent in each of framingModes to a server without the guard, are
// refused by fasthttp itself: 400 (431 for a head past the read buffer) in the JSON shape
// with Connection: close, before the handler sees them, and the connection ends with the
// request hidden behind it unserved. The guard's own checks for them would add nothing.
func TestFramingParserRefusesAlone(t *testing.T) {
	t.Parallel()
	addr, _ := framingServer(t, false)
	for _, tc := range framingRefusals {
		if !tc.parser {
			continue
		}
		for _, m := range framingModes {
			if m.name == "in pieces" && len(tc.req) > 1000 {
				continue
			}
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				status, code := tc.status, tc.code
				if status == 0 {
					status, code = 400, "bad_request"
				}
				r := framingDial(t, addr)
				r.lenient = true
				m.run(r, tc.req+framingSmuggled)
				res, body := r.response("GET")
				framingRefused(t, res, body, status, code)
				if strings.Contains(body, "smuggled") || strings.Contains(body, "/a") {
					t.Fatalf("the handler ran: %q", body)
				}
				r.ended()
			})
		}
	}
}

// TestFramingAnswersWithItsOwnMessage: a request refused at a request boundary is
// answered by the guard, naming the problem.
func TestFramingAnswersWithItsOwnMessage(t *testing.T) {
	t.Parallel()
	addr, _ := framingServer(t, true)
	r := framingDial(t, addr)
	r.send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	res, body := r.response("POST")
	framingRefused(t, res, body, 400, "bad_request")
	if !strings.Contains(body, "Content-Length together with Transfer-Encoding") {
		t.Errorf("message %q", body)
	}
	r.closed()
}

// TestFramingServesWellFormedStreams: keep-alive, pipelining, bodies of both framings,
// reads cut anywhere, big heads and HTTP/1.0 still work through the guard.
func TestFramingServesWellFormedStreams(t *testing.T) {
	t.Parallel()
	addr, _ := framingServer(t, true)
	type exchange struct{ req, method, want string }
	get := func(path string) exchange {
		return exchange{"GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n", "GET", "GET " + path + " "}
	}
	post := exchange{"POST /p HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world", "POST", "POST /p hello world"}
	chunked := exchange{"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n5;name=v\r\nhello\r\n6\r\n world\r\nA \r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n", "POST", "POST /c hello world0123456789"}
	getBody := exchange{fmt.Sprintf("GET /g HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(framingSmuggled), framingSmuggled), "GET", "GET /g " + framingSmuggled}
	big := exchange{"GET /big HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 8000) + "\r\n\r\n", "GET", "GET /big "}
	leadingCRLF := exchange{"\r\n\r\nGET /l HTTP/1.1\r\nHost: x\r\n\r\n", "GET", "GET /l "}
	head := exchange{"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD", ""}
	bareLF := exchange{"PUT /lf HTTP/1.1\nHost: x\nContent-Length: 1\r\n\r\nz", "PUT", "PUT /lf z"} // bare-LF lines, CRLF CRLF end

	cases := []struct {
		name      string
		exchanges []exchange
		pipelined bool
		piece     int // > 0: each request is sent in pieces of this many bytes
	}{
		{name: "keep-alive sequence", exchanges: []exchange{get("/1"), post, get("/2"), chunked, getBody, head, leadingCRLF, get("/3")}},
		{name: "pipelined pair", exchanges: []exchange{get("/1"), get("/2")}, pipelined: true},
		{name: "pipelined bodies", exchanges: []exchange{post, chunked, getBody, bareLF, get("/last")}, pipelined: true},
		{name: "POST with a body", exchanges: []exchange{post}},
		{name: "chunked POST with extension and trailer", exchanges: []exchange{chunked}},
		{name: "bodies in one-byte reads", exchanges: []exchange{post, chunked, get("/after")}, piece: 1},
		{name: "requests in three-byte reads", exchanges: []exchange{get("/1"), leadingCRLF, bareLF, get("/2")}, piece: 3},
		{name: "head of nearly 8 KiB", exchanges: []exchange{big, get("/after")}},
		{name: "head of nearly 8 KiB in pieces", exchanges: []exchange{big, get("/after")}, piece: 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := framingDial(t, addr)
			if tc.pipelined {
				var all strings.Builder
				for _, e := range tc.exchanges {
					all.WriteString(e.req)
				}
				r.send(all.String())
			}
			for i, e := range tc.exchanges {
				switch {
				case tc.pipelined:
				case tc.piece > 0:
					r.trickle(e.req, tc.piece)
				default:
					r.send(e.req)
				}
				res, body := r.response(e.method)
				if res.StatusCode != 200 || body != e.want || res.Close {
					t.Fatalf("request %d: %d %q (close %v), want 200 %q", i, res.StatusCode, body, res.Close, e.want)
				}
			}
		})
	}

	t.Run("HTTP/1.0 then close", func(t *testing.T) {
		r := framingDial(t, addr)
		r.send("GET /old HTTP/1.0\r\n\r\n")
		if res, body := r.response("GET"); res.StatusCode != 200 || body != "GET /old " {
			t.Fatalf("%d %q", res.StatusCode, body)
		}
		r.closed()
	})
	t.Run("Expect 100-continue", func(t *testing.T) {
		r := framingDial(t, addr)
		r.send("POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
		if res, _ := r.response("POST"); res.StatusCode != 100 {
			t.Fatalf("want 100 Continue, got %d", res.StatusCode)
		}
		r.send("body")
		if res, body := r.response("POST"); res.StatusCode != 200 || body != "POST /e body" {
			t.Fatalf("%d %q", res.StatusCode, body)
		}
	})
}

// TestFramingMalformedTrailer: a malformed trailer is refused like a malformed head, whether
// it arrives with the start of its request or in a later read (refused there at its first
// byte, it reaches fasthttp as a failed trailer read): 400, the connection ends there and
// nothing after it is served.
func TestFramingMalformedTrailer(t *testing.T) {
	t.Parallel()
	addr, _ := framingServer(t, true)
	const start = "POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n"
	for _, trailer := range []string{" folded\r\n\r\n", "0x: y\r\n\r\n", "X: a\rb\r\n\r\n", "X: y\n\n"} {
		t.Run(fmt.Sprintf("%q in one read", trailer), func(t *testing.T) {
			r := framingDial(t, addr)
			r.send(start + trailer + framingSmuggled)
			res, body := r.response("POST")
			framingRefused(t, res, body, 400, "bad_request")
			r.closed()
		})
		t.Run(fmt.Sprintf("%q in a later read", trailer), func(t *testing.T) {
			r := framingDial(t, addr)
			r.send(start)
			time.Sleep(20 * time.Millisecond)
			r.send(trailer + framingSmuggled)
			res, body := r.response("POST")
			framingRefused(t, res, body, 400, "bad_request")
			r.closed()
		})
	}
}

// TestFramingMultipartEpilogueIsBody: bytes after a multipart body's closing boundary but
// inside its Content-Length stay body. The guard passes a body by its length unread, so a
// parser that stopped at the closing boundary would serve whatever follows as the next
// request, and no listener-level guard could see it.
func TestFramingMultipartEpilogueIsBody(t *testing.T) {
	t.Parallel()
	addr, _ := framingServer(t, true)
	for pad := 4030; pad < 4040; pad++ {
		body := "--XB\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XB--\r\n" + strings.Repeat("z", pad) + framingSmuggled
		r := framingDial(t, addr)
		r.send(fmt.Sprintf("POST /m HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XB\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
		if res, _ := r.response("POST"); res.StatusCode != 200 {
			t.Fatalf("pad %d: %d", pad, res.StatusCode)
		}
		r.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
		if res, got := r.response("GET"); res.StatusCode != 200 || got != "GET /next " {
			t.Fatalf("pad %d: after the multipart request got %d %q: the epilogue was parsed as a request", pad, res.StatusCode, got)
		}
	}
}

// TestFramingKeepsHijackedConnsPeekable: the conn a hijack handler gets (UnsafeConn, as
// the stream handler takes it) is still a syscall.Conn, and a MSG_PEEK on its fd sees
// the client as open while it is and as gone once it closes: the guard holds no bytes.
func TestFramingKeepsHijackedConnsPeekable(t *testing.T) {
	t.Parallel()
	addr, hijacked := framingServer(t, true)
	r := framingDial(t, addr)
	r.send("GET /hijack HTTP/1.1\r\nHost: x\r\n\r\n")
	var nc net.Conn
	select {
	case nc = <-hijacked:
	case <-time.After(5 * time.Second):
		t.Fatal("not hijacked")
	}
	defer nc.Close()
	if _, ok := nc.(syscall.Conn); !ok {
		t.Fatalf("hijacked conn %T is not a syscall.Conn", nc)
	}
	if _, ok := nc.(*framingSysConn); !ok {
		t.Fatalf("hijacked conn %T is not the guard's", nc)
	}
	if framingPeekClosed(t, nc) {
		t.Fatal("peek reports an open client as closed")
	}
	if _, err := io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"); err != nil {
		t.Fatal(err)
	}
	if res, body := r.response("GET"); res.StatusCode != 200 || body != "hi" {
		t.Fatalf("%d %q", res.StatusCode, body)
	}
	_ = r.c.Close()
	deadline := time.Now().Add(3 * time.Second)
	for !framingPeekClosed(t, nc) {
		if time.Now().After(deadline) {
			t.Fatal("peek does not see the client's close")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// framingPeekClosed is stream.peerClosed's check.
func framingPeekClosed(t *testing.T, nc net.Conn) bool {
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	if err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (err == nil && n == 0) || (err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return closed
}

// framingStream is a well-formed keep-alive stream exercising every scanner state.
const framingStream = "GET /1 HTTP/1.1\r\nHost: x\r\nUser-Agent: Mozilla/5.0\r\nAccept: */*\r\n\r\n" +
	"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world" +
	"POST /c HTTP/1.1\r\nHost: x\r\ntransfer-encoding:  chunked \r\n\r\n5;a=b\r\nhello\r\n6\r\n world\r\n0\r\nT: v\r\n\r\n" +
	"\r\nPUT /lf HTTP/1.0\nHost: x\nContent-Length:1\r\n\r\nz" +
	"OPTIONS * HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Tab:\tv\t\r\n\r\n"

// framingScanSplit scans s in the pieces cut at the given offsets and reports where it was
// refused (-1: not) and why.
func framingScanSplit(s string, cuts ...int) (int, uint8, framingScanner) {
	var f framingScanner
	prev := 0
	for _, c := range append(cuts, len(s)) {
		if at, why := f.scan([]byte(s[prev:c])); at >= 0 {
			return prev + at, why, f
		}
		prev = c
	}
	return -1, 0, f
}

// TestFramingScannerAnySplit: the scanner refuses each request the guard refuses and lets
// through each one left to fasthttp, and the verdict on a stream does not depend on where
// reads cut it, for a well-formed stream and for each refused request.
func TestFramingScannerAnySplit(t *testing.T) {
	t.Parallel()
	if at, why, f := framingScanSplit(framingStream); at >= 0 || f.mid() {
		t.Fatalf("well-formed stream refused at %d (%d) or not at a boundary (state %d)", at, why, f.st)
	}
	for _, tc := range framingRefusals {
		switch at, _, _ := framingScanSplit(tc.req); {
		case at < 0 && !tc.parser:
			t.Errorf("%s: not refused", tc.name)
		case at >= 0 && tc.parser:
			t.Errorf("%s: refused at %d, but left to fasthttp", tc.name, at)
		}
	}
	for _, s := range append([]string{framingStream}, func() (r []string) {
		for _, tc := range framingRefusals {
			if len(tc.req) < 1000 {
				r = append(r, framingStream+tc.req)
			}
		}
		return r
	}()...) {
		at0, why0, _ := framingScanSplit(s)
		for i := 0; i <= len(s); i++ {
			for _, j := range []int{i, min(i+1, len(s)), min(i+5, len(s))} {
				if at, why, _ := framingScanSplit(s, i, j); at != at0 || why != why0 {
					t.Fatalf("cut at %d,%d: refused at %d (%d), whole: %d (%d), stream %q", i, j, at, why, at0, why0, s)
				}
			}
		}
	}
}

// FuzzFramingSplit: any input, cut anywhere, gets the same verdict as whole, without a
// panic.
func FuzzFramingSplit(f *testing.F) {
	f.Add([]byte(framingStream), uint16(10))
	for _, tc := range framingRefusals {
		f.Add([]byte(tc.req), uint16(len(tc.req)/2))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		c := int(cut) % (len(b) + 1)
		at0, why0, _ := framingScanSplit(string(b))
		if at, why, _ := framingScanSplit(string(b), c); at != at0 || why != why0 {
			t.Fatalf("cut at %d: %d (%d), whole: %d (%d)", c, at, why, at0, why0)
		}
	})
}

// BenchmarkFramingGuard compares the plain listener with the guarded one for small GETs
// on one keep-alive connection, one at a time and 16 pipelined, and times the scanner
// alone on a browser-sized head.
func BenchmarkFramingGuard(b *testing.B) {
	const req = "GET /ok HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"
	for _, depth := range []int{1, 16} {
		for _, guarded := range []bool{false, true} {
			name := "plain"
			if guarded {
				name = "guarded"
			}
			b.Run(fmt.Sprintf("pipeline=%d/listener=%s", depth, name), func(b *testing.B) {
				addr, _ := framingServer(b, guarded)
				r := framingDial(b, addr)
				// All answers have the same length (the Date header is fixed-width): measure one.
				r.send(req)
				_ = r.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				first, _ := io.ReadAll(r.c)
				_ = r.c.SetReadDeadline(time.Time{})
				respLen := len(first)
				if respLen == 0 {
					b.Fatal("no answer")
				}
				batch := []byte(strings.Repeat(req, depth))
				buf := make([]byte, respLen*depth)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += depth {
					if _, err := r.c.Write(batch); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(r.br, buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run("scan-only", func(b *testing.B) {
		head := []byte("GET /api/queues/drop/status HTTP/1.1\r\nHost: waitroom.example\r\n" +
			"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36\r\n" +
			"Accept: application/json\r\nAccept-Language: en-GB,en;q=0.9\r\nAccept-Encoding: gzip, deflate, br\r\n" +
			"Cookie: wr_ticket=eyJ0IjoiMDFIWFlaIiwicSI6ImRyb3AifQ.c2lnbmF0dXJl\r\nX-Forwarded-For: 203.0.113.7\r\n\r\n")
		var f framingScanner
		b.SetBytes(int64(len(head)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if at, _ := f.scan(head); at >= 0 {
				b.Fatal("refused")
			}
		}
	})
}
