package main

import (
	"bytes"
	"strconv"
	"time"
)

// The server's event payloads are flat one-line JSON objects. The swarm reads the few
// fields it needs by key instead of decoding whole objects: at 100,000 streams the client
// parses ~100,000 events a second on the same two cores as the server, and every
// microsecond spent here is one the server does not get.

// jsonInt returns the integer value of "key": in b.
func jsonInt(b []byte, key string) (int64, bool) {
	v := valueOf(b, key)
	if len(v) == 0 {
		return 0, false
	}
	end := 0
	for end < len(v) && (v[end] == '-' || (v[end] >= '0' && v[end] <= '9')) {
		end++
	}
	n, err := strconv.ParseInt(string(v[:end]), 10, 64)
	return n, err == nil
}

// jsonStr returns the string value of "key": in b (no escapes are expected in the fields
// read here: times, tokens, states).
func jsonStr(b []byte, key string) ([]byte, bool) {
	v := valueOf(b, key)
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	end := bytes.IndexByte(v[1:], '"')
	if end < 0 {
		return nil, false
	}
	return v[1 : 1+end], true
}

// valueOf returns b from the first byte of key's value on.
func valueOf(b []byte, key string) []byte {
	var pat [72]byte
	p := append(pat[:0], '"')
	p = append(p, key...)
	p = append(p, '"', ':')
	i := bytes.Index(b, p)
	if i < 0 {
		return nil
	}
	v := b[i+len(p):]
	for len(v) > 0 && v[0] == ' ' {
		v = v[1:]
	}
	return v
}

// parseServerTime reads the server's RFC 3339 millisecond stamps.
func parseServerTime(b []byte) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, string(b))
	return t, err == nil
}
