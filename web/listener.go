package web

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// The connection listener: it keeps the instance alive at its descriptor limit.
//
// fasthttp treats an Accept error as the end of the server, and "too many open files" is the
// usual one for an SSE server at its limit: the process exited. Here every Accept error but
// a closed listener is counted, logged at most once a second, and retried after a back-off
// growing from acceptBackoffMin to acceptBackoffMax. And while maxConns connections are open,
// a new one is accepted and closed at once (shed) rather than left to exhaust descriptors:
// the kernel backlog drains and the instance keeps the descriptors its Redis and PostgreSQL
// pools need.

// Back-off bounds between failed Accepts.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

type connListener struct {
	net.Listener
	max     int64 // 0 = no budget
	open    *atomic.Int64
	m       *metrics
	log     zerolog.Logger
	lastLog atomic.Int64 // UnixNano of the last logged accept error
}

// budgetListener wraps ln with the accept back-off and the connection budget (maxConns, 0 =
// none); open counts the connections it has handed out and not yet seen closed.
func budgetListener(ln net.Listener, maxConns int64, open *atomic.Int64, m *metrics, log zerolog.Logger) net.Listener {
	return &connListener{Listener: ln, max: maxConns, open: open, m: m, log: log}
}

func (l *connListener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			l.m.acceptErrors.WithLabelValues(acceptReason(err)).Inc()
			if now := time.Now().UnixNano(); now-l.lastLog.Load() >= int64(time.Second) {
				l.lastLog.Store(now)
				l.log.Warn().Err(err).Int64("open_connections", l.open.Load()).Msg("accept failed; backing off")
			}
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if l.max > 0 && l.open.Load() >= l.max {
			l.m.connsShed.Inc()
			_ = nc.Close()
			continue
		}
		l.open.Add(1)
		if _, ok := nc.(syscall.Conn); ok {
			c := &countedSysConn{}
			c.Conn, c.l = nc, l
			return c, nil
		}
		return &countedConn{Conn: nc, l: l}, nil
	}
}

// acceptReasons are acceptReason's answers (the reason label of http_accept_errors_total).
var acceptReasons = []string{"too_many_open_files", "aborted", "no_memory", "other"}

func acceptReason(err error) string {
	switch {
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "too_many_open_files"
	case errors.Is(err, syscall.ECONNABORTED):
		return "aborted"
	case errors.Is(err, syscall.ENOBUFS), errors.Is(err, syscall.ENOMEM):
		return "no_memory"
	}
	return "other"
}

// countedConn gives its slot back once, when closed.
type countedConn struct {
	net.Conn
	l      *connListener
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}

// CloseWrite passes the half-close through (the framing guard's refusal sends FIN with it).
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom passes sendfile through, as the bare conn would.
func (c *countedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// countedSysConn keeps syscall.Conn for the conns that have a descriptor (the user streams
// peek at it: stream.peerClosed).
type countedSysConn struct{ countedConn }

func (c *countedSysConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}
