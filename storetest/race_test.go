//go:build race

package storetest_test

const raceEnabled = true
