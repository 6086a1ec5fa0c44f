package main

import (
	"testing"

	"github.com/waitroom/waitroom/queue/redistest"
)

// currencyProduct is a product answer with the fields this test reads.
type currencyProduct struct {
	ID             string `json:"id"`
	Price          int64  `json:"price"`
	Currency       string `json:"currency"`
	CurrencyDigits int    `json:"currency_digits"`
}

type fieldErr struct {
	Error struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"error"`
}

// TestReceiptCurrencyAPI: products carry an ISO 4217 currency through the admin API, the
// public list and the product read, with the currency's decimals; a product made without
// one is USD; an unknown, lower-case or non-string currency is 422 naming the field and
// changes nothing. (Every request and answer is also checked against docs/openapi.yaml.)
func TestReceiptCurrencyAPI(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	in := startInProcess(t, "web-1", tolerantEnv(rs.URL(), testDB(t), nil))

	want := map[string]currencyProduct{
		"won":  {ID: "won", Price: 129000, Currency: "KRW", CurrencyDigits: 0},
		"yen":  {ID: "yen", Price: 12900, Currency: "JPY", CurrencyDigits: 0},
		"euro": {ID: "euro", Price: 12999, Currency: "EUR", CurrencyDigits: 2},
	}
	for id, w := range want {
		var got currencyProduct
		res := call(t, "PUT", in.url+"/admin/api/products/"+id, adminToken,
			map[string]any{"name": id, "price": w.Price, "currency": w.Currency, "stock": 3}, &got)
		if res.StatusCode != 201 || got != w {
			t.Fatalf("PUT %s: %d %+v, want 201 %+v", id, res.StatusCode, got, w)
		}
	}
	var plain currencyProduct
	if res := call(t, "PUT", in.url+"/admin/api/products/plain", adminToken, map[string]any{"price": 500}, &plain); res.StatusCode != 201 ||
		plain.Currency != "USD" || plain.CurrencyDigits != 2 {
		t.Fatalf("a product made without a currency: %d %+v, want USD with 2 decimals", res.StatusCode, plain)
	}
	want["plain"] = plain

	// A change of another field keeps the currency.
	var got currencyProduct
	if res := call(t, "PUT", in.url+"/admin/api/products/won", adminToken, map[string]any{"stock": 9}, &got); res.StatusCode != 200 || got != want["won"] {
		t.Fatalf("PUT won stock: %d %+v", res.StatusCode, got)
	}

	for _, bad := range []struct {
		value any
		code  string
	}{
		{"XYZ", "invalid_order"}, {"krw", "invalid_order"}, {"Krw", "invalid_order"}, {"", "invalid_order"},
		{"KRWW", "invalid_order"}, {"<script>", "invalid_order"}, {410, "invalid_field"},
	} {
		var e fieldErr
		res := call(t, "PUT", in.url+"/admin/api/products/won", adminToken, map[string]any{"currency": bad.value, "price": 1}, &e)
		if res.StatusCode != 422 || e.Error.Field != "currency" || e.Error.Code != bad.code {
			t.Fatalf("currency %#v: %d %+v, want 422 %s field currency", bad.value, res.StatusCode, e, bad.code)
		}
	}
	// A refused body changes nothing (the price in it neither).
	if res := call(t, "GET", in.url+"/api/products/won", "", nil, &got); res.StatusCode != 200 || got != want["won"] {
		t.Fatalf("GET won after refused changes: %d %+v, want %+v", res.StatusCode, got, want["won"])
	}

	var list struct {
		Products []currencyProduct `json:"products"`
	}
	if res := call(t, "GET", in.url+"/api/products", "", nil, &list); res.StatusCode != 200 || len(list.Products) != len(want) {
		t.Fatalf("GET /api/products: %d %+v", res.StatusCode, list)
	}
	for _, p := range list.Products {
		if p != want[p.ID] {
			t.Errorf("listed %+v, want %+v", p, want[p.ID])
		}
	}
	t.Logf("products: %+v", list.Products)
}
