package refdata

import "fmt"

// indexBy builds a lookup map from items, keyed by key. It panics on a
// duplicate key, so a transcription error in a table fails at start-up
// instead of silently shadowing an entry.
func indexBy[K comparable, V any](items []V, key func(V) K) map[K]V {
	m := make(map[K]V, len(items))
	for _, it := range items {
		k := key(it)
		if _, dup := m[k]; dup {
			panic(fmt.Sprintf("refdata: duplicate key %v", k))
		}
		m[k] = it
	}
	return m
}
