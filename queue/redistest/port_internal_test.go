package redistest

import (
	"errors"
	"testing"
)

// A server started on a port another server holds does not pass for started: the check
// sees another process answer (INFO process_id), and Start would try another port.
func TestStartOnATakenPortIsNotOurs(t *testing.T) {
	t.Parallel()
	a := Start(t, Single())
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	b := &Server{tb: t, bin: bin, dir: t.TempDir(), port: a.port}
	t.Cleanup(b.Stop)
	if err := b.start(); !errors.Is(err, errNotOurs) {
		t.Fatalf("start on %s's port: %v, want errNotOurs", a.Addr(), err)
	}
	if err := a.Client().Ping(t.Context()).Err(); err != nil {
		t.Fatalf("the server that held the port: %v", err)
	}
}
