package web

// The framing scanner: a byte-at-a-time HTTP/1.1 request-stream follower used by the framing
// guard (framing.go). It says where every request ends, so that the guard answers at a
// request boundary, and refuses the framing that fasthttp accepts but a peer may read
// another way. What fasthttp refuses by itself passes here unchecked.

import (
	"bytes"
	"strconv"
)

// Reasons for a refusal; each has a prebuilt answer in framingAnswers.
const (
	frRequestLine uint8 = iota
	frMethod
	frVersion
	frHeaderLine
	frHeadEnd
	frBadContentLength
	frContentLengthAndTE
	frTransferEncoding
	frChunk
	frCount
)

var framingAnswers = func() [frCount][]byte {
	msg := [frCount]string{
		frRequestLine:        "Malformed request line.",
		frMethod:             "Unsupported request method.",
		frVersion:            "Unsupported HTTP version: HTTP/1.1 or HTTP/1.0 only.",
		frHeaderLine:         "Malformed header line.",
		frHeadEnd:            "Malformed request head: it must end with CRLF CRLF.",
		frBadContentLength:   "Ambiguous framing: invalid Content-Length.",
		frContentLengthAndTE: "Ambiguous framing: Content-Length together with Transfer-Encoding.",
		frTransferEncoding:   "Ambiguous framing: the only Transfer-Encoding accepted is chunked.",
		frChunk:              "Malformed chunked body.",
	}
	var out [frCount][]byte
	for r, m := range msg {
		body := `{"error":{"code":"bad_request","message":"` + m + `"}}`
		out[r] = []byte("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body)
	}
	return out
}()

// Scanner states.
const (
	fsStart       uint8 = iota // before a request line; empty lines are skipped
	fsMethod                   // in the method
	fsTarget                   // in the request-target
	fsVersion                  // in "HTTP/1.x" and its line end
	fsLine                     // start of a header (or trailer) line
	fsEndLF                    // CR of the empty line ending the head or trailer: LF must follow
	fsName                     // in a field name
	fsValue                    // in a field value
	fsBody                     // in a Content-Length body
	fsChunkSize                // in a chunk size
	fsChunkExt                 // in chunk extensions
	fsChunkSizeLF              // CR after the chunk-size line: LF must follow
	fsChunkData                // in chunk data
	fsChunkDataCR              // after chunk data: CR must follow
	fsChunkDataLF              // after chunk data and CR: LF must follow
)

// Kinds of header field.
const (
	fkOther uint8 = iota
	fkContentLength
	fkTransferEncoding
)

// framingScanner follows one connection's request stream. Only Read touches it.
type framingScanner struct {
	st        uint8
	kind      uint8 // field being read
	trailer   bool  // in the trailer section of a chunked body
	begun     bool  // in fsStart: a byte of the next request (an empty line) has passed
	seenCL    bool
	seenTE    bool
	cr        bool // the last byte of the current line was CR
	crlf      bool // the last complete line ended with CRLF
	nameLen   uint8
	valLen    uint8
	pos       uint8 // in the method or version
	hexDigits uint8
	name      [framingNameCap]byte // lower-cased start of the field name
	val       [framingValueCap]byte
	method    [7]byte
	line      int   // bytes of the current chunk-size line
	remain    int64 // bytes of body or chunk data to pass
	clen      int64
	// reqStart is where, in the buffer being scanned, the request being read began, or
	// -1 if it began in an earlier read (part of it has been handed over).
	reqStart int
}

var framingVersionPrefix = []byte("HTTP/1.")

// framingTchar marks the token characters of RFC 9110 section 5.6.2.
var framingTchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func framingHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// mid reports whether the stream is inside a request (head or body).
func (f *framingScanner) mid() bool { return f.st != fsStart || f.begun }

// scan checks b, the next bytes of the stream. It returns -1 if all of them may pass, or
// the index of the byte at which the stream is refused and why.
func (f *framingScanner) scan(b []byte) (int, uint8) {
	i := 0
	for i < len(b) {
		switch f.st {
		case fsBody:
			n := len(b) - i
			if int64(n) >= f.remain {
				i += int(f.remain)
				f.remain = 0
				f.reset()
				f.reqStart = i
				continue
			}
			f.remain -= int64(n)
			return -1, 0
		case fsChunkData:
			n := len(b) - i
			if int64(n) >= f.remain {
				i += int(f.remain)
				f.remain = 0
				f.st = fsChunkDataCR
				continue
			}
			f.remain -= int64(n)
			return -1, 0
		case fsValue:
			if f.kind == fkOther {
				i += f.value(b[i:])
				continue
			}
		case fsTarget: // the run of target bytes; the delimiter goes to step
			j := i
			for j < len(b) && b[j] != ' ' && b[j] != '\n' {
				j++
			}
			if j > i {
				i = j
				continue
			}
		case fsName: // the run of token bytes; the colon (or anything else) goes to step
			j := i
			for j < len(b) && framingTchar[b[j]] {
				j++
			}
			if j > i {
				k := int(f.nameLen)
				for _, c := range b[i:min(j, i+len(f.name)-min(k, len(f.name)))] {
					f.name[k] = c | 0x20 // lower case for letters; other tchars never match
					k++
				}
				f.nameLen = uint8(min(int(f.nameLen)+j-i, 255))
				i = j
				continue
			}
		}
		if why, bad := f.step(b[i]); bad {
			return i, why
		}
		i++
		if !f.mid() {
			f.reqStart = i // a request ended with this byte
		}
	}
	return -1, 0
}

// value passes the value of a field whose content does not matter for framing, up to and
// including its LF, and returns the bytes consumed. fasthttp refuses the bytes a value
// must not hold (NUL, a bare CR, other controls) itself.
func (f *framingScanner) value(b []byte) int {
	span, lf := b, false
	if j := bytes.IndexByte(b, '\n'); j >= 0 {
		span, lf = b[:j], true
	}
	if n := len(span); n > 0 {
		f.cr = span[n-1] == '\r'
	}
	if !lf {
		return len(b)
	}
	f.crlf, f.st = f.cr, fsLine
	return len(span) + 1
}

// step consumes one byte outside bodies and plain field values.
func (f *framingScanner) step(c byte) (uint8, bool) {
	switch f.st {
	case fsChunkSize, fsChunkExt, fsChunkSizeLF:
		f.line++
		if f.line > framingMaxChunkLine {
			return frChunk, true
		}
	}
	switch f.st {
	case fsStart:
		f.begun = true
		if c != '\r' && c != '\n' { // empty lines before the request line are skipped
			f.method[0], f.pos = c, 1
			f.st = fsMethod
		}
	case fsMethod:
		switch {
		case c == ' ':
			if !framingKnownMethod(f.method[:f.pos]) {
				return frMethod, true
			}
			f.st = fsTarget
		case c == '\n':
			return frRequestLine, true
		case int(f.pos) == len(f.method):
			return frMethod, true
		default:
			f.method[f.pos] = c
			f.pos++
		}
	case fsTarget:
		switch c {
		case ' ':
			f.st, f.pos = fsVersion, 0
		case '\n':
			return frVersion, true // no version
		}
	case fsVersion: // "HTTP/1.0" or "HTTP/1.1", then CRLF or LF
		n := uint8(len(framingVersionPrefix))
		switch {
		case f.pos < n:
			if c != framingVersionPrefix[f.pos] {
				return frVersion, true
			}
			f.pos++
		case f.pos == n:
			if c != '0' && c != '1' {
				return frVersion, true
			}
			f.pos++
		case c == '\r' && f.pos == n+1:
			f.pos++
		case c == '\n':
			f.crlf, f.st = f.pos == n+2, fsLine
		default:
			return frVersion, true
		}
	case fsLine:
		switch {
		case c == '\r':
			f.st = fsEndLF
		case c == '\n':
			// fasthttp waits for a CRLF CRLF somewhere in its buffer before it takes a
			// bare-LF empty line for the end of a head: alone, such a request would hang
			// until the read timeout.
			return frHeadEnd, true
		case c == '0' && f.trailer:
			// A trailer line that starts with "0" reads, to a lenient peer, as a repeated
			// last chunk; no client sends one.
			return frChunk, true
		case framingTchar[c]:
			f.name[0], f.nameLen = c|0x20, 1
			f.st = fsName
		default: // obs-fold, whitespace before the first field, an empty name, a CTL
			return frHeaderLine, true
		}
	case fsEndLF:
		switch {
		case c != '\n':
			return frHeaderLine, true
		case !f.crlf: // as a bare-LF empty line above
			return frHeadEnd, true
		}
		return f.endHead()
	case fsName:
		switch {
		case framingTchar[c]:
			if int(f.nameLen) < len(f.name) {
				f.name[f.nameLen] = c | 0x20 // lower case for letters; other tchars never match
			}
			if f.nameLen < 255 {
				f.nameLen++
			}
		case c == ':':
			f.kind = fkOther
			if !f.trailer {
				f.kind = framingFieldKind(f.name[:min(int(f.nameLen), len(f.name))], f.nameLen)
			}
			f.valLen, f.cr = 0, false
			f.st = fsValue
		default: // whitespace before the colon or inside the name, a line without a colon, a CTL
			return frHeaderLine, true
		}
	case fsValue: // Content-Length or Transfer-Encoding
		switch c {
		case '\n':
			return f.endField()
		case ' ', '\t':
			if f.valLen == 0 {
				break // leading whitespace
			}
			fallthrough
		default:
			if int(f.valLen) == len(f.val) {
				if f.kind == fkContentLength {
					return frBadContentLength, true
				}
				return frTransferEncoding, true
			}
			f.val[f.valLen] = c
			f.valLen++
		}
	case fsChunkSize:
		if v, ok := framingHex(c); ok {
			if f.hexDigits == framingMaxHexDigits {
				return frChunk, true
			}
			f.remain = f.remain<<4 | int64(v)
			f.hexDigits++
			break
		}
		if f.hexDigits == 0 {
			return frChunk, true
		}
		switch c {
		case '\r':
			f.st = fsChunkSizeLF
		case ';', ' ', '\t':
			f.st = fsChunkExt
		default:
			return frChunk, true
		}
	case fsChunkExt:
		switch c {
		case '\r':
			f.st = fsChunkSizeLF
		case '\n', 0:
			return frChunk, true
		}
	case fsChunkSizeLF:
		if c != '\n' {
			return frChunk, true
		}
		if f.remain == 0 { // last chunk: the trailer section follows
			f.trailer, f.crlf = true, true
			f.st = fsLine
			break
		}
		f.st = fsChunkData
	case fsChunkDataCR:
		if c != '\r' {
			return frChunk, true
		}
		f.st = fsChunkDataLF
	case fsChunkDataLF:
		if c != '\n' {
			return frChunk, true
		}
		f.st, f.hexDigits, f.line = fsChunkSize, 0, 0
	}
	return 0, false
}

// endField checks the value of a Content-Length or Transfer-Encoding field, which the
// scanner needs to follow the body.
func (f *framingScanner) endField() (uint8, bool) {
	f.st = fsLine
	v := f.val[:f.valLen]
	f.crlf = len(v) > 0 && v[len(v)-1] == '\r'
	if f.crlf {
		v = v[:len(v)-1]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	switch f.kind {
	case fkContentLength:
		// A second Content-Length replaces the first: fasthttp refuses the request.
		if len(v) == 0 || len(v) > framingMaxCLDigits {
			return frBadContentLength, true
		}
		var n int64
		for _, d := range v {
			if d < '0' || d > '9' {
				return frBadContentLength, true
			}
			n = n*10 + int64(d-'0')
		}
		f.seenCL, f.clen = true, n
	case fkTransferEncoding:
		// fasthttp refuses any coding but chunked and identity, a second field, and the
		// field in an HTTP/1.0 request; identity it ignores, reading no body at all.
		if !framingEqualFold(v, "chunked") {
			return frTransferEncoding, true
		}
		f.seenTE = true
	}
	return 0, false
}

// endHead decides the framing of the body once the head (or the trailer) is complete.
func (f *framingScanner) endHead() (uint8, bool) {
	if f.trailer {
		f.reset()
		return 0, false
	}
	switch {
	case f.seenCL && f.seenTE:
		// fasthttp reads such a request as chunked and serves it, then closes; a peer
		// that goes by Content-Length forwards a different body.
		return frContentLengthAndTE, true
	case f.seenTE:
		f.st, f.remain, f.hexDigits, f.line = fsChunkSize, 0, 0, 0
	case f.clen > 0:
		f.st, f.remain = fsBody, f.clen
	default:
		f.reset()
	}
	return 0, false
}

func (f *framingScanner) reset() {
	f.st, f.begun, f.trailer = fsStart, false, false
	f.seenCL, f.seenTE, f.clen = false, false, 0
}

func framingFieldKind(name []byte, n uint8) uint8 {
	switch {
	case n == 14 && string(name) == "content-length":
		return fkContentLength
	case n == 17 && string(name) == "transfer-encoding":
		return fkTransferEncoding
	}
	return fkOther
}

// framingKnownMethod: fasthttp accepts any token as a method and Fiber answers an unknown
// one with a plain-text 400 on a connection it keeps open.
func framingKnownMethod(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH":
		return true
	}
	return false
}

func framingEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != s[i] {
			return false
		}
	}
	return true
}
