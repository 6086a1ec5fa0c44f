package orders

import (
	"sort"
	"strings"
)

// DefaultCurrency is the currency of a product that names none: new products made without
// one, and every product made before products had a currency (migration 005 gives them
// this). USD because those old prices were always shown with two decimals (price / 100), so
// reading them as US cents keeps what buyers saw before; an operator sets the real one.
const DefaultCurrency = "USD"

// currencyDigits is the allow-list of ISO 4217 codes a product may be priced in, with each
// one's minor unit (the number of decimals: price is in units of 10^-digits). A fixed list
// rather than "any three letters" so that a typo ("UDS") is refused instead of shown to
// buyers as a currency no browser knows, and so that the page never has to guess the
// decimals: 129000 KRW is ₩129,000 (0 decimals), 129000 USD is $1,290.00 (2). The values
// are ISO 4217's (List One), not a locale's cash rounding.
var currencyDigits = map[string]int{
	"AED": 2, "AUD": 2, "BGN": 2, "BHD": 3, "BRL": 2, "CAD": 2, "CHF": 2, "CLP": 0,
	"CNY": 2, "COP": 2, "CZK": 2, "DKK": 2, "EGP": 2, "EUR": 2, "GBP": 2, "HKD": 2,
	"HUF": 2, "IDR": 2, "ILS": 2, "INR": 2, "ISK": 0, "JOD": 3, "JPY": 0, "KRW": 0,
	"KWD": 3, "MXN": 2, "MYR": 2, "NOK": 2, "NZD": 2, "OMR": 3, "PHP": 2, "PLN": 2,
	"RON": 2, "SAR": 2, "SEK": 2, "SGD": 2, "THB": 2, "TRY": 2, "TWD": 2, "UAH": 2,
	"USD": 2, "VND": 0, "ZAR": 2,
}

// CurrencyDigits returns the minor unit (decimals) of an allowed ISO 4217 code; ok is false
// for a code not on the list (including lower-case spellings: codes are upper-case).
func CurrencyDigits(code string) (digits int, ok bool) {
	digits, ok = currencyDigits[code]
	return digits, ok
}

// ValidCurrency reports whether code is on the allow-list.
func ValidCurrency(code string) bool {
	_, ok := currencyDigits[code]
	return ok
}

// Currencies lists the allowed codes in order (for messages and documentation).
func Currencies() []string {
	out := make([]string, 0, len(currencyDigits))
	for c := range currencyDigits {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// currencyMessage names the rule and the list, so the 422 alone tells an operator what to
// send.
func currencyMessage() string {
	return "currency must be an upper-case ISO 4217 code from the allowed list: " + strings.Join(Currencies(), " ") + "."
}
