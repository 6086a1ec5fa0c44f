package static

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/text/language"
)

// codeRE is the name of a message file without ".json": a BCP 47 tag in its
// canonical case — a language subtag (ISO 639, lower case), then optionally a
// script (ISO 15924, "Hans") and a region (ISO 3166, "BR", or UN M.49, "419").
var codeRE = regexp.MustCompile(`^[a-z]{2,3}(-[A-Z][a-z]{3})?(-[A-Z]{2}|-[0-9]{3})?$`)

// LoadMessagesDir reads an operator's message files from dir (WR_MESSAGES_DIR)
// and returns the catalogue of the built-in tables with them applied; dir "" gives
// the built-in catalogue. Each file is named by its language code (en.json, ar.json,
// pt-BR.json, or a new one such as sv.json) and holds one JSON object
// {"key": "text", …} with keys of the English table. A file for a built-in
// language overrides those keys; a file for a new language adds the language,
// with the English text for every key it lacks (the dashboard and the report stay in
// English unless the file has their keys). Unknown keys are ignored.
// Other files (no .json, a name that is not a code) are skipped. The returned
// notes say what was loaded, what is missing and what was ignored, one line
// each, for the log. An unreadable directory or file, or a file that is not a
// JSON object of strings, is an error (and no catalogue). A file may write the plural
// variants of a plural key ("stock_left.few"); one that writes a plural key without
// variants has that text for every count.
func LoadMessagesDir(dir string) (cat *Catalog, notes []string, err error) {
	if dir == "" {
		return Builtin(), nil, nil
	}
	tables := builtinTables()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("messages directory: %w", err)
	}
	sort.Strings(names)
	en := tables[LangEnglish]
	for _, name := range names {
		code := strings.TrimSuffix(filepath.Base(name), ".json")
		if !codeRE.MatchString(code) {
			notes = append(notes, fmt.Sprintf("%s: skipped, not a language code (en.json, sv.json, pt-BR.json, zh-Hant.json, …)", name))
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, nil, err
		}
		var file map[string]string
		if err := json.Unmarshal(b, &file); err != nil {
			return nil, nil, fmt.Errorf("%s: want a JSON object of strings {\"key\": \"text\"}: %w", name, err)
		}
		table, builtin := tables[code]
		if !builtin {
			table = map[string]string{} // the pages fill each key it lacks from English
		}
		var unknown, missing, used []string
		for k, v := range file {
			if _, ok := en[k]; !ok && !knownVariant(en, k) {
				unknown = append(unknown, k)
				continue
			}
			table[k] = v
			used = append(used, k)
		}
		// A plural key the file writes is taken with the file's variants only: the
		// table's other variants (English, or the built-in text) would not match it.
		for k := range table {
			if base, c := SplitVariant(k); c != "" {
				if _, setsBase := file[base]; setsBase {
					if _, setsVariant := file[k]; !setsVariant {
						delete(table, k)
					}
				}
			}
		}
		if !builtin {
			for k := range en {
				if _, c := SplitVariant(k); c != "" || !isBuyerKey(k) {
					continue // a variant (the base key serves every count), or the dashboard's (in English unless the file has them)
				}
				if _, ok := file[k]; !ok {
					missing = append(missing, k)
				}
			}
		}
		tables[code] = table
		sort.Strings(unknown)
		sort.Strings(missing)
		kind := "overrides"
		if !builtin {
			kind = "new language"
		}
		notes = append(notes, fmt.Sprintf("%s: %s %s, %d keys", name, kind, code, len(used)))
		if _, err := language.Parse(code); err != nil {
			notes = append(notes, fmt.Sprintf("%s: %s is not a known language code: chosen with ?lang=%s or the switcher, never from Accept-Language", name, code, code))
		}
		if len(missing) > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d buyer keys missing, shown in English: %s", name, len(missing), strings.Join(missing, ", ")))
		}
		if len(unknown) > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d unknown keys ignored: %s", name, len(unknown), strings.Join(unknown, ", ")))
		}
	}
	return newCatalog(tables), notes, nil
}

// knownVariant reports whether k is a plural variant of a key of en ("stock_left.few").
func knownVariant(en map[string]string, k string) bool {
	base, c := SplitVariant(k)
	_, ok := en[base]
	return c != "" && ok
}
