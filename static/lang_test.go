package static_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/static"
)

// TestLangTrickyHeaders: q=0 excludes a language even from "*", a malformed entry drops
// only itself, and tags with scripts, extensions or underscores find their language.
func TestLangTrickyHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, header, want string
	}{
		{"English excluded, the wildcard takes the rest", "en;q=0, *", "ko"},
		{"English excluded, nothing else wanted", "en;q=0", "en"},
		{"everything excluded", "en;q=0, ko;q=0, ja;q=0", "en"},
		{"wildcard excluded", "*;q=0, ja", "ja"},
		{"excluded wildcard leaves listed ones", "*;q=0, ko;q=0.3", "ko"},
		{"q=0.0 and q=0.000", "ko;q=0.0, ja;q=0.000", "en"},
		{"the best q of a language counts", "ko-KR;q=0, ko;q=0.9, ja;q=0.5", "ko"},
		{"negative q is not acceptable", "ko;q=-1, ja;q=0.1", "ja"},
		{"malformed q, the next entry counts", "ko;q=abc, ja;q=0.5", "ja"},
		{"two q parameters", "ko;q=0.5;q=0.9, ja;q=0.1", "ja"},
		{"a parameter other than q", "ko;level=1, ja;q=0.2", "ja"},
		{"q above 1", "ko;q=2, ja;q=0.1", "ja"},
		{"empty entries and semicolons", ",,;;, ;q=1, ja;q=0.4", "ja"},
		{"not a tag", "-ko, ko-, 한국어, ja;q=0.1", "ja"},
		{"q without a leading zero", "ko;q=.9, ja;q=0.8", "ko"},
		{"spaces around everything", "  ja ;  q = 0.9 ,\tko ; q=0.8 ", "ja"},
		{"script and region", "ko-Kore-KR", "ko"},
		{"Unicode extension", "ja-JP-u-ca-japanese, en;q=0.5", "ja"},
		{"underscore and mixed case", "KO_kr", "ko"},
		{"a region of English first", "en-GB, ko;q=0.9", "en"},
		{"private use only", "x-klingon, ja;q=0.1", "ja"},
		{"Latin-script Japanese is not the Japanese pages", "ja-Latn, ko;q=0.1", "ko"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := static.Builtin().Lang(tt.header); got != tt.want {
				t.Errorf("Lang(%q) = %q, want %q", tt.header, got, tt.want)
			}
		})
	}
}

// TestLangBoundsTheWork: only the first 32 entries are read and an entry past 64 bytes
// is skipped unparsed, so a header of thousands of entries, or one of thousands of
// subtags, costs what 32 short entries cost. Not parallel: AllocsPerRun refuses it.
func TestLangBoundsTheWork(t *testing.T) {
	cat := static.Builtin()
	junk := func(n int) string { return strings.Repeat("xx-YY;q=0.1, ", n) }
	if got := cat.Lang(junk(31) + "ko"); got != "ko" {
		t.Errorf("the 32nd entry: %q, want ko", got)
	}
	if got := cat.Lang(junk(32) + "ko"); got != "en" {
		t.Errorf("the 33rd entry: %q, want en (not read)", got)
	}
	long := strings.Repeat("a-", 3000) + "b" // x/text refuses a list of more than 1000 '-'
	if got := cat.Lang(long + ", ko;q=0.5"); got != "ko" {
		t.Errorf("a long entry before ko: %q, want ko", got)
	}
	thirtyTwo := junk(32)
	huge := junk(10000)
	manyCommas := strings.Repeat(",", 100000) + "ko"
	base := testing.AllocsPerRun(20, func() { cat.Lang(thirtyTwo) })
	for name, h := range map[string]string{"10,000 entries": huge, "a 6 KB entry": long, "100,000 commas": manyCommas} {
		if n := testing.AllocsPerRun(20, func() { cat.Lang(h) }); n > base {
			t.Errorf("%s: %v allocations, more than the %v of 32 entries", name, n, base)
		}
	}
	if got := cat.Lang(manyCommas); got != "en" {
		t.Errorf("ko after 100,000 commas: %q, want en (not read)", got)
	}
}

// TestLangMatchesLoadedLanguages: a language from a messages directory is matched by
// x/text like a built-in one (a region, an alias, a close variant), and a code x/text
// does not know is reported and never picked from Accept-Language.
func TestLangMatchesLoadedLanguages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, code := range []string{"he", "nb", "pt", "zz"} {
		if err := os.WriteFile(filepath.Join(dir, code+".json"), []byte(`{"index_heading": "`+code+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cat, notes, err := static.LoadMessagesDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ header, want string }{
		{"iw", "he"}, // the old code of Hebrew
		{"he-IL, en;q=0.5", "he"},
		{"no", "nb"},           // Norwegian for Bokmål
		{"nn, en;q=0.1", "nb"}, // Nynorsk reads Bokmål before English
		{"pt-BR, en;q=0.9", "pt"},
		{"zz, ko;q=0.1", "ko"},
		{"zz", "en"},
	}
	for _, tt := range tests {
		if got := cat.Lang(tt.header); got != tt.want {
			t.Errorf("Lang(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
	if l, ok := cat.Supported("zz"); !ok || l != "zz" {
		t.Errorf("Supported(zz) = %q %v: an unknown code is still chosen with ?lang=", l, ok)
	}
	if all := strings.Join(notes, "\n"); !strings.Contains(all, "zz is not a known language code") {
		t.Errorf("no note for zz in:\n%s", all)
	}
}
