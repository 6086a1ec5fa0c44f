package queue

import (
	"encoding/json"
	"fmt"
	"sort"
)

// A queue's message overrides (the setting "messages"): an operator's own wording of some
// texts of this queue's buyer pages, per language, e.g. {"en": {"queue_heading": "The
// Sneaker Drop"}, "ko": {"queue_heading": "스니커 드롭"}}. Here the shape and the size are
// checked and the texts are held to the rules of brand_message (plain text, no control
// characters, so nothing typed can run or reorder a buyer's page); which keys and
// placeholders are allowed is the message catalogue's business (static), checked by the
// admin API before the patch reaches Put.

// Bounds of a queue's message overrides.
const (
	MaxMessagesBytes = 16 << 10 // the stored JSON
	MaxMessageText   = 600      // characters of one text
)

// ParseMessages reads a messages setting: "" is none; anything else must be a JSON
// object of objects of strings.
func ParseMessages(s string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	if s == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("messages must be a JSON object {\"<language>\": {\"<key>\": \"text\"}}")
	}
	return out, nil
}

func validateMessages(s string) error {
	if len(s) > MaxMessagesBytes {
		return invalid("messages", "messages holds at most %d bytes of JSON.", MaxMessagesBytes)
	}
	o, err := ParseMessages(s)
	if err != nil {
		return invalid("messages", "%s", err.Error())
	}
	langs := make([]string, 0, len(o))
	for l := range o {
		langs = append(langs, l)
	}
	sort.Strings(langs)
	for _, l := range langs {
		keys := make([]string, 0, len(o[l]))
		for k := range o[l] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if e := plainText(o[l][k], MaxMessageText, true); e != "" {
				return invalid("messages", "messages.%s.%s must be plain text of at most %d characters (%s).", l, k, MaxMessageText, e)
			}
		}
	}
	return nil
}
