package web

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// Request framing guard.
//
// fasthttp resolves some ambiguous framing instead of refusing it: a request with both
// Content-Length and Transfer-Encoding is read as chunked and served (the connection is
// closed after it), "Transfer-Encoding: identity" is ignored, an obs-fold line is joined
// to the field before it, a field name may hold a space, a chunk extension may hold a NUL
// and be of any length, any method token is parsed (Fiber answers an unknown one with a
// plain-text 400 and keeps the connection), and any HTTP/x.y version is served. Behind a
// proxy that frames the same bytes the other way that is request smuggling. guardFraming
// sits below fasthttp and Fiber: every accepted connection follows the HTTP/1.1 byte
// stream (request line, header fields, Content-Length or chunked body, trailer) as
// fasthttp reads it, and refuses a request whose framing is ambiguous with 400
// {"error":{"code":"bad_request",…}} and closes the connection, before fasthttp has seen
// the request whole.
//
// Refused here: Transfer-Encoding with Content-Length, a Transfer-Encoding other than
// "chunked" (ASCII case-insensitive, as nginx), a Content-Length that is not 1-18 digits,
// a method other than the nine standard ones, a version other than HTTP/1.0 and HTTP/1.1,
// a header field name that is not a token (so whitespace before the colon or inside the
// name), obs-fold (a line starting with whitespace), a head or trailer section that does
// not end with CRLF CRLF (fasthttp waits for one before it ends a head at a bare-LF empty
// line, so such a request would hang until the read timeout), a malformed chunk-size line
// (not 1-15 hex digits, a NUL or LF inside an extension, a bare LF, longer than
// framingMaxChunkLine) or chunk data not followed by CRLF.
//
// Left to fasthttp, which refuses them itself with 400 through the ErrorHandler (431 for a
// head or trailer section past fiber.Config.ReadBufferSize) and closes the connection
// before the handler runs: two Content-Length fields, two Transfer-Encoding fields,
// Transfer-Encoding in an HTTP/1.0 request, two Host fields, a control byte in the
// request-target, NUL, a bare CR or another control byte in a field value.
// TestFramingParserRefusesAlone holds fasthttp to that, without the guard. The scanner
// reads what it needs to follow the stream and nothing more: of two Content-Length
// fields it keeps the last, as fasthttp refuses the request anyway.
//
// How the refusal is answered. The wrapper never reads ahead and never holds bytes: each
// Read is one read of the socket into fasthttp's own buffer, scanned in place, so the
// byte stream fasthttp gets is exactly the socket's, cut short at a refusal. When the
// refused request began in this read (the usual case, a request boundary), Read hands
// over only the bytes of the requests before it and then io.EOF: fasthttp finishes and
// flushes those, sees a clean end of stream and closes the connection without writing;
// Close then writes this file's 400. When part of the refused request had already been
// handed over (a head or chunked body split across reads), Read hands over the bytes
// before the offending one and then errFraming: fasthttp answers it itself through the
// ErrorHandler (Fiber maps it to the same JSON shape, message "Malformed request.",
// Connection: close), after flushing any earlier pipelined responses in order; Close
// writes nothing more unless fasthttp wrote nothing. Either way the connection is then
// half-closed and drained for up to framingLinger before it is closed, so the client
// reads the answer instead of a reset; the same happens when fasthttp closes a connection
// in the middle of a request or right after answering one (its own refusals: the rest of
// the request, or the next ones, may still be arriving). fasthttp never calls Read
// with unflushed responses at a request boundary (it flushes before waiting for the next
// head), so the answer always follows every earlier response.
//
// Hijacked connections (the user streams). The wrapper keeps no read-ahead, so after
// fasthttp hijacks a connection the kernel receive queue holds exactly what it would
// without the wrapper, and a MSG_PEEK on the fd (stream.peerClosed) is as meaningful as
// before. The conn returned by Accept implements syscall.Conn, delegating SyscallConn,
// exactly when the accepted conn does (a *net.TCPConn does). It also passes ReadFrom
// through (sendfile). After a hijack nothing calls Read again (web's stream handler
// takes UnsafeConn, marks it with framingHijacked so that its close does not linger, and
// only writes); a future handler that hijacks to speak another protocol on the same
// connection (WebSocket, CONNECT) must not read through this wrapper, as the bytes would
// be checked as HTTP/1.1 requests.
//
// Bodies pass by their length unread, so fasthttp must consume exactly that length
// (TestFramingMultipartEpilogueIsBody holds it to that for multipart bodies).
//
// Cost: one allocation per connection (kept for its life) and none per read; a head is
// scanned byte by byte, a field value with bytes.IndexByte, bodies are skipped by length.
// BenchmarkFramingGuard measures it. Wrap plain TCP listeners only: behind TLS the
// wrapper would have to sit inside the TLS conn, and fasthttp detects TLS by the conn's
// type.

const (
	framingMaxChunkLine = 4 << 10     // a chunk-size line with its extensions
	framingWriteTimeout = time.Second // for the refusal written on Close
	framingLinger       = time.Second // drain after the refusal, so the client gets it, not an RST
	framingLingerBytes  = 64 << 10    // at most this much is drained
	framingMaxCLDigits  = 18          // Content-Length fits an int64
	framingMaxHexDigits = 15          // as fasthttp's chunk-size limit on 64-bit
	framingValueCap     = 32          // Content-Length / Transfer-Encoding value kept for checking
	framingNameCap      = len("transfer-encoding")
)

// errFraming is what Read returns once part of a refused request has been handed over.
// It must not be a net.Error (Fiber would map it to 502) nor mention a timeout (408).
var errFraming = errors.New("ambiguous or malformed HTTP/1.1 request framing refused")

// guardFraming wraps ln so that every connection refuses ambiguous request framing before
// fasthttp parses it (see the comment at the top of this file). Serve wraps its listener
// with it.
func guardFraming(ln net.Listener) net.Listener { return framingListener{ln} }

type framingListener struct{ net.Listener }

func (l framingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if _, ok := nc.(syscall.Conn); ok {
		c := &framingSysConn{}
		c.Conn = nc
		return c, nil
	}
	return &framingConn{Conn: nc}, nil
}

// framingSysConn is a framingConn over a conn with a file descriptor: the user streams
// peek at it (stream.peerClosed) through SyscallConn.
type framingSysConn struct{ framingConn }

func (c *framingSysConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

// Flags of framingConn.flags.
const (
	ffRefused  = 1 << iota // the scanner refused a request; Read hands over nothing more
	ffBoundary             // the refused request began at a request boundary: Read ended with io.EOF
	ffObserved             // fasthttp asked for the refused bytes and got io.EOF/errFraming
	ffWrote                // fasthttp wrote after ffObserved (its own error response)
	ffClosed               // Close ran its refusal or lingering path
	ffMid                  // the stream is inside a request (head or body): see Close
	ffAnswered             // fasthttp wrote since it last called Read: see Close
	ffHijacked             // a handler took the connection over (framingHijacked)
)

type framingConn struct {
	net.Conn
	scan framingScanner
	// flags is written by the serving goroutine and read by Close, which the server's
	// shutdown may call from another goroutine; hub workers write hijacked conns.
	flags  atomic.Uint32
	reason uint8 // set before ffRefused is published
	mid    bool  // ffMid as last published; Read only
}

func (c *framingConn) Read(p []byte) (int, error) {
	f := c.flags.Load()
	if f&ffAnswered != 0 {
		c.flags.And(^uint32(ffAnswered))
	}
	if f&ffRefused != 0 {
		c.flags.Or(ffObserved)
		if f&ffBoundary != 0 {
			return 0, io.EOF
		}
		return 0, errFraming
	}
	n, err := c.Conn.Read(p)
	if n <= 0 {
		return n, err
	}
	c.scan.reqStart = -1
	if !c.scan.mid() {
		c.scan.reqStart = 0
	}
	at, why := c.scan.scan(p[:n])
	if at < 0 {
		if mid := c.scan.mid(); mid != c.mid {
			c.mid = mid
			if mid {
				c.flags.Or(ffMid)
			} else {
				c.flags.And(^uint32(ffMid))
			}
		}
		return n, err
	}
	c.reason = why
	f = uint32(ffRefused)
	keep := at
	if c.scan.reqStart >= 0 {
		f |= ffBoundary
		keep = c.scan.reqStart
	}
	c.flags.Store(f)
	if keep > 0 {
		return keep, nil
	}
	return c.Read(p) // reports the refusal
}

func (c *framingConn) Write(p []byte) (int, error) {
	c.wrote()
	return c.Conn.Write(p)
}

func (c *framingConn) wrote() {
	f := c.flags.Load()
	if f&ffAnswered == 0 {
		c.flags.Or(ffAnswered)
	}
	if f&ffObserved != 0 && f&ffWrote == 0 {
		c.flags.Or(ffWrote)
	}
}

// ReadFrom keeps the underlying conn's io.ReaderFrom (sendfile/splice) reachable for
// bufio.Writer.ReadFrom.
func (c *framingConn) ReadFrom(r io.Reader) (int64, error) {
	c.wrote()
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// framingHijacked marks nc, a conn a hijack handler got (after UnsafeConn), as taken over:
// its Close no longer lingers after the handler's last write. An unmarked hijacked conn
// works the same, only lingering for up to framingLinger on its close.
func framingHijacked(nc net.Conn) {
	if c, ok := nc.(interface{ hijacked() }); ok {
		c.hijacked()
	}
}

func (c *framingConn) hijacked() { c.flags.Or(ffHijacked) }

// Close answers a refused request if fasthttp asked for it and did not answer, then
// closes lingering. It also lingers when fasthttp closes in the middle of a request (its
// own 400, 413 or 431), or right after answering without reading again (its own refusal
// of a request that ended a read, Connection: close): the rest of the request, or more
// pipelined ones, may still be arriving and would turn the close into a reset. An idle
// connection (fasthttp waiting in Read) closes at once.
func (c *framingConn) Close() error {
	f := c.flags.Load()
	if f&(ffRefused|ffMid) == 0 && (f&ffAnswered == 0 || f&ffHijacked != 0) {
		return c.Conn.Close()
	}
	if c.flags.Or(ffClosed)&ffClosed != 0 {
		return nil
	}
	if f&ffObserved != 0 && (f&ffBoundary != 0 || f&ffWrote == 0) {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(framingWriteTimeout))
		_, _ = c.Conn.Write(framingAnswers[c.reason])
	}
	go framingLingerClose(c.Conn)
	return nil
}

// framingLingerClose half-closes nc and reads what the client still sends for a while
// before closing: closing a socket with unread input sends an RST, which can destroy the
// answer before the client has read it.
func framingLingerClose(nc net.Conn) {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = nc.SetReadDeadline(time.Now().Add(framingLinger))
	buf := make([]byte, 2048)
	for n := 0; n < framingLingerBytes; {
		m, err := nc.Read(buf)
		n += m
		if err != nil {
			break
		}
	}
	_ = nc.Close()
}
