package refdata

import "slices"

// Unit is one entry of the default unit ID list.
type Unit struct {
	// ID is the service's numeric unit ID (1 to 52).
	ID int
	// Code is the unit's code, mostly from UN/ECE Recommendation 20,
	// e.g. "KGM".
	Code string
	// Name is the English name as documented, e.g. "Kilogram".
	Name string
}

// units is the default unit ID list, sorted by ID.
var units = [...]Unit{
	{ID: 1, Code: "C62", Name: "Piece"},
	{ID: 2, Code: "KGM", Name: "Kilogram"},
	{ID: 3, Code: "GRM", Name: "Gram"},
	{ID: 4, Code: "MGM", Name: "Milligram"},
	{ID: 5, Code: "LTR", Name: "Litre"},
	{ID: 6, Code: "DPC", Name: "12 pieces/dozen"},
	{ID: 7, Code: "OP", Name: "Two pack"},
	{ID: 8, Code: "BL", Name: "Bale"},
	{ID: 9, Code: "DI", Name: "Dispenser"},
	{ID: 10, Code: "BG", Name: "Bag"},
	{ID: 11, Code: "ST", Name: "Sheet"},
	{ID: 12, Code: "D64", Name: "Block"},
	{ID: 13, Code: "PD", Name: "Block"},
	{ID: 14, Code: "QR", Name: "Quire"},
	{ID: 15, Code: "BX", Name: "Box"},
	{ID: 16, Code: "CL", Name: "Coil"},
	{ID: 17, Code: "CH", Name: "Container"},
	{ID: 18, Code: "TN", Name: "Tin"},
	{ID: 19, Code: "CA", Name: "Can"},
	{ID: 20, Code: "DZN", Name: "Dozen"},
	{ID: 21, Code: "BJ", Name: "Bucket"},
	{ID: 22, Code: "CS", Name: "Case"},
	{ID: 23, Code: "Z3", Name: "Cask"},
	{ID: 24, Code: "BO", Name: "Bottle"},
	{ID: 25, Code: "OZA", Name: "Fluid ounce"},
	{ID: 26, Code: "JR", Name: "Jar"},
	{ID: 27, Code: "CG", Name: "Cardboard box"},
	{ID: 28, Code: "CT", Name: "Carton"},
	{ID: 29, Code: "KT", Name: "Kit"},
	{ID: 30, Code: "AA", Name: "Ball"},
	{ID: 31, Code: "MTR", Name: "Metre"},
	{ID: 32, Code: "MLT", Name: "Millilitre"},
	{ID: 33, Code: "MMT", Name: "Millimetre"},
	{ID: 34, Code: "PR", Name: "Pair"},
	{ID: 35, Code: "PA", Name: "Packet"},
	{ID: 36, Code: "PK", Name: "Bundle"},
	{ID: 37, Code: "D97", Name: "Pallet/unit load"},
	{ID: 38, Code: "MTK", Name: "Square metre"},
	{ID: 39, Code: "CMK", Name: "Square centimetre"},
	{ID: 40, Code: "MMK", Name: "Square millimetre"},
	{ID: 41, Code: "SCM", Name: "Square centimetre (non-standard)"},
	{ID: 42, Code: "SMM", Name: "Square millimetre (non-standard)"},
	{ID: 43, Code: "RO", Name: "Role"},
	{ID: 44, Code: "SA", Name: "Sack"},
	{ID: 45, Code: "SET", Name: "Set"},
	{ID: 46, Code: "RL", Name: "Reel"},
	{ID: 47, Code: "EA", Name: "Each"},
	{ID: 48, Code: "TU", Name: "Tube"},
	{ID: 49, Code: "OZ", Name: "Ounce"},
	{ID: 50, Code: "WE", Name: "Wet ton"},
	{ID: 51, Code: "CMT", Name: "Centimetre"},
	{ID: 52, Code: "INH", Name: "Inch"},
}

var unitByID = indexBy(units[:], func(u Unit) int { return u.ID })

// UnitByID returns the unit with the given ID; ok is false for unknown IDs.
func UnitByID(id int) (Unit, bool) {
	u, ok := unitByID[id]
	return u, ok
}

// Units returns a copy of the default unit ID list, sorted by ID.
func Units() []Unit {
	return slices.Clone(units[:])
}
