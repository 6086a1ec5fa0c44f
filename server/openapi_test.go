package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"go.yaml.in/yaml/v3"

	"github.com/waitroom/waitroom/queue/redistest"
)

// The e2e tests' HTTP clients send every request through specTransport, which checks the
// request and its response against docs/openapi.yaml:
//   - skipped: Server-Sent Events (text/event-stream), HTML pages (outside /api and
//     /admin/api), /static/ and /metrics;
//   - every other response must be a documented status of its operation and match that
//     status's headers and schema; a route missing from the spec fails, except that an
//     unknown route answering 404 with the error shape is the documented catch-all;
//   - the request is checked too when the response is 2xx (a deliberately malformed request
//     gets a 4xx, and then only the response is checked).
//
// A mismatch fails the test that made the request (t.Errorf, found through the request's
// context; see testContext). A request without a test in its context is reported by
// TestMain, which also prints how many requests and responses were checked.

const specPath = "../docs/openapi.yaml"

// spec is the loaded document and its router; set by TestMain in the process that runs
// the tests (nil elsewhere: nothing is checked).
var spec *specChecker

type specChecker struct {
	doc    *openapi3.T
	router routers.Router
	errors *openapi3.Schema // the shared error shape, for unknown routes
	opts   *openapi3filter.Options
	events *os.File // to the parent process: one byte per check, a line per orphan failure
	seen   sync.Map // reported mismatches: each kind once per test
}

func loadSpec() (*specChecker, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specPath)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("%s: %w", specPath, err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	s := &specChecker{doc: doc, router: router, errors: doc.Components.Schemas["Error"].Value}
	s.opts = &openapi3filter.Options{
		IncludeResponseStatus:   true, // an undocumented status fails
		SkipSettingDefaults:     true, // never change the request
		AuthenticationFunc:      credentialsPresent,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
	}
	return s, nil
}

func init() {
	openapi3.DefineStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))
}

// credentialsPresent is the spec's security check: the credential a scheme names is there
// (whether it is right is the server's business; the response says).
func credentialsPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r, s := in.RequestValidationInput.Request, in.SecurityScheme
	ok := false
	switch {
	case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"):
		a := r.Header.Get("Authorization")
		ok = len(a) > 7 && strings.EqualFold(a[:7], "bearer ")
	case s.Type == "apiKey" && s.In == "header":
		ok = r.Header.Get(s.Name) != ""
	case s.Type == "apiKey" && s.In == "query":
		ok = r.URL.Query().Get(s.Name) != ""
	case s.Type == "apiKey" && s.In == "cookie":
		// wr_ticket_{queue}: any queue's cookie (or the legacy wr_ticket); the server picks.
		prefix, perQueue := strings.CutSuffix(s.Name, "{queue}")
		for _, c := range r.Cookies() {
			ok = ok || c.Name == s.Name || perQueue && (strings.HasPrefix(c.Name, prefix) || c.Name+"_" == prefix)
		}
	}
	if !ok {
		return fmt.Errorf("no %s credential", in.SecuritySchemeName)
	}
	return nil
}

type testKey struct{}

// testContext carries the test that makes a request, for specTransport's reports.
func testContext(t *testing.T) context.Context {
	return context.WithValue(context.Background(), testKey{}, t)
}

// specTransport checks each request/response pair against the spec (see the top of
// this file) and hands the response on unchanged.
type specTransport struct{ base http.RoundTripper }

func (st specTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if spec == nil {
		return st.base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	res, err := st.base.RoundTrip(req)
	if err != nil {
		return res, err
	}
	spec.check(req, body, res)
	return res, nil
}

// check validates one pair; it reads a checked response's body and puts it back.
func (s *specChecker) check(req *http.Request, reqBody []byte, res *http.Response) {
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if req.Method == http.MethodHead || mt == "text/event-stream" ||
		req.URL.Path == "/metrics" || strings.HasPrefix(req.URL.Path, "/static/") {
		return
	}
	route, params, err := s.router.FindRoute(req)
	api := strings.HasPrefix(req.URL.Path, "/api/") || strings.HasPrefix(req.URL.Path, "/admin/api/")
	if err != nil && mt == "text/html" && !api {
		return // a page (an HTML answer on an API route is checked, and fails)
	}
	data, rerr := io.ReadAll(res.Body)
	res.Body.Close()
	if rerr != nil {
		res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errReader{rerr}))
		return // a cut connection is the test's business, not the spec's
	}
	res.Body = io.NopCloser(bytes.NewReader(data))
	kind := req.URL.Path
	if route != nil {
		kind = route.Path
	}
	fail := func(err error) {
		snippet := string(data)
		if len(snippet) > 300 {
			snippet = snippet[:300] + "…"
		}
		s.fail(req, fmt.Sprintf("%s %s → %d: %v", req.Method, kind, res.StatusCode, err),
			fmt.Sprintf("openapi: %s %s → %d: %v (body %s)", req.Method, req.URL.Path, res.StatusCode, err, snippet))
	}
	ctx := context.Background()
	if err != nil {
		s.count('r')
		if res.StatusCode != http.StatusNotFound || mt != "application/json" {
			fail(fmt.Errorf("route not in %s: %w", specPath, err))
			return
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			fail(err)
		} else if err := s.errors.VisitJSON(v, openapi3.DisableSchemaErrorDetails()); err != nil {
			fail(fmt.Errorf("unknown route: not the error shape: %w", err))
		}
		return
	}

	vreq := req.Clone(ctx)
	if len(reqBody) > 0 && vreq.Header.Get("Content-Type") == "" {
		// The server reads JSON bodies whatever their Content-Type; several tests send none.
		vreq.Header.Set("Content-Type", "application/json")
	}
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: s.opts}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		s.count('q')
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			fail(fmt.Errorf("request: %w", err))
		}
	}
	s.count('r')
	if err := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(data)), Options: s.opts,
	}); err != nil {
		fail(fmt.Errorf("response: %w", err))
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// fail reports a mismatch on the test that made the request, or else to TestMain; a
// mismatch of the same kind is reported once per test (the first fails it).
func (s *specChecker) fail(req *http.Request, kind, msg string) {
	t, _ := req.Context().Value(testKey{}).(*testing.T)
	type seenKey struct {
		t    *testing.T
		kind string
	}
	if _, dup := s.seen.LoadOrStore(seenKey{t, kind}, true); dup {
		return
	}
	if t != nil {
		reported := func() (ok bool) {
			defer func() { ok = recover() == nil }() // t already ended: report as an orphan
			t.Errorf("%s", msg)
			return true
		}()
		if reported {
			return
		}
	}
	s.send("f" + strings.ReplaceAll(msg, "\n", " ") + "\n")
}

func (s *specChecker) count(kind byte) { s.send(string(kind)) }

// send writes one event in one write. Tests run in parallel, so many goroutines send at
// once: an *os.File serialises its writes (and writes all of each before the next), and an
// event is kept under PIPE_BUF, which a pipe keeps whole even among processes; so every
// event arrives whole and none is lost or merged, and the totals are exact
// (TestOpenAPIEventsExactUnderConcurrency).
func (s *specChecker) send(ev string) {
	if s.events != nil {
		if len(ev) > 4000 {
			ev = ev[:3990] + "…\n"
		}
		_, _ = s.events.WriteString(ev)
	}
}

// pgtest.Main ends in os.Exit, so nothing runs after the tests in the process that runs
// them. TestMain therefore runs this same test binary, with the same flags, as a child that
// runs the tests, and counts the child's checks through a pipe; when the child ends it
// prints the totals and fails the package for orphan failures.
const specChildEnv = "WR_OPENAPI_CHILD"

func runSpecChild() int {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		return 1
	}
	binDir, err := os.MkdirTemp("", "waitroom-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), specChildEnv+"=1", binDirEnv+"="+binDir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the child
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		return 1
	}
	w.Close()
	requests, responses, orphans := readEvents(r)
	code := 0
	var ee *exec.ExitError
	switch err := cmd.Wait(); {
	case errors.As(err, &ee):
		code = max(1, ee.ExitCode()) // -1: killed by a signal
	case err != nil:
		fmt.Fprintln(os.Stderr, "openapi:", err)
		code = 1
	}
	for _, o := range orphans {
		fmt.Println(o)
	}
	if requests+responses > 0 || len(orphans) > 0 {
		line := fmt.Sprintf("openapi: validated %s requests and %s responses against docs/openapi.yaml\n",
			thousands(requests), thousands(responses))
		fmt.Print(line)
		// go test ./... hides a passing package's output: the test command reads it here.
		if f := os.Getenv("WR_OPENAPI_REPORT"); f != "" {
			_ = os.WriteFile(f, []byte(line), 0o644)
		}
	}
	if len(orphans) > 0 {
		fmt.Printf("openapi: %d mismatches outside a test\nFAIL\n", len(orphans))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// readEvents reads the child's events until it closes fd 3: a byte per checked request
// ('q') and response ('r'), a line per orphan failure ('f'…'\n').
func readEvents(r io.Reader) (requests, responses int, orphans []string) {
	br := bufio.NewReader(r)
	for {
		c, err := br.ReadByte()
		if err != nil {
			return requests, responses, orphans
		}
		switch c {
		case 'q':
			requests++
		case 'r':
			responses++
		case 'f':
			line, _ := br.ReadString('\n')
			orphans = append(orphans, strings.TrimSuffix(line, "\n"))
		}
	}
}

// thousands writes n with commas: 1,204.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestOpenAPIDocument: docs/openapi.yaml is a valid OpenAPI 3 document, and a running
// server serves the same document as JSON at GET /api/openapi.json.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s: %v", specPath, err)
	}
	src, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var fromYAML any
	if err := yaml.Unmarshal(src, &fromYAML); err != nil {
		t.Fatal(err)
	}
	fromYAML = viaJSON(t, fromYAML)

	rs := redistest.Start(t)
	in := startInProcess(t, "oapi", tolerantEnv(rs.URL(), testDB(t), nil))
	var served any
	res := call(t, "GET", in.url+"/api/openapi.json", "", nil, &served)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/openapi.json: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if !reflect.DeepEqual(served, fromYAML) {
		t.Fatalf("GET /api/openapi.json differs from %s", specPath)
	}
	if _, err := openapi3.NewLoader().LoadFromData([]byte(readAll(res))); err != nil {
		t.Fatalf("the served document does not load: %v", err)
	}

	// Once each, the documented answers no other test asks for; specTransport checks them
	// like every other answer.
	admin(t, in, "PUT", "/admin/api/queues/tour", map[string]any{"rate_per_second": 0})
	var j joinResp
	call(t, "POST", in.url+"/api/queues/tour/join", "", nil, &j)
	for _, c := range []struct {
		method, path, bearer string
		body                 any
		status               int
	}{
		{"GET", "/healthz", "", nil, 200},
		{"GET", "/api/products", "", nil, 200},
		{"GET", "/api/products/nope", "", nil, 404},
		{"PUT", "/admin/api/products/tour", adminToken, `{"price":"free"}`, 422},
		{"GET", "/admin/api/limits", adminToken, nil, 200},
		{"PUT", "/admin/api/limits", adminToken, `{"join_per_ip_burst":-1}`, 422},
		{"POST", "/api/queues/tour/join", j.Ticket, nil, 200},
		{"POST", "/api/queues/tour/join", "tour.forged.ticket", nil, 401},
		{"POST", "/api/orders", j.Ticket, `{"product_id":"tour","quantity":1}`, 401},
		{"DELETE", "/api/queues/tour/ticket", j.Ticket, nil, 204},
		{"GET", "/api/queues/tour/status", j.Ticket, nil, 404},
		{"GET", "/api/queues/tour/stream", j.Ticket, nil, 404},
		{"DELETE", "/api/queues/tour/ticket", "", nil, 401},
	} {
		if res := call(t, c.method, in.url+c.path, c.bearer, c.body, nil); res.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, res.StatusCode, c.status)
		}
	}
}

// viaJSON gives a YAML-decoded value the types a JSON decoder gives.
func viaJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
