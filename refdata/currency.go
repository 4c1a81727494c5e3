package refdata

import (
	"slices"
	"strings"
)

// CurrencyInfo is one entry of the supported currency list.
type CurrencyInfo struct {
	// Code is the ISO 4217 code in upper case, e.g. "EUR". The service uses
	// the code itself as the currency ID.
	Code string
	// Name is the ISO 4217 English name, e.g. "Euro". The service's list
	// names only the codes; the names are the standard's.
	Name string
}

// currencies lists the supported currencies in alphabetical order of their
// codes. HRK (Kuna) is withdrawn since 2023 but still on the service's list.
var currencies = [...]CurrencyInfo{
	{"AED", "UAE Dirham"},
	{"ARS", "Argentine Peso"},
	{"AUD", "Australian Dollar"},
	{"BGN", "Bulgarian Lev"},
	{"BHD", "Bahraini Dinar"},
	{"BRL", "Brazilian Real"},
	{"CAD", "Canadian Dollar"},
	{"CHF", "Swiss Franc"},
	{"CNY", "Yuan Renminbi"},
	{"CZK", "Czech Koruna"},
	{"DKK", "Danish Krone"},
	{"EUR", "Euro"},
	{"GBP", "Pound Sterling"},
	{"HKD", "Hong Kong Dollar"},
	{"HRK", "Kuna"},
	{"HUF", "Forint"},
	{"IDR", "Rupiah"},
	{"INR", "Indian Rupee"},
	{"JPY", "Yen"},
	{"MXN", "Mexican Peso"},
	{"MYR", "Malaysian Ringgit"},
	{"NOK", "Norwegian Krone"},
	{"NZD", "New Zealand Dollar"},
	{"PHP", "Philippine Peso"},
	{"PLN", "Zloty"},
	{"QAR", "Qatari Rial"},
	{"RON", "Romanian Leu"},
	{"RUB", "Russian Ruble"},
	{"SEK", "Swedish Krona"},
	{"SGD", "Singapore Dollar"},
	{"THB", "Baht"},
	{"TRY", "Turkish Lira"},
	{"TWD", "New Taiwan Dollar"},
	{"UAH", "Hryvnia"},
	{"USD", "US Dollar"},
	{"VND", "Dong"},
	{"XCD", "East Caribbean Dollar"},
	{"ZAR", "Rand"},
}

var currencyByCode = indexBy(currencies[:], func(c CurrencyInfo) string { return c.Code })

// IsCurrency reports whether code is a supported currency code. The check
// is case-insensitive.
func IsCurrency(code string) bool {
	_, ok := CurrencyByCode(code)
	return ok
}

// CurrencyByCode returns the supported currency with the given code. The
// lookup is case-insensitive; ok is false for unsupported codes.
func CurrencyByCode(code string) (CurrencyInfo, bool) {
	c, ok := currencyByCode[strings.ToUpper(code)]
	return c, ok
}

// Currencies returns a copy of the supported currency codes in upper case,
// sorted alphabetically.
func Currencies() []string {
	codes := make([]string, len(currencies))
	for i, c := range currencies {
		codes[i] = c.Code
	}
	return codes
}

// CurrencyInfos returns a copy of the supported currency list, sorted by code.
func CurrencyInfos() []CurrencyInfo {
	return slices.Clone(currencies[:])
}
