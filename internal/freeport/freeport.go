// Package freeport finds free TCP ports on loopback for the private servers that tests
// and the zero-config run start (redis-server, PostgreSQL, nginx).
package freeport

import (
	"fmt"
	"net"
)

// Get returns a TCP port on 127.0.0.1 that was free a moment ago. Another process may take
// it before the caller binds it; callers that can should listen on port 0 instead.
func Get() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
