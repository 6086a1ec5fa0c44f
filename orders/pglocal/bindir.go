package pglocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// ErrNoBinaries means no PostgreSQL server binaries (initdb and postgres) were found.
var ErrNoBinaries = errors.New("pglocal: PostgreSQL server binaries (initdb, postgres) not found; " +
	"install PostgreSQL (Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql@16), " +
	"set PG_BINDIR to the directory holding initdb and postgres, or set DATABASE_URL to use an existing server")

// FindBinDir returns a directory that holds both initdb and postgres. It looks, in order,
// at hint (the caller passes $PG_BINDIR; this package reads no environment itself), the
// directory of initdb on PATH, /usr/lib/postgresql/<major>/bin (Debian/Ubuntu, highest
// major first), /usr/pgsql-<major>/bin (RHEL), and the Homebrew locations on macOS.
func FindBinDir(hint string) (string, error) {
	if hint != "" {
		if hasServerBinaries(hint) {
			return hint, nil
		}
		return "", fmt.Errorf("pglocal: PG_BINDIR %q does not hold initdb and postgres: %w", hint, ErrNoBinaries)
	}
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	candidates = append(candidates, byVersion("/usr/lib/postgresql/*/bin")...)
	candidates = append(candidates, byVersion("/usr/pgsql-*/bin")...)
	candidates = append(candidates, byVersion("/usr/local/opt/postgresql*/bin")...)
	candidates = append(candidates, "/opt/homebrew/bin", "/usr/local/bin")
	candidates = append(candidates, byVersion("/opt/homebrew/opt/postgresql*/bin")...)
	for _, dir := range candidates {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

var digits = regexp.MustCompile(`\d+`)

// byVersion expands pattern and orders the matches by the first number in the path,
// highest first, so postgresql/16 wins over postgresql/15 (and 15 over 9.6).
func byVersion(pattern string) []string {
	matches, _ := filepath.Glob(pattern)
	num := func(s string) int {
		n, _ := strconv.Atoi(digits.FindString(s))
		return n
	}
	sort.SliceStable(matches, func(i, j int) bool { return num(matches[i]) > num(matches[j]) })
	return matches
}

// MajorVersion runs `postgres --version` in binDir and returns the major version ("15").
func MajorVersion(ctx context.Context, binDir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("pglocal: postgres --version: %w", err)
	}
	// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
	m := regexp.MustCompile(`\)\s+(\d+)`).FindSubmatch(bytes.TrimSpace(out))
	if m == nil {
		return "", fmt.Errorf("pglocal: cannot read version from %q", out)
	}
	return string(m[1]), nil
}
