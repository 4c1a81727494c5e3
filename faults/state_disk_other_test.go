//go:build !linux

package faults

// platformFaults: the state-disk-full fault needs Linux (prlimit).
func platformFaults(*faultEnv) []func() { return nil }
