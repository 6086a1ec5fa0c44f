package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestAdminTokenKeptBetweenStarts runs the server as `make run` does — no REDIS_URL, no
// DATABASE_URL, no WR_ADMIN_TOKEN, no WR_INSTANCE_ID — three times on one data directory:
//   - the first start makes the token and keeps it in <data dir>/waitroom-admin-token-default
//     (mode 0600); its stderr, a terminal, gets a sign-in link with the token in the fragment;
//     the token signs in (GET /admin/api/whoami 200), another does not; the sign-in page says
//     where the token is (in English and Japanese);
//   - the second start (stderr a pipe, as under a service manager) reuses the same token,
//     names the file on stderr and prints no token there;
//   - a start with WR_INSTANCE_ID=blue keeps a token of its own in waitroom-admin-token-blue;
//   - the JSON log of every start names the file and never holds a token.
func TestAdminTokenKeptBetweenStarts(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	data := filepath.Join(traversableDir(t), "pg")
	env := map[string]string{"WR_DATA_DIR": data, "WR_DEMO": "false", "WR_LOG_LEVEL": "info",
		"PATH": os.Getenv("PATH"), "PG_BINDIR": os.Getenv("PG_BINDIR")}
	file := filepath.Join(data, "waitroom-admin-token-default")

	// 1. The first start, its stderr on a terminal.
	master, slave := openPTY(t)
	terminal := &syncBuffer{}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(terminal, master); close(copied) }()
	first := startWithStderr(t, bin, env, slave)
	_ = slave.Close() // the child holds its own copy; the terminal's reader ends when the child does
	link := waitForOutput(t, terminal, first.done, "Sign in to the dashboard: ")
	tok := readTokenFile(t, file)
	if want := first.url + "/admin#token=" + tok; link != want {
		t.Fatalf("sign-in link %q, want %q", link, want)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v, mode %v; want 0600", file, err, fi.Mode().Perm())
	}
	if !strings.Contains(terminal.String(), file) || !strings.Contains(terminal.String(), "made now") {
		t.Fatalf("the terminal does not name the new token file %s:\n%s", file, terminal.String())
	}
	checkSignsIn(t, first, tok)
	checkSignInHint(t, first)
	first.stop()
	<-copied
	logs := first.logs.String()
	if strings.Contains(logs, tok) {
		t.Fatal("the JSON log of the first start holds the admin token")
	}
	if !strings.Contains(logs, `"file":"`+file+`"`) || !strings.Contains(logs, `"made_now":true`) {
		t.Fatalf("the JSON log does not name the token file %s:\n%s", file, logs)
	}

	// 2. The second start, its stderr a pipe: the same token, not printed.
	piped := &syncBuffer{}
	second := startWithStderr(t, bin, env, piped)
	checkSignsIn(t, second, tok)
	second.stop()
	if again := readTokenFile(t, file); again != tok {
		t.Fatal("the second start changed the token in the file")
	}
	if out := piped.String(); strings.Contains(out, tok) || !strings.Contains(out, file) || !strings.Contains(out, "made at an earlier start") {
		t.Fatalf("stderr of the second start (a pipe): want the file named and no token:\n%s", out)
	}
	if logs := second.logs.String(); strings.Contains(logs, tok) || !strings.Contains(logs, `"made_now":false`) {
		t.Fatalf("the JSON log of the second start holds the token or does not say it was reused:\n%s", logs)
	}

	// 3. Another instance name, a token of its own.
	blueEnv := copyEnv(env)
	blueEnv["WR_INSTANCE_ID"] = "blue"
	blue := startWithStderr(t, bin, blueEnv, &syncBuffer{})
	blueTok := readTokenFile(t, filepath.Join(data, "waitroom-admin-token-blue"))
	if blueTok == tok {
		t.Fatal("instance blue reuses the default instance's token")
	}
	checkSignsIn(t, blue, blueTok)
	blue.stop()
	if strings.Contains(blue.logs.String(), blueTok) {
		t.Fatal("the JSON log of instance blue holds its admin token")
	}
	if readTokenFile(t, file) != tok {
		t.Fatal("instance blue changed the default instance's token")
	}
}

// checkSignsIn: tok is the instance's admin token (whoami 200), and a token one character
// off is not (401).
func checkSignsIn(t *testing.T, in *instance, tok string) {
	t.Helper()
	var who struct {
		Role string `json:"role"`
	}
	if res := call(t, "GET", in.url+"/admin/api/whoami", tok, nil, &who); res.StatusCode != 200 || who.Role != "operator" {
		t.Fatalf("whoami with the kept token: %d, role %q", res.StatusCode, who.Role)
	}
	if res := call(t, "GET", in.url+"/admin/api/whoami", tok[:len(tok)-1]+"x", nil, nil); res.StatusCode != 401 {
		t.Fatalf("whoami with another token: %d, want 401", res.StatusCode)
	}
}

// checkSignInHint: the sign-in page says where the token is.
func checkSignInHint(t *testing.T, in *instance) {
	t.Helper()
	for lang, want := range map[string][]string{
		"en": {"Where is the token?", "WR_ADMIN_TOKEN", "printed on the terminal where the server started", "waitroom-admin-token-default", "WR_DATA_DIR"},
		"ja": {"トークンはどこにありますか", "WR_ADMIN_TOKEN", "ターミナル", "waitroom-admin-token-default"},
	} {
		res := call(t, "GET", in.url+"/admin?lang="+lang, "", nil, nil)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("GET /admin?lang=%s: %d", lang, res.StatusCode)
		}
		for _, w := range want {
			if !bytes.Contains(body, []byte(w)) {
				t.Errorf("the sign-in page (%s) does not say %q", lang, w)
			}
		}
	}
}

func readTokenFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("admin token file: %v", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 {
		t.Fatalf("admin token file %s holds %d characters", path, len(tok))
	}
	return tok
}

// startWithStderr runs the built binary with env only (no WR_INSTANCE_ID added), its JSON log
// (stdout) in the instance's logs and its stderr to stderr, listening on a loopback port
// chosen here: the sign-in link names WR_ADDR's port, so it cannot be 0. A port taken between
// choosing and binding is chosen again.
func startWithStderr(t *testing.T, bin string, env map[string]string, stderr io.Writer) *instance {
	t.Helper()
	for attempt := 1; ; attempt++ {
		env := copyEnv(env)
		env["WR_ADDR"] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		cmd := exec.Command(bin)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		in := &instance{t: t, id: env["WR_ADDR"], logs: &syncBuffer{}, done: make(chan error, 1), exited: make(chan struct{}), cmd: cmd}
		cmd.Stdout, cmd.Stderr = in.logs, stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			err := cmd.Wait()
			close(in.exited)
			in.done <- err
		}()
		t.Cleanup(in.stop)
		// Generous: the first start runs initdb.
		url, err := listening(in.logs, in.done, 3*time.Minute)
		if err == nil {
			in.url = url
			return in
		}
		if attempt < 3 && strings.Contains(in.logs.String()+fmt.Sprint(stderr), "address already in use") {
			continue
		}
		t.Fatalf("start: %v\nstderr:\n%v", err, stderr)
	}
}

// waitForOutput waits for a line of out that starts with prefix and returns the rest of it.
func waitForOutput(t *testing.T, out *syncBuffer, done chan error, prefix string) string {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		text, changed := out.since(0)
		for _, line := range strings.Split(strings.ReplaceAll(text, "\r", ""), "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok && strings.HasSuffix(text, "\n") {
				return rest
			}
		}
		select {
		case <-changed:
		case err := <-done:
			done <- err
			t.Fatalf("the server exited before printing %q: %v\n%s", prefix, err, text)
		case <-deadline.C:
			t.Fatalf("no line %q within a minute:\n%s", prefix, text)
		}
	}
}

// traversableDir is a temporary directory the postgres OS user can traverse when the tests
// run as root (t.TempDir is 0700), removed when the test ends.
func traversableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wr-admintoken-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAdminTokenFileRefusals: a token file another user could know — open to others, a
// symbolic link, one that holds no token — stops the start with a message that names the
// file and the way out, and never the token; a missing directory is made.
func TestAdminTokenFileRefusals(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-token-in-a-file"
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
	}{
		{"open to others", func(t *testing.T, path string) {
			writeFile(t, path, secret+"\n", 0o644)
		}, "is open to other users (mode 0644"},
		{"symbolic link", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			writeFile(t, target, secret+"\n", 0o600)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "is not a regular file"},
		{"empty", func(t *testing.T, path string) { writeFile(t, path, "", 0o600) }, "does not hold one token"},
		{"two words", func(t *testing.T, path string) { writeFile(t, path, secret+" and more\n", 0o600) }, "does not hold one token"},
		{"too short", func(t *testing.T, path string) { writeFile(t, path, "short\n", 0o600) }, "does not hold one token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "waitroom-admin-token-default")
			tc.setup(t, path)
			_, _, err := storedAdminToken(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) ||
				!strings.Contains(err.Error(), "WR_ADMIN_TOKEN") || strings.Contains(err.Error(), secret) {
				t.Fatalf("error %v: want one naming %s, saying %q and the way out (WR_ADMIN_TOKEN), without the token", err, path, tc.want)
			}
		})
	}
	t.Run("hand-written token kept", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "waitroom-admin-token-default")
		writeFile(t, path, "  "+secret+"\n\n", 0o600)
		tok, made, err := storedAdminToken(path)
		if err != nil || made || tok != secret {
			t.Fatalf("got %q, made %v, %v; want the file's token, not made", tok, made, err)
		}
	})
	t.Run("directory made", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "a", "b", "waitroom-admin-token-x")
		tok, made, err := storedAdminToken(path)
		if err != nil || !made || len(tok) != 48 {
			t.Fatalf("got %d characters, made %v, %v", len(tok), made, err)
		}
		fi, err := os.Stat(filepath.Dir(path))
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("directory: %v, mode %v; want 0700", err, fi.Mode().Perm())
		}
		if again, made, err := storedAdminToken(path); err != nil || made || again != tok {
			t.Fatalf("read again: %v, made %v", err, made)
		}
	})
	t.Run("the same token as WR_ADMIN_VIEWER_TOKEN", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "waitroom-admin-token-default"), secret+"-viewer\n", 0o600)
		var log bytes.Buffer
		_, err := generatedAdminToken(config{DataDir: dir, InstanceIDUnset: true, Addr: ":8080", AdminViewerToken: secret + "-viewer"},
			"", devNull(t), zerolog.New(&log))
		if err == nil || !strings.Contains(err.Error(), "WR_ADMIN_VIEWER_TOKEN") || strings.Contains(err.Error(), secret) {
			t.Fatalf("error %v: want the clash named, without the token", err)
		}
	})
}

// TestAdminTokenFilePlace: the file is per data directory and instance name, in the local
// PostgreSQL's data directory when the server started one.
func TestAdminTokenFilePlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		cfg        config
		pgData     string
		want       string
		wantSuffix string
	}{
		{"local PostgreSQL", config{DataDir: "/srv/ignored", InstanceID: "host-123", InstanceIDUnset: true}, "/var/tmp/waitroom-pg/pg15", "/var/tmp/waitroom-pg/pg15/waitroom-admin-token-default", ""},
		{"WR_DATA_DIR", config{DataDir: "/srv/wr", InstanceID: "a"}, "", "/srv/wr/waitroom-admin-token-a", ""},
		{"instance with a slash", config{DataDir: "/srv/wr", InstanceID: "a/../b"}, "", "/srv/wr/waitroom-admin-token-a_.._b", ""},
		{"cache directory", config{InstanceID: "h-1", InstanceIDUnset: true}, "", "", filepath.Join("waitroom", "waitroom-admin-token-default")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := adminTokenFile(tc.cfg, tc.pgData)
			switch {
			case err != nil:
				t.Fatal(err)
			case tc.want != "" && got != tc.want:
				t.Fatalf("%s, want %s", got, tc.want)
			case tc.wantSuffix != "" && (!strings.HasSuffix(got, tc.wantSuffix) || !filepath.IsAbs(got)):
				t.Fatalf("%s, want an absolute path ending in %s", got, tc.wantSuffix)
			}
		})
	}
}

// TestSignInLink: the link names the listening port on loopback (or the host WR_ADDR
// names), carries the token in the fragment escaped for it, and there is none when the port
// is chosen at start. Off a terminal only the file is named.
func TestSignInLink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, tok, want string }{
		{":8080", "abc123", "http://127.0.0.1:8080/admin#token=abc123"},
		{"0.0.0.0:9000", "abc123", "http://127.0.0.1:9000/admin#token=abc123"},
		{"[::]:9000", "abc123", "http://127.0.0.1:9000/admin#token=abc123"},
		{"localhost:8081", "a&b=c#d", "http://localhost:8081/admin#token=a%26b%3Dc%23d"},
		{"[::1]:8081", "abc123", "http://[::1]:8081/admin#token=abc123"},
		{"127.0.0.1:0", "abc123", ""},
	} {
		if got := signInLink(tc.addr, tc.tok); got != tc.want {
			t.Errorf("signInLink(%q): %q, want %q", tc.addr, got, tc.want)
		}
	}
	var out bytes.Buffer
	printSignIn(&out, false, ":8080", "/d/waitroom-admin-token-default", "abc123-token", true)
	if s := out.String(); strings.Contains(s, "abc123-token") || !strings.Contains(s, "/d/waitroom-admin-token-default") {
		t.Fatalf("off a terminal: %q", s)
	}
	out.Reset()
	printSignIn(&out, true, "127.0.0.1:0", "/d/f", "abc123-token", false)
	if s := out.String(); strings.Contains(s, "abc123-token") || !strings.Contains(s, "listening") {
		t.Fatalf("on a terminal with port 0: %q", s)
	}
}

func writeFile(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func devNull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// TestBrowserAdminSignInLink opens the sign-in link's form, /admin#token=…, in headless
// Chromium: the dashboard opens signed in, the token is kept in sessionStorage as a typed one
// is, and the address no longer holds it. A link with a wrong token lands on the sign-in form
// with the server's refusal.
func TestBrowserAdminSignInLink(t *testing.T) {
	t.Parallel()
	ctx, in := browserInstance(t, "signin-link", 60*time.Second, nil)
	b := startBrowser(t, ctx)
	p := b.open(t, "admin")
	p.navigate(in.url + "/admin#token=" + adminToken)
	p.waitJS("the dashboard, signed in from the link", 15*time.Second, `(() => {
		return !document.getElementById('dashboard').hidden && document.getElementById('login').hidden &&
			document.getElementById('admin-conn').dataset.state === 'live';
	})()`)
	var state struct {
		Hash, Href, Stored string
	}
	raw := p.eval(`JSON.stringify({hash: location.hash, href: location.href, stored: sessionStorage.getItem('wr_admin_token')})`)
	if err := json.Unmarshal([]byte(raw), &state); err != nil {
		t.Fatalf("page state %q: %v", raw, err)
	}
	if state.Hash != "" || strings.Contains(state.Href, adminToken) || state.Stored != adminToken {
		t.Fatalf("after the link: hash %q, address %q, stored %q; want the token stored and gone from the address", state.Hash, state.Href, state.Stored)
	}

	p2 := b.open(t, "admin-wrong")
	p2.navigate(in.url + "/admin#token=not-the-admin-token")
	p2.waitJS("the sign-in form with the refusal", 15*time.Second, `(() => {
		const err = document.getElementById('login-error');
		return !document.getElementById('login').hidden && document.getElementById('dashboard').hidden &&
			!err.hidden && err.textContent.trim() !== '' && location.hash === '';
	})()`)
}
