package draw_test

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue/draw"
)

// The known answer: seed 00 01 … 1f and six ticket ids. The values were computed once and
// cross-checked with an independent Python reimplementation of the package documentation
// (hashlib only); any change to them is a change of algorithm and needs a new name.
var (
	katSeed    = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	katTickets = []string{"AAAAAAAAAAAAAAAAAAAAAA", "alice-ticket-id-000001", "bob-ticket-id-00000002",
		"carol-ticket-id-000003", "dave-ticket-id-0000004", "erin-ticket-id-0000005"}
	katIDs = []string{
		"8a5bdb4cc15164126c6ef2668de9dd240d299ce6397a42c95a9411b93d080ed8",
		"55db016e2a08fc909e694e62004eb2eff0b60d59a6ee73dedfef33ba57afa191",
		"5472f747950fd3b403748d839bcffb082a9d780d85a45a7faff505f10aa60c52",
		"f44f2d50bf63352e0b41e9a6bc8cece5f5a85af7486da91c6fb4b4fe988c722a",
		"644cc61c27e96aefc3d3ff8d0e19561b0535d95498bd501d3d77262af7004008",
		"6dfbab3dd6f2654ec0bec0ad628e22f9643d3742909183d0196f1ee46220b71b",
	}
	katCommitment = "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd"
	katPHash      = "7c916fa4589bba10afe1382d7da23dac5aa4761c2df740b6f1102ddab4625544"
	katKey        = "939e2224e579233d6764152e74c1db0f61a647bbba245cabfa539f6d5b09b9a1"
	katOrder      = []string{katIDs[3], katIDs[1], katIDs[2], katIDs[5], katIDs[0], katIDs[4]}
)

func TestKnownAnswer(t *testing.T) {
	t.Parallel()
	for i, tk := range katTickets {
		if got := draw.ID(tk); got != katIDs[i] {
			t.Fatalf("ID(%q) = %s, want %s", tk, got, katIDs[i])
		}
	}
	c, err := draw.Commitment(katSeed)
	if err != nil || c != katCommitment {
		t.Fatalf("Commitment = %s, %v; want %s", c, err, katCommitment)
	}
	if ph := draw.ParticipantsHash(katIDs); ph != katPHash {
		t.Fatalf("ParticipantsHash = %s, want %s", ph, katPHash)
	}
	key, err := draw.Key(katSeed, katPHash)
	if err != nil || hex.EncodeToString(key[:]) != katKey {
		t.Fatalf("Key = %x, %v; want %s", key, err, katKey)
	}
	order, err := draw.Order(katSeed, katPHash, katIDs)
	if err != nil || !slices.Equal(order, katOrder) {
		t.Fatalf("Order = %v, %v; want %v", order, err, katOrder)
	}
	perm := draw.OrderIndex(key, katIDs)
	for k, i := range perm {
		if katIDs[i] != katOrder[k] {
			t.Fatalf("OrderIndex = %v: place %d is %s, want %s", perm, k+1, katIDs[i], katOrder[k])
		}
	}
	if err := draw.Verify(katSeed, katCommitment, katPHash, katOrder); err != nil {
		t.Fatalf("Verify(known answer) = %v", err)
	}
}

// ids returns n distinct draw ids.
func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = draw.ID("ticket-" + strconv.Itoa(i))
	}
	return out
}

// published is an honest draw of list: what the server publishes.
func published(t testing.TB, list []string) (seed, commitment, phash string, order []string) {
	t.Helper()
	seed = draw.NewSeed()
	commitment, err := draw.Commitment(seed)
	if err != nil {
		t.Fatal(err)
	}
	phash = draw.ParticipantsHash(list)
	order, err = draw.Order(seed, phash, list)
	if err != nil {
		t.Fatal(err)
	}
	return seed, commitment, phash, order
}

func TestSeedAndID(t *testing.T) {
	t.Parallel()
	a, b := draw.NewSeed(), draw.NewSeed()
	if a == b || len(a) != 64 || strings.ToLower(a) != a {
		t.Fatalf("NewSeed: %q %q", a, b)
	}
	if _, err := hex.DecodeString(a); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte("x"))
	if draw.ID("x") != hex.EncodeToString(want[:]) {
		t.Fatal("ID is not hex SHA-256 of the ticket id")
	}
	if _, err := draw.Commitment(strings.Repeat("0", 63) + "G"); err == nil || !strings.Contains(err.Error(), "seed: want 64 lowercase hex characters, character 64 is 'G'") {
		t.Errorf("upper-case seed: %v", err)
	}
	for _, bad := range []string{"", "00", strings.Repeat("A", 64), strings.Repeat("0", 63) + "g",
		strings.Repeat("0", 65), strings.Repeat("0", 62) + "\n0", " " + strings.Repeat("0", 63)} {
		if _, err := draw.Commitment(bad); err == nil {
			t.Errorf("Commitment(%q) accepted", bad)
		}
		if _, err := draw.Key(bad, katPHash); err == nil || !strings.Contains(err.Error(), "seed") {
			t.Errorf("Key(seed %q): %v", bad, err)
		}
		if _, err := draw.Key(katSeed, bad); err == nil || !strings.Contains(err.Error(), "participants hash") {
			t.Errorf("Key(hash %q): %v", bad, err)
		}
		if _, err := draw.Order(katSeed, katPHash, []string{katIDs[0], bad}); err == nil || !strings.Contains(err.Error(), "place 2") {
			t.Errorf("Order with id %q: %v", bad, err)
		}
	}
}

// The order depends on the set of participants, not on the order they are listed (joined)
// in, and the callers' slices are left alone.
func TestOrderIgnoresListOrder(t *testing.T) {
	t.Parallel()
	list := ids(1000)
	seed, _, phash, want := published(t, list)
	shuffled := slices.Clone(list)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	before := slices.Clone(shuffled)
	if draw.ParticipantsHash(shuffled) != phash {
		t.Fatal("the participants hash depends on the list order")
	}
	got, err := draw.Order(seed, phash, shuffled)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("the order depends on the list order (%v)", err)
	}
	if !slices.Equal(shuffled, before) {
		t.Fatal("ParticipantsHash or Order modified its input")
	}
	key, _ := draw.Key(seed, phash)
	for k, i := range draw.OrderIndex(key, shuffled) {
		if shuffled[i] != want[k] {
			t.Fatalf("OrderIndex disagrees with Order at place %d", k+1)
		}
	}
	// Another seed, another order.
	other, _ := draw.Order(draw.NewSeed(), phash, list)
	if slices.Equal(other, want) {
		t.Fatal("two seeds drew the same order of 1,000")
	}
}

func TestEmptyDraw(t *testing.T) {
	t.Parallel()
	seed, commitment, phash, order := published(t, nil)
	if len(order) != 0 {
		t.Fatal(order)
	}
	if phash != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("the empty list hashes to %s, not SHA-256 of nothing", phash)
	}
	if err := draw.Verify(seed, commitment, phash, nil); err != nil {
		t.Fatal(err)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	list := ids(50)
	seed, commitment, phash, order := published(t, list)
	if err := draw.Verify(seed, commitment, phash, order); err != nil {
		t.Fatalf("honest draw refused: %v", err)
	}
	with := func(f func(o []string) []string) []string { return f(slices.Clone(order)) }
	swapped := with(func(o []string) []string { o[3], o[4] = o[4], o[3]; return o })
	cases := []struct {
		name                    string
		seed, commitment, phash string
		order                   []string
		want                    string
	}{
		{"wrong seed", draw.NewSeed(), commitment, phash, order, "does not match the commitment"},
		{"changed commitment", seed, draw.ID("other"), phash, order, "does not match the commitment"},
		{"swapped pair", seed, commitment, phash, swapped, "place 4 holds"},
		{"reversed", seed, commitment, phash, with(func(o []string) []string { slices.Reverse(o); return o }), "place 1 holds"},
		{"missing id", seed, commitment, phash, order[1:], "not the frozen participant list"},
		{"added id", seed, commitment, phash, append(slices.Clone(order), draw.ID("sybil")), "not the frozen participant list"},
		{"replaced id", seed, commitment, phash, with(func(o []string) []string { o[7] = draw.ID("sybil"); return o }), "not the frozen participant list"},
		{"duplicated id", seed, commitment, phash, with(func(o []string) []string { o[9] = o[2]; return o }), "listed twice, at places 3 and 10"},
		{"duplicate added", seed, commitment, phash, append(slices.Clone(order), order[0]), "listed twice"},
		{"tampered participants hash", seed, commitment, draw.ParticipantsHash(order[1:]), order, "not the frozen participant list"},
		{"upper-case id", seed, commitment, phash, with(func(o []string) []string { o[5] = strings.ToUpper(o[5]); return o }), "draw id at place 6"},
		{"short id", seed, commitment, phash, with(func(o []string) []string { o[0] = o[0][:63]; return o }), "draw id at place 1: want 64"},
		{"empty line", seed, commitment, phash, append(slices.Clone(order), ""), "draw id at place 51"},
		{"malformed seed", "xyz", commitment, phash, order, "seed: want 64"},
		{"malformed commitment", seed, strings.ToUpper(commitment), phash, order, "commitment: want 64"},
		{"malformed participants hash", seed, commitment, phash + "0", order, "participants hash: want 64"},
	}
	for _, c := range cases {
		err := draw.Verify(c.seed, c.commitment, c.phash, c.order)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Verify = %v, want an error with %q", c.name, err, c.want)
		}
	}
	// A whole other honest draw of the same list is honest too, but not with this seed.
	seed2, commitment2, _, order2 := published(t, list)
	if err := draw.Verify(seed2, commitment2, phash, order2); err != nil {
		t.Fatal(err)
	}
	if err := draw.Verify(seed2, commitment2, phash, order); err == nil {
		t.Fatal("an order from another seed verified")
	}
}

// TestDrawIsUniform: over 20,000 draws of the same 5 participants, each participant's
// drawn place is uniform (a chi-square test of join rank against drawn place). The seeds
// are derived from the draw number, so the test is deterministic; what it checks is that
// nothing in the construction (the sort, the tie-break, the key) favours a list position
// or an id.
func TestDrawIsUniform(t *testing.T) {
	t.Parallel()
	const draws, m = 20000, 5
	list := ids(m)
	phash := draw.ParticipantsHash(list)
	counts := make([][]int, m)
	for i := range counts {
		counts[i] = make([]int, m)
	}
	for d := range draws {
		s := sha256.Sum256([]byte("uniform-" + strconv.Itoa(d)))
		key, err := draw.Key(hex.EncodeToString(s[:]), phash)
		if err != nil {
			t.Fatal(err)
		}
		for place, i := range draw.OrderIndex(key, list) {
			counts[i][place]++
		}
	}
	stat, df := draw.ChiSquareUniform(counts)
	stat *= float64(m-1) / m // permutation sampling: see ChiSquareUniform
	crit := draw.ChiSquareCritical001(df)
	t.Logf("chi-square %.1f with %d degrees of freedom (p = 0.001 critical value %.1f): %v", stat, df, crit, counts)
	if df != (m-1)*(m-1) || stat > crit {
		t.Fatalf("drawn place depends on join rank: chi-square %.1f > %.1f (df %d)", stat, crit, df)
	}
}

// The test of the test: a biased draw fails it.
func TestChiSquareCatchesBias(t *testing.T) {
	t.Parallel()
	const draws, m = 20000, 5
	counts := make([][]int, m)
	for i := range counts {
		counts[i] = make([]int, m)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range draws {
		perm := r.Perm(m)
		// A small bias: a tenth of the time, whoever joined first is put first.
		if r.IntN(10) == 0 {
			j := slices.Index(perm, 0)
			perm[0], perm[j] = perm[j], perm[0]
		}
		for place, i := range perm {
			counts[i][place]++
		}
	}
	stat, df := draw.ChiSquareUniform(counts)
	stat *= float64(m-1) / m
	if crit := draw.ChiSquareCritical001(df); stat <= crit {
		t.Fatalf("a biased draw passed: chi-square %.1f <= %.1f", stat, crit)
	}
}

func TestChiSquareUniform(t *testing.T) {
	t.Parallel()
	// Expected 25 each: (35-25)²/25·2 + (15-25)²/25·2 = 16, one degree of freedom.
	stat, df := draw.ChiSquareUniform([][]int{{35, 15}, {15, 35}})
	if math.Abs(stat-16) > 1e-9 || df != 1 {
		t.Fatalf("got %v, %d", stat, df)
	}
	// Empty rows and columns are left out.
	stat, df = draw.ChiSquareUniform([][]int{{10, 0, 10}, {0, 0, 0}, {10, 0, 10}})
	if stat != 0 || df != 1 {
		t.Fatalf("got %v, %d", stat, df)
	}
	if stat, df = draw.ChiSquareUniform(nil); stat != 0 || df != 0 {
		t.Fatalf("got %v, %d", stat, df)
	}
}

func TestChiSquareCritical001(t *testing.T) {
	t.Parallel()
	// Exact values from a chi-square table; Wilson–Hilferty is close and never stricter.
	for df, exact := range map[int]float64{1: 10.828, 2: 13.816, 4: 18.467, 9: 27.877, 16: 39.252, 81: 126.0, 100: 149.449} {
		got := draw.ChiSquareCritical001(df)
		if got < exact-0.05 || got > exact*1.035 {
			t.Errorf("df %d: %.3f, exact %.3f", df, got, exact)
		}
	}
	if draw.ChiSquareCritical001(0) != 0 {
		t.Error("df 0")
	}
}

func BenchmarkOrder100k(b *testing.B) {
	list := ids(100_000)
	seed, _, phash, _ := published(b, list[:1])
	phash = draw.ParticipantsHash(list)
	b.ResetTimer()
	for b.Loop() {
		if _, err := draw.Order(seed, phash, list); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify100k(b *testing.B) {
	seed, commitment, phash, order := published(b, ids(100_000))
	b.ResetTimer()
	for b.Loop() {
		if err := draw.Verify(seed, commitment, phash, order); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzVerify: Verify never panics, and whatever it accepts really is a draw: the order is
// what Order gives and the hashes match.
func FuzzVerify(f *testing.F) {
	f.Add(katSeed, katCommitment, katPHash, strings.Join(katOrder, "\n"))
	f.Add(katSeed, katCommitment, katPHash, strings.Join(katIDs, "\n"))
	f.Add(katSeed, katCommitment, draw.ParticipantsHash(nil), "")
	f.Add("", "", "", "\n\n")
	f.Add(strings.ToUpper(katSeed), katCommitment, katPHash, katOrder[0]+"\n"+katOrder[0])
	f.Fuzz(func(t *testing.T, seed, commitment, phash, orderText string) {
		var order []string
		if orderText != "" {
			order = strings.Split(orderText, "\n")
		}
		if err := draw.Verify(seed, commitment, phash, order); err != nil {
			return
		}
		if c, _ := draw.Commitment(seed); c != commitment || draw.ParticipantsHash(order) != phash {
			t.Fatal("accepted with hashes that do not match")
		}
		if want, _ := draw.Order(seed, phash, order); !slices.Equal(want, order) {
			t.Fatal("accepted an order the seed does not give")
		}
	})
}
