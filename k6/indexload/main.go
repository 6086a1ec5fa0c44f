// Command indexload measures GET / with many queues: it creates -queues queues through the
// admin API (skipped when they exist), waits -settle for the admission loops to rest them,
// then drives GET / at a fixed rate (-rate per second, open loop) or back to back (-closed
// workers) for -duration and prints the latency percentiles, the rate reached and the Redis
// commands per second over the window (INFO stats total_commands_processed). -rate 0 with
// -closed 0 measures the idle cost alone (no request). Loopback only; bounded in time.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "the instance (loopback only)")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "the instance's Redis (for INFO)")
	token := flag.String("admin-token", "", "admin token (to create the queues)")
	queues := flag.Int("queues", 10000, "queues to create (q00000 …)")
	settle := flag.Duration("settle", 30*time.Second, "wait after creating the queues")
	rate := flag.Float64("rate", 50, "GET / per second (open loop); 0 = none")
	closed := flag.Int("closed", 0, "workers sending GET / back to back instead of -rate")
	dur := flag.Duration("duration", 30*time.Second, "measurement window")
	path := flag.String("path", "/", "the page to request")
	flag.Parse()
	if err := run(*base, *redisAddr, *token, *queues, *settle, *rate, *closed, *dur, *path); err != nil {
		fmt.Fprintln(os.Stderr, "indexload:", err)
		os.Exit(1)
	}
}

func run(base, redisAddr, token string, queues int, settle time.Duration, rate float64, closed int, dur time.Duration, path string) error {
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	for _, hp := range []string{u.Hostname(), strings.Split(redisAddr, ":")[0]} {
		if ip := net.ParseIP(hp); hp != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("%s is not a loopback address", hp)
		}
	}
	hard := time.AfterFunc(settle+dur+15*time.Minute, func() { fmt.Fprintln(os.Stderr, "indexload: hard stop"); os.Exit(3) })
	defer hard.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ctx := context.Background()
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	have, err := rdb.SCard(ctx, "wr:queues").Result()
	if err != nil {
		return err
	}
	if int(have) < queues && token != "" {
		t0 := time.Now()
		if err := create(client, base, token, int(have), queues); err != nil {
			return err
		}
		fmt.Printf("created %d queues in %v\n", queues-int(have), time.Since(t0).Round(time.Millisecond))
		time.Sleep(settle)
	}
	n, _ := rdb.SCard(ctx, "wr:queues").Result()
	before, err := totalCommands(ctx, rdb)
	if err != nil {
		return err
	}
	statsBefore, err := commandStats(ctx, rdb)
	if err != nil {
		return err
	}
	start := time.Now()
	var mu sync.Mutex
	var lat []time.Duration
	fails := map[string]int{}
	get := func() {
		t := time.Now()
		res, err := client.Get(base + path)
		d := time.Since(t)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			fails[err.Error()]++
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			fails[strconv.Itoa(res.StatusCode)]++
			return
		}
		lat = append(lat, d)
	}
	var wg sync.WaitGroup
	end := start.Add(dur)
	switch {
	case closed > 0:
		for range closed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					get()
				}
			}()
		}
	case rate > 0:
		every := time.Duration(float64(time.Second) / rate)
		for i := 0; ; i++ {
			at := start.Add(time.Duration(i) * every)
			if !at.Before(end) {
				break
			}
			time.Sleep(time.Until(at))
			wg.Add(1)
			go func() { defer wg.Done(); get() }()
		}
	default:
		time.Sleep(dur)
	}
	wg.Wait()
	window := time.Since(start)
	after, err := totalCommands(ctx, rdb)
	if err != nil {
		return err
	}
	statsAfter, err := commandStats(ctx, rdb)
	if err != nil {
		return err
	}
	cps := float64(after-before) / window.Seconds()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) string {
		if len(lat) == 0 {
			return "-"
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(10 * time.Microsecond).String()
	}
	fmt.Printf("queues %d, window %.1f s, requests ok %d (%.1f/s), failed %v\n", n, window.Seconds(), len(lat), float64(len(lat))/window.Seconds(), fails)
	fmt.Printf("GET %s latency p50 %s p90 %s p99 %s max %s\n", path, q(0.5), q(0.9), q(0.99), q(1))
	fmt.Printf("Redis commands/s %.0f (%.2f per queue; INFO total_commands_processed delta %d)\n", cps, cps/float64(max(n, 1)), after-before)
	type cs struct {
		name string
		n    int64
	}
	var by []cs
	for k, v := range statsAfter {
		if d := v - statsBefore[k]; d > 0 {
			by = append(by, cs{k, d})
		}
	}
	sort.Slice(by, func(i, j int) bool { return by[i].n > by[j].n })
	var top []string
	for _, c := range by[:min(len(by), 8)] {
		top = append(top, fmt.Sprintf("%s %.0f/s", c.name, float64(c.n)/window.Seconds()))
	}
	fmt.Printf("by command (INFO commandstats, scripts' inner commands included): %s\n", strings.Join(top, ", "))
	if len(lat) > 0 {
		fmt.Printf("Redis commands per request %.1f (everything Redis ran in the window / requests)\n", float64(after-before)/float64(len(lat)))
	}
	return nil
}

// create PUTs queues from..to-1 through the admin API, 16 at a time.
func create(client *http.Client, base, token string, from, to int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/admin/api/queues/q%05d", base, i), bytes.NewReader([]byte(`{"rate_per_second":5}`)))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode >= 300 {
						err = fmt.Errorf("PUT q%05d: %d", i, res.StatusCode)
					}
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		select {
		case err := <-errs:
			close(next)
			wg.Wait()
			return err
		case next <- i:
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// commandStats reads INFO commandstats: calls per command.
func commandStats(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	s, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out, nil
}

func totalCommands(ctx context.Context, rdb *redis.Client) (int64, error) {
	s, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no total_commands_processed in INFO stats")
}
