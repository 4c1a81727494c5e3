package diff

import (
	"encoding/json"
	"fmt"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// wireState is a State as MarshalJSON renders it (an event's before/after).
type wireState struct {
	StatusID   order.Decimal    `json:"statusId"`
	LockStatus *string          `json:"lockStatus"`
	TypeID     int64            `json:"typeId"`
	ReferrerID order.Decimal    `json:"referrerId"`
	PlentyID   int64            `json:"plentyId"`
	OwnerID    order.FlexString `json:"ownerId"`
	LocationID order.FlexString `json:"locationId"`
	CreatedAt  order.Time       `json:"createdAt"`
	UpdatedAt  order.Time       `json:"updatedAt"`
}

// EventData is what a standby needs of an encoded event: the order and
// its tracked state before (nil on first sight) and after.
type EventData struct {
	ID      string
	Source  string // the CloudEvents source
	Type    Type
	OrderID int64
	Before  *State
	After   State
}

// DecodeEvent reads an event as Encode writes it; the states come back
// Same as they went in.
func DecodeEvent(b []byte) (EventData, error) {
	var ev struct {
		ID     string `json:"id"`
		Source string `json:"source"`
		Type   Type   `json:"type"`
		Data   struct {
			OrderID *int64     `json:"orderId"`
			Before  *wireState `json:"before"`
			After   *wireState `json:"after"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return EventData{}, fmt.Errorf("decode event: %w", err)
	}
	if ev.Data.OrderID == nil || ev.Data.After == nil {
		return EventData{}, fmt.Errorf("decode event %s: no data.orderId or data.after", ev.ID)
	}
	out := EventData{ID: ev.ID, Source: ev.Source, Type: ev.Type, OrderID: *ev.Data.OrderID, After: ev.Data.After.state()}
	if ev.Data.Before != nil {
		b := ev.Data.Before.state()
		out.Before = &b
	}
	return out, nil
}

func (w *wireState) state() State {
	s := State{StatusID: w.StatusID, TypeID: w.TypeID, ReferrerID: w.ReferrerID, PlentyID: w.PlentyID,
		OwnerID: w.OwnerID, LocationID: w.LocationID, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
	if w.LockStatus != nil {
		s.LockStatus = *w.LockStatus
	}
	return s
}
