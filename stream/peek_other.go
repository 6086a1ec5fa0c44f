//go:build !unix

package stream

import "net"

// peerClosed cannot peek on this platform; a failed heartbeat write detects the close.
func peerClosed(net.Conn) bool { return false }
