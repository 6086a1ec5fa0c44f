package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/waitroom/waitroom/internal/backoff"
)

// pgStartWait bounds the wait for PostgreSQL at DATABASE_URL at start. PostgreSQL may be
// starting beside the server (docker compose up, a pod and its database restarted
// together); the official image's first start initialises its volume before it listens,
// which takes seconds. Past the bound the server exits with one line, and the orchestrator's
// restart policy tries again.
const pgStartWait = 30 * time.Second

// pgAttemptTimeout bounds one connection attempt (a packet-dropping address answers nothing).
const pgAttemptTimeout = 5 * time.Second

// waitPostgres connects to dbURL until PostgreSQL accepts a connection, for at most wait.
// What waiting can change is tried again, backing off from 100 ms to 2 s: a refused, reset
// or timed-out connection, a host name that does not resolve yet, a server that says it is
// starting up or full. What it cannot — a wrong password, a database that does not exist,
// a TLS mismatch — ends the wait at once. The first failure is logged with the bound, later
// ones at debug level; an answer after waiting is logged too.
func waitPostgres(ctx context.Context, dbURL string, wait time.Duration, log zerolog.Logger) error {
	pcfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return fmt.Errorf("invalid DATABASE_URL: %w", err)
	}
	if pcfg.ConnectTimeout == 0 || pcfg.ConnectTimeout > pgAttemptTimeout {
		pcfg.ConnectTimeout = pgAttemptTimeout
	}
	target := net.JoinHostPort(pcfg.Host, strconv.Itoa(int(pcfg.Port))) + "/" + pcfg.Database
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for attempt := 1; ; attempt++ {
		err := pingPostgres(wctx, pcfg)
		switch {
		case err == nil:
			if attempt > 1 {
				log.Info().Str("database", target).Int("attempts", attempt).Dur("waited", time.Since(start)).Msg("PostgreSQL accepts connections")
			}
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("stopped while waiting for PostgreSQL at DATABASE_URL (%s): %w", target, ctx.Err())
		case !pgRetryable(err):
			return fmt.Errorf("PostgreSQL at DATABASE_URL (%s) refuses the connection: %w", target, err)
		case attempt == 1:
			log.Warn().Err(err).Str("database", target).Dur("wait", wait).
				Msg("PostgreSQL does not accept connections yet: trying again until it does or the wait passes")
		default:
			log.Debug().Err(err).Str("database", target).Int("attempt", attempt).Msg("PostgreSQL does not accept connections yet")
		}
		if !b.Wait(wctx) {
			if ctx.Err() != nil {
				return fmt.Errorf("stopped while waiting for PostgreSQL at DATABASE_URL (%s): %w", target, ctx.Err())
			}
			return fmt.Errorf("PostgreSQL does not accept connections at DATABASE_URL (%s) within %v (%d attempts): %w", target, wait, attempt, err)
		}
	}
}

// pingPostgres opens one connection (the startup and authentication exchange included) and
// closes it.
func pingPostgres(ctx context.Context, pcfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	return conn.Close(cctx)
}

// pgRetryable reports whether a failed connection may succeed later without a change of
// configuration: PostgreSQL is not there yet, is starting up (57P03), has no free
// connection slot (53300), or failed the connection itself (class 08); the network refused,
// reset or timed out; the name did not resolve (a container not created yet).
func pgRetryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P03" || pe.Code == "53300" || strings.HasPrefix(pe.Code, "08")
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
