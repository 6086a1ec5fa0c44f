package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue/redistest"
)

// runCLI runs the command line with env (NAME=value lines) and returns the exit status,
// stdout and stderr. ctx bounds it: a subcommand that started a server instead of
// answering would run until ctx ends, so the test also checks that ctx did not end.
func runCLI(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := cli(ctx, args, environ(env), &out, &errOut)
	if ctx.Err() != nil {
		t.Fatalf("waitroom %s ran until its context ended (%v): it started something", strings.Join(args, " "), ctx.Err())
	}
	return code, out.String(), errOut.String()
}

// freeAddr is a loopback address nothing listens on (taken and let go).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestCLIHelpStartsNothing: every spelling of help prints the commands and every setting
// (name, default, accepted values, meaning) on stdout and exits 0 on its own — no server
// on WR_ADDR, and without REDIS_URL and DATABASE_URL a start would begin a local
// PostgreSQL, which returning at once rules out.
func TestCLIHelpStartsNothing(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}} {
		t.Run(args[0], func(t *testing.T) {
			addr := freeAddr(t)
			code, out, errOut := runCLI(t, []string{"WR_ADDR=" + addr}, args...)
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("WR_ADDR %s is taken after -h: %v", addr, err)
			}
			ln.Close()
			for _, c := range commands() {
				if !c.hidden && !strings.Contains(out, "waitroom "+c.name) {
					t.Errorf("usage lacks the command %s", c.name)
				}
			}
			if !strings.Contains(out, "Health check:") || !strings.Contains(out, `503 "full"`) {
				t.Errorf("usage does not say what the health check counts as healthy:\n%s", out)
			}
			for _, s := range settings {
				head := "\n  " + s.name + "=" + s.def + "  [" + s.accepts.String() + "]\n"
				i := strings.Index(out, head)
				if i < 0 {
					t.Errorf("usage lacks %q", head)
					continue
				}
				// The meaning follows, wrapped and indented.
				var meaning []string
				for _, line := range strings.Split(out[i+len(head):], "\n") {
					if !strings.HasPrefix(line, "      ") {
						break
					}
					meaning = append(meaning, strings.Fields(line)...)
				}
				if got, want := strings.Join(meaning, " "), strings.Join(strings.Fields(s.help), " "); got != want {
					t.Errorf("%s: meaning %q, want %q", s.name, got, want)
				}
			}
			for _, line := range strings.Split(out, "\n") {
				if n := len([]rune(line)); n > 80 && strings.Contains(strings.TrimSpace(line), " ") {
					t.Errorf("a line of %d columns: %q", n, line)
				}
			}
		})
	}
}

// TestCLIUnknownArgument: a command line that is not one exits 2 with the usage on stderr
// and nothing on stdout; help for a command is that command's usage.
func TestCLIUnknownArgument(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `waitroom: unknown command "bogus"`},
		{[]string{"-x"}, `waitroom: unknown command "-x"`},
		{[]string{"serve"}, `waitroom: unknown command "serve"`},
		{[]string{"config", "extra"}, `waitroom config: unexpected argument "extra"`},
		{[]string{"version", "-v"}, `waitroom version: unexpected argument "-v"`},
		{[]string{"healthcheck", "--addr=:1"}, `waitroom healthcheck: unexpected argument "--addr=:1"`},
		{[]string{"help", "nope"}, `waitroom help: no command "nope"`},
		{[]string{"verify-draw", "-no-such-flag"}, "flag provided but not defined"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, nil, c.args...)
			if code != exitUsage || out != "" || !strings.HasPrefix(errOut, c.want) || !strings.Contains(errOut, "usage") && !strings.Contains(errOut, "Usage") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2, nothing, %q and the usage", code, out, errOut, c.want)
			}
		})
	}
	for _, name := range []string{"healthcheck", "config", "version"} {
		for _, args := range [][]string{{name, "-h"}, {"help", name}} {
			code, out, errOut := runCLI(t, nil, args...)
			if code != exitOK || errOut != "" || !strings.HasPrefix(out, "usage: waitroom "+name+"\n") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
			}
		}
	}
	if code, out, _ := runCLI(t, nil, "help", "verify-draw"); code != exitOK || !strings.HasPrefix(out, "usage: waitroom verify-draw") {
		t.Errorf("help verify-draw: exit %d, stdout %q", code, out)
	}
}

// TestCLIVersion: the build information as Go stamps it, and the honest "(devel)" and
// unknown revision when there is none.
func TestCLIVersion(t *testing.T) {
	t.Parallel()
	stamped := &debug.BuildInfo{Main: debug.Module{Path: "github.com/waitroom/waitroom", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want []string
	}{
		{"stamped", stamped, true, []string{"waitroom  v1.2.3\n", "revision  0123abcd\n", "time      2026-01-02T03:04:05Z\n", "modified  true (built with uncommitted changes)\n"}},
		{"unstamped", &debug.BuildInfo{Main: debug.Module{Path: "github.com/waitroom/waitroom", Version: "(devel)"}}, true, []string{"waitroom  (devel)\n", "revision  unknown (not stamped"}},
		{"no build information", nil, false, []string{"waitroom  (devel)\n", "revision  unknown"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := versionText(c.bi, c.ok)
			for _, w := range append(c.want, "go        "+runtime.Version()+" ") {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
		})
	}
	code, out, errOut := runCLI(t, nil, "version")
	if code != exitOK || errOut != "" || !strings.Contains(out, runtime.Version()) || !strings.Contains(out, "module    github.com/waitroom/waitroom\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestCLIConfig: every setting once, as NAME=value with where it came from; secrets
// masked; a misspelt WR_ name warned about with the setting it likely means; an invalid
// value exits 1 with the server's one line and prints no listing.
func TestCLIConfig(t *testing.T) {
	t.Parallel()
	const secret, token, viewer, named, dbPass, redisPass = "super-secret-value-123", "admin-secret-456",
		"viewer-secret-7890123", "named-secret-45678901", "dbpass789", "redispass321"
	env := []string{"WR_SECRET=" + secret, "WR_ADMIN_TOKEN=" + token, "WR_ADMIN_VIEWER_TOKEN=" + viewer,
		"WR_ADMIN_TOKENS=alice:operator:" + named, "DATABASE_URL=postgres://u:" + dbPass + "@h/db",
		"REDIS_URL=redis://h:6379?password=" + redisPass + "&addr=h2:6379", "WR_DEMO_RATE=3", "WR_DEMO_RAET=4",
		"HOME=/nowhere", "WR_DEMO_RATE=99", // a repeated name: the first wins, as in os.Getenv
		"WR_SMTP_URL=smtp://mailer:smtppass654@mail.example.com?from=rooms%40example.com", "WR_PUBLIC_URL=https://rooms.example.com"}
	code, out, errOut := runCLI(t, env, "config")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, s := range []string{secret, token, viewer, named, dbPass, redisPass, "smtppass654", "mailer"} {
		if strings.Contains(out, s) {
			t.Errorf("config shows the secret %q:\n%s", s, out)
		}
	}
	lines := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, "=")
		if !ok || lines[name] != "" {
			t.Errorf("line %q: not NAME=value, or a name twice", line)
		}
		lines[name] = rest
	}
	if len(lines) != len(settings) {
		t.Errorf("%d settings listed, want %d", len(lines), len(settings))
	}
	for name, want := range map[string]string{
		"WR_SECRET": "*** # environment", "WR_ADMIN_TOKEN": "*** # environment", "WR_ADMIN_VIEWER_TOKEN": "*** # environment",
		"WR_ADMIN_TOKENS": "alice:operator:*** # environment", "DATABASE_URL": "postgres://u:***@h/db # environment",
		"REDIS_URL": "redis://h:6379?password=***&addr=h2:6379 # environment", "WR_DEMO_RATE": "3 # environment",
		"WR_TICK": "100ms # default", "WR_INSTANCE_ID": "# default", "WR_SMTP_URL": "*** # environment",
	} {
		if got := strings.Join(strings.Fields(lines[name]), " "); got != want {
			t.Errorf("%s=%q, want %q", name, got, want)
		}
	}
	if !strings.Contains(out, "# warning: WR_DEMO_RAET is not a setting and is ignored; did you mean WR_DEMO_RATE?\n") {
		t.Errorf("no warning for WR_DEMO_RAET:\n%s", out)
	}

	code, out, errOut = runCLI(t, []string{"WR_DEMO_RATE=-1"}, "config")
	if code != exitFail || out != "" || errOut != "waitroom: invalid WR_DEMO_RATE=\"-1\": must be a number from 0 to 100000\n" {
		t.Fatalf("invalid value: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, []string{"WR_SECRET=short"}, "config")
	if code != exitFail || strings.Contains(errOut, "short") || !strings.Contains(errOut, "WR_SECRET") {
		t.Fatalf("invalid secret: exit %d, stderr %q (names the setting, never the value)", code, errOut)
	}
}

// TestConfigStrayVariables: which WR_ names are no setting, and which setting each is
// closest to when the slip is small.
func TestConfigStrayVariables(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, closest string }{
		{"WR_DEMO_RAET", "WR_DEMO_RATE"}, // a swap
		{"WR_DEMORATE", "WR_DEMO_RATE"},  // a letter left out
		{"WR_TICKS", "WR_TICK"},          // one too many
		{"WR_REDIS_URL", "REDIS_URL"},    // the prefix on a setting without one
		{"WR_HEARTBEET", "WR_HEARTBEAT"}, // a wrong letter
		{"WR_FOO", ""},                   // nothing near
		{"WR_COMPLETELY_UNRELATED", ""},
	} {
		if got := closestSetting(c.name); got != c.closest {
			t.Errorf("closestSetting(%s) = %q, want %q", c.name, got, c.closest)
		}
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"abc", "abc", 0}, {"abc", "acb", 1}, {"abc", "abd", 1}, {"kitten", "sitting", 3}, {"ab", "ba", 1}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
	got := strayVariables(environ{"WR_TICKS=1", "WR_ADDR=:1", "PATH=/bin", "WR_DEMO_RAET=2", "WR_TICKS=3", "REDIS_URLX=4", "WR_ONLY_NAME"})
	want := []strayVariable{{"WR_DEMO_RAET", "WR_DEMO_RATE"}, {"WR_ONLY_NAME", ""}, {"WR_TICKS", "WR_TICK"}}
	if len(got) != len(want) {
		t.Fatalf("strayVariables = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("strayVariables[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

// TestCLIWarnsOfMisspeltSettingAtStart: the server started by the command line with a
// misspelt WR_ variable runs, and its log warns naming the setting meant; the start line
// lists every setting, secrets masked.
func TestCLIWarnsOfMisspeltSettingAtStart(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	var env []string
	for k, v := range tolerantEnv(rs.URL(), testDB(t), map[string]string{"WR_INSTANCE_ID": "stray", "WR_DEMO_RAET": "3"}) {
		env = append(env, k+"="+v)
	}
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var errOut bytes.Buffer
		if code := cli(ctx, nil, environ(env), logs, &errOut); code != exitOK {
			done <- errors.New("exit " + strconv.Itoa(code) + ": " + errOut.String())
			return
		}
		done <- nil
	}()
	_, err := listening(logs, done, startTimeout)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the server: %v", err)
	}
	var warned, started bool
	for _, line := range strings.Split(logs.String(), "\n") {
		var l struct {
			Level      string            `json:"level"`
			Message    string            `json:"message"`
			Variable   string            `json:"variable"`
			DidYouMean string            `json:"did_you_mean"`
			Settings   map[string]string `json:"settings"`
			Set        []string          `json:"set"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch {
		case l.Level == "warn" && l.Variable == "WR_DEMO_RAET":
			warned = l.DidYouMean == "WR_DEMO_RATE" && strings.Contains(l.Message, "did you mean WR_DEMO_RATE?")
		case l.Message == "starting":
			started = true
			if len(l.Settings) != len(settings) {
				t.Errorf("the start log lists %d settings, want %d", len(l.Settings), len(settings))
			}
			if l.Settings["WR_SECRET"] != "***" || l.Settings["WR_ADMIN_TOKEN"] != "***" || l.Settings["WR_TICK"] != "100ms" {
				t.Errorf("start log settings: %v", l.Settings)
			}
			if !strings.Contains(strings.Join(l.Set, " "), "WR_SECRET") {
				t.Errorf("start log set: %v, want WR_SECRET among them", l.Set)
			}
		}
	}
	if !warned || !started {
		t.Fatalf("warned %v, start line %v:\n%s", warned, started, logs.String())
	}
}

// TestCLIBinary: the built binary answers as the function does — main wires the command
// line, its exit status and streams.
func TestCLIBinary(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	for _, c := range []struct {
		args           []string
		env            []string
		code           int
		stdout, stderr string // prefixes; "" wants the stream empty
	}{
		{[]string{"-h"}, nil, 0, "waitroom — a real-time virtual waiting room\n", ""},
		{[]string{"bogus"}, nil, 2, "", `waitroom: unknown command "bogus"`},
		{[]string{"version"}, nil, 0, "waitroom  ", ""},
		{[]string{"config"}, []string{"WR_TICK=fast"}, 1, "", `waitroom: invalid WR_TICK="fast"`},
		{[]string{"healthcheck"}, []string{"WR_ADDR=" + freeAddr(t)}, 1, "", "unhealthy: http://127.0.0.1:"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, c.args...)
			cmd.Env = append([]string{"WR_ADDR=" + freeAddr(t)}, c.env...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("still running after %v: it started something", time.Minute)
			}
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			check := func(what, got, want string) {
				if (want == "") != (got == "") || !strings.HasPrefix(got, want) {
					t.Errorf("%s %q, want it to start with %q", what, got, want)
				}
			}
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			check("stdout", out.String(), c.stdout)
			check("stderr", errOut.String(), c.stderr)
		})
	}
}
