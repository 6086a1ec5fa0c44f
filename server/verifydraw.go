package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/waitroom/waitroom/queue/draw"
)

// verify-draw is the buyer's side of the auditable draw (docs/DRAW.md): it recomputes a
// published draw from its seed and participant list, so that nobody has to take the
// operator's word for the order. It lives in the server binary so that whoever runs a room
// also has the verifier, and it needs nothing but the published data.

// Exit codes of verify-draw: the draw verifies; it does not (or the asked-for participant is
// not in it); it could not be checked (bad flags, unreachable room, not drawn yet).
const (
	verifyOK     = 0
	verifyFailed = 1
	verifyError  = 2
)

// maxDrawBody bounds what verify-draw reads from a room or a file: 64 MiB is an order of
// about a million participants (65 bytes a line), and a hostile room cannot make the
// verifier eat its memory.
const maxDrawBody = 64 << 20

// publishedDraw is GET /api/queues/{queue}/draw. Before the draw only starts_at and
// commitment are set; participants_hash and participants come at the start, the seed after
// the draw.
type publishedDraw struct {
	StartsAt         string `json:"starts_at"`
	Commitment       string `json:"commitment"`
	Seed             string `json:"seed"`
	ParticipantsHash string `json:"participants_hash"`
	Participants     int64  `json:"participants"`
	Algorithm        string `json:"algorithm"`
}

// verifyDrawMain runs "waitroom verify-draw" with args (the flags after the subcommand) and
// returns the exit code.
func verifyDrawMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify-draw", flag.ContinueOnError)
	fs.SetOutput(stderr)
	room := fs.String("room", "", "base URL of the room, e.g. https://room.example.com (with -queue)")
	queueName := fs.String("queue", "", "name of the queue whose draw to verify (with -room)")
	drawFile := fs.String("draw", "", "offline: a saved copy of GET /api/queues/{queue}/draw (JSON, with -order)")
	orderFile := fs.String("order", "", "offline: a saved copy of GET /api/queues/{queue}/draw/order (one draw id a line, with -draw)")
	ticketID := fs.String("ticket-id", "", "also print the drawn place of this ticket id (the middle part of your ticket; a whole ticket <queue>.<id>.<signature> works too, only the id is used and nothing is sent)")
	drawID := fs.String("draw-id", "", "also print the drawn place of this draw id")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: waitroom verify-draw -room URL -queue NAME [-ticket-id ID | -draw-id ID]
       waitroom verify-draw -draw FILE.json -order FILE.txt [-ticket-id ID | -draw-id ID]

Recomputes a queue's published draw (`+draw.Algorithm+`, docs/DRAW.md) from its seed and
participant list. Exit status: 0 the draw verifies, 1 it does not (or the participant is not
in it), 2 it could not be checked.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return verifyOK
		}
		return verifyError
	}
	usage := func(msg string) int {
		fmt.Fprintln(stderr, "verify-draw:", msg)
		fs.Usage()
		return verifyError
	}
	online, offline := *room != "" || *queueName != "", *drawFile != "" || *orderFile != ""
	switch {
	case fs.NArg() > 0:
		return usage("unexpected arguments: " + strings.Join(fs.Args(), " "))
	case online == offline:
		return usage("give either -room and -queue or -draw and -order")
	case online && (*room == "" || *queueName == ""):
		return usage("-room and -queue go together")
	case offline && (*drawFile == "" || *orderFile == ""):
		return usage("-draw and -order go together")
	case *ticketID != "" && *drawID != "":
		return usage("give -ticket-id or -draw-id, not both")
	}
	mine := strings.ToLower(*drawID)
	if *ticketID != "" {
		id := *ticketID
		if parts := strings.Split(id, "."); len(parts) == 3 {
			id = parts[1] // a whole ticket string
		}
		mine = draw.ID(id)
	}
	if *drawID != "" {
		if _, err := hex.DecodeString(mine); err != nil || len(mine) != 64 {
			return usage("-draw-id: want the 64 hex characters of a draw id")
		}
	}

	var (
		d        publishedDraw
		orderRaw []byte
		err      error
	)
	if online {
		d, orderRaw, err = fetchDraw(*room, *queueName)
	} else {
		d, orderRaw, err = readDrawFiles(*drawFile, *orderFile)
	}
	if err != nil {
		fmt.Fprintln(stderr, "verify-draw:", err)
		return verifyError
	}
	order := splitOrder(orderRaw)
	if err := checkDraw(d, order); err != nil {
		fmt.Fprintln(stdout, "FAILED:", err)
		return verifyFailed
	}
	fmt.Fprintf(stdout, "OK: %d participants, order reproduced from seed %s and participants hash %s\n",
		len(order), d.Seed, d.ParticipantsHash)
	// What no program can check from the published data alone: that this commitment was
	// the one shown before the start. The buyer compares it with what they saw then.
	when := "before the start"
	if d.StartsAt != "" {
		when += " (" + d.StartsAt + ")"
	}
	fmt.Fprintf(stdout, "The seed matches commitment %s: check that this is the commitment the room published %s.\n", d.Commitment, when)
	if mine == "" {
		return verifyOK
	}
	for k, id := range order {
		if id == mine {
			fmt.Fprintf(stdout, "draw id %s is at place %d of %d\n", mine, k+1, len(order))
			return verifyOK
		}
	}
	fmt.Fprintf(stdout, "FAILED: draw id %s is not among the %d participants\n", mine, len(order))
	return verifyFailed
}

// checkDraw checks a published draw against its order: the algorithm, the count, then
// draw.Verify (commitment, participants hash, order).
func checkDraw(d publishedDraw, order []string) error {
	if d.Algorithm != draw.Algorithm {
		return fmt.Errorf("the draw was made with algorithm %q; this verifier implements %q", d.Algorithm, draw.Algorithm)
	}
	if d.Participants != int64(len(order)) {
		return fmt.Errorf("the draw counts %d participants but the order lists %d", d.Participants, len(order))
	}
	return draw.Verify(d.Seed, d.Commitment, d.ParticipantsHash, order)
}

// splitOrder splits the order text into draw ids: one a line, the last line ending with a
// line feed (a missing final line feed, or CRLF line ends from a file saved on Windows, are
// forgiven: they change no id). Empty text is an empty draw.
func splitOrder(b []byte) []string {
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// fetchDraw reads a queue's draw and its order from a room.
func fetchDraw(room, queueName string) (publishedDraw, []byte, error) {
	base := strings.TrimRight(room, "/") + "/api/queues/" + url.PathEscape(queueName) + "/draw"
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return publishedDraw{}, nil, fmt.Errorf("-room %q: want an http or https URL", room)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	body, err := get(client, base, "application/json")
	if err != nil {
		return publishedDraw{}, nil, err
	}
	d, err := parseDraw(body, base)
	if err != nil {
		return d, nil, err
	}
	order, err := get(client, base+"/order", "text/plain")
	return d, order, err
}

// readDrawFiles reads a saved draw and order.
func readDrawFiles(drawPath, orderPath string) (publishedDraw, []byte, error) {
	body, err := readFileAtMost(drawPath)
	if err != nil {
		return publishedDraw{}, nil, err
	}
	d, err := parseDraw(body, drawPath)
	if err != nil {
		return d, nil, err
	}
	order, err := readFileAtMost(orderPath)
	return d, order, err
}

// parseDraw decodes the draw JSON read from source and refuses a draw not done yet.
func parseDraw(body []byte, source string) (publishedDraw, error) {
	var d publishedDraw
	if err := json.Unmarshal(body, &d); err != nil {
		return d, fmt.Errorf("%s: not a draw: %w", source, err)
	}
	if d.Seed == "" {
		msg := "the draw has not happened yet"
		if d.StartsAt != "" {
			msg += " (the queue starts at " + d.StartsAt + ")"
		}
		if d.Commitment != "" {
			// Saved now, it is what makes the check after the draw worth anything.
			msg += "; keep its commitment " + d.Commitment + " to compare after the draw"
		}
		return d, errors.New(msg)
	}
	return d, nil
}

// get fetches u and returns its body (at most maxDrawBody bytes); anything but 200 is an
// error carrying the start of the room's answer.
func get(client *http.Client, u, accept string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "waitroom-verify-draw")
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := readAtMost(res.Body, maxDrawBody)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if res.StatusCode != http.StatusOK {
		snippet := strings.TrimSpace(string(body[:min(len(body), 300)]))
		return nil, fmt.Errorf("GET %s: %s: %s", u, res.Status, snippet)
	}
	return body, nil
}

func readFileAtMost(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := readAtMost(f, maxDrawBody)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// readAtMost reads r to its end, refusing more than limit bytes.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than the limit of %d bytes", limit)
	}
	return b, nil
}
