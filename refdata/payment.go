package refdata

import "slices"

// PaymentStatusInfo is one entry of the payment status ID list.
type PaymentStatusInfo struct {
	// ID is the service's numeric payment status ID (1 to 10).
	ID int
	// Name is the English name of the status, e.g. "Captured".
	Name string
}

// paymentStatuses is the payment status ID list, sorted by ID.
var paymentStatuses = [...]PaymentStatusInfo{
	{ID: 1, Name: "Awaiting approval"},
	{ID: 2, Name: "Approved"},
	{ID: 3, Name: "Captured"},
	{ID: 4, Name: "Partially captured"},
	{ID: 5, Name: "Cancelled"},
	{ID: 6, Name: "Refused"},
	{ID: 7, Name: "Awaiting renewal"},
	{ID: 8, Name: "Expired"},
	{ID: 9, Name: "Refunded"},
	{ID: 10, Name: "Partially refunded"},
}

var paymentStatusByID = indexBy(paymentStatuses[:], func(p PaymentStatusInfo) int { return p.ID })

// PaymentStatus returns the name of the payment status with the given ID;
// ok is false for unknown IDs.
func PaymentStatus(id int) (name string, ok bool) {
	p, ok := paymentStatusByID[id]
	return p.Name, ok
}

// PaymentStatuses returns a copy of the payment status ID list, sorted by ID.
func PaymentStatuses() []PaymentStatusInfo {
	return slices.Clone(paymentStatuses[:])
}
