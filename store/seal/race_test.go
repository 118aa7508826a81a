//go:build race

package seal

// raceEnabled: the race detector is on, and sync.Pool drops what it is
// given at random, so allocation counts mean nothing.
const raceEnabled = true
