package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// ownPageJourney is the shop's own waiting page the operator writes in the journey: its own
// header and words, the position repeated in a slot, the room's live part in the middle.
const ownPageJourney = `<!doctype html>
<html lang="{{.Lang}}" dir="{{.Dir}}">
<head>{{.Head}}<title>{{.Brand}} — {{t "queue_title"}}</title></head>
<body class="shop-page">
<header class="shop-header"><p class="shop-brand">{{.Brand}}</p>
  <p class="shop-pos">{{t "stat_ahead"}}: {{slot "ahead"}} · {{slot "state"}}</p></header>
<main id="main">
  <h1 class="shop-title">The winter drop at {{.Brand}}</h1>
  {{.Room}}
</main>
{{.Scripts}}
</body>
</html>
`

// TestJourneyOwnPage (page templates): Olga, an operator, opens the queue's own page in the
// dashboard, tries a template with an inline script (refused with its line and reason), then
// previews the shop's template — rendered in a frame sandboxed without scripts — and saves
// it. Ana, a buyer behind two others, gets the shop's page: its header and words, the live
// position in the room and the slot that repeats it, the line moving, and her turn with the
// order link. The page carries the shop's CSP. Olga goes back to the default page, and a new
// load shows it.
func TestJourneyOwnPage(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "journey-own", 90*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/shop", map[string]any{"rate_per_second": 0, "brand_name": "Sample Shop"})
	joinUsers(t, in, "shop", 2, 2) // two buyers ahead of Ana

	j := newJourney(t, ctx)
	olga := j.person("olga", journeyDesktop)
	ana := j.person("ana", journeyPhone)

	// 1. Olga opens the queue's own page in the dashboard: it shows the default page.
	olga.navigate(in.url + "/admin?lang=en")
	signInDashboard(olga.browserPage, adminToken)
	card := `[data-testid="queue-card"][data-queue="shop"] `
	olga.activate(card + `[data-testid="template-toggle"]`)
	olga.waitJS("the default page said", 10*time.Second, fmt.Sprintf(`document.querySelector(%q).textContent === 'This queue shows the default page.'`, card+`[data-testid="template-msg"]`))

	paste := func(src string) {
		olga.eval(fmt.Sprintf(`(() => { const e = document.getElementById('q-shop-tpl-template'); e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); return ''; })()`, src))
	}
	// 2. An inline script is refused with its line and reason, next to the editor.
	paste(strings.Replace(ownPageJourney, "{{.Room}}", "{{.Room}}\n<script>alert(1)</script>", 1))
	olga.activate(card + `[data-testid="template-preview"]`)
	olga.waitJS("the refusal next to the editor", 10*time.Second, `(() => {
		const e = document.getElementById('q-shop-tpl-template');
		const err = document.querySelector('[data-error-for="template"]');
		return e.getAttribute('aria-invalid') === 'true' && !err.hidden && err.textContent.includes('line 10') && err.textContent.includes('inline script');
	})()`)
	j.state(olga, "template-refused")

	// 3. The shop's template: previewed in a sandboxed frame, then saved.
	paste(ownPageJourney)
	olga.activate(card + `[data-testid="template-preview"]`)
	olga.waitJS("the preview in a frame without scripts", 10*time.Second, fmt.Sprintf(`(() => {
		const f = document.querySelector(%q);
		return !f.hidden && f.getAttribute('sandbox') === '' && f.srcdoc.includes('The winter drop at Sample Shop') && f.srcdoc.includes('id="room"');
	})()`, card+`[data-testid="template-frame"]`))
	j.state(olga, "template-preview")
	olga.activate(card + `[data-testid="template-save"]`)
	olga.waitJS("saved as version 1", 10*time.Second, fmt.Sprintf(`document.querySelector(%q).textContent === 'Saved: version 1 is live.'`, card+`[data-testid="template-msg"]`))

	// 4. Ana's waiting page is the shop's: its words, her live place, the slot beside it.
	res := call(t, "GET", in.url+"/q/shop", "", nil, nil)
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe") {
		t.Errorf("the own page's CSP: %q", csp)
	}
	ana.navigate(in.url + "/q/shop?lang=en")
	ana.waitJS("third in line on the shop's page", 15*time.Second, `document.querySelector('.shop-title').textContent === 'The winter drop at Sample Shop' &&
		document.querySelector('.shop-brand').textContent === 'Sample Shop' &&
		!document.getElementById('waiting').hidden && document.getElementById('position').dataset.position === '3' &&
		document.querySelector('[data-wr-slot="ahead"]').textContent === document.getElementById('ahead').textContent &&
		document.getElementById('ahead').textContent === '2'`)
	j.state(ana, "own-page-waiting")

	// 5. The line moves; the slot follows; the turn comes with the order link.
	mustAdmin(t, in, "PUT", "/admin/api/queues/shop", map[string]any{"rate_per_second": 1})
	ana.waitJS("the turn on the shop's page", 30*time.Second, `!document.getElementById('admitted').hidden &&
		document.querySelector('[data-wr-slot="state"]').textContent === document.getElementById('admitted-title').textContent.trim() &&
		document.getElementById('go-order').getAttribute('href') === '/q/shop/order'`)
	j.state(ana, "own-page-turn")

	// 6. Back to the default page (asked first); the next load shows it.
	olga.activate(card + `[data-testid="template-remove"]`)
	olga.waitJS("the confirmation dialog", 5*time.Second, `document.getElementById('confirm-dialog').open`)
	olga.click("confirm-ok")
	olga.waitJS("the default page again", 10*time.Second, fmt.Sprintf(`document.querySelector(%q).textContent === 'This queue shows the default page.'`, card+`[data-testid="template-msg"]`))
	ana.navigate(in.url + "/q/shop?lang=en")
	ana.waitJS("the default page", 10*time.Second, `document.querySelector('.shop-title') === null && document.querySelector('h1 .queue-name').textContent === 'shop'`)
}
