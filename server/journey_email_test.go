package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/freeport"
	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/notify/smtptest"
)

// TestJourneyEmailReminder (the e-mail reminder): Ana waits first in line on her desktop
// and leaves her address in the waiting page's field. The room's SMTP server (in-process,
// go-smtp) receives "nearly your turn" with a link. She opens the link on her phone (a
// second browser context: no cookie, no storage): the page offers a button and spends
// nothing by being opened; the button brings her place to the phone, which shows the same
// position. The same link opened again says it has been used. At her turn the second
// message's link brings the turn (the token and the order button) to the phone too. Her
// address is in no log line. axe runs at every state (the field saved, the link's page, the
// spent page, the restored place and turn).
func TestJourneyEmailReminder(t *testing.T) {
	t.Parallel()
	inbox := smtptest.StartInbox(t)
	port, err := freeport.Get()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx, in := browserInstance(t, "journey-email", 120*time.Second, map[string]string{"WR_ADDR": addr,
		"WR_PUBLIC_URL": "http://" + addr, "WR_SMTP_URL": "smtp://" + inbox.Addr + "?from=rooms%40example.com", "WR_NOTIFY_NEAR": "1"})
	// One buyer holds the one active place: Ana waits first in line until the cap is lifted.
	admittedUsers(t, in, "mail", 1)
	mustAdmin(t, in, "PUT", "/admin/api/queues/mail", map[string]any{"max_active": 1, "rate_per_second": 50, "token_ttl_seconds": 300})

	j := newJourney(t, ctx)
	ana := j.person("ana", journeyDesktop)
	phone := j.person("ana-phone", journeyPhone)

	// 1. Ana waits and gives her address.
	ana.navigate(in.url + "/q/mail?lang=en")
	ana.waitJS("first in line", 15*time.Second, `!document.getElementById('waiting').hidden &&
		document.getElementById('position').dataset.position === '1'`)
	const email = "ana.reminder@example.com"
	ana.do("type the address", 5*time.Second, chromedp.SendKeys(chromedp.ID("email-input"), email))
	ana.click("email-submit")
	ana.waitJS("the address saved", 10*time.Second, `document.getElementById('email-form').dataset.state === 'saved' &&
		document.getElementById('email-state').textContent.includes('`+email+`')`)
	j.state(ana, "email-saved")

	// 2. The near message arrives; its link opens on the phone.
	testwait.For(t, 30*time.Second, "the near message", func() bool { return len(inbox.Messages()) >= 1 })
	near := inbox.Messages()[0]
	if near.Header.Get("X-Waitroom-Reminder") != "near" || near.To != email {
		t.Fatalf("first message: kind %q to %q", near.Header.Get("X-Waitroom-Reminder"), near.To)
	}
	link := smtptest.LinkPattern.FindString(near.Body)
	t.Logf("near message: Subject %q, link %s", near.Header.Get("Subject"), link)
	phone.navigate(link)
	phone.waitJS("the link's page", 10*time.Second, `document.getElementById('back').dataset.state === 'live' &&
		document.getElementById('back-go') !== null`)
	j.state(phone, "reminder-link")
	phone.navigate(link) // opened again: still unspent (a GET spends nothing)
	phone.waitJS("the link's page again", 10*time.Second, `document.getElementById('back').dataset.state === 'live'`)
	phone.click("back-go")
	phone.waitJS("the place on the phone", 15*time.Second, `location.pathname === '/q/mail' &&
		!document.getElementById('waiting').hidden && document.getElementById('position').dataset.position === '1'`)
	j.state(phone, "place-restored")

	// 3. The same link again: used (the page answers 410, which the browser logs).
	phone.navigate(link)
	phone.waitJS("the spent page", 10*time.Second, `document.getElementById('back').dataset.state === 'spent'`)
	phone.expectConsole("the spent link's 410", func(text, url string) bool {
		return strings.Contains(text, "410") && strings.HasPrefix(url, link)
	})
	j.state(phone, "link-spent")

	// 4. The turn: the second message's link brings the token to the phone.
	mustAdmin(t, in, "PUT", "/admin/api/queues/mail", map[string]any{"max_active": 0})
	testwait.For(t, 30*time.Second, "the turn's message", func() bool { return len(inbox.Messages()) >= 2 })
	turn := inbox.Messages()[1]
	if turn.Header.Get("X-Waitroom-Reminder") != "turn" {
		t.Fatalf("second message: kind %q", turn.Header.Get("X-Waitroom-Reminder"))
	}
	turnLink := smtptest.LinkPattern.FindString(turn.Body)
	t.Logf("turn message: Subject %q, link %s", turn.Header.Get("Subject"), turnLink)
	phone.navigate(turnLink)
	phone.waitJS("the turn link's page", 10*time.Second, `document.getElementById('back').dataset.state === 'live'`)
	phone.click("back-go")
	phone.waitJS("the turn on the phone", 15*time.Second, `!document.getElementById('admitted').hidden &&
		document.getElementById('go-order').getAttribute('href') === '/q/mail/order'`)
	j.state(phone, "turn-restored")
	ana.waitJS("the turn on the desktop too", 15*time.Second, `!document.getElementById('admitted').hidden`)

	if logs := strings.ToLower(in.logs.String()); strings.Contains(logs, email) || strings.Contains(logs, "ana.reminder") {
		t.Error("the address is in a log line")
	}
}
