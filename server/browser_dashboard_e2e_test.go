package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBrowserDashboardConfirmations: the dashboard's one confirmation dialog.
//   - Which requests need it (admin.js confirmKind, the table every request of the page goes
//     through): removing a logo, revoking a code, rotating the key, pausing, closing, and an
//     emptied start of a scheduled queue ("start now") — not resuming, reopening, settings,
//     products, branding, invites, nor an emptied start of a queue that is not scheduled; an
//     unknown DELETE needs a kind no control gives (refused).
//   - By keyboard: Enter on "Remove the logo" opens the dialog naming the consequence, the
//     focus on Cancel; Escape cancels (the logo stays) and the focus returns to the button;
//     again, Tab to the confirm button and Enter removes it.
//   - The sale form with the start emptied on a scheduled queue asks too (it starts the
//     sale): Cancel keeps the schedule.
func TestBrowserDashboardConfirmations(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "dash-confirm", 120*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/eu", map[string]any{"rate_per_second": 2})
	mustAdmin(t, in, "PUT", "/admin/api/queues/kr", map[string]any{"rate_per_second": 2})
	mustAdmin(t, in, "PUT", "/admin/api/queues/kr", map[string]any{"starts_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	if res := call(t, "PUT", in.url+"/admin/api/queues/eu/logo", adminToken, brandingPNG(t, 60, 20), nil, "Content-Type", "image/png"); res.StatusCode >= 300 {
		t.Fatalf("upload eu's logo: %d", res.StatusCode)
	}
	b := startBrowser(t, ctx)
	adm := dropAdminPage(t, b, in, "")
	adm.waitJS("both cards, kr scheduled, eu's logo", 10*time.Second, dropCard("eu")+` !== null && `+dropCard("kr")+` !== null &&
		`+dropCard("kr")+`.querySelector('[data-field=draw]').dataset.value === 'scheduled' &&
		!`+dropCard("eu")+`.querySelector('[data-testid=brand-logo-remove]').hidden`)

	// 1. Which requests ask.
	for _, c := range []struct {
		method, path, body, want string
	}{
		{"PUT", "/admin/api/queues/eu", `{rate_per_second: 3, max_active: 10}`, ""},
		{"PUT", "/admin/api/queues/eu", `{paused: true}`, "pause"},
		{"PUT", "/admin/api/queues/eu", `{paused: false}`, ""},
		{"PUT", "/admin/api/queues/eu", `{closed: true}`, "close"},
		{"PUT", "/admin/api/queues/eu", `{closed: false}`, ""},
		{"PUT", "/admin/api/queues/eu", `{starts_at: null}`, ""}, // not scheduled: changes nothing
		{"PUT", "/admin/api/queues/eu", `{starts_at: '2099-01-01T00:00:00Z', method: 'random'}`, ""},
		{"PUT", "/admin/api/queues/eu", `{ends_at: null}`, ""},
		{"PUT", "/admin/api/queues/eu", `{brand_name: 'Acme'}`, ""},
		{"PUT", "/admin/api/queues/kr", `{starts_at: null, method: 'fifo'}`, "start_now"},
		{"PUT", "/admin/api/queues/kr", `{starts_at: '2099-01-01T00:00:00+09:00'}`, ""}, // moving the start keeps the commitment
		{"PUT", "/admin/api/queues/nowhere", `{starts_at: null}`, "start_now"},          // state unknown: asked
		{"PUT", "/admin/api/queues/newq", `{rate_per_second: 5}`, ""},
		{"PUT", "/admin/api/products/scarf", `{name: 'Scarf', price: 1290, currency: 'EUR', stock: 3, queue: 'eu'}`, ""},
		{"PUT", "/admin/api/queues/eu/logo", `undefined`, ""},
		{"DELETE", "/admin/api/queues/eu/logo", `undefined`, "remove_logo"},
		{"DELETE", "/admin/api/queues/eu/template", `undefined`, "remove_template"},
		{"POST", "/admin/api/queues/eu/template/preview", `undefined`, ""},
		{"POST", "/admin/api/queues/eu/invites", `{count: 2, lane: 'bypass'}`, ""},
		{"DELETE", "/admin/api/queues/eu/invites/abcdef", `undefined`, "revoke_invite"},
		{"POST", "/admin/api/keys/rotate", `undefined`, "rotate_key"},
		{"DELETE", "/admin/api/keys/some-kid", `undefined`, "revoke_key"},
		{"DELETE", "/admin/api/products/scarf", `undefined`, "delete"}, // no control sends it: refused
		{"GET", "/admin/api/stats", `undefined`, ""},
	} {
		got := adm.eval(fmt.Sprintf(`window.WaitRoomAdmin.confirmKind(%q, %q, %s)`, c.method, c.path, c.body))
		if got != c.want {
			t.Errorf("confirmKind(%s %s %s) = %q, want %q", c.method, c.path, c.body, got, c.want)
		}
	}
	if kinds := adm.eval(`window.WaitRoomAdmin.kinds.slice().sort().join(' ')`); kinds != "close pause remove_logo remove_template revoke_invite revoke_key rotate_key start_now" {
		t.Errorf("the kinds that ask: %s", kinds)
	}

	// 2. By keyboard: Enter opens, Escape cancels and gives the focus back.
	remove := dropCard("eu") + `.querySelector('[data-testid=brand-logo-remove]')`
	adm.do("Enter on Remove the logo", 5*time.Second, chromedp.Focus(chromedp.JSPath(remove)), chromedp.KeyEvent(kb.Enter))
	adm.waitJS("the dialog, the focus on Cancel", 5*time.Second, `(() => {
		const d = document.getElementById('confirm-dialog');
		return d.open && d.dataset.kind === 'remove_logo' && document.activeElement === document.getElementById('confirm-cancel') &&
			!document.getElementById('confirm-undo').hidden;
	})()`)
	text := adm.eval(`document.getElementById('confirm-text').textContent`)
	if !strings.Contains(text, "logo of queue eu") || !strings.Contains(text, "upload the file again") {
		t.Errorf("the dialog says %q: want the queue and the consequence", text)
	}
	adm.do("Escape", 5*time.Second, chromedp.KeyEvent(kb.Escape))
	adm.waitJS("closed, the focus back", 5*time.Second, `!document.getElementById('confirm-dialog').open && document.activeElement === `+remove)
	if st := brandingStats(t, in, "eu"); st.LogoURL == nil {
		t.Fatal("Escape removed the logo")
	}
	adm.do("Enter again, Tab, Enter", 5*time.Second, chromedp.KeyEvent(kb.Enter))
	adm.waitJS("the dialog again", 5*time.Second, `document.getElementById('confirm-dialog').open && document.activeElement === document.getElementById('confirm-cancel')`)
	adm.do("Tab to the confirm button", 5*time.Second, chromedp.KeyEvent(kb.Tab))
	if id := adm.eval(`document.activeElement.id`); id != "confirm-ok" {
		t.Fatalf("Tab from Cancel went to #%s, want #confirm-ok", id)
	}
	if label := adm.eval(`document.getElementById('confirm-ok').textContent`); label != "Remove the logo" {
		t.Errorf("the confirm button says %q", label)
	}
	adm.do("Enter on confirm", 5*time.Second, chromedp.KeyEvent(kb.Enter))
	adm.waitJS("the logo removed", 10*time.Second, `!document.getElementById('confirm-dialog').open && `+remove+`.hidden`)
	if st := brandingStats(t, in, "eu"); st.LogoURL != nil {
		t.Fatalf("logo_url %v after the confirmed removal", *st.LogoURL)
	}
	t.Logf("remove the logo asked %q; Escape kept it, Tab+Enter removed it", text)

	// 3. The sale form with the start emptied on the scheduled queue kr asks too.
	adm.eval(`(() => { const e = document.getElementById('q-kr-starts_at'); e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true})); return ''; })()`)
	adm.click("q-kr-save-sale")
	text = opsDialog(adm, "does not cancel a scheduled sale", false)
	if !strings.Contains(text, "Start the sale of queue kr now") {
		t.Errorf("the emptied start asks %q", text)
	}
	if st := ddStats(t, in, "kr"); st.StartsAt == nil || st.Draw != "scheduled" {
		t.Fatalf("after Cancel: %+v, want kr still scheduled", st)
	}
	if state := adm.eval(dropCard("kr") + `.querySelector('[data-testid=sale-msg]').dataset.state || ''`); state != "" {
		t.Fatalf("after Cancel the sale form says %q: a change was sent", state)
	}
	t.Logf("an emptied start of a scheduled sale asks %q", text)
	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
}

// TestBrowserDashboardProducts: products on the dashboard in their currencies.
//   - The new-product form offers the server's currency list and starts with none when the
//     products differ (EUR and KRW here): a price without a currency is refused on the
//     currency; EUR 12.345 is refused on the price (two decimals), 12.3 is saved as 1230 and
//     the row shows 12.30 and "€12.30"; the product is listed under its queue.
//   - The API's 422s land next to their field in a row: an empty name (name), a currency the
//     server does not know (currency, its message listing the allowed codes), a stock of -1
//     (stock); nothing is saved.
//   - Moving a product to another queue moves its row to that queue's group.
//   - A logo over 100 KiB is refused on the logo field before anything is sent (the brand
//     name typed with it is not saved either).
func TestBrowserDashboardProducts(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "dash-products", 120*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/eu", map[string]any{"rate_per_second": 2})
	mustAdmin(t, in, "PUT", "/admin/api/queues/kr", map[string]any{"rate_per_second": 2})
	mustAdmin(t, in, "PUT", "/admin/api/products/scarf", map[string]any{"name": "Scarf", "price": 4500, "currency": "EUR", "stock": 3, "queue": "eu"})
	mustAdmin(t, in, "PUT", "/admin/api/products/hanbok", map[string]any{"name": "Hanbok", "price": 189000, "currency": "KRW", "stock": 3, "queue": "kr"})
	b := startBrowser(t, ctx)
	adm := dropAdminPage(t, b, in, "")
	adm.waitJS("the rows in their groups", 10*time.Second, `(() => {
		const g = (id) => { const tr = document.querySelector('tr[data-product=' + id + ']'); return tr && tr.closest('tbody').dataset.group; };
		return g('scarf') === 'eu' && g('hanbok') === 'kr' && document.getElementById('p-hanbok-price').value === '189000' &&
			document.getElementById('p-scarf-price').value === '45.00' && document.getElementById('new-product-currency').options.length > 40;
	})()`)
	if cur := adm.eval(`document.getElementById('new-product-currency').value`); cur != "" {
		t.Fatalf("with EUR and KRW products the form starts with currency %q, want none chosen", cur)
	}
	heads := adm.eval(`[...document.querySelectorAll('#products tbody th[scope=rowgroup]')].map((th) => th.textContent).join(' | ')`)
	if heads != "Sold through queue eu | Sold through queue kr" {
		t.Errorf("group headings %q", heads)
	}

	// 1. A new product: no currency, then too many decimals, then right.
	adm.sendKeys("new-product-id", "gloves")
	adm.sendKeys("new-product-name", "Gloves")
	adm.sendKeys("new-product-price", "12.345")
	adm.sendKeys("new-product-queue", "eu")
	create := func() {
		adm.activate(`#new-product button[type=submit]`)
	}
	fieldError := func(id, contains string) string {
		adm.waitJS("the error on #"+id, 10*time.Second, fmt.Sprintf(`(() => {
			const e = document.getElementById(%q);
			const slot = document.getElementById(e.getAttribute('aria-describedby') || 'none');
			return e.getAttribute('aria-invalid') === 'true' && slot !== null && !slot.hidden && slot.textContent.includes(%q);
		})()`, id, contains))
		return adm.eval(fmt.Sprintf(`document.getElementById(document.getElementById(%q).getAttribute('aria-describedby')).textContent`, id))
	}
	create()
	t.Logf("no currency: %q", fieldError("new-product-currency", "Choose the currency"))
	adm.sendKeys("new-product-currency", "EUR")
	create()
	t.Logf("12.345 EUR: %q", fieldError("new-product-price", "EUR prices have at most 2 decimals"))
	if res := call(t, "GET", in.url+"/api/products/gloves", "", nil, nil); res.StatusCode != 404 {
		t.Fatalf("gloves exists after the refusals: %d", res.StatusCode)
	}
	adm.do("retype the price", 5*time.Second, chromedp.SetValue(chromedp.ID("new-product-price"), ""), chromedp.SendKeys(chromedp.ID("new-product-price"), "12.3"))
	create()
	adm.waitJS("gloves under eu at 12.30", 10*time.Second, `(() => {
		const tr = document.querySelector('tr[data-product=gloves]');
		return tr !== null && tr.closest('tbody').dataset.group === 'eu' && document.getElementById('p-gloves-price').value === '12.30' &&
			tr.querySelector('[data-testid=price-shows]').textContent.includes('€12.30');
	})()`)
	var p j5Product
	if call(t, "GET", in.url+"/api/products/gloves", "", nil, &p); p.Price != 1230 || p.Currency != "EUR" {
		t.Fatalf("gloves: %+v, want 1230 EUR", p)
	}

	// 2. The API's refusals next to their fields in a row; nothing saved.
	refuse := func(setup, id, contains string) {
		t.Helper()
		adm.eval(`(() => { ` + setup + `; return ''; })()`)
		adm.click("p-scarf-save")
		t.Logf("%s: %q next to the field, row says %q", id, fieldError(id, contains),
			adm.eval(`document.querySelector('tr[data-product=scarf] [data-testid=product-msg]').textContent`))
	}
	refuse(`const e = document.getElementById('p-scarf-name'); e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true}))`, "p-scarf-name", "name must be")
	refuse(`document.getElementById('p-scarf-name').value = 'Scarf';
		const s = document.getElementById('p-scarf-currency'); s.add(new Option('XXX', 'XXX')); s.value = 'XXX'; s.dispatchEvent(new Event('change', {bubbles: true}))`,
		"p-scarf-currency", "ISO 4217")
	refuse(`const s = document.getElementById('p-scarf-currency'); s.value = 'EUR';
		const e = document.getElementById('p-scarf-stock'); e.value = '-1'; e.dispatchEvent(new Event('input', {bubbles: true}))`, "p-scarf-stock", "stock must be")
	if call(t, "GET", in.url+"/api/products/scarf", "", nil, &p); p.Name != "Scarf" || p.Currency != "EUR" || p.Stock != 3 || p.Price != 4500 {
		t.Fatalf("scarf after the refusals: %+v", p)
	}

	// 3. To another queue: the row moves to that group.
	adm.eval(`(() => { document.getElementById('p-scarf-stock').value = '3'; const s = document.getElementById('p-scarf-queue'); s.value = 'kr';
		s.dispatchEvent(new Event('change', {bubbles: true})); return ''; })()`)
	adm.click("p-scarf-save")
	adm.waitJS("scarf under kr", 10*time.Second, `document.querySelector('tr[data-product=scarf]').closest('tbody').dataset.group === 'kr' &&
		document.querySelector('tr[data-product=scarf] [data-testid=product-msg]').dataset.state === 'ok'`)
	if call(t, "GET", in.url+"/api/products/scarf", "", nil, &p); p.Queue == nil || *p.Queue != "kr" || p.Price != 4500 || p.Currency != "EUR" {
		t.Fatalf("scarf after the move: %+v", p)
	}
	adm.screenshot(shotDir(t), "dashboard-products")

	// 4. A logo over 100 KiB: refused on its field, nothing sent.
	big := filepath.Join(t.TempDir(), "big.png")
	data := append(brandingPNG(t, 10, 10), make([]byte, 101*1024)...)
	if err := os.WriteFile(big, data, 0o644); err != nil {
		t.Fatal(err)
	}
	adm.do("choose the big logo", 5*time.Second, chromedp.SetValue(chromedp.ID("q-eu-brand-brand_name"), "Euro shop"),
		chromedp.SetUploadFiles(chromedp.ID("q-eu-brand-logo"), []string{big}))
	adm.click("q-eu-brand-save")
	t.Logf("a %d-byte logo: %q", len(data), fieldError("q-eu-brand-logo", "at most 100 KiB"))
	if st := brandingStats(t, in, "eu"); st.BrandName != "" || st.LogoURL != nil {
		t.Fatalf("eu's branding after the refused logo: %+v", st)
	}
	for _, p := range b.pages {
		p.checkConsole()
	}
	logServerErrors(t, in)
}
