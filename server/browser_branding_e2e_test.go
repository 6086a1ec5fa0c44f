package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserBranding: in headless Chromium a branded queue's waiting page shows the brand
// name, the logo (loaded: naturalWidth > 0), the message as text, the support link, and the
// accent colour on the buttons (computed background = the colour) — all under the page's
// CSP, which forbids inline styles. The order page carries the same branding. Screenshots at
// 1280 px and 375 px go to /tmp/wr-shots/branding-*.png.
func TestBrowserBranding(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "brand-browser", 60*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/brand", map[string]any{
		"rate_per_second": 0, "brand_name": "Acme Shoes", "brand_color": "#8a1c7c",
		"brand_message": "Drop at ten. One pair each. <b>not bold</b>", "support_url": "/help",
	})
	res := call(t, "PUT", in.url+"/admin/api/queues/brand/logo", adminToken, brandingPNG(t, 120, 40), nil, "Content-Type", "image/png")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("upload the logo: %d", res.StatusCode)
	}
	if err := os.MkdirAll(dropShotsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := startBrowser(t, ctx)
	shots := newDropShots(t)
	p := b.open(t, "buyer")
	p.navigate(in.url + "/q/brand")
	p.waitJS("the branded page, the logo loaded", 10*time.Second, `(() => {
		const l = document.getElementById('brand-logo');
		return l !== null && l.complete && l.naturalWidth > 0 && !document.getElementById('waiting').hidden;
	})()`)

	type view struct {
		Name, Message, Support, SupportHref, LogoAlt, ButtonBG, Accent string
		LogoWidth                                                      int
		BoldTags                                                       int
	}
	// The button: the page's primary button (the leave/order buttons may be hidden while
	// waiting, so a probe button of the same class is put in the main area).
	v, err := evalJS[view](p, `(() => {
		const $ = (id) => document.getElementById(id);
		const probe = document.createElement('button');
		probe.className = 'button button-primary';
		probe.textContent = 'probe';
		document.getElementById('main').appendChild(probe);
		const bg = getComputedStyle(probe).backgroundColor;
		probe.remove();
		return {Name: $('brand-name').textContent, Message: $('brand-message').textContent,
			Support: $('brand-support').textContent, SupportHref: $('brand-support').getAttribute('href'),
			LogoAlt: $('brand-logo').alt, LogoWidth: $('brand-logo').naturalWidth, ButtonBG: bg,
			Accent: getComputedStyle(document.body).getPropertyValue('--brand').trim(),
			BoldTags: $('brand-message').querySelectorAll('b').length};
	})()`)
	if err != nil {
		t.Fatalf("read the page: %v\n%s", err, p.diagnose())
	}
	t.Logf("branded waiting page: %+v", v)
	switch {
	case v.Name != "Acme Shoes" || v.LogoAlt != "" || v.LogoWidth != 120: // the name is beside the logo: alt ""
		t.Errorf("name %q, logo alt %q width %d", v.Name, v.LogoAlt, v.LogoWidth)
	case v.Message != "Drop at ten. One pair each. <b>not bold</b>" || v.BoldTags != 0:
		t.Errorf("message %q (%d <b> elements): want the text as typed, no markup", v.Message, v.BoldTags)
	case v.SupportHref != "/help" || v.Support == "":
		t.Errorf("support link %q %q", v.Support, v.SupportHref)
	case v.ButtonBG != "rgb(138, 28, 124)" || v.Accent != "#8a1c7c":
		t.Errorf("button background %q, --brand %q: want the accent #8a1c7c", v.ButtonBG, v.Accent)
	}
	shots.take(p, "branding-queue-1280")
	p.viewport(375, 812)
	if over := p.eval(`String(document.documentElement.scrollWidth > window.innerWidth)`); over != "true" && over != "false" {
		t.Fatalf("scrollWidth check: %q", over)
	} else if over == "true" {
		t.Errorf("the branded page scrolls sideways at 375 px")
	}
	shots.take(p, "branding-queue-375")
	p.viewport(1280, 900)

	// The order page: the same band and colour.
	p.navigate(in.url + "/q/brand/order")
	p.waitJS("the branded order page", 10*time.Second, `(() => {
		const l = document.getElementById('brand-logo');
		return l !== null && l.complete && l.naturalWidth > 0 && document.getElementById('brand-name').textContent === 'Acme Shoes' &&
			document.body.classList.contains('branded');
	})()`)
	shots.take(p, "branding-order-1280")
	p.checkConsole()
}

// TestBrowserBrandingDashboard: the admin brands a queue on the dashboard: a colour that is
// too light is refused on its field (the 422 names brand_color); then the name, a good
// colour, the message and the support link are saved, and a logo file is uploaded through the
// file input (fetch PUT with the file's type). The settings, the stats and the waiting page
// carry them. Removing the logo asks for confirmation first.
func TestBrowserBrandingDashboard(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "brand-dash", 60*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/shop", map[string]any{"rate_per_second": 0})
	logo := filepath.Join(t.TempDir(), "logo.png")
	if err := os.WriteFile(logo, brandingPNG(t, 90, 30), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBrowser(t, ctx)
	adm := dropAdminPage(t, b, in, "")
	card := dropCard("shop")
	adm.waitJS("shop's branding form", 10*time.Second, `document.getElementById('q-shop-brand-brand_color') !== null`)
	adm.sendKeys("q-shop-brand-brand_color", "#ffff00")
	adm.click("q-shop-brand-save")
	adm.waitJS("the colour refused on its field", 10*time.Second, `document.getElementById('q-shop-brand-brand_color').getAttribute('aria-invalid') === 'true' &&
		`+card+`.querySelector('[data-testid=branding-msg]').dataset.state === 'error'`)

	adm.do("fill the branding", 5*time.Second,
		chromedp.SetValue(chromedp.ID("q-shop-brand-brand_color"), "#8a1c7c"),
		chromedp.SetValue(chromedp.ID("q-shop-brand-brand_name"), "Shop & Co"),
		chromedp.SetValue(chromedp.ID("q-shop-brand-brand_message"), "One pair each."),
		chromedp.SetValue(chromedp.ID("q-shop-brand-support_url"), "https://help.shop.example/"),
		chromedp.SetUploadFiles(chromedp.ID("q-shop-brand-logo"), []string{logo}),
	)
	adm.click("q-shop-brand-save")
	adm.waitJS("saved, the logo shown", 10*time.Second, card+`.querySelector('[data-testid=branding-msg]').dataset.state === 'ok' &&
		!`+card+`.querySelector('[data-testid=brand-logo-preview]').hidden && `+card+`.querySelector('[data-testid=brand-logo-preview]').naturalWidth === 90`)
	st := brandingStats(t, in, "shop")
	if st.BrandName != "Shop & Co" || st.BrandColor != "#8a1c7c" || st.BrandMessage != "One pair each." ||
		st.SupportURL != "https://help.shop.example/" || st.LogoURL == nil {
		t.Fatalf("stats after the dashboard saved the branding: %+v", st)
	}
	res := call(t, "GET", in.url+*st.LogoURL, "", nil, nil)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("the uploaded logo: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	shots := newDropShots(t)
	shots.take(adm, "branding-dashboard-1280")

	// Remove the logo from the dashboard: it asks first (the file is gone afterwards).
	adm.activate(`[data-testid=queue-card][data-queue="shop"] [data-testid=brand-logo-remove]`)
	opsDialog(adm, "logo of queue shop", true)
	adm.waitJS("the logo gone", 10*time.Second, card+`.querySelector('[data-testid=brand-logo-preview]').hidden`)
	if st := brandingStats(t, in, "shop"); st.LogoURL != nil {
		t.Fatalf("logo_url %v after the dashboard removed it", *st.LogoURL)
	}
	adm.checkConsole()
}
