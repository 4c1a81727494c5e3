package refdata

import (
	"slices"
	"strings"
)

// currencies lists the supported ISO 4217 currency codes in alphabetical
// order. The service uses the code itself as the currency ID.
var currencies = [...]string{
	"AED", "ARS", "AUD", "BGN", "BHD", "BRL", "CAD", "CHF", "CNY", "CZK",
	"DKK", "EUR", "GBP", "HKD", "HRK", "HUF", "IDR", "INR", "JPY", "MXN",
	"MYR", "NOK", "NZD", "PHP", "PLN", "QAR", "RON", "RUB", "SEK", "SGD",
	"THB", "TRY", "TWD", "UAH", "USD", "VND", "XCD", "ZAR",
}

var currencySet = indexBy(currencies[:], func(c string) string { return c })

// IsCurrency reports whether code is a supported currency code. The check
// is case-insensitive.
func IsCurrency(code string) bool {
	_, ok := currencySet[strings.ToUpper(code)]
	return ok
}

// Currencies returns a copy of the supported currency codes in upper case,
// sorted alphabetically.
func Currencies() []string {
	return slices.Clone(currencies[:])
}
