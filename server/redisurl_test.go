package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/freeport"
)

// TestUnreachableRedisClusterIsOneClearLine: a REDIS_URL naming a Redis Cluster nobody
// listens on stops the start with one error naming the kind and the addresses (never the
// password), within the 5 s start check — not a flood of go-redis dial errors.
func TestUnreachableRedisClusterIsOneClearLine(t *testing.T) {
	t.Parallel()
	p1, err1 := freeport.Get()
	p2, err2 := freeport.Get()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	env := map[string]string{
		"REDIS_URL": "redis://:hunter2@127.0.0.1:" + strconv.Itoa(p1) + "?addr=127.0.0.1:" + strconv.Itoa(p2),
		"WR_ADDR":   "127.0.0.1:0", "WR_DATA_DIR": t.TempDir(), "WR_LOG_LEVEL": "info",
		// A database that answers: without one the zero-config PostgreSQL under WR_DATA_DIR
		// (a 0700 folder, unreachable for the postgres user when root) could fail first
		// and be the error (red in a fresh-clone run, 2026-12-03).
		"DATABASE_URL": testDB(t),
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := run(ctx, func(k string) string { return env[k] }, &out)
	if err == nil {
		t.Fatal("the server started without a Redis")
	}
	msg := err.Error()
	t.Logf("after %v: %s", time.Since(start).Round(100*time.Millisecond), msg)
	if !strings.Contains(msg, "Redis does not answer at REDIS_URL (a Redis Cluster: 127.0.0.1:"+strconv.Itoa(p1)+", 127.0.0.1:"+strconv.Itoa(p2)+")") {
		t.Fatalf("unclear error: %s", msg)
	}
	if strings.Contains(msg, "hunter2") || strings.Contains(out.String(), "hunter2") {
		t.Fatal("the password was printed")
	}
	if n := strings.Count(out.String(), "connection refused"); n > 0 {
		t.Fatalf("%d dial errors logged besides the one error:\n%s", n, out.String())
	}
}
