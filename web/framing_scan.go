package web

// The framing scanner: a byte-at-a-time HTTP/1.1 request-stream follower used by the framing
// guard (framing.go), which says where every request ends and refuses ambiguous framing.

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
	frTwoContentLength
	frBadContentLength
	frContentLengthAndTE
	frTransferEncoding
	frTEInHTTP10
	frTwoHost
	frChunk
	frTooLarge
	frCount
)

var framingAnswers = func() [frCount][]byte {
	msg := [frCount]string{
		frRequestLine:        "Malformed request line.",
		frMethod:             "Unsupported request method.",
		frVersion:            "Unsupported HTTP version: HTTP/1.1 or HTTP/1.0 only.",
		frHeaderLine:         "Malformed header line.",
		frTwoContentLength:   "Ambiguous framing: more than one Content-Length header.",
		frBadContentLength:   "Ambiguous framing: invalid Content-Length.",
		frContentLengthAndTE: "Ambiguous framing: Content-Length together with Transfer-Encoding.",
		frTransferEncoding:   "Ambiguous framing: the only Transfer-Encoding accepted is chunked.",
		frTEInHTTP10:         "Ambiguous framing: Transfer-Encoding in an HTTP/1.0 request.",
		frTwoHost:            "More than one Host header.",
		frChunk:              "Malformed chunked body.",
		frTooLarge:           "The request headers are too large.",
	}
	var out [frCount][]byte
	for r, m := range msg {
		status, code := "400 Bad Request", "bad_request"
		if r == int(frTooLarge) {
			status, code = "431 Request Header Fields Too Large", "headers_too_large"
		}
		body := `{"error":{"code":"` + code + `","message":"` + m + `"}}`
		out[r] = []byte("HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body)
	}
	return out
}()

// Scanner states.
const (
	fsStart       uint8 = iota // before a request line; empty lines are skipped
	fsStartLF                  // CR of an empty line before the request line
	fsMethod                   // in the method
	fsTarget0                  // first byte of the request-target
	fsTarget                   // in the request-target
	fsVersion                  // in "HTTP/1.x"
	fsVersionLF                // after the version: CR seen, LF must follow
	fsLine                     // start of a header (or trailer) line
	fsEndLF                    // CR of the empty line ending the head or trailer: LF must follow
	fsName                     // in a field name
	fsValue                    // in a field value
	fsValueCR                  // CR in a field value: LF must follow
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
	fkHost
)

// framingScanner follows one connection's request stream. Only Read touches it.
type framingScanner struct {
	st        uint8
	kind      uint8 // field being read
	minor     uint8 // HTTP/1.minor of the current request
	trailer   bool  // in the trailer section of a chunked body
	seenCL    bool
	seenTE    bool
	seenHost  bool
	nameLen   uint8
	valLen    uint8
	pos       uint8 // in the method or version
	hexDigits uint8
	name      [framingNameCap]byte // lower-cased start of the field name
	val       [framingValueCap]byte
	method    [7]byte
	head      int   // bytes of the current head (or trailer section) so far
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
				f.done(i)
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
				at, why, n := f.value(b[i:])
				if at >= 0 {
					return i + at, why
				}
				i += n
				continue
			}
		case fsTarget0, fsTarget: // the run of target bytes; the delimiter goes to step
			j := i
			for j < len(b) && b[j] > ' ' && b[j] != 0x7f {
				j++
			}
			if j > i {
				if lim := framingMaxHead - f.head; lim < j-i {
					return i + lim, frTooLarge
				}
				f.head += j - i
				f.st, i = fsTarget, j
				continue
			}
		case fsVersion: // "HTTP/1.1" or "HTTP/1.0" whole; the line end goes to step
			if f.pos == 0 && len(b)-i > len(framingVersionPrefix) && framingMaxHead-f.head > len(framingVersionPrefix) &&
				string(b[i:i+len(framingVersionPrefix)]) == string(framingVersionPrefix) && (b[i+7] == '1' || b[i+7] == '0') {
				f.minor = b[i+7] - '0'
				f.pos = uint8(len(framingVersionPrefix)) + 1
				f.head += len(framingVersionPrefix) + 1
				i += len(framingVersionPrefix) + 1
				continue
			}
		case fsName: // the run of token bytes; the colon (or anything else) goes to step
			j := i
			for j < len(b) && framingTchar[b[j]] {
				j++
			}
			if j > i {
				if lim := framingMaxHead - f.head; lim < j-i {
					return i + lim, frTooLarge
				}
				f.head += j - i
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
		c := b[i]
		if why, bad := f.step(c); bad {
			return i, why
		}
		i++
		if f.st == fsStart && f.head == 0 {
			f.reqStart = i // a request ended with this byte
		}
	}
	return -1, 0
}

// value passes the value of a field whose content does not matter for framing: up to its
// LF with bytes.IndexByte, refusing NUL and a bare CR. It returns the refusal (index and
// reason) or -1 and the bytes consumed.
//
// The refusal is reported where the byte-by-byte states would report it, whatever the
// reads' boundaries: the first byte past framingMaxHead, a NUL, or the byte after a bare
// CR.
func (f *framingScanner) value(b []byte) (int, uint8, int) {
	span, lf := b, false
	if j := bytes.IndexByte(b, '\n'); j >= 0 {
		span, lf = b[:j], true
	}
	n := len(span)
	used := n
	if lf {
		used++
	}
	at, why := -1, uint8(0)
	if k := bytes.IndexByte(span, 0); k >= 0 {
		at, why = k, frHeaderLine
	}
	if k := bytes.IndexByte(span, '\r'); k >= 0 && k != n-1 && (at < 0 || k+1 < at) {
		at, why = k+1, frHeaderLine
	}
	if lim := framingMaxHead - f.head; lim < used && (at < 0 || lim <= at) {
		at, why = lim, frTooLarge
	}
	if at >= 0 {
		return at, why, 0
	}
	f.head += used
	switch {
	case lf:
		f.st = fsLine
	case n > 0 && span[n-1] == '\r':
		f.st = fsValueCR
	}
	return -1, 0, used
}

// step consumes one byte outside bodies and plain field values.
func (f *framingScanner) step(c byte) (uint8, bool) {
	switch f.st {
	case fsChunkSize, fsChunkExt, fsChunkSizeLF:
		f.line++
		if f.line > framingMaxChunkLine {
			return frChunk, true
		}
	case fsChunkDataCR, fsChunkDataLF:
	default:
		f.head++
		if f.head > framingMaxHead {
			return frTooLarge, true
		}
	}
	switch f.st {
	case fsStart:
		switch {
		case c == '\r':
			f.st = fsStartLF
		case c == '\n':
		case framingTchar[c]:
			f.method[0], f.pos = c, 1
			f.st = fsMethod
		default:
			return frRequestLine, true
		}
	case fsStartLF:
		if c != '\n' {
			return frRequestLine, true
		}
		f.st = fsStart
	case fsMethod:
		switch {
		case c == ' ':
			if !framingKnownMethod(f.method[:f.pos]) {
				return frMethod, true
			}
			f.st = fsTarget0
		case framingTchar[c]:
			if int(f.pos) == len(f.method) {
				return frMethod, true
			}
			f.method[f.pos] = c
			f.pos++
		default:
			return frRequestLine, true
		}
	case fsTarget0, fsTarget:
		switch {
		case c > ' ' && c != 0x7f:
			f.st = fsTarget
		case c == ' ' && f.st == fsTarget:
			f.st, f.pos = fsVersion, 0
		default:
			return frRequestLine, true
		}
	case fsVersion:
		switch {
		case int(f.pos) < len(framingVersionPrefix):
			if c != framingVersionPrefix[f.pos] {
				return frVersion, true
			}
			f.pos++
		case int(f.pos) == len(framingVersionPrefix):
			if c != '0' && c != '1' {
				return frVersion, true
			}
			f.minor = c - '0'
			f.pos++
		case c == '\r':
			f.st = fsVersionLF
		case c == '\n':
			f.st = fsLine
		default:
			return frVersion, true
		}
	case fsVersionLF:
		if c != '\n' {
			return frRequestLine, true
		}
		f.st = fsLine
	case fsLine:
		switch {
		case c == '\r':
			f.st = fsEndLF
		case c == '\n':
			return f.endHead()
		case c == '0' && f.trailer:
			// fasthttp v1.51 skips three bytes of a trailer section that starts with '0'
			// and would lose its place in the stream.
			return frChunk, true
		case framingTchar[c]:
			f.name[0], f.nameLen = c|0x20, 1
			f.st = fsName
		default: // obs-fold, whitespace before the first field, an empty name, a CTL
			return frHeaderLine, true
		}
	case fsEndLF:
		if c != '\n' {
			return frHeaderLine, true
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
			if f.kind == fkHost { // only counted: its value passes like any other
				if f.seenHost {
					return frTwoHost, true
				}
				f.seenHost, f.kind = true, fkOther
			}
			f.valLen = 0
			f.st = fsValue
		default: // whitespace before the colon, a line without one, a CTL
			return frHeaderLine, true
		}
	case fsValue: // Content-Length or Transfer-Encoding
		switch c {
		case '\n':
			return f.endField()
		case '\r':
			f.st = fsValueCR
		case 0:
			return frHeaderLine, true
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
	case fsValueCR:
		if c != '\n' {
			return frHeaderLine, true
		}
		if f.kind == fkOther {
			f.st = fsLine
			return 0, false
		}
		return f.endField()
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
			f.trailer, f.head = true, 0
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

// endField checks the value of a Content-Length or Transfer-Encoding field.
func (f *framingScanner) endField() (uint8, bool) {
	f.st = fsLine
	v := f.val[:f.valLen]
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	switch f.kind {
	case fkContentLength:
		if f.seenCL {
			return frTwoContentLength, true
		}
		f.seenCL = true
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
		f.clen = n
	case fkTransferEncoding:
		if f.seenTE {
			return frTransferEncoding, true
		}
		f.seenTE = true
		if !framingEqualFold(v, "chunked") {
			return frTransferEncoding, true
		}
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
		return frContentLengthAndTE, true
	case f.seenTE && f.minor == 0:
		return frTEInHTTP10, true
	case f.seenTE:
		f.st, f.remain, f.hexDigits, f.line = fsChunkSize, 0, 0, 0
	case f.clen > 0:
		f.st, f.remain = fsBody, f.clen
	default:
		f.reset()
	}
	return 0, false
}

// done ends a request whose body ended at b[i] (exclusive).
func (f *framingScanner) done(i int) {
	f.reset()
	f.reqStart = i
}

func (f *framingScanner) reset() {
	f.st, f.head, f.trailer = fsStart, 0, false
	f.seenCL, f.seenTE, f.seenHost, f.clen = false, false, false, 0
}

func framingFieldKind(name []byte, n uint8) uint8 {
	switch {
	case n == 14 && string(name) == "content-length":
		return fkContentLength
	case n == 17 && string(name) == "transfer-encoding":
		return fkTransferEncoding
	case n == 4 && string(name) == "host":
		return fkHost
	}
	return fkOther
}

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
