package redistest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The one-slot rule of Redis Cluster: a command or script may take several keys only if
// all of them hash to one slot, and a MULTI … EXEC transaction runs on one slot. The
// cluster's clients (Cluster.Client, Server.Client in cluster mode) carry a hook that checks
// every command against it before it is sent, and every reply for the errors with which a
// cluster refuses a breach (CROSSSLOT; a script touching a key of another slot than its
// declared ones). What it sees goes to Recorders: which scripts ran (by the SHA1 of their
// body, as EVALSHA names them), every breach, and every command that touched a global key
// (one outside the per-queue hash tags {q:<name>}).
//
// The hook sits on the client of each cluster node (ClusterOptions.NewClient), so it also
// sees what product code sends through a node's client (ClusterClient.MasterForKey, e.g. a
// script and WAIT in one pipeline).

// Recorder collects what checked clients saw. Safe for concurrent use.
type Recorder struct {
	mu         sync.Mutex
	scripts    map[string]int // SHA1 (lower case) -> runs
	keyless    map[string]int // SHA1 -> runs with no key (a keyless script goes to a random node)
	violations []string
	globals    map[string]map[string]int // global key -> "COMMAND/n keys" -> count
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	r := &Recorder{}
	r.Reset()
	return r
}

// Reset forgets everything recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scripts, r.keyless, r.violations, r.globals = map[string]int{}, map[string]int{}, nil, map[string]map[string]int{}
}

// Scripts returns how often each script ran, by the SHA1 (lower-case hex) of its body.
func (r *Recorder) Scripts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return copyCounts(r.scripts)
}

// KeylessScripts returns the scripts that ran with no key, by SHA1.
func (r *Recorder) KeylessScripts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return copyCounts(r.keyless)
}

// Violations returns every breach of the one-slot rule seen, in order.
func (r *Recorder) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.violations...)
}

// GlobalKeys returns, for every key outside the per-queue hash tags that a command touched,
// how often each command touched it, as "COMMAND/n" (n: how many keys the command had, all
// in one slot unless a violation says otherwise).
func (r *Recorder) GlobalKeys() map[string]map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]map[string]int, len(r.globals))
	for k, v := range r.globals {
		out[k] = copyCounts(v)
	}
	return out
}

func (r *Recorder) violation(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) < 1000 {
		r.violations = append(r.violations, s)
	}
}

func (r *Recorder) script(sha string, keys int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scripts[sha]++
	if keys == 0 {
		r.keyless[sha]++
	}
}

func (r *Recorder) global(key, use string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.globals[key]
	if m == nil {
		if len(r.globals) >= 10000 {
			return
		}
		m = map[string]int{}
		r.globals[key] = m
	}
	m[use]++
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ScriptSHA1 is the name under which Redis knows a script body (EVALSHA).
func ScriptSHA1(body string) string {
	h := sha1.Sum([]byte(body))
	return hex.EncodeToString(h[:])
}

// PerQueueKey reports whether key carries a queue's hash tag (wr:{q:<name>}:…).
func PerQueueKey(key string) bool { return strings.HasPrefix(key, "wr:{q:") }

// keySpec is where a command's keys are (COMMAND's legacy first/last/step positions).
type keySpec struct {
	first, last, step int
	movable           bool
}

// keyFinder finds the keys of a command: COMMAND's key positions, the commands whose keys
// move (numkeys, STREAMS …) by their syntax, and any other such command by asking a node
// (COMMAND GETKEYS).
type keyFinder struct {
	specs map[string]keySpec
	addrs func() []string // running nodes, for COMMAND GETKEYS
}

func loadKeyFinder(ctx context.Context, addr string, addrs func() []string) (*keyFinder, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	infos, err := c.Command(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("COMMAND on %s: %w", addr, err)
	}
	kf := &keyFinder{specs: make(map[string]keySpec, len(infos)), addrs: addrs}
	for name, in := range infos {
		s := keySpec{first: int(in.FirstKeyPos), last: int(in.LastKeyPos), step: int(in.StepCount)}
		for _, f := range in.Flags {
			if f == "movablekeys" {
				s.movable = true
			}
		}
		kf.specs[strings.ToLower(name)] = s
	}
	return kf, nil
}

func argString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}

func argInt(args []any, i int) (int, bool) {
	if i >= len(args) {
		return 0, false
	}
	n, err := strconv.Atoi(argString(args[i]))
	return n, err == nil && n >= 0
}

// numkeysAt returns the keys of a command whose key count is the argument at i, the keys
// following it.
func numkeysAt(args []any, i int) []string {
	n, ok := argInt(args, i)
	if !ok || i+1+n > len(args) {
		return nil
	}
	out := make([]string, n)
	for j := range n {
		out[j] = argString(args[i+1+j])
	}
	return out
}

// keys returns the keys of the command args (args[0] is its name).
func (kf *keyFinder) keys(name string, args []any) []string {
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return numkeysAt(args, 2)
	case "zunionstore", "zinterstore", "zdiffstore":
		if len(args) < 2 {
			return nil
		}
		return append([]string{argString(args[1])}, numkeysAt(args, 2)...)
	case "zunion", "zinter", "zdiff", "zintercard", "sintercard", "lmpop", "zmpop":
		return numkeysAt(args, 1)
	case "blmpop", "bzmpop":
		return numkeysAt(args, 2)
	case "xread", "xreadgroup":
		for i := 1; i < len(args); i++ {
			if strings.EqualFold(argString(args[i]), "streams") {
				rest := args[i+1:]
				out := make([]string, 0, len(rest)/2)
				for _, a := range rest[:len(rest)/2] {
					out = append(out, argString(a))
				}
				return out
			}
		}
		return nil
	}
	s, ok := kf.specs[name]
	if !ok {
		return nil
	}
	if s.movable {
		return kf.getKeys(args)
	}
	if s.first <= 0 {
		return nil
	}
	last := s.last
	if last < 0 {
		last = len(args) + last
	}
	step := max(s.step, 1)
	var out []string
	for i := s.first; i <= last && i < len(args); i += step {
		out = append(out, argString(args[i]))
	}
	return out
}

// getKeys asks a running node (COMMAND GETKEYS), for the rare commands whose keys move and
// are not parsed above (SORT … STORE, GEORADIUS … STORE, MIGRATE).
func (kf *keyFinder) getKeys(args []any) []string {
	if kf.addrs == nil {
		return nil
	}
	for _, addr := range kf.addrs() {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		keys, err := c.Do(ctx, append([]any{"COMMAND", "GETKEYS"}, args...)...).StringSlice()
		cancel()
		_ = c.Close()
		if err == nil {
			return keys
		}
	}
	return nil
}

// checkHook is the redis.Hook of checked clients.
type checkHook struct {
	kf   *keyFinder
	recs []*Recorder
}

var _ redis.Hook = checkHook{}

func (h checkHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h checkHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.before(cmd.Args(), "")
		err := next(ctx, cmd)
		h.after(cmd.Args(), err)
		return err
	}
}

func (h checkHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		tx := len(cmds) > 0 && strings.EqualFold(cmds[0].Name(), "multi")
		var txKeys []string
		var txNames []string
		where := ""
		if tx {
			where = "in MULTI"
		}
		for _, c := range cmds {
			keys := h.before(c.Args(), where)
			if tx && len(keys) > 0 {
				txKeys = append(txKeys, keys...)
				txNames = append(txNames, strings.ToUpper(c.Name()))
			}
		}
		if tx && !oneSlot(txKeys) {
			h.report(fmt.Sprintf("MULTI/EXEC over several slots: %s with keys %s", strings.Join(txNames, ","), describeKeys(txKeys)))
		}
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.after(c.Args(), c.Err())
		}
		return err
	}
}

func (h checkHook) report(v string) {
	for _, r := range h.recs {
		r.violation(v)
	}
}

// before checks one command's keys and records its script and global keys; it returns the
// keys.
func (h checkHook) before(args []any, where string) []string {
	if len(args) == 0 {
		return nil
	}
	name := strings.ToLower(argString(args[0]))
	keys := h.kf.keys(name, args)
	if !oneSlot(keys) {
		desc := strings.ToUpper(name)
		if sha := scriptOf(name, args); sha != "" {
			desc += " " + sha
		}
		if where != "" {
			desc += " " + where
		}
		h.report(fmt.Sprintf("CROSSSLOT: %s with keys %s", desc, describeKeys(keys)))
	}
	use := strings.ToUpper(name) + "/" + strconv.Itoa(len(keys))
	for _, k := range keys {
		if !PerQueueKey(k) {
			for _, r := range h.recs {
				r.global(k, use)
			}
		}
	}
	return keys
}

// after records a script that ran (a NOSCRIPT answer, a refused or unsent command is no
// run; an error the script raised is) and the errors with which a cluster refuses a breach.
func (h checkHook) after(args []any, err error) {
	if len(args) == 0 {
		return
	}
	name := strings.ToLower(argString(args[0]))
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "CROSSSLOT") || strings.Contains(msg, "do not hash to the same slot") ||
			strings.Contains(msg, "non local key") || strings.Contains(msg, "non-local key") {
			desc := strings.ToUpper(name)
			if sha := scriptOf(name, args); sha != "" {
				desc += " " + sha
			}
			h.report(fmt.Sprintf("refused by the cluster: %s: %v", desc, err))
			return
		}
	}
	sha := scriptOf(name, args)
	if sha == "" {
		return
	}
	var rerr redis.Error
	if err != nil && (!errors.As(err, &rerr) || strings.HasPrefix(err.Error(), "NOSCRIPT") ||
		strings.HasPrefix(err.Error(), "MOVED") || strings.HasPrefix(err.Error(), "ASK") ||
		strings.HasPrefix(err.Error(), "TRYAGAIN") || strings.HasPrefix(err.Error(), "CLUSTERDOWN")) {
		return
	}
	n, _ := argInt(args, 2)
	for _, r := range h.recs {
		r.script(sha, n)
	}
}

// scriptOf is the SHA1 of the script an EVAL/EVALSHA runs, "" for other commands.
func scriptOf(name string, args []any) string {
	if len(args) < 2 {
		return ""
	}
	switch name {
	case "eval", "eval_ro":
		return ScriptSHA1(argString(args[1]))
	case "evalsha", "evalsha_ro":
		return strings.ToLower(argString(args[1]))
	}
	return ""
}

func oneSlot(keys []string) bool {
	for _, k := range keys[min(1, len(keys)):] {
		if Slot(k) != Slot(keys[0]) {
			return false
		}
	}
	return true
}

func describeKeys(keys []string) string {
	bySlot := map[int][]string{}
	for _, k := range keys {
		bySlot[Slot(k)] = append(bySlot[Slot(k)], k)
	}
	slots := make([]int, 0, len(bySlot))
	for s := range bySlot {
		slots = append(slots, s)
	}
	sort.Ints(slots)
	var b strings.Builder
	for i, s := range slots {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "slot %d: %s", s, strings.Join(bySlot[s], " "))
	}
	return b.String()
}
