package main

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// TestBrowserInvites drives the invite part of the admin dashboard in headless Chromium:
//   - the queue card shows priority_share and saves a new one with the other knobs;
//   - "Create codes" makes 3 bypass codes of 2 uses each: they are listed in the card and
//     by GET /admin/api/queues/vip/invites;
//   - a count over 10,000 is refused by the server (422 invalid_invites, field count) and
//     marked on its input;
//   - "Copy link" copies /q/vip?invite=<code> as an absolute URL, through the Clipboard API
//     and, where the page has none, through the selection fallback;
//   - "Revoke" takes a code off the list, and a join with it is refused (422
//     invite_invalid).
func TestBrowserInvites(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "admin-invites", 90*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/vip", map[string]any{"paused": true})

	b := startBrowser(t, ctx)
	adm := b.open(t, "admin")
	opened := time.Now() // the invite form's default expiry is 7 days from when its card was made
	adm.navigate(in.url + "/admin")
	adm.waitJS("the token form", 5*time.Second, `!document.getElementById('login').hidden`)
	adm.sendKeys("admin-token", adminToken)
	adm.click("admin-login-submit")
	adm.waitJS("vip's card with its priority share", 10*time.Second, `(() => {
		const card = document.querySelector('[data-testid=queue-card][data-queue=vip]');
		return card !== null && card.querySelector('[data-field=priority_share]').textContent.trim() === '50%' &&
			document.getElementById('q-vip-priority_share').value === '0.5';
	})()`)

	// 1. The priority share, saved with the other knobs (and the allowed origins and the
	// proof of work, edited on the same form).
	adminUIRetype(adm, "q-vip-priority_share", "0.3")
	adm.sendKeys("q-vip-allowed_origins", "https://Shop.Example\nhttp://127.0.0.2:8090")
	adm.click("q-vip-save")
	adm.waitJS("vip saved", 10*time.Second, `(() => {
		const card = document.querySelector('[data-testid=queue-card][data-queue=vip]');
		return card.querySelector('[data-testid=queue-msg]').dataset.state === 'ok' &&
			card.querySelector('[data-field=priority_share]').textContent.trim() === '30%';
	})()`)
	var st struct {
		Queues []struct {
			Name          string  `json:"name"`
			PriorityShare float64 `json:"priority_share"`
		} `json:"queues"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &st)
	if len(st.Queues) != 1 || st.Queues[0].PriorityShare != 0.3 {
		t.Fatalf("GET /admin/api/stats after the save: %+v, want priority_share 0.3", st.Queues)
	}
	var origins struct {
		Queues []struct {
			AllowedOrigins []string `json:"allowed_origins"`
		} `json:"queues"`
	}
	call(t, "GET", in.url+"/admin/api/stats", adminToken, nil, &origins)
	if o := origins.Queues[0].AllowedOrigins; len(o) != 2 || o[0] != "https://shop.example" || o[1] != "http://127.0.0.2:8090" {
		t.Fatalf("allowed_origins saved from the dashboard: %v", o)
	}

	// 2. Create 3 bypass codes of 2 uses.
	const card = `document.querySelector('[data-testid=queue-card][data-queue=vip]')`
	adm.activate(`[data-queue=vip] [data-testid=invites-toggle]`)
	adm.waitJS("the empty list", 5*time.Second, card+`.querySelector('[data-testid=invite-count-live]').textContent.startsWith('0 ')`)
	adminUIRetype(adm, "q-vip-invite-count", "3")
	adm.sendKeys("q-vip-invite-lane", "bypass")
	adminUIRetype(adm, "q-vip-invite-max_uses", "2")
	if v := adm.eval(`document.getElementById('q-vip-invite-lane').value`); v != "bypass" {
		t.Fatalf("lane select after typing bypass: %q", v)
	}
	adm.activate(`[data-queue=vip] [data-testid=invite-create]`)
	adm.waitJS("3 codes listed", 10*time.Second, card+`.querySelector('[data-testid=invite-msg]').dataset.state === 'ok' &&
		`+card+`.querySelectorAll('[data-testid=invite-row]').length === 3`)
	var list inviteListResp
	call(t, "GET", in.url+"/admin/api/queues/vip/invites", adminToken, nil, &list)
	if len(list.Invites) != 3 {
		t.Fatalf("GET invites: %d codes, want 3", len(list.Invites))
	}
	for i, inv := range list.Invites {
		row := adm.eval(fmt.Sprintf(`(() => { const r = %s.querySelectorAll('[data-testid=invite-row]')[%d];
			return r.dataset.code + '|' + r.children[1].textContent + '|' + r.children[2].textContent; })()`, card, i))
		if inv.Lane != "bypass" || inv.UsesLeft != 2 || row != inv.Code+"|Bypass|2" {
			t.Fatalf("code %d: API %+v, row %q", i, inv, row)
		}
		// The form shows the default to the minute: 7 days from when the card was made,
		// truncated.
		if exp, _ := time.Parse(time.RFC3339, inv.ExpiresAt); exp.Before(opened.Add(7*24*time.Hour-time.Minute)) || exp.After(time.Now().Add(7*24*time.Hour)) {
			t.Fatalf("code %d expires %s, want the form's default of 7 days (the card was made after %s)", i, inv.ExpiresAt, opened.UTC().Format(time.RFC3339))
		}
	}
	t.Logf("dashboard created %d bypass codes of 2 uses", len(list.Invites))

	// 3. A count the server refuses is marked on its input.
	adminUIRetype(adm, "q-vip-invite-count", "20000")
	adm.activate(`[data-queue=vip] [data-testid=invite-create]`)
	adm.waitJS("the field error on count", 10*time.Second, `(() => {
		const input = document.getElementById('q-vip-invite-count');
		const slot = document.getElementById(input.getAttribute('aria-describedby') || 'none');
		return input.getAttribute('aria-invalid') === 'true' && slot !== null && !slot.hidden &&
			slot.textContent.includes('count must be between 1 and 10000');
	})()`)

	// 4. Copy link: the Clipboard API (recorded here), then the fallback without it.
	first := list.Invites[0].Code
	link := in.url + "/q/vip?invite=" + first
	adm.eval(`(() => { window.__clip = ''; navigator.clipboard.writeText = (s) => { window.__clip = s; return Promise.resolve(); }; return ''; })()`)
	adm.activate(`[data-queue=vip] tr[data-code="` + first + `"] [data-testid=invite-copy]`)
	adm.waitJS("the link copied", 5*time.Second, `window.__clip === `+strconv.Quote(link)+` && `+
		card+`.querySelector('[data-testid=invite-msg]').dataset.state === 'ok'`)
	adm.eval(`(() => { window.__copied = '';
		Object.defineProperty(navigator, 'clipboard', { value: undefined, configurable: true });
		document.addEventListener('copy', () => { window.__copied = String(document.getSelection()) || document.activeElement.value; });
		return ''; })()`)
	adm.activate(`[data-queue=vip] tr[data-code="` + first + `"] [data-testid=invite-copy]`)
	adm.waitJS("the link copied by the fallback", 5*time.Second, `window.__copied === `+strconv.Quote(link))
	t.Logf("copied %s (Clipboard API and fallback)", link)
	// The link works: the waiting page answers it.
	if res := call(t, "GET", link, "", nil, nil); res.StatusCode != 200 {
		t.Fatalf("GET %s: %d", link, res.StatusCode)
	}

	// 5. Revoke it.
	adm.activate(`[data-queue=vip] tr[data-code="` + first + `"] [data-testid=invite-revoke]`)
	adm.waitJS("the confirmation", 5*time.Second, `document.getElementById('confirm-dialog').open`)
	adm.click("confirm-ok")
	adm.waitJS("the code gone from the list", 10*time.Second, card+`.querySelectorAll('[data-testid=invite-row]').length === 2 &&
		`+card+`.querySelector('tr[data-code="`+first+`"]') === null`)
	call(t, "GET", in.url+"/admin/api/queues/vip/invites", adminToken, nil, &list)
	if len(list.Invites) != 2 {
		t.Fatalf("GET invites after the revoke: %d codes, want 2", len(list.Invites))
	}
	var e fieldErrResp
	if res := call(t, "POST", in.url+"/api/queues/vip/join", "", map[string]any{"invite": first}, &e); res.StatusCode != 422 || e.Error.Code != "invite_invalid" {
		t.Fatalf("join with the revoked code: %d %+v", res.StatusCode, e)
	}
	var j laneJoinResp
	if res := call(t, "POST", in.url+"/api/queues/vip/join", "", map[string]any{"invite": list.Invites[0].Code}, &j); res.StatusCode != 201 || j.Lane != "bypass" {
		t.Fatalf("join with a listed code: %d %+v", res.StatusCode, j)
	}
	// 6. A buyer opens the other listed code's link: the waiting page joins the bypass lane and
	// says so.
	buyer := b.open(t, "invited-buyer")
	buyer.navigate(in.url + "/q/vip?invite=" + list.Invites[1].Code)
	buyer.waitJS("the bypass lane on the waiting page", 10*time.Second, `(() => {
		const l = document.getElementById('lane');
		return !!l && !l.hidden && l.dataset.lane === 'bypass' && l.textContent.length > 0;
	})()`)
	buyer.screenshot(shotDir(t), "9-invited-buyer")
	adm.screenshot(shotDir(t), "9-admin-invites")

	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
}
