package static

import (
	"slices"
	"testing"
	"testing/fstest"
)

// TestMessageFilesDoNotOverlap: a key lives in one area file; the same key in two areas
// of one language is refused when the catalogue is read, so an area never silently
// replaces another one's text.
func TestMessageFilesDoNotOverlap(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"i18n/buyer/en.json":     {Data: []byte(`{"a": "A", "b": "B"}`)},
		"i18n/dashboard/en.json": {Data: []byte(`{"b": "B again"}`)},
	}
	if _, _, err := readCatalogue(fsys); err == nil {
		t.Fatal("a key in two areas was read without an error")
	}
	fsys["i18n/dashboard/en.json"] = &fstest.MapFile{Data: []byte(`{"c": "C"}`)}
	tables, areas, err := readCatalogue(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if tables["en"]["c"] != "C" || areas["a"] != "buyer" || areas["c"] != "dashboard" {
		t.Errorf("tables %v areas %v", tables, areas)
	}
	fsys["i18n/buyer/en.json"] = &fstest.MapFile{Data: []byte(`{"a": 1}`)}
	if _, _, err := readCatalogue(fsys); err == nil {
		t.Error("a file that is not an object of strings was read without an error")
	}
	if _, _, err := readCatalogue(fstest.MapFS{"i18n/buyer/ko.json": {Data: []byte(`{}`)}}); err == nil {
		t.Error("a catalogue without English was read without an error")
	}
}

// TestBuyerAreas: the dashboard area's keys (the dashboard's and the report's) are not
// buyer messages; the buyer area's are.
func TestBuyerAreas(t *testing.T) {
	t.Parallel()
	tables, areas, err := readCatalogue(catalogueFS)
	if err != nil {
		t.Fatal(err)
	}
	for k := range tables[LangEnglish] {
		if isBuyerKey(k) != (areas[k] != dashboardArea) {
			t.Errorf("%s: area %s, isBuyerKey %v", k, areas[k], isBuyerKey(k))
		}
	}
	if !isBuyerKey("joining") || isBuyerKey("admin_title") || isBuyerKey("report_title") || !slices.Contains(buyerKeyList(), "brand") {
		t.Error("joining and brand are buyer keys, admin_title and report_title are not")
	}
}
