// Package telemetry is what an operator reads about a running instance beside its logs and
// request metrics: the Go profiler on a listener of its own (Profiler), the build's identity
// as a metric (RegisterBuildInfo), and OpenTelemetry tracing (tracing.go).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Profiler serves the Go profiler (net/http/pprof: /debug/pprof/…) on a listener of its
// own, so the public port never serves it: a profile shows the program's insides and a CPU
// profile costs CPU for as long as asked, and there is no authentication on it. The
// address must be on loopback (CheckLoopback); an operator reaches it from the host or
// through a tunnel (kubectl port-forward, ssh -L).
type Profiler struct {
	ln  net.Listener
	srv *http.Server
}

// NewProfiler listens on addr (a loopback host:port; port 0 picks one) for the profiler.
func NewProfiler(addr string) (*Profiler, error) {
	if err := CheckLoopback(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // the index and every named profile (heap, goroutine, …)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No WriteTimeout: a CPU profile or an execution trace answers after the seconds asked
	// for (30 by default), and pprof refuses a duration past the server's write timeout.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	return &Profiler{ln: ln, srv: srv}, nil
}

// Addr is where the profiler listens.
func (p *Profiler) Addr() net.Addr { return p.ln.Addr() }

// Serve serves until Shutdown; it returns nil after Shutdown.
func (p *Profiler) Serve() error {
	if err := p.srv.Serve(p.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops the profiler. A profile being taken is cut at ctx's end.
func (p *Profiler) Shutdown(ctx context.Context) error {
	if err := p.srv.Shutdown(ctx); err != nil {
		return p.srv.Close()
	}
	return nil
}

// Close stops the profiler at once (its listener too, if Serve never ran).
func (p *Profiler) Close() {
	_ = p.srv.Close()
	_ = p.ln.Close()
}

// CheckLoopback accepts a host:port whose host is a loopback address (127.0.0.0/8, ::1) or
// localhost. An empty host (":6060") would listen on every interface and is refused.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port")
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("must be a loopback address such as 127.0.0.1:6060 (the profiler has no authentication; reach it through a tunnel)")
}
