//go:build linux

package main

import "syscall"

// ipBindAddressNoPort is IP_BIND_ADDRESS_NO_PORT (linux/in.h), missing from syscall.
const ipBindAddressNoPort = 24

// bindNoPort lets a socket bound to a source address take its port at connect time. Without
// it, bind(addr, 0) reserves a port for the address alone, and 100,000 such sockets over six
// addresses use up the whole ephemeral range for everyone: the server's own new connections
// to Redis and PostgreSQL, and the swarm's /metrics scrapes, then fail with "cannot assign
// requested address" (seen in the first 100,000-stream run).
func bindNoPort(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
