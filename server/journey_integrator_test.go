package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue/redistest"
)

// The integrator's journeys (J3, J4): examples/shop started exactly as its README says. The
// README is the one source of truth: the test reads its shell blocks — the room's start
// command, the shop's command line and the allowed_origins call — and runs them with only the
// addresses replaced (the room on 127.0.0.3, the shop on 127.0.0.2: two sites to Chromium,
// as localhost and 127.0.0.1 are in the README). The room runs with the zero-config
// defaults the README relies on: demo data on, no WR_ADMIN_TOKEN (the generated token file
// is what step 3 reads, in a HOME of the test's own). The room is the built server as a
// child process (`make run` is `go run ./server`, the same program); the shop is its own binary.

const shopReadmePath = "../examples/shop/README.md"

// The addresses the README uses, replaced by the test's.
const (
	readmeRoom = "http://localhost:8080"
	readmeShop = "127.0.0.1:8090"
)

// shopReadme is what the test takes from examples/shop/README.md.
type shopReadme struct {
	start string   // step 1, the room's start command
	args  []string // step 2, the shop's flags
	allow string   // step 3, the shell lines that allow the shop's origin
	open  string   // step 4, the address to open
}

func readShopReadme(t *testing.T) shopReadme {
	t.Helper()
	b, err := os.ReadFile(shopReadmePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text, -1)
	if len(blocks) != 3 {
		t.Fatalf("%s: %d sh blocks, want 3 (start the room, start the shop, allow the origin)", shopReadmePath, len(blocks))
	}
	var r shopReadme
	r.start = strings.TrimSpace(blocks[0][1])
	const cmd = "go run ./examples/shop/cmd/shop"
	line := strings.TrimSpace(blocks[1][1])
	if !strings.HasPrefix(line, cmd+" ") || strings.Contains(line, "\n") {
		t.Fatalf("%s step 2: %q, want one line starting %q", shopReadmePath, line, cmd)
	}
	r.args = strings.Fields(strings.TrimPrefix(line, cmd))
	r.allow = blocks[2][1]
	if !strings.Contains(r.allow, "allowed_origins") {
		t.Fatalf("%s step 3 does not set allowed_origins:\n%s", shopReadmePath, r.allow)
	}
	m := regexp.MustCompile(`\*\*4\. Open the shop\*\*: <(http://[^>]+)>`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s: no step 4 (**4. Open the shop**: <url>)", shopReadmePath)
	}
	r.open = m[1]
	return r
}

// integrator is one run of the README: the room, the shop, the buyer-facing addresses.
type integrator struct {
	readme shopReadme
	room   *instance
	db     string
	home   string // the HOME of the room and of step 3's shell
	token  string // the room's generated admin token (from its file)
	shop   string // the shop's base URL
	swap   func(string) string
}

var (
	shopBinOnce sync.Once
	shopBinPath string
	shopBinErr  error
)

// shopBinary builds examples/shop/cmd/shop once per test run (step 2's `go run`, built).
func shopBinary(t *testing.T) string {
	t.Helper()
	shopBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "waitroom-shop-")
		if err != nil {
			shopBinErr = err
			return
		}
		shopBinPath = filepath.Join(dir, "shop")
		if out, err := exec.Command("go", "build", "-o", shopBinPath, "../examples/shop/cmd/shop").CombinedOutput(); err != nil {
			shopBinErr = fmt.Errorf("go build examples/shop/cmd/shop: %v\n%s", err, out)
		}
	})
	if shopBinErr != nil {
		t.Fatal(shopBinErr)
	}
	return shopBinPath
}

// startIntegrator does steps 1 and 2 of the README: the room with zero-config defaults (demo
// data, a generated admin token) and the shop with the README's flags.
func startIntegrator(t *testing.T) *integrator {
	t.Helper()
	r := readShopReadme(t)
	if r.start != "make run" {
		t.Fatalf("%s step 1 is %q; the test starts the server as `make run` does", shopReadmePath, r.start)
	}
	if mk, err := os.ReadFile("../Makefile"); err != nil || !regexp.MustCompile(`(?m)^run:\n\tgo run \./server$`).Match(mk) {
		t.Fatalf("Makefile: `make run` is no longer `go run ./server` (%v)", err)
	}
	if _, err := os.Stat(chromiumBin); err != nil {
		t.Fatalf("headless Chromium is required at %s (%v): run scripts/test.sh", chromiumBin, err)
	}
	shopBin := shopBinary(t)
	in := &integrator{readme: r, home: t.TempDir(), db: testDB(t)}
	// The room keeps its generated token in its data directory, which `make run` puts in the
	// user's cache directory (~/.cache/waitroom/pg<major>, its local PostgreSQL's data): it
	// runs as its own process, the built server (`make run` is `go run ./server`), with this
	// test's HOME, so the journeys run in parallel and the test binary's environment is left
	// alone. The test's database stands in for the local PostgreSQL, so WR_DATA_DIR names
	// the directory `make run` would use.
	dataDir := filepath.Join(in.home, ".cache", "waitroom", "pg15")
	env := baseEnv(redistest.Start(t).URL(), in.db, map[string]string{"WR_ADDR": "127.0.0.3:0",
		"HOME": in.home, "XDG_CACHE_HOME": filepath.Join(in.home, ".cache"), "WR_DATA_DIR": dataDir})
	delete(env, "WR_DEMO")        // zero config: the demo queue and product are made
	delete(env, "WR_ADMIN_TOKEN") // zero config: a random token, kept in a file
	in.room = startProcess(t, "room", env)
	tok, err := os.ReadFile(filepath.Join(dataDir, "waitroom-admin-token-room"))
	if err != nil {
		t.Fatalf("the room's generated admin token file: %v\n%s", err, in.room.logs.String())
	}
	in.token = strings.TrimSpace(string(tok))

	// Step 2: the shop's binary with the README's flags, on 127.0.0.2 (any free port).
	in.swap = strings.NewReplacer(readmeRoom, in.room.url, readmeShop, "127.0.0.2:0").Replace
	args := make([]string, len(r.args))
	for i, a := range r.args {
		args[i] = in.swap(a)
	}
	cmd := exec.Command(shopBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + in.home}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	logs := &syncBuffer{}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.Write([]byte(sc.Text() + "\n"))
			if m := regexp.MustCompile(`example shop on (http://\S+) `).FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case in.shop = <-addr:
	case <-time.After(15 * time.Second):
		t.Fatalf("the shop did not say where it listens:\n%s", logs.String())
	}
	host := strings.TrimPrefix(in.shop, "http://")
	in.swap = strings.NewReplacer(readmeRoom, in.room.url, "http://"+readmeShop, in.shop, readmeShop, host).Replace
	return in
}

// allowOrigin is step 3: the README's lines, run by bash in the room's HOME (where the
// generated token file is), addresses replaced.
func (in *integrator) allowOrigin(t *testing.T) {
	t.Helper()
	script := in.swap(in.readme.allow)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + in.home}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README step 3 failed: %v\n%s\n--- the script:\n%s", err, out, script)
	}
	if want := `"allowed_origins":["` + in.shop + `"]`; !strings.Contains(string(out), want) {
		t.Fatalf("README step 3 answered %s; want %s in it", out, want)
	}
}

// waitCORS waits until the room answers the shop's origin on the queue's and the shop
// routes: each instance follows a change of allowed_origins within 2 s (its cache).
func (in *integrator) waitCORS(t *testing.T) {
	t.Helper()
	for _, path := range []string{"/api/queues/demo/join", "/api/orders"} {
		testwait.For(t, 30*time.Second, "the room to answer CORS for "+in.shop+" on "+path, func() bool {
			res := call(t, "OPTIONS", in.room.url+path, "", nil, nil, "Origin", in.shop, "Access-Control-Request-Method", "POST")
			return res.Header.Get("Access-Control-Allow-Origin") == in.shop
		})
	}
}

// admin is the test's own admin call (to hold or let the line move), with the room's token.
func (in *integrator) admin(t *testing.T, method, path string, body any) {
	t.Helper()
	if res := call(t, method, in.room.url+path, in.token, body, nil); res.StatusCode >= 300 {
		t.Fatalf("%s %s: %d", method, path, res.StatusCode)
	}
}

// TestJourneyIntegratorRedirect is J3: the redirect flow of examples/shop at 1280 px. The
// buyer goes from the shop to the room's waiting page, is let in, comes back to the shop,
// whose backend redeems the token; the shop shows its own session and its own order.
func TestJourneyIntegratorRedirect(t *testing.T) {
	t.Parallel() // journeys overlap their waits
	// The deadline is a guard for a machine under load, not the budget.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	in := startIntegrator(t)
	in.allowOrigin(t)
	in.admin(t, "PUT", "/admin/api/queues/demo", map[string]any{"rate_per_second": 0}) // hold the line: the waiting page is seen
	j := newJourney(t, ctx)
	buyer := j.person("buyer", journeyDesktop)

	// The token the room hands back, as the address bar shows it (fragment included).
	returned := make(chan string, 4)
	listen := chromedp.Listen(buyer.ctx, func(ev any) {
		if e, ok := ev.(*page.EventFrameNavigated); ok && e.Frame.ParentID == "" && strings.HasPrefix(e.Frame.URLFragment, "#wr_token=") {
			select {
			case returned <- strings.TrimPrefix(e.Frame.URLFragment, "#wr_token="):
			default:
			}
		}
	})
	if listen != nil {
		t.Fatal(listen)
	}

	buyer.navigate(in.swap(in.readme.open))
	buyer.waitJS("the shop's index", 10*time.Second, `!!document.getElementById('to-redirect')`)
	j.state(buyer, "shop index")
	buyer.click("to-redirect")
	buyer.waitJS("the redirect page", 10*time.Second, `location.pathname === '/redirect.html' && document.getElementById('status').dataset.state === 'start' && document.getElementById('join').href.includes('return_to=')`)
	j.state(buyer, "shop redirect page")

	buyer.click("join")
	buyer.waitJS("on the room's waiting page, first", 10*time.Second,
		`location.origin === '`+in.room.url+`' && !!document.getElementById('position') && document.getElementById('position').dataset.position === '1'`)
	if got := buyer.eval(`document.getElementById('room').dataset.returnTo`); got != in.shop+"/redirect.html" {
		t.Fatalf("return_to on the waiting page: %q", got)
	}
	j.state(buyer, "room waiting page")

	in.admin(t, "PUT", "/admin/api/queues/demo", map[string]any{"rate_per_second": 5}) // the zero-config rate again
	buyer.waitJS("back at the shop, session open", 20*time.Second,
		`location.origin === '`+in.shop+`' && document.getElementById('status').dataset.state === 'admitted' && !document.getElementById('turn').hidden`)
	if h := buyer.eval(`location.hash`); h != "" {
		t.Fatalf("the token stayed in the address: %q", h)
	}
	j.state(buyer, "shop admitted")

	buyer.click("buy")
	buyer.waitJS("the shop's order", 10*time.Second, `document.getElementById('status').dataset.state === 'ordered' && !document.getElementById('receipt').hidden`)
	shown := buyer.eval(`document.getElementById('order-id').dataset.orderId`)
	if !regexp.MustCompile(`^S-[0-9A-F]{12}$`).MatchString(shown) || buyer.eval(`document.getElementById('order-id').textContent`) != shown {
		t.Fatalf("order id on the page: %q", shown)
	}
	j.state(buyer, "shop order")

	// The shop's backend has the session and this order.
	sess := buyer.eval(`(() => { const x = new XMLHttpRequest(); x.open('GET', '/shop/api/session', false); x.send(); return x.status + ' ' + x.responseText; })()`)
	if !strings.HasPrefix(sess, "200 ") || !strings.Contains(sess, `"order":{"id":"`+shown+`","product_id":"demo","quantity":1`) {
		t.Fatalf("the shop's session: %s", sess)
	}
	// The room knows the token was redeemed: the buyer's ticket is used.
	ticket := roomTicket(t, buyer, in.room.url, "demo")
	var st joinResp
	call(t, "GET", in.room.url+"/api/queues/demo/status", ticket, nil, &st)
	if st.State != "used" {
		t.Fatalf("the buyer's ticket at the room: %q, want used", st.State)
	}
	// A reload keeps the order; the same token from a shared link is refused.
	buyer.navigate(in.shop + "/redirect.html")
	buyer.waitJS("the order after a reload", 10*time.Second, `document.getElementById('order-id').dataset.orderId === '`+shown+`'`)
	var tok string
	select {
	case tok = <-returned:
	default:
		t.Fatal("the return to the shop carried no #wr_token=")
	}
	if c := tokenClaims(t, tok); c["aud"] != "demo" {
		t.Fatalf("the token handed back: %v", c)
	}
	replay := j.person("someone-else", journeyDesktop)
	replay.navigate(in.shop + "/redirect.html?shared=1#wr_token=" + tok)
	replay.waitJS("the replay refused", 10*time.Second, `document.getElementById('status').dataset.state === 'used' && !document.getElementById('join').hidden`)
	if res := call(t, "POST", in.room.url+"/api/redeem", "", nil, nil, "X-Admission-Token", tok); res.StatusCode != http.StatusConflict {
		t.Fatalf("redeem again at the room: %d, want 409", res.StatusCode)
	}
}

// TestJourneyIntegratorEmbed is J4: the embedded widget of examples/shop at 375 px. Before
// step 3 the page says why it cannot reach the line; after it the buyer waits on the shop's
// page, is let in and orders the room's product: the page shows the room's order id (the one
// in PostgreSQL) and the stock that fell.
func TestJourneyIntegratorEmbed(t *testing.T) {
	t.Parallel() // journeys overlap their waits
	// The deadline is a guard for a machine under load, not the budget.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	in := startIntegrator(t)
	in.admin(t, "PUT", "/admin/api/queues/demo", map[string]any{"rate_per_second": 0}) // hold the line
	if s := stockOf(t, in.room, "demo"); s != 100 {
		t.Fatalf("the zero-config product demo has stock %d, want 100", s)
	}
	j := newJourney(t, ctx)
	buyer := j.person("buyer", journeyPhone)

	// Without step 3 the room hides its answers from the shop's page: it says so.
	buyer.navigate(in.shop + "/embed.html")
	buyer.waitJS("the page explains it cannot reach the line", 10*time.Second,
		`document.getElementById('notice').dataset.reason === 'unreachable' && !document.getElementById('notice').hidden`)
	j.state(buyer, "embed before allowed_origins")
	// The buyer closes the page (its join retries stop: one landing after step 3 would take
	// a place before the two buyers below), the integrator does step 3, the buyer comes back.
	buyer.navigate("about:blank")

	in.allowOrigin(t)
	in.waitCORS(t)
	var ahead [2]joinResp // two buyers ahead, through the API
	for i := range ahead {
		call(t, "POST", in.room.url+"/api/queues/demo/join", "", nil, &ahead[i])
	}
	buyer.navigate(in.shop + "/embed.html")
	buyer.waitJS("third in line, live, the product shown", 15*time.Second,
		`document.getElementById('place').dataset.position === '3' && document.getElementById('conn').textContent === 'live' &&
		 document.getElementById('stock').dataset.stock === '100' && document.getElementById('notice').hidden`)
	if got := buyer.eval(`document.getElementById('product-price').textContent`); got != "$1,290.00" {
		t.Fatalf("price on the page: %q", got)
	}
	j.state(buyer, "embed waiting")
	// The line moves, pushed across origins: the two ahead leave, one after the other.
	for i, want := range []string{"2", "1"} {
		if res := call(t, "DELETE", in.room.url+"/api/queues/demo/ticket", ahead[i].Ticket, nil, nil); res.StatusCode != http.StatusNoContent {
			t.Fatalf("buyer %d ahead leaves: %d", i+1, res.StatusCode)
		}
		buyer.waitJS("number "+want+" in line", 10*time.Second, `document.getElementById('place').dataset.position === '`+want+`'`)
	}

	in.admin(t, "PUT", "/admin/api/queues/demo", map[string]any{"rate_per_second": 5})
	buyer.waitJS("the turn", 20*time.Second, `document.getElementById('place').dataset.position === '0' && !document.getElementById('buy').hidden`)
	j.state(buyer, "embed admitted")

	buyer.click("buy")
	buyer.waitJS("the room's order", 10*time.Second, `document.getElementById('result').dataset.state === 'ordered' && !document.getElementById('receipt').hidden`)
	shown := buyer.eval(`document.getElementById('order-id').dataset.orderId`)
	j.state(buyer, "embed order")

	conn, err := pgx.Connect(ctx, in.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var id, product string
	var qty, n int
	if err := conn.QueryRow(ctx, `SELECT id::text, product_id, quantity, count(*) OVER () FROM orders`).Scan(&id, &product, &qty, &n); err != nil {
		t.Fatalf("the order in PostgreSQL: %v", err)
	}
	if n != 1 || id != shown || product != "demo" || qty != 1 {
		t.Fatalf("page shows order %q; PostgreSQL has %d order(s), the first %s of %d × %s", shown, n, id, qty, product)
	}
	before, after := buyer.eval(`document.getElementById('stock-before').dataset.stock`), buyer.eval(`document.getElementById('stock-after').dataset.stock`)
	if before != "100" || after != "99" || stockOf(t, in.room, "demo") != 99 {
		t.Fatalf("stock on the page %s → %s, at the room %d; want 100 → 99", before, after, stockOf(t, in.room, "demo"))
	}
	// The ticket stayed with the page: no cookie of the room's site was needed.
	if c := buyer.eval(`document.cookie`); strings.Contains(c, "wr_ticket") {
		t.Fatalf("shop page cookies: %q", c)
	}
}

// roomTicket reads the buyer's ticket cookie of queue q from the browser (HttpOnly: through
// the protocol, as the room's own page holds it).
func roomTicket(t *testing.T, p *journeyPerson, roomURL, q string) string {
	t.Helper()
	var got network.GetCookiesResult
	p.do("read the room's cookies", 5*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		var err error
		got, err = cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{roomURL + "/"}})
		return err
	}))
	for _, c := range got.Cookies {
		if c.Name == "wr_ticket_"+q {
			return c.Value
		}
	}
	t.Fatalf("no wr_ticket_%s cookie for %s", q, roomURL)
	return ""
}
