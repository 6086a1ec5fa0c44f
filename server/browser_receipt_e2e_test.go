package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// receiptShots is where the receipt screenshots go (looked at by hand; not git-tracked).
const receiptShots = "/tmp/wr-shots"

// TestBrowserReceipt: in headless Chromium a buyer admitted through queue drop buys two of
// a product and gets a receipt in the page's language — English (a JPY product), Korean (a
// KRW product) and Japanese (a EUR product, two decimals), the language chosen by
// Accept-Language as a browser sends it:
// the prices formatted with Intl.NumberFormat in the product's currency and its decimals
// (¥12,900 / ₩129,000, no ".00"), the quantity, the total, a short order reference with the
// full id in its title, the local time; the form hidden; the focus on the receipt's heading;
// the copy button answering (copied, or the fallback that shows the reference). Screenshots
// at 1280 px and 375 px go to /tmp/wr-shots/receipt-<lang>-<width>.png.
func TestBrowserReceipt(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "web-1", 90*time.Second, nil)
	mustAdmin(t, in, "PUT", "/admin/api/queues/drop", map[string]any{"rate_per_second": 20})
	mustAdmin(t, in, "PUT", "/admin/api/products/yen", map[string]any{"name": "Kyoto tote", "price": 12900, "currency": "JPY", "stock": 10, "queue": "drop"})
	mustAdmin(t, in, "PUT", "/admin/api/products/won", map[string]any{"name": "서울 스니커즈", "price": 129000, "currency": "KRW", "stock": 10, "queue": "drop"})
	mustAdmin(t, in, "PUT", "/admin/api/products/euro", map[string]any{"name": "Paris cap", "price": 4990, "currency": "EUR", "stock": 10, "queue": "drop"})
	if err := os.MkdirAll(receiptShots, 0o755); err != nil {
		t.Fatal(err)
	}
	b := startBrowser(t, ctx)

	for _, c := range []struct {
		lang, accept, product, name, unit, total, title string
	}{
		{"en", "en-US,en;q=0.9", "yen", "Kyoto tote", "¥12,900", "¥25,800", "Receipt"},
		{"ko", "ko-KR,ko;q=0.9", "won", "서울 스니커즈", "₩129,000", "₩258,000", "주문 내역"},
		{"ja", "ja-JP,ja;q=0.9", "euro", "Paris cap", "€49.90", "€99.80", "領収書"},
	} {
		p := b.open(t, "buyer-"+c.lang)
		cdpDo(p, "network on", network.Enable, network.EnableParams{})
		cdpDo(p, "Accept-Language "+c.accept, network.SetExtraHTTPHeaders,
			network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": c.accept}})
		p.navigate(in.url + "/q/drop")
		p.waitJS("admitted", 15*time.Second, `document.documentElement.lang === '`+c.lang+`' && !document.getElementById('admitted').hidden`)
		// The token stays in this tab's sessionStorage; the product is picked in the URL.
		p.navigate(in.url + "/q/drop/order?product=" + c.product)
		p.waitJS("the order page with the price in "+c.product, 10*time.Second, `document.getElementById('token-state').dataset.state === 'valid' &&
			document.getElementById('price').textContent === '`+c.unit+`' && !document.getElementById('buy').disabled`)
		p.do("quantity 2", 5*time.Second, chromedp.SetValue(chromedp.ID("qty"), "2"))
		p.click("buy")
		p.waitJS("the receipt", 10*time.Second, `!document.getElementById('receipt').hidden`)

		type receiptView struct {
			Outcome, Title, Product, Qty, Unit, Total, Ref, RefTitle, Time, Focus string
			FormHidden                                                            bool
		}
		v, err := evalJS[receiptView](p, `(() => {
			const $ = (id) => document.getElementById(id);
			return {Outcome: $('order-result').dataset.outcome, Title: $('receipt-title').textContent,
				Product: $('receipt-product').textContent, Qty: $('receipt-qty').textContent,
				Unit: $('receipt-unit').textContent, Total: $('receipt-total').textContent,
				Ref: $('receipt-ref').textContent, RefTitle: $('receipt-ref').title,
				Time: $('receipt-time').dateTime, Focus: document.activeElement ? document.activeElement.id : '',
				FormHidden: $('buy-form').hidden && $('buy-form').offsetParent === null};
		})()`)
		if err != nil {
			t.Fatalf("%s: read the receipt: %v\n%s", c.lang, err, p.diagnose())
		}
		t.Logf("%s receipt: %+v", c.lang, v)
		switch {
		case v.Outcome != "success":
			t.Errorf("%s: outcome %q", c.lang, v.Outcome)
		case v.Title != c.title || v.Product != c.name || v.Qty != "2":
			t.Errorf("%s: title %q product %q quantity %q", c.lang, v.Title, v.Product, v.Qty)
		case v.Unit != c.unit || v.Total != c.total:
			t.Errorf("%s: unit %q total %q, want %q %q", c.lang, v.Unit, v.Total, c.unit, c.total)
		case len(v.Ref) != 8 || !strings.HasPrefix(strings.ReplaceAll(strings.ToUpper(v.RefTitle), "-", ""), v.Ref) || len(v.RefTitle) != 36:
			t.Errorf("%s: reference %q (title %q): want the first 8 of the full id", c.lang, v.Ref, v.RefTitle)
		case !v.FormHidden:
			t.Errorf("%s: the form is still shown after the order", c.lang)
		case v.Focus != "receipt-title":
			t.Errorf("%s: focus on %q, want the receipt heading", c.lang, v.Focus)
		}
		if at, err := time.Parse(time.RFC3339, v.Time); err != nil || time.Since(at) > time.Minute || time.Since(at) < -time.Minute {
			t.Errorf("%s: receipt time %q: %v", c.lang, v.Time, err)
		}
		// The server has the order the receipt names.
		var prod struct{ Stock int64 }
		call(t, "GET", in.url+"/api/products/"+c.product, "", nil, &prod)
		if prod.Stock != 8 {
			t.Errorf("%s: stock %d after buying 2 of 10", c.lang, prod.Stock)
		}

		p.click("copy-ref")
		p.waitJS("the copy answer", 5*time.Second, `document.getElementById('copy-status').textContent.includes(document.getElementById('receipt-ref').title)`)
		t.Logf("%s copy: %s (%s)", c.lang, p.eval(`document.getElementById('copy-status').dataset.outcome`),
			p.eval(`document.getElementById('copy-status').textContent`))

		for _, w := range []int64{1280, 375} {
			p.do(fmt.Sprintf("viewport %d", w), 5*time.Second, chromedp.EmulateViewport(w, 900))
			p.waitJS("layout", 2*time.Second, fmt.Sprintf(`window.innerWidth === %d`, w))
			if w == 375 {
				// clientWidth leaves the scroll bar out, as the page's own width does.
				if over := p.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); over != "0" {
					t.Errorf("%s at 375 px: the page is %s px wider than the screen", c.lang, over)
				}
			}
			p.screenshot(receiptShots, fmt.Sprintf("receipt-%s-%d", c.lang, w))
		}
		if _, err := os.Stat(filepath.Join(receiptShots, "receipt-"+c.lang+"-375.png")); err != nil && !screenshotsOff() {
			t.Error(err)
		}
		p.checkConsole()
	}
}
