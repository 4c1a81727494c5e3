// Package plentysim simulates the commerce REST service over real HTTP, for
// the tests, benchmarks and demo of orderwatch. It is an independent
// implementation of the wire protocol (it does not import the client), and
// it reproduces the quirks of the real service listed in DESIGN.md:
//
//   - POST /rest/login (JSON or form body): token response in snake_case,
//     camelCase or both key sets; a limited number of concurrent sessions
//     (429 too_many_concurrent_sessions); a new login never ends an earlier
//     session.
//   - POST /rest/login/refresh ({"refresh_token"} or {"refreshToken"}): new
//     tokens for the same session; the old access token stops working.
//   - GET and POST /rest/orders/search: simple filters in the query string,
//     a complex filter group in the POST body, both applied; unknown filter
//     names silently ignored; decimal statuses compared as decimals; a "+"
//     that was not URL-encoded arrives as a space and makes a timestamp
//     invalid (400); sortBy orderId only; the paginated envelope with the
//     effective itemsPerPage (silently capped).
//   - Throttle headers (X-Plenty-Global-Long-Period-*, -Short-Period-*,
//     X-Plenty-Route-*) on every response, 429 with Retry-After and
//     <prefix>-Calls-Reset, and a count of calls made while blocked.
//   - A Date header from the configured clock.
//   - Injected faults on search: 500, 502 HTML, truncated body, invalid
//     JSON, dropped connection, latency; on login (FailLogins): the session
//     is opened and its answer lost (cut, dropped, never sent, or a 500);
//     on refresh (FailRefreshes): the session is renewed and the answer
//     dropped; new tokens rejected for a while (RejectNewTokens) while
//     their sessions stay open.
//   - One order's entry rendered unreadable in every answer (Corrupt: its
//     statusId an object, or its id not a number) until the corruption ends;
//     the order itself does not change.
//
// Tenants serves many such systems in one process, one per base path
// /shops/<id> (NewMulti, TenantPath), each a Server of its own: its own
// orders, throttle quota, sessions, faults and mutator; CallsBy and
// SetOnCall tell which client (User-Agent) called which tenant, so that a
// fleet test can prove that no shop was called by two replicas at once.
//
// Tests mutate orders (SetStatus, SetLock, Touch, MutateRandom, RunMutator),
// inspect History and Stats, and hook SetBeforeSearch to change orders
// between the page requests of one scan. All randomness is seeded
// (Config.Seed) and the clock is injectable (Config.Now).
//
// In a simple filter value, the text before the first colon is read as the
// operator when it consists of letters only ("in:5,6", "between:a,b"); a
// plain timestamp ("2026-11-22T10:00:00+01:00") is therefore an eq value,
// while a plain string such as "Note: x" is an unknown operator (400): write
// "eq:Note: x".
//
// Matching semantics where the real service is not documented: for the
// multi-valued itemId and itemVariationId, eq, in and the range operators
// match when any item matches, not and nin when no item is equal/in. On an
// absent value (no such property or relation) not and nin match, the other
// operators do not; null matches absent or empty values.
package plentysim
