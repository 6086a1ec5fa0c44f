package queue_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/testwait"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/queue/redistest"
)

// The acknowledgement rule (docs/OPERATIONS.md "Failover") against a real master and replica: while an
// attached replica has not acknowledged a tick, the tick's message is held (not published)
// and no further tick runs; no token is handed out (ErrUnconfirmed); once the replica
// acknowledges, the held message goes out first and the tokens are read again.
func TestHeldTickUntilTheReplicaAcknowledges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master := redistest.Start(t, redistest.Single()) // a replica of its own is attached to it
	replica := startReplica(t, master.Addr())
	reg := prometheus.NewRegistry()
	rdb := master.Client()
	q := queue.New(rdb, queue.Config{Grace: -1, ReplicaAcks: 1, AckTimeout: 100 * time.Millisecond}, reg)
	const name = "ack"
	rate := 100.0
	if _, _, err := q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: &rate}); err != nil {
		t.Fatal(err)
	}
	signer := queue.NewSigner([]byte("k"))
	var tickets []queue.Ticket
	for range 40 {
		tk, _ := signer.New(name)
		if _, _, err := q.Join(ctx, tk); err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	sub := rdb.Subscribe(ctx, queue.Channel(name))
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription is up
		t.Fatal(err)
	}
	msgs := sub.Channel()
	next := func(what string) queue.Tick {
		t.Helper()
		select {
		case m := <-msgs:
			tk, err := queue.DecodeTick([]byte(m.Payload))
			if err != nil {
				t.Fatal(err)
			}
			return tk
		case <-time.After(10 * time.Second):
			t.Fatalf("no tick message: %s", what)
		}
		return queue.Tick{}
	}

	ad := queue.NewAdmitter(q, queue.AdmitConfig{Owner: "ack", Tick: 10 * time.Millisecond})
	// With the replica keeping up, a tick admits and its message goes out after its WAIT (on
	// a busy machine a WAIT may still fall short now and then: that tick is held, and
	// released by the next try).
	var confirmed queue.TickResult
	testwait.For(t, 20*time.Second, "a confirmed admission", func() bool {
		res, err := ad.TickOnce(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		confirmed = res
		return res.Admitted > 0 && !res.Held
	})
	var last queue.Tick
	for last.Ev != confirmed.Ev {
		last = next("the confirmed tick")
	}
	if len(last.Adm) == 0 {
		t.Fatalf("the admitting tick's message admitted nobody: %+v", last)
	}
	// Redis time moves on until the next tick is sure to admit (100/s: one per 10 ms).
	waitRedisElapsed(t, rdb, name, 50*time.Millisecond)

	heldBefore := metricValue(t, reg, "queue_admission_held_ticks_total", name)
	replica.pause(t)
	res, err := ad.TickOnce(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Held || res.Admitted == 0 {
		t.Fatalf("tick with the replica paused: held %v, admitted %d; want held with admissions", res.Held, res.Admitted)
	}
	heldEv := res.Ev
	if got := metricValue(t, reg, "queue_admission_held", name); got != 1 {
		t.Fatalf("queue_admission_held %v, want 1", got)
	}
	if got := ad.Held(); len(got) != 1 || got[0] != name {
		t.Fatalf("Held() = %v", got)
	}
	// Nobody is told a token meanwhile: status, stream connect (TicketState) and a join of
	// an admitted ticket answer ErrUnconfirmed; a waiting ticket still reads its place.
	withheld, waiting := 0, 0
	for _, tk := range append(tickets[:4:4], tickets[len(tickets)-1]) { // the front (admitted) and the last (waiting)
		p, err := q.TicketState(ctx, tk)
		switch {
		case errors.Is(err, queue.ErrUnconfirmed):
			withheld++
		case err != nil:
			t.Fatal(err)
		case p.Token != "":
			t.Fatalf("ticket %s: token %s handed out with the replica paused", tk.ID, p.Token)
		default:
			waiting++
		}
	}
	if withheld == 0 || waiting == 0 {
		t.Fatalf("%d token reads withheld, %d waiting; want some of each", withheld, waiting)
	}
	if _, _, err := q.Join(ctx, tickets[0]); !errors.Is(err, queue.ErrUnconfirmed) {
		t.Fatalf("join of an admitted ticket with the replica paused: %v, want ErrUnconfirmed", err)
	}
	// No further tick while one is held.
	if res, err := ad.TickOnce(ctx, name); err != nil || !res.Held || res.Admitted != 0 {
		t.Fatalf("tick while held: %+v %v, want held and no tick", res, err)
	}

	replica.resume(t)
	testwait.For(t, 30*time.Second, "the held tick released", func() bool {
		res, err := ad.TickOnce(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return !res.Held
	})
	// The first message after the confirmed one is the held tick's, with its admissions.
	m := next("the held tick")
	if m.Ev != heldEv || m.Ev != last.Ev+1 || len(m.Adm) == 0 {
		t.Fatalf("message after the resume: ev %d (%d admissions); want the held tick's ev %d after %d", m.Ev, len(m.Adm), heldEv, last.Ev)
	}
	if got := metricValue(t, reg, "queue_admission_held", name); got != 0 {
		t.Fatalf("queue_admission_held %v after the release, want 0", got)
	}
	if got := metricValue(t, reg, "queue_admission_held_ticks_total", name); got != heldBefore+1 {
		t.Fatalf("queue_admission_held_ticks_total %v, want %v (one more)", got, heldBefore+1)
	}
	if got := metricValue(t, reg, "queue_admission_held_seconds_total", name); got <= 0 {
		t.Fatalf("queue_admission_held_seconds_total %v, want > 0", got)
	}
	if got := metricValue(t, reg, "queue_replication_unconfirmed_total", name); got != 0 {
		t.Fatalf("queue_replication_unconfirmed_total %v with a replica attached, want 0", got)
	}
	if got := metricValue(t, reg, "queue_replication_withheld_total", name); got < float64(withheld) {
		t.Fatalf("queue_replication_withheld_total %v, want at least %d", got, withheld)
	}
	p, err := q.TicketState(ctx, tickets[0])
	if err != nil || p.Token == "" {
		t.Fatalf("the first ticket after the resume: %+v %v, want its token", p, err)
	}
	t.Logf("held tick ev %d: %d admissions; %d token reads withheld meanwhile", heldEv, len(m.Adm), withheld)
}

// With no replica attached at all (after a failover, before the old master returns) there
// is nothing a failover could promote: admission proceeds unconfirmed, counted, and tokens
// are handed out.
func TestNoReplicaAdmitsUnconfirmed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rs := redistest.Start(t, redistest.Single()) // no replica: INFO says so
	reg := prometheus.NewRegistry()
	q := queue.New(rs.Client(), queue.Config{Grace: -1, ReplicaAcks: 1, AckTimeout: 100 * time.Millisecond}, reg)
	const name = "alone"
	rate := 100.0
	if _, _, err := q.Put(ctx, name, queue.SettingsPatch{RatePerSecond: &rate}); err != nil {
		t.Fatal(err)
	}
	tk, _ := queue.NewSigner([]byte("k")).New(name)
	if _, _, err := q.Join(ctx, tk); err != nil {
		t.Fatal(err)
	}
	ad := queue.NewAdmitter(q, queue.AdmitConfig{Owner: "alone"})
	var admitted int64
	testwait.For(t, 10*time.Second, "an admission", func() bool {
		res, err := ad.TickOnce(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if res.Held {
			t.Fatalf("tick held with no replica attached: %+v", res)
		}
		admitted += res.Admitted
		return admitted > 0
	})
	p, err := q.TicketState(ctx, tk)
	if err != nil || p.Token == "" {
		t.Fatalf("token read with no replica: %+v %v, want the token", p, err)
	}
	// The admission went out unconfirmed, and the token read; the place before them too.
	if got := metricValue(t, reg, "queue_replication_unconfirmed_total", name); got < float64(admitted)+1 {
		t.Fatalf("queue_replication_unconfirmed_total %v, want at least %d", got, admitted+1)
	}
	if got := metricValue(t, reg, "queue_replication_unconfirmed_places_total", name); got != 1 {
		t.Fatalf("queue_replication_unconfirmed_places_total %v, want 1", got)
	}
	if got := metricValue(t, reg, "queue_admission_held_ticks_total", name); got != 0 {
		t.Fatalf("queue_admission_held_ticks_total %v, want 0", got)
	}
}

// replicaProc is a redis-server started as a replica of a test's master.
type replicaProc struct {
	cmd  *exec.Cmd
	addr string
}

// startReplica starts a redis-server replicating master and waits until the master counts
// it and its link is up. It is killed when the test ends.
func startReplica(t *testing.T, master string) *replicaProc {
	t.Helper()
	bin, err := redistest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(master, ":")
	mc := redis.NewClient(&redis.Options{Addr: master})
	defer mc.Close()
	// The full sync starts at once (diskless sync otherwise waits 5 s for more replicas).
	if err := mc.ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ln, err := freeLocalPort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(ln), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--appendonly", "no", "--protected-mode", "no", "--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log"),
		"--replicaof", host, port)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replicaProc{cmd: cmd, addr: "127.0.0.1:" + strconv.Itoa(ln)}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	rc := redis.NewClient(&redis.Options{Addr: r.addr})
	defer rc.Close()
	testwait.For(t, 20*time.Second, "the replica attached and in sync", func() bool {
		mi, _ := mc.Info(context.Background(), "replication").Result()
		ri, _ := rc.Info(context.Background(), "replication").Result()
		return strings.Contains(mi, "connected_slaves:1") && strings.Contains(mi, "state=online") &&
			strings.Contains(ri, "master_link_status:up")
	})
	return r
}

func (r *replicaProc) pause(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

func (r *replicaProc) resume(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// freeLocalPort asks the kernel for a free port on 127.0.0.1.
func freeLocalPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitRedisElapsed waits until Redis's clock is d past queue name's last tick.
func waitRedisElapsed(t *testing.T, rdb redis.UniversalClient, name string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	key := strings.TrimSuffix(queue.Channel(name), "events") + "clock"
	lastUs, err := rdb.HGet(ctx, key, "last").Int64()
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "Redis time past the last tick", func() bool {
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now.UnixMicro()-lastUs >= d.Microseconds()
	})
}

// metricValue reads a gauge or counter of one queue from reg (0 when absent).
func metricValue(t *testing.T, reg *prometheus.Registry, name, queueName string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == queueName {
					if g := m.GetGauge(); g != nil {
						return g.GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
