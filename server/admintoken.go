package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/web"
)

// The admin token of a run without WR_ADMIN_TOKEN. The server makes one once and keeps it
// in a file in its data directory, so a restart keeps the token — a signed-in dashboard,
// a bookmarked sign-in link and a script's bearer token go on working. The token never
// reaches the JSON log: the log names the file; the sign-in link, token included, goes to
// stderr, and only when stderr is a terminal (a service manager or a container runtime
// keeps a non-terminal stderr as a log).

// adminTokenPrefix starts the file's name; the instance name follows.
const adminTokenPrefix = "waitroom-admin-token-"

// adminTokenFile is where a run without WR_ADMIN_TOKEN keeps its token: one file per data
// directory and instance name. The data directory is the local PostgreSQL's when the
// server started one (pgDataDir), else WR_DATA_DIR, else a per-user cache directory. The
// instance name is WR_INSTANCE_ID, or "default" when it is unset: the hostname-pid that
// stands in for it changes at every run.
func adminTokenFile(cfg config, pgDataDir string) (string, error) {
	dir := pgDataDir
	if dir == "" {
		dir = cfg.DataDir
	}
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("WR_ADMIN_TOKEN is not set and there is no directory to keep one in (%v): set WR_ADMIN_TOKEN, or WR_DATA_DIR", err)
		}
		dir = filepath.Join(cache, "waitroom")
	}
	name := "default"
	if !cfg.InstanceIDUnset {
		name = strings.NewReplacer("/", "_", `\`, "_").Replace(cfg.InstanceID)
	}
	abs, err := filepath.Abs(filepath.Join(dir, adminTokenPrefix+name))
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	return abs, nil
}

// generatedAdminToken is the admin token of a run without WR_ADMIN_TOKEN: the one kept in
// the data directory (adminTokenFile), made there now if there is none. It says where the
// token is: the path in the log, the sign-in link on stderr when that is a terminal.
func generatedAdminToken(cfg config, pgDataDir string, stderr *os.File, log zerolog.Logger) (string, error) {
	path, err := adminTokenFile(cfg, pgDataDir)
	if err != nil {
		return "", err
	}
	tok, made, err := storedAdminToken(path)
	if err != nil {
		return "", err
	}
	// The token must not collide with WR_ADMIN_VIEWER_TOKEN or WR_ADMIN_TOKENS (a token
	// written into the file by hand could); the error names settings, never tokens.
	if err := web.CheckAdminTokens(tok, cfg.AdminViewerToken, cfg.AdminTokens); err != nil {
		return "", fmt.Errorf("the admin token in %s: %v", path, err)
	}
	log.Warn().Str("file", path).Bool("made_now", made).
		Msg("WR_ADMIN_TOKEN is not set: the admin token is kept in a file (path in file), reused at every start; a sign-in link is printed on the terminal")
	printSignIn(stderr, isTerminal(stderr), cfg.Addr, path, tok, made)
	return tok, nil
}

// printSignIn tells the person at the terminal how to sign in: the file and, when w is a
// terminal, a link to the dashboard that carries the token in its fragment (a browser
// never sends the fragment to the server, so the token stays out of every access log; the
// page takes it from there and removes it from the address bar).
func printSignIn(w io.Writer, terminal bool, addr, path, tok string, made bool) {
	how := "made now; it is reused at every start"
	if !made {
		how = "made at an earlier start"
	}
	fmt.Fprintf(w, "WR_ADMIN_TOKEN is not set: the admin token is kept in %s (%s).\n", path, how)
	if !terminal {
		fmt.Fprintln(w, "stderr is not a terminal, so the token itself is not printed here: read it from the file.")
		return
	}
	if link := signInLink(addr, tok); link != "" {
		fmt.Fprintf(w, "Sign in to the dashboard: %s\n", link)
		return
	}
	fmt.Fprintln(w, "Sign in to the dashboard: open /admin at the address of the \"listening\" log line and paste the token from the file.")
}

// signInLink is the dashboard's address on this machine with the token in the fragment
// (#token=…, which the page reads), or "" when WR_ADDR's port is chosen at start (0).
func signInLink(addr, tok string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" || port == "" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1" // listening on every address: loopback is one of them
	}
	return "http://" + net.JoinHostPort(host, port) + "/admin#token=" + url.QueryEscape(tok)
}

// isTerminal reports whether f is a character device: a terminal (or /dev/null, where a
// printed token goes nowhere). Pipes, files and sockets are not.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// storedAdminToken reads the token kept at path, or makes one and writes it there; made
// reports the second. The file is created whole or not at all (written under a temporary
// name, then linked into place), so two instances starting at once with the same data
// directory and name agree on one token: the second finds the first's file and reads it.
func storedAdminToken(path string) (tok string, made bool, err error) {
	tok, err = readAdminToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("WR_ADMIN_TOKEN is not set and the admin token file cannot be made: %w (set WR_ADMIN_TOKEN, or WR_DATA_DIR)", err)
	}
	tok = randomHex(48)
	tmp, err := os.CreateTemp(dir, ".waitroom-admin-token-*") // mode 0600
	if err != nil {
		return "", false, fmt.Errorf("WR_ADMIN_TOKEN is not set and the admin token file cannot be made: %w (set WR_ADMIN_TOKEN, or WR_DATA_DIR)", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(tok + "\n")
	serr := tmp.Sync()
	if cerr := tmp.Close(); werr == nil && serr == nil && cerr != nil {
		werr = cerr
	}
	if err := errors.Join(werr, serr); err != nil {
		return "", false, fmt.Errorf("admin token file %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			tok, err = readAdminToken(path) // another start made it first
			return tok, false, err
		}
		return "", false, fmt.Errorf("admin token file %s: %w", path, err)
	}
	return tok, true, nil
}

// readAdminToken reads and checks the token kept at path: a regular file (not a link to
// somewhere else) of this process's user that no other user may read or write, holding
// one line of 8–512 visible ASCII characters (WR_ADMIN_TOKEN's rule, and what a URL
// fragment carries unchanged). A missing file is fs.ErrNotExist; anything else wrong is a
// clear error, since a token someone else could have read or planted must not sign anyone
// in.
func readAdminToken(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	fix := "remove it (the next start makes a new token) or set WR_ADMIN_TOKEN"
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("admin token file %s is not a regular file (%s): %s", path, fi.Mode().Type(), fix)
	}
	if err := private(fi); err != nil {
		return "", fmt.Errorf("admin token file %s %v: %s", path, err, fix)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 8 || len(tok) > 512 || strings.IndexFunc(tok, func(r rune) bool { return r < '!' || r > '~' }) >= 0 {
		return "", fmt.Errorf("admin token file %s does not hold one token of 8 to 512 visible ASCII characters: %s", path, fix)
	}
	return tok, nil
}
