package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/queue"
)

// expireToken moves the expiry of ticket t's admission (its row in the tickets hash) into
// the past, as the clock would once the token TTL passed (the shortest TTL is 10 s; the
// row's expiry is what the join script reads).
func expireToken(t *testing.T, f *fixture, tk queue.Ticket) {
	t.Helper()
	ctx := context.Background()
	key := "wr:{q:" + tk.Queue + "}:tickets"
	row, err := f.rdb.HGet(ctx, key, tk.ID).Result()
	if err != nil {
		t.Fatal(err)
	}
	p := strings.Split(row, ":")
	if len(p) < 4 || p[0] != "a" {
		t.Fatalf("ticket row %q is not an admission", row)
	}
	p[3] = fmt.Sprint(time.Now().Add(-time.Second).UnixMilli())
	if err := f.rdb.HSet(ctx, key, tk.ID, strings.Join(p, ":")).Err(); err != nil {
		t.Fatal(err)
	}
}

// One address holds at most places_per_ip live places, whatever it does. A place counts
// from its join until it leaves or its admission token is used or expires: an admitted
// place keeps counting while its token lives. A ticket that already has a place gets it
// back without spending one; another address has its own allowance.
func TestPlacesPerIP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "cap", 1000, 0)
	if _, _, err := f.q.Put(ctx, "cap", queue.SettingsPatch{PlacesPerIP: i64(3), Paused: bp(true)}); err != nil {
		t.Fatal(err)
	}
	const ip = "203.0.113.7"
	join := func(tk queue.Ticket, addr string) (queue.Place, bool, error) {
		t.Helper()
		return f.q.JoinFrom(ctx, tk, addr)
	}
	var mine []queue.Ticket
	for range 3 {
		tk, _ := f.signer.New("cap")
		if _, created, err := join(tk, ip); err != nil || !created {
			t.Fatalf("join within the cap: %v %v", created, err)
		}
		mine = append(mine, tk)
	}
	extra, _ := f.signer.New("cap")
	if _, _, err := join(extra, ip); !errors.Is(err, queue.ErrTooManyPlaces) {
		t.Fatalf("4th place from one address: %v, want ErrTooManyPlaces", err)
	}
	if _, created, err := join(mine[0], ip); err != nil || created {
		t.Fatalf("re-join of a held place: %v %v", created, err)
	}
	if _, _, err := join(extra, "198.51.100.1"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	// Leaving gives the slot back at once; leave-and-rejoin never holds more than the cap.
	if err := f.q.Leave(ctx, mine[2]); err != nil {
		t.Fatal(err)
	}
	again, _ := f.signer.New("cap")
	if _, created, err := join(again, ip); err != nil || !created {
		t.Fatalf("join after leaving: %v %v", created, err)
	}
	mine[2] = again
	over, _ := f.signer.New("cap")
	if _, _, err := join(over, ip); !errors.Is(err, queue.ErrTooManyPlaces) {
		t.Fatalf("join with the slot taken again: %v, want ErrTooManyPlaces", err)
	}

	// Admission does not free a slot: the admitted places count while their tokens live.
	if _, _, err := f.q.Put(ctx, "cap", queue.SettingsPatch{Paused: bp(false)}); err != nil {
		t.Fatal(err)
	}
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "t"})
	tokens := map[string]string{}
	for len(tokens) < 3 {
		if _, err := a.TickOnce(ctx, "cap"); err != nil {
			t.Fatal(err)
		}
		for _, tk := range mine {
			if p, _ := f.q.Status(ctx, tk); p.State == queue.StateAdmitted {
				tokens[tk.ID] = p.Token
			}
		}
	}
	if _, _, err := join(over, ip); !errors.Is(err, queue.ErrTooManyPlaces) {
		t.Fatalf("join while the address's 3 admissions live: %v, want ErrTooManyPlaces", err)
	}
	// A used token frees its place.
	if err := f.q.ConsumeToken(ctx, mine[0], tokens[mine[0].ID], "order-1"); err != nil {
		t.Fatal(err)
	}
	if _, created, err := join(over, ip); err != nil || !created {
		t.Fatalf("join after a token was used: %v %v", created, err)
	}
	late, _ := f.signer.New("cap")
	if _, _, err := join(late, ip); !errors.Is(err, queue.ErrTooManyPlaces) {
		t.Fatalf("join at the cap again: %v, want ErrTooManyPlaces", err)
	}
	// A token that expired frees its place.
	expireToken(t, f, mine[1])
	if _, created, err := join(late, ip); err != nil || !created {
		t.Fatalf("join after a token expired: %v %v", created, err)
	}
	// Giving up an admission (leave with its token) frees its place.
	if err := f.q.Leave(ctx, mine[2]); err != nil {
		t.Fatal(err)
	}
	last, _ := f.signer.New("cap")
	if _, created, err := join(last, ip); err != nil || !created {
		t.Fatalf("join after an admission was given up: %v %v", created, err)
	}
	// 0 turns the cap off.
	if _, _, err := f.q.Put(ctx, "cap", queue.SettingsPatch{PlacesPerIP: i64(0)}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		tk, _ := f.signer.New("cap")
		if _, _, err := join(tk, ip); err != nil {
			t.Fatalf("cap off: %v", err)
		}
	}
}

func bp(v bool) *bool { return &v }

// TestPlacesPassthroughOneAddress: one address cannot take a passthrough queue. 60 joins
// from one address into a passthrough queue with max_active 40: before places counted
// until their token ended, 40 were admitted at once (all of max_active) and the queue was
// blocked for the token TTL; now the address holds its share of max_active.
func TestPlacesPassthroughOneAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "pt", 1000, 40)
	if _, _, err := f.q.Put(ctx, "pt", queue.SettingsPatch{Method: methodp(queue.MethodPassthrough), PlacesPerIP: i64(10)}); err != nil {
		t.Fatal(err)
	}
	const ip = "127.0.0.1"
	join := func(addr string) (queue.Ticket, queue.Place, error) {
		tk, _ := f.signer.New("pt")
		p, _, err := f.q.JoinFrom(ctx, tk, addr)
		return tk, p, err
	}
	admitted, waiting, refused := 0, 0, 0
	var mine []queue.Ticket
	tokens := map[string]string{}
	for range 60 {
		tk, p, err := join(ip)
		switch {
		case errors.Is(err, queue.ErrTooManyPlaces):
			refused++
		case err != nil:
			t.Fatal(err)
		case p.State == queue.StateAdmitted:
			admitted++
			mine = append(mine, tk)
			tokens[tk.ID] = p.Token
		default:
			waiting++
		}
	}
	t.Logf("60 joins from %s, places_per_ip 10, max_active 40: %d admitted, %d waiting, %d refused", ip, admitted, waiting, refused)
	// The default share: max(1, floor(40 × 0.1)) = 4 live places for the address.
	if admitted != 4 || waiting != 0 || refused != 56 {
		t.Fatalf("%d admitted, %d waiting, %d refused; want 4, 0, 56", admitted, waiting, refused)
	}
	if s, _ := f.q.Settings(ctx, "pt"); s.MaxActiveSharePerIP != queue.DefaultMaxActiveSharePerIP || s.AddressCap() != 4 {
		t.Fatalf("settings: share %v, address cap %d; want the default and 4", s.MaxActiveSharePerIP, s.AddressCap())
	}
	// Everyone else still gets in at once: 36 tokens are left for other addresses.
	for i := range 36 {
		if _, p, err := join(fmt.Sprintf("198.51.100.%d", i)); err != nil || p.State != queue.StateAdmitted {
			t.Fatalf("another address's join %d: %s %v; want admitted", i, p.State, err)
		}
	}
	if _, _, err := join(ip); !errors.Is(err, queue.ErrTooManyPlaces) {
		t.Fatalf("a join while the address's 4 admissions live: %v, want ErrTooManyPlaces", err)
	}
	// A used token frees the place (and its max_active slot): the address joins once more.
	if err := f.q.ConsumeToken(ctx, mine[0], tokens[mine[0].ID], "order-1"); err != nil {
		t.Fatal(err)
	}
	if _, p, err := join(ip); err != nil || p.State != queue.StateAdmitted {
		t.Fatalf("join after a used token: %s %v; want admitted", p.State, err)
	}
	if _, _, err := join(ip); !errors.Is(err, queue.ErrTooManyPlaces) {
		t.Fatalf("join at the share again: %v, want ErrTooManyPlaces", err)
	}
	// The setting relaxes it for shared addresses: a share of 0.25 is 10 places, and
	// places_per_ip (10) still applies.
	if _, _, err := f.q.Put(ctx, "pt", queue.SettingsPatch{MaxActiveSharePerIP: f64(0.25)}); err != nil {
		t.Fatal(err)
	}
	more := 0
	for range 20 {
		if _, _, err := join(ip); err == nil {
			more++
		} else if !errors.Is(err, queue.ErrTooManyPlaces) {
			t.Fatal(err)
		}
	}
	if more != 6 {
		t.Fatalf("share 0.25: %d more places, want 6 (10 in all)", more)
	}
	// 0 leaves places_per_ip alone: raised to 12, two more.
	if _, _, err := f.q.Put(ctx, "pt", queue.SettingsPatch{MaxActiveSharePerIP: f64(0), PlacesPerIP: i64(12)}); err != nil {
		t.Fatal(err)
	}
	more = 0
	for range 5 {
		if _, _, err := join(ip); err == nil {
			more++
		}
	}
	if more != 2 {
		t.Fatalf("share 0, places_per_ip 12: %d more places, want 2", more)
	}
}

// TestAddressCap: the cap as the join script computes it.
func TestAddressCap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		places, maxActive int64
		share             float64
		want              int64
	}{
		{100, 0, 0.1, 100},       // no max_active: places_per_ip
		{100, 40, 0.1, 4},        // a tenth of 40
		{100, 5, 0.1, 1},         // at least 1
		{100, 1, 0.1, 1},         // a drop of one: one place per address
		{100, 1000, 0.1, 100},    // a tenth of 1,000 = the default places_per_ip
		{100, 100_000, 0.1, 100}, // places_per_ip is the lower one
		{3, 40, 0.1, 3},
		{100, 70, 0.1, 7}, // 70 × 0.1 is 7.000000000000001 in binary: still 7
		{100, 30, 0.1, 3}, // and 30 × 0.1 is 3.0000000000000004
		{100, 40, 0, 100}, // share off
		{100, 40, 1, 40},
		{0, 40, 0.1, 0}, // places_per_ip 0: no per-address cap at all
	} {
		s := queue.DefaultSettings("x")
		s.PlacesPerIP, s.MaxActive, s.MaxActiveSharePerIP = c.places, c.maxActive, c.share
		if got := s.AddressCap(); got != c.want {
			t.Errorf("places_per_ip %d, max_active %d, share %v: cap %d, want %d", c.places, c.maxActive, c.share, got, c.want)
		}
	}
}

// TestPlacesShareSetting: the share is checked (0..1, 422 naming the field), stored, read
// back, and a queue made before the setting existed has the default.
func TestPlacesShareSetting(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "sh", 5, 10)
	for _, bad := range []float64{-0.1, 1.01, 2} {
		_, _, err := f.q.Put(ctx, "sh", queue.SettingsPatch{MaxActiveSharePerIP: f64(bad)})
		var ie *queue.InvalidError
		if !errors.As(err, &ie) || ie.Field != "max_active_share_per_ip" {
			t.Fatalf("share %v: %v, want an invalid max_active_share_per_ip", bad, err)
		}
	}
	if s, _ := f.q.Settings(ctx, "sh"); s.MaxActiveSharePerIP != queue.DefaultMaxActiveSharePerIP {
		t.Fatalf("refused values changed the share to %v", s.MaxActiveSharePerIP)
	}
	negZero := f64(0)
	*negZero = -*negZero
	for _, v := range []*float64{f64(0.5), negZero, f64(1)} {
		if _, _, err := f.q.Put(ctx, "sh", queue.SettingsPatch{MaxActiveSharePerIP: v}); err != nil {
			t.Fatal(err)
		}
		got, _ := f.rdb.HGet(ctx, "wr:{q:sh}:cfg", "max_active_share_per_ip").Result()
		if s, _ := f.q.Settings(ctx, "sh"); s.MaxActiveSharePerIP != *v || got == "-0" {
			t.Fatalf("share %v stored as %q, read back %v", *v, got, s.MaxActiveSharePerIP)
		}
	}
	if err := f.rdb.HDel(ctx, "wr:{q:sh}:cfg", "max_active_share_per_ip").Err(); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.q.Settings(ctx, "sh"); s.MaxActiveSharePerIP != queue.DefaultMaxActiveSharePerIP {
		t.Fatalf("a queue made before the setting: share %v, want the default", s.MaxActiveSharePerIP)
	}
}

// TestPlacesEndedDropped: an address at its cap has its places checked in one read, and
// places that ended (here: admissions whose tokens expired) are dropped from
// its set as they are found, so the set never outgrows the cap.
func TestPlacesEndedDropped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "full", 1000, 0)
	if _, _, err := f.q.Put(ctx, "full", queue.SettingsPatch{PlacesPerIP: i64(50), Method: methodp(queue.MethodFIFO)}); err != nil {
		t.Fatal(err)
	}
	const ip = "192.0.2.9"
	var mine []queue.Ticket
	for range 50 {
		tk, _ := f.signer.New("full")
		if _, _, err := f.q.JoinFrom(ctx, tk, ip); err != nil {
			t.Fatal(err)
		}
		mine = append(mine, tk)
	}
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "t"})
	for {
		if _, err := a.TickOnce(ctx, "full"); err != nil {
			t.Fatal(err)
		}
		if p, _ := f.q.Status(ctx, mine[19]); p.State == queue.StateAdmitted {
			break
		}
	}
	for _, tk := range mine[:20] {
		if p, _ := f.q.Status(ctx, tk); p.State == queue.StateAdmitted {
			expireToken(t, f, tk)
		}
	}
	set := "wr:{q:full}:places:" + ip
	for i := range 25 {
		tk, _ := f.signer.New("full")
		_, _, err := f.q.JoinFrom(ctx, tk, ip)
		if n, _ := f.rdb.ZCard(ctx, set).Result(); n > 50 {
			t.Fatalf("join %d: the address's set holds %d places, over the cap", i, n)
		}
		if i < 20 && err != nil {
			t.Fatalf("join %d after 20 tokens expired: %v", i, err)
		}
		if i >= 20 && !errors.Is(err, queue.ErrTooManyPlaces) {
			t.Fatalf("join %d past the cap: %v, want ErrTooManyPlaces", i, err)
		}
	}
}
