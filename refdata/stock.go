package refdata

import "slices"

// StockReasonInfo is one entry of the stock management reason ID list.
type StockReasonInfo struct {
	// ID is the service's numeric reason ID, e.g. 300.
	ID int
	// Reason is the English description as documented. Descriptions are
	// not unique: 302 and 402 are both "Stock correction stocktaking".
	Reason string
}

// stockReasons is the stock management reason ID list, sorted by ID.
var stockReasons = [...]StockReasonInfo{
	{ID: 0, Reason: "Undefined"},
	{ID: 1, Reason: "Undefined log"},
	{ID: 2, Reason: "Initial value (new log)"},
	{ID: 100, Reason: "Incoming items"},
	{ID: 101, Reason: "Incoming items (WE)"},
	{ID: 102, Reason: "Recognition stocktaking"},
	{ID: 104, Reason: "Derecognition cancelled manufacturer error"},
	{ID: 106, Reason: "Maculation cancelled"},
	{ID: 107, Reason: "Packing error cancelled"},
	{ID: 108, Reason: "Dispensation claim cancelled"},
	{ID: 110, Reason: "Incoming items (import)"},
	{ID: 112, Reason: "Incoming items (reorder)"},
	{ID: 113, Reason: "Outgoing items cancelled"},
	{ID: 114, Reason: "Stock rotation inventory rise"},
	{ID: 115, Reason: "Incoming items (second choice)"},
	{ID: 116, Reason: "Recognition correction"},
	{ID: 150, Reason: "Return booked in"},
	{ID: 171, Reason: "Incoming items picking"},
	{ID: 180, Reason: "Incoming items (purchase order)"},
	{ID: 181, Reason: "Incoming items warehousing"},
	{ID: 182, Reason: "Incoming items found source"},
	{ID: 200, Reason: "Outgoing items"},
	{ID: 201, Reason: "Outgoing items (WA)"},
	{ID: 202, Reason: "Derecognition stocktaking"},
	{ID: 203, Reason: "Return to producer"},
	{ID: 204, Reason: "Derecognition manufacturer error"},
	{ID: 205, Reason: "Derecognition maculation"},
	{ID: 206, Reason: "Derecognition packing error"},
	{ID: 207, Reason: "Derecognition damage"},
	{ID: 208, Reason: "Derecognition dispensation claim"},
	{ID: 209, Reason: "Outgoing items (logistics)"},
	{ID: 210, Reason: "Outgoing items (import)"},
	{ID: 214, Reason: "Stock rotation inventory reduction"},
	{ID: 215, Reason: "Outgoing items (second choice)"},
	{ID: 216, Reason: "Derecognition correction"},
	{ID: 226, Reason: "Derecognition defect (without return)"},
	{ID: 280, Reason: "Outgoing items (purchase order)"},
	{ID: 281, Reason: "Outbound loss"},
	{ID: 300, Reason: "Stock correction"},
	{ID: 301, Reason: "Stock correction (WK)"},
	{ID: 302, Reason: "Stock correction stocktaking"},
	{ID: 304, Reason: "Stock correction manufacturer error"},
	{ID: 305, Reason: "Stock correction maculation"},
	{ID: 306, Reason: "Stock correction packing error"},
	{ID: 307, Reason: "Stock correction damage"},
	{ID: 309, Reason: "Stock correction (internal offset)"},
	{ID: 310, Reason: "Stock correction (import)"},
	{ID: 315, Reason: "Stock correction (attributes deleted)"},
	{ID: 316, Reason: "Stock correction change FBA availability"},
	{ID: 317, Reason: "Stock correction BBD"},
	{ID: 318, Reason: "Stock correction shipping items to FBA"},
	{ID: 319, Reason: "Stock correction shipping items to fulfilment service provider"},
	{ID: 320, Reason: "Stock correction sample interested parties"},
	{ID: 321, Reason: "Stock correction sample customers"},
	{ID: 322, Reason: "Stock correction sample"},
	{ID: 323, Reason: "Stock correction quality models booked in"},
	{ID: 324, Reason: "Stock correction quality models booked out"},
	{ID: 325, Reason: "Stock correction gift"},
	{ID: 326, Reason: "Stock correction malfunction (without return)"},
	{ID: 327, Reason: "Stock correction loss"},
	{ID: 328, Reason: "Balancing entry"},
	{ID: 329, Reason: "Year-end close"},
	{ID: 330, Reason: "Stock correction own use"},
	{ID: 401, Reason: "Rebooking stock"},
	{ID: 402, Reason: "Stock correction stocktaking"},
	{ID: 403, Reason: "Rebooking stock repair demand"},
	{ID: 404, Reason: "Rebooking stock finding"},
	{ID: 405, Reason: "Rebooking stock new return A"},
	{ID: 406, Reason: "Rebooking stock new return C"},
	{ID: 407, Reason: "Rebooking stock inventory lock"},
	{ID: 408, Reason: "Rebooking stock remove lock"},
	{ID: 409, Reason: "Rebooking warehousing return"},
	{ID: 410, Reason: "Rebooking stock quality change"},
	{ID: 411, Reason: "Rebooking stock via warehouse system"},
	{ID: 412, Reason: "Reversal via warehouse system"},
	{ID: 500, Reason: "Flow of stock deleted"},
	{ID: 600, Reason: "Item registered"},
	{ID: 601, Reason: "Purchase price changed"},
	{ID: 602, Reason: "Quantity changed"},
	{ID: 603, Reason: "Item booked in"},
	{ID: 604, Reason: "Item removed from incoming items"},
	{ID: 605, Reason: "Storage location changed"},
	{ID: 606, Reason: "RRP changed"},
	{ID: 607, Reason: "Quantity and purchase price changed"},
	{ID: 608, Reason: "Quantity and RRP changed"},
	{ID: 609, Reason: "Purchase price and RRP changed"},
	{ID: 610, Reason: "Quantity, purchase price and RRP changed"},
	{ID: 611, Reason: "Quantity corrected"},
	{ID: 612, Reason: "Item registration cancelled"},
}

var stockReasonByID = indexBy(stockReasons[:], func(r StockReasonInfo) int { return r.ID })

// StockReason returns the description of the stock management reason with
// the given ID; ok is false for unknown IDs.
func StockReason(id int) (reason string, ok bool) {
	r, ok := stockReasonByID[id]
	return r.Reason, ok
}

// StockReasons returns a copy of the stock management reason ID list,
// sorted by ID.
func StockReasons() []StockReasonInfo {
	return slices.Clone(stockReasons[:])
}
