package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// instruction is one Dockerfile instruction, its continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, HEALTHCHECK…
	args string
	line int
}

// parseDockerfile splits a Dockerfile into stages (from each FROM on) of instructions.
func parseDockerfile(text string) ([][]instruction, error) {
	var stages [][]instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if more, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(more + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" { // an ARG before the first FROM belongs to no stage
				continue
			}
			return nil, fmt.Errorf("line %d: %s before the first FROM", start, in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("line %d: the file ends inside a continued instruction", start)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("no FROM")
	}
	return stages, nil
}

// image is what the final stage of the Dockerfile says about the image it makes.
type image struct {
	healthcheck []string          // the HEALTHCHECK command, exec form
	entrypoint  []string          // ENTRYPOINT, exec form
	user        string            // the last USER
	env         map[string]string // ENV of the final stage
	copied      []string          // destinations of COPY --from
	context     []string          // files COPY takes from the build context
}

// checkDockerfile returns every way the Dockerfile breaks what its comments promise: a
// non-root user; WR_DEMO=false; a HEALTHCHECK that runs the binary's healthcheck subcommand;
// the version stamped into a variable that exists. It also returns what the image is.
func checkDockerfile(text string, versionVars []string) (*image, []string) {
	var p []string
	bad := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	stages, err := parseDockerfile(text)
	if err != nil {
		return nil, []string{"Dockerfile: " + err.Error()}
	}
	final := stages[len(stages)-1]
	img := &image{env: map[string]string{}}
	execForm := func(in instruction, s string) []string {
		var argv []string
		if err := json.Unmarshal([]byte(s), &argv); err != nil || len(argv) == 0 {
			bad("line %d: %s %s: want the exec form [\"…\", …] (no shell in the runtime image)", in.line, in.cmd, s)
			return nil
		}
		return argv
	}
	for _, in := range final {
		switch in.cmd {
		case "USER":
			img.user = in.args
		case "ENV":
			for k, v := range envPairs(in.args) {
				img.env[k] = v
			}
		case "ENTRYPOINT":
			img.entrypoint = execForm(in, in.args)
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) > 0 && strings.HasPrefix(f[0], "--from=") {
				img.copied = append(img.copied, f[len(f)-1])
			} else {
				img.context = append(img.context, f[:max(len(f)-1, 0)]...)
			}
		case "HEALTHCHECK":
			rest := in.args
			for strings.HasPrefix(rest, "--") {
				opt, after, _ := strings.Cut(rest, " ")
				rest = strings.TrimSpace(after)
				name, v, _ := strings.Cut(strings.TrimPrefix(opt, "--"), "=")
				switch name {
				case "interval", "timeout", "start-period", "start-interval":
					if _, err := time.ParseDuration(v); err != nil {
						bad("line %d: HEALTHCHECK --%s=%q is not a duration", in.line, name, v)
					}
				}
			}
			if c, ok := strings.CutPrefix(rest, "CMD "); ok {
				img.healthcheck = execForm(in, strings.TrimSpace(c))
			} else {
				bad("line %d: HEALTHCHECK %s: want CMD [\"/binary\", \"healthcheck\"]", in.line, rest)
			}
		}
	}
	switch u, _, _ := strings.Cut(img.user, ":"); u {
	case "", "root", "0":
		bad("the runtime image runs as %q: want a non-root USER", img.user)
	}
	if v, ok := img.env["WR_DEMO"]; !ok || v != "false" {
		bad("the runtime image: ENV WR_DEMO=%q, want false (the server's own default makes the demo queue)", v)
	}
	for _, f := range []string{"LICENSE", "NOTICE"} {
		if !slices.Contains(img.context, f) {
			bad("the runtime image lacks %s (the licence and the third-party notices go with the binary)", f)
		}
	}
	if len(img.entrypoint) == 0 {
		bad("the runtime image has no ENTRYPOINT")
	} else {
		bin := img.entrypoint[0]
		if !slices.Contains(img.copied, bin) {
			bad("ENTRYPOINT %s is not a file COPY --from puts into the image (%q)", bin, img.copied)
		}
		if want := []string{bin, "healthcheck"}; !slices.Equal(img.healthcheck, want) {
			bad("HEALTHCHECK runs %q, want %q", img.healthcheck, want)
		}
	}

	// The build: the version stamped into a variable of package main that exists (-X on a
	// missing name is silently ignored), from a build argument declared before it is used.
	var build strings.Builder
	argDeclared := false
	for _, st := range stages[:len(stages)-1] {
		for _, in := range st {
			if in.cmd == "ARG" && strings.HasPrefix(in.args, "VERSION") {
				argDeclared = true
			}
			if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
				build.WriteString(in.args)
				if strings.Contains(in.args, "${VERSION}") && !argDeclared {
					bad("line %d: the build uses ${VERSION} before ARG VERSION", in.line)
				}
			}
		}
	}
	m := regexp.MustCompile(`-X[= ]main\.([A-Za-z_][A-Za-z0-9_]*)=\$\{VERSION\}`).FindStringSubmatch(build.String())
	switch {
	case build.Len() == 0:
		bad("no RUN go build in a build stage")
	case m == nil:
		bad("the go build stamps no version: want -ldflags \"-X main.version=${VERSION}\"")
	case !slices.Contains(versionVars, m[1]):
		bad("the go build stamps main.%s, which is not a string variable of package main in server/ (%q)", m[1], versionVars)
	}
	if !strings.Contains(build.String(), "-trimpath") {
		bad("the go build lacks -trimpath (the image would hold the build machine's paths)")
	}
	return img, p
}

// envPairs reads the arguments of ENV: key=value pairs, or the old "key value" form.
func envPairs(args string) map[string]string {
	out := map[string]string{}
	if !strings.Contains(strings.Fields(args)[0], "=") {
		k, v, _ := strings.Cut(args, " ")
		out[k] = strings.TrimSpace(v)
		return out
	}
	for _, f := range strings.Fields(args) {
		k, v, _ := strings.Cut(f, "=")
		out[k] = strings.Trim(v, `"`)
	}
	return out
}

// stringVars is the package-level string variables of package main in dir (its non-test
// files).
func stringVars(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "main" {
			continue
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "string" && len(vs.Values) == 0 {
					for _, n := range vs.Names {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}

func readDockerfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loadImage checks the Dockerfile and returns what its runtime image is.
func loadImage(t *testing.T) *image {
	t.Helper()
	img, problems := checkDockerfile(readDockerfile(t), stringVars(t, "../server"))
	for _, p := range problems {
		t.Error(p)
	}
	if img == nil {
		t.FailNow()
	}
	return img
}

// TestDockerfile checks the Dockerfile's promises: non-root, demo off, the healthcheck
// subcommand, the version stamp.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	img := loadImage(t)
	t.Logf("runtime image: user %s, WR_DEMO=%s, HEALTHCHECK %q", img.user, img.env["WR_DEMO"], img.healthcheck)
}

// TestDockerfileChecksCatchMistakes changes the real Dockerfile one way at a time.
func TestDockerfileChecksCatchMistakes(t *testing.T) {
	t.Parallel()
	vars := stringVars(t, "../server")
	for _, tc := range []struct{ name, old, new, want string }{
		{"demo on", "WR_DEMO=false", "WR_DEMO=true", `ENV WR_DEMO="true"`},
		{"no demo setting", " WR_DEMO=false", "", `ENV WR_DEMO=""`},
		{"root", "USER nonroot:nonroot", "USER root", `runs as "root"`},
		{"no user", "USER nonroot:nonroot\n", "", `runs as ""`},
		{"no healthcheck", `HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 CMD ["/waitroom", "healthcheck"]`, "", "HEALTHCHECK runs []"},
		{"healthcheck by shell", `CMD ["/waitroom", "healthcheck"]`, `CMD /waitroom healthcheck`, "want the exec form"},
		{"healthcheck of another path", `CMD ["/waitroom", "healthcheck"]`, `CMD ["/bin/waitroom", "healthcheck"]`, "HEALTHCHECK runs"},
		{"bad interval", "--interval=10s", "--interval=10", `--interval="10" is not a duration`},
		{"version into nothing", "-X main.version=", "-X main.versio=", "main.versio, which is not a string variable"},
		{"no version", ` -X main.version=${VERSION}`, "", "stamps no version"},
		{"version before its ARG", "ARG VERSION=dev\n", "", "before ARG VERSION"},
		{"no notices", "COPY LICENSE NOTICE", "COPY LICENSE", "the runtime image lacks NOTICE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			text := readDockerfile(t)
			if strings.Count(text, tc.old) != 1 {
				t.Fatalf("Dockerfile changed shape: %q appears %d times", tc.old, strings.Count(text, tc.old))
			}
			_, problems := checkDockerfile(strings.Replace(text, tc.old, tc.new, 1), vars)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("want a problem containing %q, got %q", tc.want, problems)
			}
		})
	}
}

// mustIgnore are what the build context must leave out: history (large, and no business in
// an image), test and benchmark output, screenshots, installed JavaScript packages.
var mustIgnore = []string{".git", "k6/results", "screenshots", "**/node_modules", "**/*.test"}

// checkDockerignore returns the patterns of .dockerignore that leave out a file the build
// reads (needed: paths relative to the repository), and the mustIgnore entries it lacks.
// Patterns are matched as Docker does for the forms used here: from the context's root,
// a match on a directory leaving out everything in it, "**/" matching at any depth.
// Exceptions ("!") are refused: this check does not model them.
func checkDockerignore(text string, needed []string) []string {
	var p []string
	var patterns []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			p = append(p, fmt.Sprintf(".dockerignore: exception %q: not modelled by this test", line))
			continue
		}
		patterns = append(patterns, strings.TrimPrefix(filepath.Clean(line), "/"))
	}
	for _, want := range mustIgnore {
		if !slices.Contains(patterns, want) {
			p = append(p, fmt.Sprintf(".dockerignore: lacks %s", want))
		}
	}
	for _, path := range needed {
		for _, pat := range patterns {
			if ignores(pat, path) {
				p = append(p, fmt.Sprintf(".dockerignore: %q leaves out %s, which the build reads", pat, path))
			}
		}
	}
	return p
}

// ignores reports whether pattern leaves path out: it matches the path or a directory
// above it.
func ignores(pattern, path string) bool {
	parts := strings.Split(path, "/")
	for end := 1; end <= len(parts); end++ {
		prefix := parts[:end]
		if rest, ok := strings.CutPrefix(pattern, "**/"); ok {
			for start := range prefix {
				if m, _ := filepath.Match(rest, strings.Join(prefix[start:], "/")); m {
					return true
				}
			}
			continue
		}
		if m, _ := filepath.Match(pattern, strings.Join(prefix, "/")); m {
			return true
		}
	}
	return false
}

// buildInputs is every file the image's build reads from the repository: the LICENSE and
// NOTICE it copies, and what `go build ./server` reads — go.mod, go.sum and the files of
// each of the module's packages it builds (embedded files included).
func buildInputs(t *testing.T) []string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`, "./server")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	needed := []string{"LICENSE", "NOTICE", "go.mod", "go.sum"}
	for _, f := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		needed = append(needed, filepath.ToSlash(rel))
	}
	if len(needed) < 20 || !slices.Contains(needed, "server/main.go") || !slices.Contains(needed, "docs/openapi.yaml") {
		t.Fatalf("go list named %d files, without server/main.go or docs/openapi.yaml: has its output changed?", len(needed))
	}
	return needed
}

// TestDockerignore checks that .dockerignore leaves out what it must and keeps every file
// the server's build reads.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	needed := buildInputs(t)
	for _, p := range checkDockerignore(string(b), needed) {
		t.Error(p)
	}
	t.Run("catches mistakes", func(t *testing.T) {
		for pat, want := range map[string]string{
			"static":     `"static" leaves out static/`,
			"**/*.sql":   `"**/*.sql" leaves out orders/migrations/`,
			"docs":       `"docs" leaves out docs/openapi.yaml`,
			"*.sum":      `"*.sum" leaves out go.sum`,
			"!README.md": "not modelled",
		} {
			problems := checkDockerignore(string(b)+"\n"+pat+"\n", needed)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, want) }) {
				t.Errorf("with %q: want a problem containing %q, got %q", pat, want, problems)
			}
		}
		problems := checkDockerignore(strings.Replace(string(b), "\n.git\n", "\n", 1), needed)
		if !slices.Contains(problems, ".dockerignore: lacks .git") {
			t.Errorf("without .git: got %q", problems)
		}
	})
}
