package refdata

import (
	"slices"
	"strings"
)

// Country is one entry of the country ID list.
type Country struct {
	// ID is the service's numeric country ID.
	ID int
	// ISO is the country code, usually ISO 3166-1 alpha-2 ("DE"). IDs 258,
	// 259 and 260 carry three-letter codes, some IDs carry reserved or
	// user-assigned codes ("IC", "EA", "XZ", "XI"), and ID 0 (Unknown) has
	// none (""). Several IDs may share one code.
	ISO string
	// Name is set only where the service documentation names the entry:
	// ID 0 (Unknown), ID 45 (Kosovo) and the territories. It is empty for
	// all other countries.
	Name string
	// Territory reports whether the ID denotes a territory with special
	// (typically tax or customs) status that shares or borrows the code of
	// a country, such as 255 Helgoland with code "DE".
	Territory bool
}

// countries is the country ID list, sorted by ID. IDs 111, 157, 167, 251
// and 257 are unused and therefore absent.
var countries = [...]Country{
	{ID: 0, ISO: "", Name: "Unknown"},
	{ID: 1, ISO: "DE"},
	{ID: 2, ISO: "AT"},
	{ID: 3, ISO: "BE"},
	{ID: 4, ISO: "CH"},
	{ID: 5, ISO: "CY"},
	{ID: 6, ISO: "CZ"},
	{ID: 7, ISO: "DK"},
	{ID: 8, ISO: "ES"},
	{ID: 9, ISO: "EE"},
	{ID: 10, ISO: "FR"},
	{ID: 11, ISO: "FI"},
	{ID: 12, ISO: "GB"},
	{ID: 13, ISO: "GR"},
	{ID: 14, ISO: "HU"},
	{ID: 15, ISO: "IT"},
	{ID: 16, ISO: "IE"},
	{ID: 17, ISO: "LU"},
	{ID: 18, ISO: "LV"},
	{ID: 19, ISO: "MT"},
	{ID: 20, ISO: "NO"},
	{ID: 21, ISO: "NL"},
	{ID: 22, ISO: "PT"},
	{ID: 23, ISO: "PL"},
	{ID: 24, ISO: "SE"},
	{ID: 25, ISO: "SG"},
	{ID: 26, ISO: "SK"},
	{ID: 27, ISO: "SI"},
	{ID: 28, ISO: "US"},
	{ID: 29, ISO: "AU"},
	{ID: 30, ISO: "CA"},
	{ID: 31, ISO: "CN"},
	{ID: 32, ISO: "JP"},
	{ID: 33, ISO: "LT"},
	{ID: 34, ISO: "LI"},
	{ID: 35, ISO: "MC"},
	{ID: 36, ISO: "MX"},
	{ID: 37, ISO: "IC", Name: "Canary Islands", Territory: true},
	{ID: 38, ISO: "IN"},
	{ID: 39, ISO: "BR"},
	{ID: 40, ISO: "RU"},
	{ID: 41, ISO: "RO"},
	{ID: 42, ISO: "EA", Name: "Ceuta", Territory: true},
	{ID: 43, ISO: "EA", Name: "Melilla", Territory: true},
	{ID: 44, ISO: "BG"},
	{ID: 45, ISO: "XZ", Name: "Kosovo"},
	{ID: 46, ISO: "KG"},
	{ID: 47, ISO: "KZ"},
	{ID: 48, ISO: "BY"},
	{ID: 49, ISO: "UZ"},
	{ID: 50, ISO: "MA"},
	{ID: 51, ISO: "AM"},
	{ID: 52, ISO: "AL"},
	{ID: 53, ISO: "EG"},
	{ID: 54, ISO: "HR"},
	{ID: 55, ISO: "MV"},
	{ID: 56, ISO: "MY"},
	{ID: 57, ISO: "HK"},
	{ID: 58, ISO: "YE"},
	{ID: 59, ISO: "IL"},
	{ID: 60, ISO: "TW"},
	{ID: 61, ISO: "GP"},
	{ID: 62, ISO: "TH"},
	{ID: 63, ISO: "TR"},
	{ID: 64, ISO: "GR", Name: "Greek Islands", Territory: true},
	{ID: 65, ISO: "ES", Name: "Balearic Islands", Territory: true},
	{ID: 66, ISO: "NZ"},
	{ID: 67, ISO: "AF"},
	{ID: 68, ISO: "AX"},
	{ID: 69, ISO: "DZ"},
	{ID: 70, ISO: "AS"},
	{ID: 71, ISO: "AD"},
	{ID: 72, ISO: "AO"},
	{ID: 73, ISO: "AI"},
	{ID: 74, ISO: "AQ"},
	{ID: 75, ISO: "AG"},
	{ID: 76, ISO: "AR"},
	{ID: 77, ISO: "AW"},
	{ID: 78, ISO: "AZ"},
	{ID: 79, ISO: "BS"},
	{ID: 80, ISO: "BH"},
	{ID: 81, ISO: "BD"},
	{ID: 82, ISO: "BB"},
	{ID: 83, ISO: "BZ"},
	{ID: 84, ISO: "BJ"},
	{ID: 85, ISO: "BM"},
	{ID: 86, ISO: "BT"},
	{ID: 87, ISO: "BO"},
	{ID: 88, ISO: "BA"},
	{ID: 89, ISO: "BW"},
	{ID: 90, ISO: "BV"},
	{ID: 91, ISO: "IO"},
	{ID: 92, ISO: "BN"},
	{ID: 93, ISO: "BF"},
	{ID: 94, ISO: "BI"},
	{ID: 95, ISO: "KH"},
	{ID: 96, ISO: "CM"},
	{ID: 97, ISO: "CV"},
	{ID: 98, ISO: "KY"},
	{ID: 99, ISO: "CF"},
	{ID: 100, ISO: "TD"},
	{ID: 101, ISO: "CL"},
	{ID: 102, ISO: "CX"},
	{ID: 103, ISO: "CC"},
	{ID: 104, ISO: "CO"},
	{ID: 105, ISO: "KM"},
	{ID: 106, ISO: "CG"},
	{ID: 107, ISO: "CD"},
	{ID: 108, ISO: "CK"},
	{ID: 109, ISO: "CR"},
	{ID: 110, ISO: "CI"},
	{ID: 112, ISO: "CU"},
	{ID: 113, ISO: "DJ"},
	{ID: 114, ISO: "DM"},
	{ID: 115, ISO: "DO"},
	{ID: 116, ISO: "EC"},
	{ID: 117, ISO: "SV"},
	{ID: 118, ISO: "GQ"},
	{ID: 119, ISO: "ER"},
	{ID: 120, ISO: "ET"},
	{ID: 121, ISO: "FK"},
	{ID: 122, ISO: "FO"},
	{ID: 123, ISO: "FJ"},
	{ID: 124, ISO: "GF"},
	{ID: 125, ISO: "PF"},
	{ID: 126, ISO: "TF"},
	{ID: 127, ISO: "GA"},
	{ID: 128, ISO: "GM"},
	{ID: 129, ISO: "GE"},
	{ID: 130, ISO: "GH"},
	{ID: 131, ISO: "GI"},
	{ID: 132, ISO: "GL"},
	{ID: 133, ISO: "GD"},
	{ID: 134, ISO: "GU"},
	{ID: 135, ISO: "GT"},
	{ID: 136, ISO: "GG"},
	{ID: 137, ISO: "GN"},
	{ID: 138, ISO: "GW"},
	{ID: 139, ISO: "GY"},
	{ID: 140, ISO: "HT"},
	{ID: 141, ISO: "HM"},
	{ID: 142, ISO: "VA"},
	{ID: 143, ISO: "HN"},
	{ID: 144, ISO: "IS"},
	{ID: 145, ISO: "ID"},
	{ID: 146, ISO: "IR"},
	{ID: 147, ISO: "IQ"},
	{ID: 148, ISO: "IM"},
	{ID: 149, ISO: "JM"},
	{ID: 150, ISO: "JE"},
	{ID: 151, ISO: "JO"},
	{ID: 152, ISO: "KE"},
	{ID: 153, ISO: "KI"},
	{ID: 154, ISO: "KP"},
	{ID: 155, ISO: "KR"},
	{ID: 156, ISO: "KW"},
	{ID: 158, ISO: "LA"},
	{ID: 159, ISO: "LB"},
	{ID: 160, ISO: "LS"},
	{ID: 161, ISO: "LR"},
	{ID: 162, ISO: "LY"},
	{ID: 163, ISO: "MO"},
	{ID: 164, ISO: "MK"},
	{ID: 165, ISO: "MG"},
	{ID: 166, ISO: "MW"},
	{ID: 168, ISO: "ML"},
	{ID: 169, ISO: "MH"},
	{ID: 170, ISO: "MQ"},
	{ID: 171, ISO: "MR"},
	{ID: 172, ISO: "MU"},
	{ID: 173, ISO: "YT"},
	{ID: 174, ISO: "FM"},
	{ID: 175, ISO: "MD"},
	{ID: 176, ISO: "MN"},
	{ID: 177, ISO: "ME"},
	{ID: 178, ISO: "MS"},
	{ID: 179, ISO: "MZ"},
	{ID: 180, ISO: "MM"},
	{ID: 181, ISO: "NA"},
	{ID: 182, ISO: "NR"},
	{ID: 183, ISO: "NP"},
	{ID: 184, ISO: "AN"},
	{ID: 185, ISO: "NC"},
	{ID: 186, ISO: "NI"},
	{ID: 187, ISO: "NE"},
	{ID: 188, ISO: "NG"},
	{ID: 189, ISO: "NU"},
	{ID: 190, ISO: "NF"},
	{ID: 191, ISO: "MP"},
	{ID: 192, ISO: "OM"},
	{ID: 193, ISO: "PK"},
	{ID: 194, ISO: "PW"},
	{ID: 195, ISO: "PS"},
	{ID: 196, ISO: "PA"},
	{ID: 197, ISO: "PG"},
	{ID: 198, ISO: "PY"},
	{ID: 199, ISO: "PE"},
	{ID: 200, ISO: "PH"},
	{ID: 201, ISO: "PN"},
	{ID: 202, ISO: "PR"},
	{ID: 203, ISO: "QA"},
	{ID: 204, ISO: "RE"},
	{ID: 205, ISO: "RW"},
	{ID: 206, ISO: "SH"},
	{ID: 207, ISO: "KN"},
	{ID: 208, ISO: "LC"},
	{ID: 209, ISO: "PM"},
	{ID: 210, ISO: "VC"},
	{ID: 211, ISO: "WS"},
	{ID: 212, ISO: "SM"},
	{ID: 213, ISO: "ST"},
	{ID: 214, ISO: "SA"},
	{ID: 215, ISO: "SN"},
	{ID: 216, ISO: "RS"},
	{ID: 217, ISO: "SC"},
	{ID: 218, ISO: "SL"},
	{ID: 219, ISO: "SB"},
	{ID: 220, ISO: "SO"},
	{ID: 221, ISO: "ZA"},
	{ID: 222, ISO: "GS"},
	{ID: 223, ISO: "LK"},
	{ID: 224, ISO: "SD"},
	{ID: 225, ISO: "SR"},
	{ID: 226, ISO: "SJ"},
	{ID: 227, ISO: "SZ"},
	{ID: 228, ISO: "SY"},
	{ID: 229, ISO: "TJ"},
	{ID: 230, ISO: "TZ"},
	{ID: 231, ISO: "TL"},
	{ID: 232, ISO: "TG"},
	{ID: 233, ISO: "TK"},
	{ID: 234, ISO: "TO"},
	{ID: 235, ISO: "TT"},
	{ID: 236, ISO: "TN"},
	{ID: 237, ISO: "TM"},
	{ID: 238, ISO: "TC"},
	{ID: 239, ISO: "TV"},
	{ID: 240, ISO: "UG"},
	{ID: 241, ISO: "UA"},
	{ID: 242, ISO: "UM"},
	{ID: 243, ISO: "UY"},
	{ID: 244, ISO: "VU"},
	{ID: 245, ISO: "VE"},
	{ID: 246, ISO: "VN"},
	{ID: 247, ISO: "VG"},
	{ID: 248, ISO: "VI"},
	{ID: 249, ISO: "WF"},
	{ID: 250, ISO: "EH"},
	{ID: 252, ISO: "ZM"},
	{ID: 253, ISO: "ZW"},
	{ID: 254, ISO: "AE"},
	{ID: 255, ISO: "DE", Name: "Helgoland", Territory: true},
	{ID: 256, ISO: "DE", Name: "Buesingen", Territory: true},
	{ID: 258, ISO: "CUW"},
	{ID: 259, ISO: "SXM"},
	{ID: 260, ISO: "BES"},
	{ID: 261, ISO: "BL"},
	{ID: 262, ISO: "IT", Name: "Livigno", Territory: true},
	{ID: 263, ISO: "IT", Name: "Campione d'Italia", Territory: true},
	{ID: 264, ISO: "IT", Name: "Lake Lugano from Ponte Tresa to Porto Ceresio", Territory: true},
	{ID: 265, ISO: "XI"},
}

// unusedCountryIDs lists the IDs the service leaves unassigned.
var unusedCountryIDs = [...]int{111, 157, 167, 251, 257}

var (
	countryByID = indexBy(countries[:], func(c Country) int { return c.ID })

	// countryIDsByISO maps an upper-case code to its IDs in ascending order.
	countryIDsByISO = func() map[string][]int {
		m := make(map[string][]int)
		for _, c := range countries { // countries is sorted by ID
			if c.ISO != "" {
				m[c.ISO] = append(m[c.ISO], c.ID)
			}
		}
		return m
	}()
)

// CountryByID returns the country with the given ID. ID 0 is the Unknown
// country with an empty ISO code; ok is false for unused and unknown IDs.
func CountryByID(id int) (Country, bool) {
	c, ok := countryByID[id]
	return c, ok
}

// CountryIDsByISO returns, in ascending order, all country IDs carrying the
// given code, e.g. "DE" yields [1 255 256]. The lookup is case-insensitive.
// It returns nil for unknown codes and for the empty code.
func CountryIDsByISO(iso string) []int {
	return slices.Clone(countryIDsByISO[strings.ToUpper(iso)])
}

// Countries returns a copy of the country ID list, sorted by ID.
func Countries() []Country {
	return slices.Clone(countries[:])
}

// IsUnusedCountryID reports whether id is one of the IDs the service
// documents as unused (111, 157, 167, 251 and 257).
func IsUnusedCountryID(id int) bool {
	return slices.Contains(unusedCountryIDs[:], id)
}
