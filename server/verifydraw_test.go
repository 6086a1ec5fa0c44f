package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue/draw"
)

// honestDraw returns a draw of n participants as a room publishes it, and the ticket ids
// of its participants in join order.
func honestDraw(t *testing.T, n int) (publishedDraw, []string, []string) {
	t.Helper()
	tickets := make([]string, n)
	ids := make([]string, n)
	for i := range tickets {
		tickets[i] = "ticket-id-" + strconv.Itoa(i)
		ids[i] = draw.ID(tickets[i])
	}
	seed := draw.NewSeed()
	c, err := draw.Commitment(seed)
	if err != nil {
		t.Fatal(err)
	}
	d := publishedDraw{StartsAt: "2030-01-02T03:04:05Z", Commitment: c, Seed: seed,
		ParticipantsHash: draw.ParticipantsHash(ids), Participants: int64(n), Algorithm: draw.Algorithm}
	order, err := draw.Order(d.Seed, d.ParticipantsHash, ids)
	if err != nil {
		t.Fatal(err)
	}
	return d, order, tickets
}

func orderText(order []string) string {
	if len(order) == 0 {
		return ""
	}
	return strings.Join(order, "\n") + "\n"
}

// room serves a draw and its order as GET /api/queues/drop/draw[/order] do.
func room(t *testing.T, d *publishedDraw, order *string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/queues/drop/draw", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(d)
	})
	mux.HandleFunc("GET /api/queues/drop/draw/order", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(*order))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func runVerifyDraw(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = verifyDrawMain(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVerifyDrawRoom(t *testing.T) {
	t.Parallel()
	honest, order, tickets := honestDraw(t, 200)
	d, text := honest, orderText(order)
	srv := room(t, &d, &text)
	args := []string{"-room", srv.URL + "/", "-queue", "drop"}

	code, out, errOut := runVerifyDraw(args...)
	want := "OK: 200 participants, order reproduced from seed " + d.Seed + " and participants hash " + d.ParticipantsHash + "\n"
	if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, d.Commitment) || errOut != "" {
		t.Fatalf("honest draw: %d %q %q", code, out, errOut)
	}
	// A participant finds their place, by ticket id, whole ticket or draw id.
	place := slices.Index(order, draw.ID(tickets[17])) + 1
	wantPlace := "draw id " + draw.ID(tickets[17]) + " is at place " + strconv.Itoa(place) + " of 200\n"
	for _, who := range [][]string{
		{"-ticket-id", tickets[17]},
		{"-ticket-id", "drop." + tickets[17] + ".c2lnbmF0dXJl"},
		{"-draw-id", strings.ToUpper(draw.ID(tickets[17]))},
	} {
		code, out, _ = runVerifyDraw(append(who, args...)...)
		if code != 0 || !strings.HasSuffix(out, wantPlace) {
			t.Fatalf("%v: %d %q, want %q", who, code, out, wantPlace)
		}
	}
	code, out, _ = runVerifyDraw(append([]string{"-ticket-id", "not-a-participant"}, args...)...)
	if code != 1 || !strings.Contains(out, "FAILED: draw id "+draw.ID("not-a-participant")+" is not among the 200 participants") {
		t.Fatalf("outsider: %d %q", code, out)
	}

	swapped := slices.Clone(order)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	other, _, _ := honestDraw(t, 200)
	for _, c := range []struct {
		name  string
		d     func(*publishedDraw)
		order []string
		want  string
	}{
		{"swapped pair", nil, swapped, "place 1 holds"},
		{"missing id", func(d *publishedDraw) { d.Participants-- }, order[1:], "not the frozen participant list"},
		{"missing id, count kept", nil, order[1:], "the draw counts 200 participants but the order lists 199"},
		{"added id", func(d *publishedDraw) { d.Participants++ }, append(slices.Clone(order), draw.ID("sybil")), "not the frozen participant list"},
		{"other seed", func(d *publishedDraw) { d.Seed = other.Seed }, order, "does not match the commitment"},
		{"other seed and commitment", func(d *publishedDraw) { d.Seed, d.Commitment = other.Seed, other.Commitment }, order, "place "},
		{"tampered participants hash", func(d *publishedDraw) { d.ParticipantsHash = draw.ParticipantsHash(order[1:]) }, order, "not the frozen participant list"},
		{"unknown algorithm", func(d *publishedDraw) { d.Algorithm = "waitroom-draw-v2" }, order, `algorithm "waitroom-draw-v2"`},
		{"malformed seed", func(d *publishedDraw) { d.Seed = "zz" }, order, "seed: want 64 lowercase hex"},
	} {
		d = honest
		if c.d != nil {
			c.d(&d)
		}
		text = orderText(c.order)
		code, out, _ := runVerifyDraw(args...)
		if code != 1 || !strings.HasPrefix(out, "FAILED: ") || !strings.Contains(out, c.want) {
			t.Errorf("%s: %d %q, want FAILED with %q", c.name, code, out, c.want)
		}
	}
}

func TestVerifyDrawNotYet(t *testing.T) {
	t.Parallel()
	d := publishedDraw{StartsAt: "2030-01-02T03:04:05Z", Commitment: draw.ID("c"), Algorithm: draw.Algorithm}
	text := ""
	srv := room(t, &d, &text)
	code, out, errOut := runVerifyDraw("-room", srv.URL, "-queue", "drop")
	if code != 2 || out != "" || !strings.Contains(errOut, "the draw has not happened yet") || !strings.Contains(errOut, d.Commitment) {
		t.Fatalf("%d %q %q", code, out, errOut)
	}
	// At the start: the list is frozen and hashed, the seed still secret.
	d.ParticipantsHash, d.Participants = draw.ParticipantsHash(nil), 0
	if code, _, errOut = runVerifyDraw("-room", srv.URL, "-queue", "drop"); code != 2 || !strings.Contains(errOut, "the draw has not happened yet") {
		t.Fatalf("%d %q", code, errOut)
	}
}

func TestVerifyDrawEmpty(t *testing.T) {
	t.Parallel()
	d, order, _ := honestDraw(t, 0)
	text := orderText(order)
	srv := room(t, &d, &text)
	if code, out, errOut := runVerifyDraw("-room", srv.URL, "-queue", "drop"); code != 0 || !strings.HasPrefix(out, "OK: 0 participants") {
		t.Fatalf("%d %q %q", code, out, errOut)
	}
}

func TestVerifyDrawRoomErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	code, out, errOut := runVerifyDraw("-room", srv.URL, "-queue", "drop")
	if code != 2 || out != "" || !strings.Contains(errOut, "404") {
		t.Fatalf("404: %d %q %q", code, out, errOut)
	}
	srv.Close()
	if code, _, errOut = runVerifyDraw("-room", srv.URL, "-queue", "drop"); code != 2 || errOut == "" {
		t.Fatalf("room down: %d %q", code, errOut)
	}
	if code, _, errOut = runVerifyDraw("-room", "ftp://example.com", "-queue", "drop"); code != 2 || !strings.Contains(errOut, "http or https") {
		t.Fatalf("bad URL: %d %q", code, errOut)
	}
	if _, err := readAtMost(strings.NewReader("12345"), 4); err == nil {
		t.Fatal("readAtMost read past its limit")
	}
	if b, err := readAtMost(strings.NewReader("1234"), 4); err != nil || string(b) != "1234" {
		t.Fatalf("readAtMost at its limit: %q %v", b, err)
	}
}

func TestVerifyDrawFiles(t *testing.T) {
	t.Parallel()
	d, order, tickets := honestDraw(t, 50)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	js, _ := json.Marshal(d)
	drawPath, orderPath := write("draw.json", string(js)), write("order.txt", orderText(order))
	code, out, errOut := runVerifyDraw("-draw", drawPath, "-order", orderPath, "-ticket-id", tickets[0])
	if code != 0 || !strings.HasPrefix(out, "OK: 50 participants") || !strings.Contains(out, " of 50\n") {
		t.Fatalf("honest files: %d %q %q", code, out, errOut)
	}
	// Saved on Windows or without the final line feed: the same ids, the same verdict.
	crlf := write("crlf.txt", strings.ReplaceAll(strings.TrimSuffix(orderText(order), "\n"), "\n", "\r\n"))
	if code, out, _ = runVerifyDraw("-draw", drawPath, "-order", crlf); code != 0 {
		t.Fatalf("CRLF order: %d %q", code, out)
	}
	rev := slices.Clone(order)
	slices.Reverse(rev)
	if code, out, _ = runVerifyDraw("-draw", drawPath, "-order", write("rev.txt", orderText(rev))); code != 1 || !strings.HasPrefix(out, "FAILED: place 1 holds") {
		t.Fatalf("reversed order: %d %q", code, out)
	}
	blank := write("blank.txt", orderText(order[:10])+"\n"+orderText(order[10:]))
	if code, out, _ = runVerifyDraw("-draw", drawPath, "-order", blank); code != 1 || !strings.HasPrefix(out, "FAILED: ") {
		t.Fatalf("blank line: %d %q", code, out)
	}
	if code, _, errOut = runVerifyDraw("-draw", write("bad.json", "{"), "-order", orderPath); code != 2 || !strings.Contains(errOut, "not a draw") {
		t.Fatalf("bad JSON: %d %q", code, errOut)
	}
	if code, _, errOut = runVerifyDraw("-draw", filepath.Join(dir, "missing.json"), "-order", orderPath); code != 2 || errOut == "" {
		t.Fatalf("missing file: %d %q", code, errOut)
	}
}

func TestVerifyDrawUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		nil,
		{"-room", "http://127.0.0.1:1"},
		{"-draw", "d.json"},
		{"-room", "http://127.0.0.1:1", "-queue", "q", "-draw", "d.json", "-order", "o.txt"},
		{"-draw", "d.json", "-order", "o.txt", "-ticket-id", "a", "-draw-id", draw.ID("a")},
		{"-draw", "d.json", "-order", "o.txt", "-draw-id", "abc"},
		{"-draw", "d.json", "-order", "o.txt", "extra"},
		{"-no-such-flag"},
	} {
		if code, out, errOut := runVerifyDraw(args...); code != 2 || out != "" || !strings.Contains(errOut, "usage") {
			t.Errorf("%q: %d %q %q", args, code, out, errOut)
		}
	}
	if code, _, errOut := runVerifyDraw("-h"); code != 0 || !strings.Contains(errOut, "usage") {
		t.Errorf("-h: %d %q", code, errOut)
	}
}
