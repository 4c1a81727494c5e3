package refdata

import (
	"slices"
	"strings"
)

// LanguageInfo is one entry of the language code list.
type LanguageInfo struct {
	// Code is the lower-case code used by the service, e.g. "de". Note that
	// some codes differ from ISO 639-1 ("cn", "cz", "se", "vn").
	Code string
	// Name is the English name of the language, e.g. "German".
	Name string
}

// languages is the language code list, sorted by code.
var languages = [...]LanguageInfo{
	{Code: "bg", Name: "Bulgarian"},
	{Code: "cn", Name: "Chinese"},
	{Code: "cz", Name: "Czech"},
	{Code: "da", Name: "Danish"},
	{Code: "de", Name: "German"},
	{Code: "en", Name: "English"},
	{Code: "es", Name: "Spanish"},
	{Code: "fr", Name: "French"},
	{Code: "it", Name: "Italian"},
	{Code: "nl", Name: "Dutch"},
	{Code: "nn", Name: "Norwegian"},
	{Code: "pl", Name: "Polish"},
	{Code: "pt", Name: "Portuguese"},
	{Code: "ro", Name: "Romanian"},
	{Code: "ru", Name: "Russian"},
	{Code: "se", Name: "Swedish"},
	{Code: "sk", Name: "Slovak"},
	{Code: "tr", Name: "Turkish"},
	{Code: "vn", Name: "Vietnamese"},
}

var languageByCode = indexBy(languages[:], func(l LanguageInfo) string { return l.Code })

// Language returns the English name of the language with the given code.
// The lookup is case-insensitive; ok is false for unknown codes.
func Language(code string) (name string, ok bool) {
	l, ok := languageByCode[strings.ToLower(code)]
	return l.Name, ok
}

// Languages returns a copy of the language code list, sorted by code.
func Languages() []LanguageInfo {
	return slices.Clone(languages[:])
}
