package notify

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"time"
)

// message is one reminder to send.
type message struct {
	kind  Kind
	queue string
	to    string
	link  string
	until time.Time // when the link expires
}

// compose writes the reminder as an RFC 5322 message: plain text, UTF-8, quoted-printable,
// marked Auto-Submitted (no vacation replies). The text is English.
func compose(m message, from *mail.Address, domain string, now time.Time) []byte {
	var subject, body string
	switch m.kind {
	case Near:
		subject = "Nearly your turn in the waiting room: " + m.queue
		body = "You are near the front of the line \"" + m.queue + "\".\r\n\r\n" +
			"Keep the waiting page open, or go back to it with this link (it works once, on any device, until " +
			m.until.UTC().Format("2006-01-02 15:04 MST") + "):\r\n\r\n" + m.link + "\r\n\r\n" +
			"You will get one more message when it is your turn.\r\n"
	default:
		subject = "It is your turn: " + m.queue
		body = "It is your turn in the line \"" + m.queue + "\".\r\n\r\n" +
			"Open this link to continue to the shop (it works once, on any device, until " +
			m.until.UTC().Format("2006-01-02 15:04 MST") + ", when your turn ends):\r\n\r\n" + m.link + "\r\n"
	}
	body += "\r\nYou get this message because this address was given on the waiting page. It is deleted when your place ends.\r\n"
	var id [12]byte
	_, _ = rand.Read(id[:])
	var b bytes.Buffer
	h := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	h("From", from.String())
	h("To", "<"+m.to+">")
	h("Subject", mime.QEncoding.Encode("utf-8", subject))
	h("Date", now.Format(time.RFC1123Z))
	h("Message-ID", "<"+hex.EncodeToString(id[:])+"@"+domain+">")
	h("Auto-Submitted", "auto-generated")
	h("X-Waitroom-Reminder", string(m.kind))
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	w := quotedprintable.NewWriter(&b)
	_, _ = w.Write([]byte(body))
	_ = w.Close()
	return b.Bytes()
}
