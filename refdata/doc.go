// Package refdata holds the fixed reference code lists of the commerce REST
// service as typed Go data: language codes, country IDs, unit IDs,
// currencies, payment status IDs and stock management reason IDs.
//
// Order events received from the service carry these lists' numeric IDs and
// short codes only. The lists serve two purposes:
//
//   - enriching order events with readable names (for example turning
//     country ID 12 into "GB" or payment status 3 into "Captured"): package
//     diff adds them to an event as data.labels, and
//   - validating IDs and codes before they are stored or sent back to the
//     service.
//
// The tables are transcribed verbatim from the service's reference
// documentation (a copy is in testdata; the tests compare the tables with
// it), currency names from ISO 4217. They are read-only: lookups are constant-time map accesses,
// and every function returning a slice returns a fresh copy that callers
// may modify freely. All functions are safe for concurrent use.
package refdata
