package deploy

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// composeFile is the part of the Compose specification docker-compose.yml uses; any other
// key fails the strict decoding (a misspelled "healtcheck" would otherwise be dropped and
// the service would run without one).
type composeFile struct {
	Services map[string]*service `yaml:"services"`
	Volumes  map[string]struct{} `yaml:"volumes"`
}

type service struct {
	Image       string                `yaml:"image"`
	Build       string                `yaml:"build"`
	Command     []string              `yaml:"command"`
	Environment map[string]string     `yaml:"environment"`
	Volumes     []string              `yaml:"volumes"`
	Ports       []string              `yaml:"ports"`
	Restart     string                `yaml:"restart"`
	DependsOn   map[string]dependency `yaml:"depends_on"` // the long form: a list has no condition
	Healthcheck *healthcheck          `yaml:"healthcheck"`
}

type dependency struct {
	Condition string `yaml:"condition"`
	Restart   *bool  `yaml:"restart"`
	Required  *bool  `yaml:"required"`
}

type healthcheck struct {
	Test          []string `yaml:"test"`
	Interval      string   `yaml:"interval"`
	Timeout       string   `yaml:"timeout"`
	StartPeriod   string   `yaml:"start_period"`
	StartInterval string   `yaml:"start_interval"`
	Retries       int      `yaml:"retries"`
	Disable       bool     `yaml:"disable"`
}

// decodeCompose decodes a Compose file strictly: unknown keys and a wrong shape fail.
func decodeCompose(data []byte) (*composeFile, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c composeFile
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	return &c, nil
}

func loadCompose(t *testing.T) *composeFile {
	t.Helper()
	data, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodeCompose(data)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// requiredEnv are the settings every instance must be given, the same on each: Compose
// refuses to start without them (${NAME:?message}) instead of letting each instance make a
// random one of its own.
var requiredEnv = []string{"WR_SECRET", "WR_ADMIN_TOKEN"}

// checkCompose returns every way the Compose file breaks the rules of its header: a
// healthcheck and a restart policy on every service, every dependency waited for until it
// is healthy, the instances checked with the image's own healthcheck and given only
// settings the server knows.
func checkCompose(c *composeFile, img *image, settings map[string]bool) []string {
	var p []string
	bad := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if len(c.Services) == 0 {
		return []string{"no services"}
	}
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		if s.Restart != "unless-stopped" {
			bad("service %s: restart %q, want unless-stopped", name, s.Restart)
		}
		checkHealthcheck(name, s.Healthcheck, bad)
		for _, dep := range sortedKeys(s.DependsOn) {
			if _, ok := c.Services[dep]; !ok {
				bad("service %s: depends on %s, which is not a service", name, dep)
			}
			if cond := s.DependsOn[dep].Condition; cond != "service_healthy" {
				bad("service %s: depends on %s with condition %q, want service_healthy (started is not ready)", name, dep, cond)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			switch {
			case strings.HasPrefix(src, "./"):
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					bad("service %s: mounts %s: %v", name, src, err)
				}
			case !strings.HasPrefix(src, "/"):
				if _, ok := c.Volumes[src]; !ok {
					bad("service %s: volume %s is not declared under volumes", name, src)
				}
			}
		}
		if s.Build == "" {
			continue
		}
		// An instance of the image built here.
		want := append([]string{"CMD"}, img.healthcheck...)
		if s.Healthcheck != nil && !slices.Equal(s.Healthcheck.Test, want) {
			bad("service %s: healthcheck %q, want the image's own %q", name, s.Healthcheck.Test, want)
		}
		for _, k := range sortedKeys(s.Environment) {
			if !settings[k] {
				bad("service %s: environment %s is not a setting of the server (server/config.go)", name, k)
			}
		}
		for _, k := range requiredEnv {
			if v := s.Environment[k]; !strings.HasPrefix(v, "${"+k+":?") {
				bad("service %s: %s=%q, want ${%s:?…} (required, the same on every instance)", name, k, v, k)
			}
		}
		// The backends it is pointed at are services it waits for.
		for _, k := range []string{"REDIS_URL", "DATABASE_URL"} {
			u, err := url.Parse(s.Environment[k])
			if err != nil || u.Hostname() == "" {
				bad("service %s: %s=%q names no host", name, k, s.Environment[k])
				continue
			}
			if _, ok := c.Services[u.Hostname()]; ok {
				if _, waits := s.DependsOn[u.Hostname()]; !waits {
					bad("service %s: %s names service %s, which it does not depend on", name, k, u.Hostname())
				}
			}
		}
	}
	return p
}

// checkHealthcheck checks one service's healthcheck: present, on, a command in exec form
// (CMD) or for the shell (CMD-SHELL), and timings that parse, with the timeout below the
// interval.
func checkHealthcheck(name string, h *healthcheck, bad func(string, ...any)) {
	if h == nil || h.Disable {
		bad("service %s: no healthcheck", name)
		return
	}
	if len(h.Test) < 2 || (h.Test[0] != "CMD" && h.Test[0] != "CMD-SHELL") {
		bad("service %s: healthcheck test %q: want [\"CMD\", …] or [\"CMD-SHELL\", \"…\"]", name, h.Test)
	}
	durations := map[string]time.Duration{}
	for field, v := range map[string]string{"interval": h.Interval, "timeout": h.Timeout, "start_period": h.StartPeriod} {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad("service %s: healthcheck %s %q: want a duration such as 5s", name, field, v)
		}
		durations[field] = d
	}
	if durations["timeout"] >= durations["interval"] {
		bad("service %s: healthcheck timeout %s is not below its interval %s", name, h.Timeout, h.Interval)
	}
	if h.Retries < 1 {
		bad("service %s: healthcheck retries %d, want at least 1", name, h.Retries)
	}
}

// serverSettings is the names of the server's settings, read from its settings table as
// text: {"WR_ADDR", ":8080", "listen address …", …
func serverSettings(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("../server/config.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*\{"([A-Z][A-Z0-9_]*)", "`).FindAllStringSubmatch(string(src), -1) {
		out[m[1]] = true
	}
	for _, must := range []string{"WR_ADDR", "REDIS_URL", "DATABASE_URL", "WR_SECRET", "WR_ADMIN_TOKEN", "WR_DEMO"} {
		if !out[must] {
			t.Fatalf("server/config.go: setting %s not found (%d found): has the settings table changed shape?", must, len(out))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestCompose checks docker-compose.yml against the rules of its header.
func TestCompose(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	img := loadImage(t)
	for _, p := range checkCompose(c, img, serverSettings(t)) {
		t.Error(p)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d services, each with a healthcheck and restart unless-stopped; instances checked with %q", len(c.Services), img.healthcheck)
}

// TestComposeStrictDecoding shows that a misspelled key and a dependency without a
// condition (the short list form) fail instead of being dropped.
func TestComposeStrictDecoding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc, want string }{
		{"valid", "services:\n  a:\n    image: x\n    restart: unless-stopped\n", ""},
		{"misspelled healthcheck", "services:\n  a:\n    image: x\n    healtcheck:\n      test: [\"CMD\", \"true\"]\n", "field healtcheck not found"},
		{"depends_on as a list", "services:\n  a:\n    image: x\n    depends_on: [b]\n", "cannot unmarshal !!seq into map"},
		{"misspelled condition", "services:\n  a:\n    image: x\n    depends_on:\n      b:\n        conditon: service_healthy\n", "field conditon not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeCompose([]byte(tc.doc))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("decode: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("decoded; want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q; want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestComposeChecksCatchMistakes breaks the real file one way at a time and expects
// checkCompose to say so: the checks are not vacuous.
func TestComposeChecksCatchMistakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(c *composeFile)
		want   string
	}{
		{"no healthcheck", func(c *composeFile) { c.Services["redis"].Healthcheck = nil }, "service redis: no healthcheck"},
		{"healthcheck off", func(c *composeFile) { c.Services["postgres"].Healthcheck.Disable = true }, "service postgres: no healthcheck"},
		{"no restart policy", func(c *composeFile) { c.Services["nginx"].Restart = "" }, `service nginx: restart ""`},
		{"started is not healthy", func(c *composeFile) {
			c.Services["app1"].DependsOn["postgres"] = dependency{Condition: "service_started"}
		}, `depends on postgres with condition "service_started"`},
		{"no condition", func(c *composeFile) { c.Services["nginx"].DependsOn["app2"] = dependency{} }, `depends on app2 with condition ""`},
		{"backend not waited for", func(c *composeFile) { delete(c.Services["app2"].DependsOn, "redis") }, "REDIS_URL names service redis, which it does not depend on"},
		{"instance checked another way", func(c *composeFile) {
			c.Services["app1"].Healthcheck.Test = []string{"CMD", "wget", "-q", "http://127.0.0.1:8080/readyz"}
		}, "want the image's own"},
		{"a shell string", func(c *composeFile) { c.Services["redis"].Healthcheck.Test = []string{"redis-cli ping"} }, "healthcheck test"},
		{"timeout past the interval", func(c *composeFile) { c.Services["redis"].Healthcheck.Timeout = "10s" }, "is not below its interval"},
		{"random secret per instance", func(c *composeFile) { c.Services["app2"].Environment["WR_SECRET"] = "" }, `WR_SECRET=""`},
		{"unknown setting", func(c *composeFile) { c.Services["app1"].Environment["WR_DEMO_MODE"] = "true" }, "WR_DEMO_MODE is not a setting"},
		{"missing mount", func(c *composeFile) {
			c.Services["nginx"].Volumes[0] = "./deploy/nginx-missing.conf:/etc/nginx/conf.d/default.conf:ro"
		}, "mounts ./deploy/nginx-missing.conf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := loadCompose(t)
			tc.mutate(c)
			problems := checkCompose(c, loadImage(t), serverSettings(t))
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("want a problem containing %q, got %q", tc.want, problems)
			}
		})
	}
}
