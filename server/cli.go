package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"
)

// The command line. `waitroom` alone runs the server; every subcommand answers and exits
// without starting anything (no listener, no Redis, no PostgreSQL). What the help, the
// config listing and docs/CONFIGURATION.md say about settings is made from the settings
// table (config.go), so it cannot drift from what the server parses.

// Exit statuses of the command line (verify-draw keeps its own, verifydraw.go).
const (
	exitOK    = 0
	exitFail  = 1 // the server stopped with an error, a value is invalid, the health check failed
	exitUsage = 2 // an unknown command or argument
)

// environ is the process's environment as NAME=value lines (os.Environ): the settings are
// read from it, and a WR_ name in it that is no setting is warned about.
type environ []string

// getenv answers as os.Getenv does on Unix, where the first of repeated names wins.
func (e environ) getenv(name string) string {
	for _, kv := range e {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// command is one subcommand: how the usage shows it, and what it runs.
type command struct {
	name    string
	args    string // shown after the name in the usage
	summary string
	help    string // the subcommand's own -h (after the summary); empty: the summary says it all
	hidden  bool   // a maintainer's tool, not in the usage
	ownArgs bool   // reads its own arguments (flags, a command name); the others take none
	run     func(ctx context.Context, args []string, env environ, stdout, stderr io.Writer) int
}

// commands is the subcommands; a func, not a var, since help reads the table it is in.
func commands() []command {
	return []command{
		{name: "healthcheck", summary: "exit 0 if the server on WR_ADDR is alive, else 1",
			help: healthHelp, run: runHealthcheck},
		{name: "config", summary: "print the settings in effect, secrets masked",
			help: configHelp, run: runConfig},
		{name: "version", summary: "print the version, VCS revision and Go version",
			help: versionHelp, run: runVersion},
		{name: "verify-draw", args: "…", summary: "recompute a queue's published draw (see its -h)", ownArgs: true,
			run: func(_ context.Context, args []string, _ environ, stdout, stderr io.Writer) int {
				return verifyDrawMain(args, stdout, stderr)
			}},
		{name: "help", args: "[command]", summary: "print this help (also -h, --help), or a command's",
			ownArgs: true, run: runHelp},
		{name: "config-doc", summary: "print docs/CONFIGURATION.md as the settings table makes it", hidden: true,
			run: func(_ context.Context, _ []string, _ environ, stdout, _ io.Writer) int {
				fmt.Fprint(stdout, configDoc())
				return exitOK
			}},
	}
}

// cli runs the command line args (without the program name) and returns the exit status.
func cli(ctx context.Context, args []string, env environ, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		if err := run(ctx, env.getenv, stdout, strayVariables(env)...); err != nil {
			fmt.Fprintln(stderr, "waitroom:", err)
			return exitFail
		}
		return exitOK
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage(true))
		return exitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		if c.ownArgs {
			return c.run(ctx, args[1:], env, stdout, stderr)
		}
		if len(args) > 1 {
			if len(args) == 2 && isHelp(args[1]) {
				fmt.Fprint(stdout, c.usage())
				return exitOK
			}
			fmt.Fprintf(stderr, "waitroom %s: unexpected argument %q\n\n%s", c.name, args[1], c.usage())
			return exitUsage
		}
		return c.run(ctx, nil, env, stdout, stderr)
	}
	fmt.Fprintf(stderr, "waitroom: unknown command %q\n\n%s", args[0], usage(false))
	return exitUsage
}

// isHelp is a request for help in the flag package's spellings; the word help is the
// command of that name.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// usage is the command summary and, withSettings, every setting (-h). An unknown
// command gets it without the settings, which would push the mistake off the screen.
func usage(withSettings bool) string {
	var b strings.Builder
	b.WriteString("waitroom — a real-time virtual waiting room\n\nUsage:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  waitroom\t%s\n", serveSummary)
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(tw, "  waitroom %s\t%s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
		}
	}
	tw.Flush()
	if !withSettings {
		b.WriteString("\nwaitroom -h also lists every setting.\n")
		return b.String()
	}
	b.WriteString("\nHealth check:\n")
	writeWrapped(&b, healthHelp, "  ", helpWidth)
	b.WriteString("\nSettings (environment variables; docs/CONFIGURATION.md has the same):\n")
	writeSettings(&b)
	return b.String()
}

// serveSummary is the line of the usage for `waitroom` alone.
const serveSummary = "run the server, configured by the environment"

// configHelp and versionHelp say more in `waitroom config -h` and `waitroom version -h`.
const (
	configHelp = "Each setting is one line NAME=value, marked # environment or # default; secrets show as ***, the named admin tokens as name:role:***, URLs without their password. " +
		"A WR_ variable that is no setting comes first, as a warning naming the closest setting. " +
		"A value the server would refuse exits 1 with the one line the server would stop with."
	versionHelp = "The version is the one stamped at link time (-ldflags -X main.version=…, as the Dockerfile does), else the module version; the revision comes from the build information Go stamps into the binary; a build without it (go run, -buildvcs=false, no git checkout) says (devel) and that the revision is unknown."
)

// usage is a subcommand's -h.
func (c command) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: waitroom %s\n\n", strings.TrimSpace(c.name+" "+c.args))
	writeWrapped(&b, strings.ToUpper(c.summary[:1])+c.summary[1:]+".", "", helpWidth)
	if c.help != "" {
		b.WriteString("\n")
		writeWrapped(&b, c.help, "", helpWidth)
	}
	return b.String()
}

// runHelp is `waitroom help [command]`.
func runHelp(_ context.Context, args []string, _ environ, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage(true))
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] && len(args) == 1 {
			if c.name == "verify-draw" {
				return verifyDrawMain([]string{"-h"}, stdout, stdout) // asked for: on stdout
			}
			fmt.Fprint(stdout, c.usage())
			return exitOK
		}
	}
	fmt.Fprintf(stderr, "waitroom help: no command %q\n\n%s", strings.Join(args, " "), usage(false))
	return exitUsage
}

// runConfig is `waitroom config`: each setting as NAME=value with where it came from,
// secrets masked, after a warning for each WR_ variable that is no setting. An invalid
// value is the one line the server would stop with.
func runConfig(_ context.Context, _ []string, env environ, stdout, stderr io.Writer) int {
	cfg, err := loadConfig(env.getenv)
	if err != nil {
		fmt.Fprintln(stderr, "waitroom:", err)
		return exitFail
	}
	var b strings.Builder
	b.WriteString("# the settings in effect: the environment's, else the default; secrets masked\n")
	for _, v := range strayVariables(env) {
		fmt.Fprintf(&b, "# warning: %s\n", v)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, t := range cfg.texts {
		from := "default"
		if t.set {
			from = "environment"
		}
		fmt.Fprintf(tw, "%s=%s\t# %s\n", t.name, shown(t.name, t.text), from)
	}
	tw.Flush()
	fmt.Fprint(stdout, b.String())
	return exitOK
}

// linkedVersion is the version stamped at link time (main.version, version.go), which wins
// over the module's.
func linkedVersion() string { return version }

// runVersion is `waitroom version`.
func runVersion(_ context.Context, _ []string, _ environ, stdout, _ io.Writer) int {
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprint(stdout, versionText(bi, ok))
	return exitOK
}

// versionText says what the binary was built from. A build outside a VCS checkout, with
// -buildvcs=false, or by go run carries no revision: it says so instead of guessing.
func versionText(bi *debug.BuildInfo, ok bool) string {
	version, path := "(devel)", "waitroom"
	vcs := map[string]string{}
	if ok && bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.Main.Path != "" {
			path = bi.Main.Path
		}
		for _, s := range bi.Settings {
			vcs[s.Key] = s.Value
		}
	}
	if stamped := linkedVersion(); stamped != "" {
		version = stamped
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "waitroom\t%s\n", version)
	fmt.Fprintf(tw, "module\t%s\n", path)
	if rev := vcs["vcs.revision"]; rev != "" {
		fmt.Fprintf(tw, "revision\t%s\n", rev)
		if t := vcs["vcs.time"]; t != "" {
			fmt.Fprintf(tw, "time\t%s\n", t)
		}
		switch vcs["vcs.modified"] {
		case "true":
			fmt.Fprintf(tw, "modified\ttrue (built with uncommitted changes)\n")
		case "false":
			fmt.Fprintf(tw, "modified\tfalse\n")
		}
	} else {
		fmt.Fprintf(tw, "revision\tunknown (not stamped: built by go run, with -buildvcs=false, or outside a git checkout)\n")
	}
	fmt.Fprintf(tw, "go\t%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	tw.Flush()
	return b.String()
}
