package static

import (
	"slices"
	"sort"
	"testing"
)

// TestMessageTablesDoNotOverlap: each key is written in one place — the first tables
// (messages with messagesJA beside it, key for key) or exactly one area table of
// messageAreas — so a key added to an area never silently replaces another one's text.
func TestMessageTablesDoNotOverlap(t *testing.T) {
	t.Parallel()
	for k := range messages {
		if _, ok := messagesJA[k]; !ok {
			t.Errorf("%s: in messages, not in messagesJA", k)
		}
	}
	for k := range messagesJA {
		if _, ok := messages[k]; !ok {
			t.Errorf("%s: in messagesJA, not in messages", k)
		}
	}
	names := []string{"messagesOrder", "messagesWaiting", "messagesDashboard", "messagesReport", "messagesPlatform", "messagesSnapshots", "messagesTokens27", "messagesPlaces27", "messagesAck28", "messagesSignIn"}
	if len(names) != len(messageAreas) {
		t.Fatalf("messageAreas has %d tables, this test names %d", len(messageAreas), len(names))
	}
	where := map[string][]string{}
	for k := range messages {
		where[k] = append(where[k], "messages")
	}
	for i, area := range messageAreas {
		for k := range area {
			where[k] = append(where[k], names[i])
		}
	}
	var keys []string
	for k, w := range where {
		if len(w) > 1 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Errorf("%s: defined in %v (one place only)", k, where[k])
	}
}

// TestBuyerAreas: the dashboard's and the report's tables are not buyer messages, the
// order, waiting and platform tables are.
func TestBuyerAreas(t *testing.T) {
	t.Parallel()
	for _, area := range []map[string][3]string{messagesDashboard, messagesReport} {
		for k := range area {
			if isBuyerKey(k) {
				t.Errorf("%s: a dashboard or report key counted as a buyer key", k)
			}
		}
	}
	for _, area := range []map[string][3]string{messagesOrder, messagesWaiting, messagesPlatform} {
		for k := range area {
			if !isBuyerKey(k) {
				t.Errorf("%s: a buyer area's key not counted as a buyer key", k)
			}
		}
	}
	if !isBuyerKey("joining") || isBuyerKey("admin_title") || isBuyerKey("report_title") || !slices.Contains(buyerKeyList(), "brand") {
		t.Error("the first table's keys are split by prefix: admin_ and report_ are not buyer keys")
	}
}
