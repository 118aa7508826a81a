package nats

import "testing"

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want [3]int
		ok   bool
	}{
		{"2.9.10", casVersion, false},
		{"2.9.20", casVersion, false},
		{"2.9.21", casVersion, true},
		{"2.10.0", casVersion, true},
		{"2.15.2", casVersion, true},
		{"3.0.0", casVersion, true},
		{"2.10.22", ttlVersion, false},
		{"2.11.0-RC.1", ttlVersion, true},
		{"2.11", ttlVersion, true},
		{"", casVersion, false},
		{"garbage", ttlVersion, false},
	} {
		if got := versionAtLeast(tc.v, tc.want); got != tc.ok {
			t.Errorf("versionAtLeast(%q, %v) = %v, want %v", tc.v, tc.want, got, tc.ok)
		}
	}
}
