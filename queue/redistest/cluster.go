package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/freeport"
)

// A Redis Cluster of 3 masters and 3 replicas on loopback, for tests: every node is a
// redis-server with cluster-enabled yes, its own directory (nodes.conf, log) under one
// temporary directory, its own port and cluster bus port, cluster-node-timeout 2000 ms (a
// failed master is replaced by its replica within seconds), no persistence. It is created
// with redis-cli --cluster create … --cluster-replicas 1.

const (
	clusterMasters     = 3
	clusterReplicas    = 1
	clusterNodeTimeout = 2000 // ms
)

// Cluster is a running Redis Cluster.
type Cluster struct {
	bin   string
	dir   string
	nodes []*Node
	kf    *keyFinder
	rec   *Recorder

	stopOnce sync.Once
}

// Node is one redis-server of a Cluster. Kill and Start take it down (like a crash) and
// back up on the same port, directory and nodes.conf.
type Node struct {
	c    *Cluster
	n    int
	port int
	bus  int
	dir  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// CLIBinary returns the redis-cli path: $WR_TEST_REDIS_CLI, else redis-cli next to
// redis-server, on PATH, or at Debian's location.
func CLIBinary() (string, error) {
	if b := os.Getenv("WR_TEST_REDIS_CLI"); b != "" {
		return b, nil
	}
	if srv, err := Binary(); err == nil {
		if b := filepath.Join(filepath.Dir(srv), "redis-cli"); isExecutable(b) {
			return b, nil
		}
	}
	if b, err := exec.LookPath("redis-cli"); err == nil {
		return b, nil
	}
	if isExecutable("/usr/bin/redis-cli") {
		return "/usr/bin/redis-cli", nil
	}
	return "", fmt.Errorf("redis-cli not found: run the README test command (make test), which installs it")
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// StartCluster starts a private cluster for one test (or benchmark); it is stopped when
// the test ends. Most tests want the process's shared cluster instead (Start in cluster
// mode, or SharedCluster): a cluster takes a few seconds to form.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := NewCluster()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(c.Stop)
	return c
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// SharedCluster returns the test binary's one cluster, started on first use and stopped
// when the binary exits (the nodes die with it: see spawn.go). It is not emptied: Start in
// cluster mode does that.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	shared.once.Do(func() { shared.c, shared.err = NewCluster() })
	if shared.err != nil {
		tb.Fatalf("redistest: the shared cluster did not start: %v", shared.err)
	}
	return shared.c
}

// NewCluster starts a cluster and waits until it is healthy (see WaitHealthy). The caller
// stops it (Stop); its nodes die with this process anyway. A node whose port was taken
// between choosing and binding it (another test's server, on a busy machine) makes it start
// again on new ports, up to three times.
func NewCluster() (*Cluster, error) {
	for try := 1; ; try++ {
		c, err := newCluster()
		if err == nil || !errors.Is(err, errNotOurs) || try == 3 {
			return c, err
		}
	}
}

func newCluster() (*Cluster, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	cli, err := CLIBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-cluster-")
	if err != nil {
		return nil, err
	}
	if err := removeAtExit(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("cluster directory reaper: %w", err)
	}
	c := &Cluster{bin: bin, dir: dir, rec: NewRecorder()}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	used := map[int]bool{}
	port := func() (int, error) {
		for range 100 {
			p, err := freeport.Get()
			if err != nil {
				return 0, err
			}
			if !used[p] {
				used[p] = true
				return p, nil
			}
		}
		return 0, errors.New("no free port")
	}
	for i := range clusterMasters * (1 + clusterReplicas) {
		n := &Node{c: c, n: i, dir: filepath.Join(dir, "node-"+strconv.Itoa(i))}
		if n.port, err = port(); err != nil {
			return nil, err
		}
		if n.bus, err = port(); err != nil {
			return nil, err
		}
		if err := os.Mkdir(n.dir, 0o700); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := n.spawn(); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := n.waitPing(10 * time.Second); err != nil {
			return nil, err
		}
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(clusterReplicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		return nil, fmt.Errorf("%w\nredis-cli --cluster create said:\n%s", err, out)
	}
	if c.kf, err = loadKeyFinder(context.Background(), c.nodes[0].Addr(), c.runningAddrs); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// Stop kills every node and removes the cluster's directory. Safe to call twice.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		for _, n := range c.nodes {
			_ = n.Kill()
		}
		_ = os.RemoveAll(c.dir)
	})
}

// Nodes returns every node, masters and replicas, in a fixed order (roles change with
// failovers: ask Masters, MasterFor or Node.Role).
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// Addrs returns host:port of every node.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

func (c *Cluster) runningAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		if n.Running() {
			out = append(out, n.Addr())
		}
	}
	return out
}

// URL is the cluster's go-redis cluster URL (redis.ParseClusterURL): the first node, the
// others as addr= seeds.
func (c *Cluster) URL() string {
	a := c.Addrs()
	var b strings.Builder
	b.WriteString("redis://" + a[0])
	for i, s := range a[1:] {
		if i == 0 {
			b.WriteString("?")
		} else {
			b.WriteString("&")
		}
		b.WriteString("addr=" + s)
	}
	return b.String()
}

// Recorder is what every client of this cluster from Client, ClientWith or a Server saw
// (see hook.go).
func (c *Cluster) Recorder() *Recorder { return c.rec }

// Client returns a new cluster client, checked by the one-slot hook (hook.go), recording to
// the cluster's Recorder and to recs. The caller closes it.
func (c *Cluster) Client(recs ...*Recorder) *redis.ClusterClient {
	return c.ClientWith(&redis.ClusterOptions{}, recs...)
}

// ClientWith is Client with options (Addrs and NewClient are set here).
func (c *Cluster) ClientWith(o *redis.ClusterOptions, recs ...*Recorder) *redis.ClusterClient {
	h := checkHook{kf: c.kf, recs: append([]*Recorder{c.rec}, recs...)}
	o.Addrs = c.Addrs()
	o.NewClient = func(opt *redis.Options) *redis.Client {
		nc := redis.NewClient(opt)
		nc.AddHook(h)
		return nc
	}
	return redis.NewClusterClient(o)
}

// FlushAll empties the cluster: FLUSHALL on every running master (replicas follow).
func (c *Cluster) FlushAll(ctx context.Context) error {
	return c.ForEachMaster(ctx, func(ctx context.Context, nc *redis.Client) error {
		return nc.FlushAll(ctx).Err()
	})
}

// ForEachMaster calls fn with a client of every running master, one after the other.
func (c *Cluster) ForEachMaster(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	ms, err := c.Masters(ctx)
	if err != nil {
		return err
	}
	for _, n := range ms {
		nc := n.Client()
		err := fn(ctx, nc)
		_ = nc.Close()
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Addr(), err)
		}
	}
	return nil
}

// Masters returns the running nodes that are masters.
func (c *Cluster) Masters(ctx context.Context) ([]*Node, error) {
	var out []*Node
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		r, err := n.Role(ctx)
		if err != nil {
			return nil, err
		}
		if r == "master" {
			out = append(out, n)
		}
	}
	return out, nil
}

// MasterFor returns the node that is master of key's slot now, as the cluster says.
func (c *Cluster) MasterFor(ctx context.Context, key string) (*Node, error) {
	return c.MasterOfSlot(ctx, Slot(key))
}

// MasterOfSlot returns the node that is master of slot now, as the running nodes say
// (all of them must agree).
func (c *Cluster) MasterOfSlot(ctx context.Context, slot int) (*Node, error) {
	var addr string
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		m, err := n.slotMap(ctx)
		if err != nil {
			return nil, err
		}
		r, ok := m.find(slot)
		if !ok {
			return nil, fmt.Errorf("node %s: slot %d has no master", n.Addr(), slot)
		}
		if addr != "" && r.master != addr {
			return nil, fmt.Errorf("nodes disagree on the master of slot %d: %s, %s", slot, addr, r.master)
		}
		addr = r.master
	}
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("slot %d: master %q is not a node of this cluster", slot, addr)
}

// WaitHealthy waits until the cluster serves every slot from a running master and the
// running nodes agree: each says cluster_state:ok, all report the same masters for the same
// slot ranges (CLUSTER SLOTS), those masters are running, and every other running node is a
// replica whose link to one of them is up (a restarted node has rejoined).
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.healthy()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not healthy after %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) healthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	running := map[string]bool{}
	for _, n := range c.nodes {
		if n.Running() {
			running[n.Addr()] = true
		}
	}
	var ref slotMap
	masterOf := map[string]string{} // replica -> its master, as the replica says
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		nc := n.Client()
		info, err := nc.ClusterInfo(ctx).Result()
		if err == nil && !strings.Contains(info, "cluster_state:ok") {
			err = errors.New("cluster_state is not ok")
		}
		var repl string
		if err == nil {
			repl, err = nc.Info(ctx, "replication").Result()
		}
		_ = nc.Close()
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Addr(), err)
		}
		if strings.Contains(repl, "role:slave") {
			if !strings.Contains(repl, "master_link_status:up") || strings.Contains(repl, "master_sync_in_progress:1") {
				return fmt.Errorf("node %s: replica not attached to its master", n.Addr())
			}
			masterOf[n.Addr()] = net.JoinHostPort(infoField(repl, "master_host"), infoField(repl, "master_port"))
		}
		m, err := n.slotMap(ctx)
		if err != nil {
			return err
		}
		if err := m.complete(); err != nil {
			return fmt.Errorf("node %s: %w", n.Addr(), err)
		}
		if ref == nil {
			ref = m
		} else if ref.masters() != m.masters() {
			return fmt.Errorf("nodes disagree on the slot map:\n%s\n%s", ref.masters(), m.masters())
		}
	}
	if ref == nil {
		return errors.New("no node is running")
	}
	masters := map[string]bool{}
	for _, r := range ref {
		if !running[r.master] {
			return fmt.Errorf("slots %d-%d: master %s is not running", r.from, r.to, r.master)
		}
		masters[r.master] = true
	}
	for a := range running {
		if masters[a] {
			if _, ok := masterOf[a]; ok {
				return fmt.Errorf("node %s serves slots but says it is a replica", a)
			}
			continue
		}
		m, ok := masterOf[a]
		if !ok {
			return fmt.Errorf("node %s is neither a master of slots nor a replica", a)
		}
		if !masters[m] {
			return fmt.Errorf("node %s replicates %s, which serves no slots", a, m)
		}
	}
	return nil
}

func infoField(info, name string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v
		}
	}
	return ""
}

// slotRange is one row of CLUSTER SLOTS.
type slotRange struct {
	from, to int
	master   string
	replicas []string
}

type slotMap []slotRange

func (m slotMap) find(slot int) (slotRange, bool) {
	for _, r := range m {
		if r.from <= slot && slot <= r.to {
			return r, true
		}
	}
	return slotRange{}, false
}

func (m slotMap) complete() error {
	n := 0
	for _, r := range m {
		n += r.to - r.from + 1
	}
	if n != Slots {
		return fmt.Errorf("%d of %d slots assigned", n, Slots)
	}
	return nil
}

// masters describes the map without its replicas (CLUSTER SLOTS lists a replica only once
// gossip has told of its replication offset, seconds after it attached).
func (m slotMap) masters() string {
	var b bytes.Buffer
	for _, r := range m {
		fmt.Fprintf(&b, "%d-%d %s; ", r.from, r.to, r.master)
	}
	return b.String()
}

// Addr is host:port of the node.
func (n *Node) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// Dir is the node's directory (nodes.conf, redis.log).
func (n *Node) Dir() string { return n.dir }

// Running reports whether the node's process is up (Kill stops it, Start restarts it).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Client returns a plain client of this node alone (no cluster routing, no hook). The
// caller closes it.
func (n *Node) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: time.Second})
}

// Role is "master" or "slave", as the node says (ROLE).
func (n *Node) Role(ctx context.Context) (string, error) {
	nc := n.Client()
	defer nc.Close()
	v, err := nc.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", fmt.Errorf("node %s: ROLE: %w", n.Addr(), err)
	}
	if len(v) == 0 {
		return "", fmt.Errorf("node %s: empty ROLE answer", n.Addr())
	}
	s, _ := v[0].(string)
	return s, nil
}

// ID is the node's cluster id (CLUSTER MYID).
func (n *Node) ID(ctx context.Context) (string, error) {
	nc := n.Client()
	defer nc.Close()
	return nc.Do(ctx, "CLUSTER", "MYID").Text()
}

// Kill SIGKILLs the node (a crash) and waits until it is gone. A no-op if it is not running.
func (n *Node) Kill() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil
	}
	err := n.cmd.Process.Kill()
	_ = n.cmd.Wait()
	n.cmd = nil
	return err
}

// Pause stops the node's process (SIGSTOP): its connections stay open and nothing is
// answered — a replica that falls behind, a frozen VM. Resume ends it. A no-op if it is not
// running.
func (n *Node) Pause() error { return n.signal(syscall.SIGSTOP) }

// Resume continues a paused node (SIGCONT).
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil
	}
	return n.cmd.Process.Signal(sig)
}

// Start restarts a killed node on the same port, directory and nodes.conf and waits until
// it answers; it rejoins the cluster by itself (WaitHealthy waits for that). A no-op if it
// is running.
func (n *Node) Start() error {
	if err := n.spawn(); err != nil {
		return err
	}
	return n.waitPing(10 * time.Second)
}

func (n *Node) spawn() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return nil
	}
	cmd := exec.Command(n.c.bin,
		"--port", strconv.Itoa(n.port), "--bind", "127.0.0.1", "--dir", n.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no",
		"--logfile", filepath.Join(n.dir, "redis.log"),
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(n.bus),
		"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout),
		// A replica takes over however long it was cut off (a test kills masters at will).
		"--cluster-replica-validity-factor", "0",
		// Replicas attach at once (the default waits 5 s for more replicas to sync together).
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
	)
	if err := startGuarded(cmd); err != nil {
		return fmt.Errorf("start %s: %w", n.c.bin, err)
	}
	n.cmd = cmd
	return nil
}

func (n *Node) waitPing(timeout time.Duration) error {
	nc := n.Client()
	defer nc.Close()
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		ours, err := answersAs(ctx, nc, cmd.Process.Pid)
		if err == nil && ours {
			err = nc.Ping(ctx).Err()
		}
		cancel()
		if err == nil && ours {
			return nil
		}
		if (err == nil && !ours) || exited(cmd) {
			// Another process answers, or ours gave up: one of its two ports was taken.
			log, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
			return fmt.Errorf("node %s: %w\n%s", n.Addr(), errNotOurs, log)
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
			return fmt.Errorf("node %s did not answer: %v\n%s", n.Addr(), err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *Node) slotMap(ctx context.Context) (slotMap, error) {
	nc := n.Client()
	defer nc.Close()
	slots, err := nc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("node %s: CLUSTER SLOTS: %w", n.Addr(), err)
	}
	m := make(slotMap, 0, len(slots))
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			continue
		}
		r := slotRange{from: s.Start, to: s.End, master: s.Nodes[0].Addr}
		for _, rn := range s.Nodes[1:] {
			r.replicas = append(r.replicas, rn.Addr)
		}
		sort.Strings(r.replicas)
		m = append(m, r)
	}
	sort.Slice(m, func(i, j int) bool { return m[i].from < m[j].from })
	return m, nil
}
