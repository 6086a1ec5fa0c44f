//go:build !linux

package main

import "syscall"

func bindNoPort(network, address string, c syscall.RawConn) error { return nil }
