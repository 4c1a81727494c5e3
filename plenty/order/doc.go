// Package order is the model of the service's order search: an Order decoded
// losslessly from a search entry (Decimal statuses and ids, Time stamps that
// keep their offset, the flexible scalars some systems send as numbers and
// others as strings), the search page, the filters and the query, and the
// session Token the state file keeps.
//
// It imports the standard library only, so that the pure decision (diff) and
// the state file (state) do not depend on the HTTP client (plenty), which
// sends the queries and decodes the pages with this package.
package order
