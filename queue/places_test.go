package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/waitroom/waitroom/queue"
)

// One address holds at most places_per_ip live places, whatever it does: places that were
// admitted (or left and were passed by the head) free their slot; a ticket that already has
// a place gets it back without spending one; another address has its own allowance.
func TestPlacesPerIP(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.mkQueue(t, "cap", 1000, 0)
	if _, _, err := f.q.Put(ctx, "cap", queue.SettingsPatch{PlacesPerIP: i64(3)}); err != nil {
		t.Fatal(err)
	}
	const ip = "203.0.113.7"
	var mine []queue.Ticket
	for range 3 {
		tk, _ := f.signer.New("cap")
		if _, created, err := f.q.JoinFrom(ctx, tk, ip); err != nil || !created {
			t.Fatalf("join within the cap: %v %v", created, err)
		}
		mine = append(mine, tk)
	}
	extra, _ := f.signer.New("cap")
	if _, _, err := f.q.JoinFrom(ctx, extra, ip); !errors.Is(err, queue.ErrTooManyPlaces) {
		t.Fatalf("4th place from one address: %v, want ErrTooManyPlaces", err)
	}
	if _, created, err := f.q.JoinFrom(ctx, mine[0], ip); err != nil || created {
		t.Fatalf("re-join of a held place: %v %v", created, err)
	}
	if _, _, err := f.q.JoinFrom(ctx, extra, "198.51.100.1"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	// Leaving does not hand the slot back before the head passes the place (stricter,
	// never looser): leave-and-rejoin cannot grow the count.
	if err := f.q.Leave(ctx, mine[2]); err != nil {
		t.Fatal(err)
	}
	again, _ := f.signer.New("cap")
	if _, _, err := f.q.JoinFrom(ctx, again, ip); !errors.Is(err, queue.ErrTooManyPlaces) {
		t.Fatalf("rejoin after leaving, head not past: %v, want ErrTooManyPlaces", err)
	}
	// Admission moves the head past the address's places: their slots are free again.
	a := queue.NewAdmitter(f.q, queue.AdmitConfig{Owner: "t"})
	for range 20 {
		if _, err := a.TickOnce(ctx, "cap"); err != nil {
			t.Fatal(err)
		}
		if p, _ := f.q.Status(ctx, mine[1]); p.State == queue.StateAdmitted {
			break
		}
	}
	if _, created, err := f.q.JoinFrom(ctx, again, ip); err != nil || !created {
		t.Fatalf("join after the address's places were admitted: %v %v", created, err)
	}
	// 0 turns the cap off.
	if _, _, err := f.q.Put(ctx, "cap", queue.SettingsPatch{PlacesPerIP: i64(0)}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		tk, _ := f.signer.New("cap")
		if _, _, err := f.q.JoinFrom(ctx, tk, ip); err != nil {
			t.Fatalf("cap off: %v", err)
		}
	}
}
