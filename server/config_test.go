package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestBadConfigStopsWithOneLine(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"WR_ADDR": "nonsense", "WR_SECRET": "short", "WR_TICK": "fast", "WR_LOG_LEVEL": "loud",
		"WR_DEMO_RATE": "-1", "WR_STREAMS_PER_IP": "0", "WR_FAIL_OPEN": "maybe", "WR_INSTANCE_ID": "has space",
		"WR_TRUSTED_PROXIES": "10.0.0.0/33", "WR_LEASE_TTL": "300ms", // a 100 ms tick is more than a quarter of it
	}
	for name, val := range cases {
		env := map[string]string{name: val}
		var out bytes.Buffer
		// Bounded: should a case be valid after all, the server it starts stops again.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := run(ctx, func(k string) string { return env[k] }, &out)
		cancel()
		if err == nil || !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%q: error %v, want one line naming the variable", name, val, err)
		}
	}
}

func TestSecretsMaskedInStartLog(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(func(k string) string {
		return map[string]string{"WR_SECRET": "super-secret-value-123", "WR_ADMIN_TOKEN": "admin-secret-456",
			"DATABASE_URL": "postgres://u:dbpass789@h/db?sslmode=disable", "REDIS_URL": "redis://h:6379?password=redispass321&addr=h2:6379",
			"WR_SMTP_URL": "smtps://mailer:smtppass654@mail.example.com?from=rooms%40example.com", "WR_PUBLIC_URL": "https://rooms.example.com"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log := newTestLogger(&out)
	cfg.logFields(log.Info()).Msg("starting")
	for _, secret := range []string{"super-secret-value-123", "admin-secret-456", "dbpass789", "redispass321", "smtppass654", "mailer"} {
		if strings.Contains(out.String(), secret) {
			t.Fatalf("start log shows %q: %s", secret, out.String())
		}
	}
	// Every setting is in the start log, under its own name.
	var line struct{ Settings map[string]string }
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		if _, ok := line.Settings[s.name]; !ok {
			t.Errorf("the start log lacks %s: %s", s.name, out.String())
		}
		// A secret kind is masked by name: the list of secrets must hold it.
		if s.accepts.Kind == "secret" && !secretSettings[s.name] {
			t.Errorf("%s is a secret but not in secretSettings: the log and config would show it", s.name)
		}
	}
	if line.Settings["WR_SECRET"] != "***" || line.Settings["DATABASE_URL"] != "postgres://u:***@h/db?sslmode=disable" || line.Settings["WR_SMTP_URL"] != "***" {
		t.Errorf("masked: %v", line.Settings)
	}
}

// TestEverySettingIsDocumented: docs/CONFIGURATION.md is exactly what the settings table
// makes of it, so a setting added, changed or removed changes the page in the same commit.
func TestEverySettingIsDocumented(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../" + configDocPath)
	if err != nil {
		t.Fatalf("%v: make it with: go run ./server config-doc > %s", err, configDocPath)
	}
	want := configDoc()
	if string(page) == want {
		return
	}
	got, wantLines := strings.Split(string(page), "\n"), strings.Split(want, "\n")
	line := 0
	for line < min(len(got), len(wantLines)) && got[line] == wantLines[line] {
		line++
	}
	t.Fatalf("%s is stale (first difference at line %d: the file has %q, the table makes %q); regenerate it from the repository root with:\n\tgo run ./server config-doc > %s",
		configDocPath, line+1, at(got, line), at(wantLines, line), configDocPath)
}

// at is lines[i], or "" past the end.
func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return ""
}

func newTestLogger(w *bytes.Buffer) zerolog.Logger { return zerolog.New(w) }

// TestEverySettingAcceptsWhatItSays holds each setting's parse to its accepts (the data -h
// and the configuration page show): every choice and both bounds are taken, a step past
// either bound is refused.
func TestEverySettingAcceptsWhatItSays(t *testing.T) {
	t.Parallel()
	for _, s := range settings {
		a := s.accepts
		if a.Kind == "" && len(a.Choices) == 0 {
			t.Errorf("%s: no accepted values", s.name)
			continue
		}
		if a.String() == "" {
			t.Errorf("%s: accepts says nothing", s.name)
		}
		take := func(v string, want bool) {
			t.Helper()
			var c config
			if err := s.parse(&c, v); (err == nil) != want {
				t.Errorf("%s=%q: err %v, want accepted %v (accepts: %s)", s.name, v, err, want, a)
			}
		}
		for _, ch := range a.Choices {
			take(ch, true)
		}
		switch a.Kind {
		case "integer", "number":
			for _, b := range []struct {
				v    string
				step float64
			}{{a.Min, -1}, {a.Max, +1}} {
				if b.v == "" {
					continue
				}
				take(b.v, true)
				f, err := strconv.ParseFloat(b.v, 64)
				if err != nil {
					t.Fatalf("%s: bound %q: %v", s.name, b.v, err)
				}
				take(strconv.FormatFloat(f+b.step, 'f', -1, 64), false)
			}
		case "duration":
			if a.Min == "" {
				continue
			}
			min, err := time.ParseDuration(a.Min)
			if err != nil {
				t.Fatalf("%s: bound %q: %v", s.name, a.Min, err)
			}
			take(min.String(), true)
			take((min - time.Nanosecond).String(), false)
		}
		if len(a.Choices) > 0 {
			take("no-such-choice", false)
		}
	}
}

// TestSMTPSettings: e-mail needs WR_PUBLIC_URL beside WR_SMTP_URL; a bad SMTP URL or public
// origin stops the start with one line that never repeats the SMTP URL (it holds a password).
func TestSMTPSettings(t *testing.T) {
	t.Parallel()
	const good = "smtp://mailer:smtppass654@mail.example.com?from=rooms%40example.com"
	for _, tc := range []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{"WR_SMTP_URL": good, "WR_PUBLIC_URL": "https://rooms.example.com"}, ""},
		{map[string]string{}, ""},
		{map[string]string{"WR_SMTP_URL": good}, "WR_PUBLIC_URL must be set"},
		{map[string]string{"WR_SMTP_URL": "smtp://mailer:smtppass654@mail.example.com", "WR_PUBLIC_URL": "https://rooms.example.com"}, "from= must be"},
		{map[string]string{"WR_SMTP_URL": "http://mailer:smtppass654@mail.example.com?from=a%40b.example", "WR_PUBLIC_URL": "https://rooms.example.com"}, "scheme must be smtp"},
		{map[string]string{"WR_SMTP_URL": good, "WR_PUBLIC_URL": "https://rooms.example.com/shop"}, "origin without a path"},
	} {
		cfg, err := loadConfig(func(k string) string { return tc.env[k] })
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want one saying %q", tc.env, err, tc.wantErr)
		case err != nil && (strings.Contains(err.Error(), "smtppass654") || strings.Contains(err.Error(), "mailer")):
			t.Errorf("the error repeats the SMTP URL: %v", err)
		case err == nil && tc.env["WR_SMTP_URL"] != "" && (cfg.SMTPURL != good || cfg.PublicURL != "https://rooms.example.com"):
			t.Errorf("parsed %q %q", cfg.SMTPURL, cfg.PublicURL)
		}
	}
}
