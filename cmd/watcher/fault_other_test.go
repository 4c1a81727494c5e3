//go:build !linux

package main

// platformFaults: the state-disk-full fault needs Linux (prlimit).
func platformFaults(*faultEnv) []func() { return nil }
