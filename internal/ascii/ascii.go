// Package ascii holds the word-at-a-time test for plain ASCII (no NUL, no
// byte of 0x80 or above) that the store package's argument checks and the
// memory store's own hot-path checks share: a string that passes it is valid
// UTF-8 without NUL, in one pass and with no test inside its loop.
package ascii

const (
	// LoBits is 0x01 in every byte of a word.
	LoBits = 0x0101010101010101
	// HiBits is 0x80 in every byte: the bits Bad sets over a bad byte.
	HiBits = 0x8080808080808080
	// Lo7Bits is 0x7f in every byte: a byte below 0x80 plus 0x7f sets its
	// own top bit unless it is zero, and carries into no other byte.
	Lo7Bits = 0x7f7f7f7f7f7f7f7f
)

// Plain reports whether s is ASCII without NUL bytes, which makes it
// valid UTF-8 without NUL.
func Plain(s string) bool { return Bad(s)&HiBits == 0 }

// Bad returns a word in which some bit of HiBits is set if and only
// if s holds a NUL byte or a byte of 0x80 or above. It reads s eight bytes
// at a time with no test inside its loop: the words' top bits are ORed
// together (a byte of 0x80 or above sets its own), and the words plus
// 0x7f in every byte ANDed together (a byte below 0x80 plus 0x7f carries
// into no other byte and sets its top bit unless the byte is zero), so
// the caller tests the result once, for all its strings at once. The last
// word of a string of eight bytes or more overlaps the one before it, and
// a shorter string is read as two overlapping halves, so no loop runs
// byte by byte.
func Bad(s string) uint64 {
	n := len(s)
	var w uint64
	switch {
	case n >= 8:
		w = Load8(s[n-8:])
		top, nonzero := w, w+Lo7Bits
		for ; len(s) > 8; s = s[8:] {
			w = Load8(s)
			top |= w
			nonzero &= w + Lo7Bits
		}
		return top | ^nonzero
	case n >= 4:
		w = Load4(s) | Load4(s[n-4:])<<32
	case n >= 2:
		// The top four bytes are padding that is neither NUL nor high.
		w = Load2(s) | Load2(s[n-2:])<<16 | LoBits&^0xffffffff
	case n == 1:
		w = uint64(s[0]) | LoBits&^0xff
	default:
		return 0
	}
	return w | ^(w + Lo7Bits)
}

// Load8, Load4 and Load2 read the first bytes of s as a little-endian word
// (one load each: one bounds check, the bytes combined by the compiler).
func Load8(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// Load4 reads the first four bytes of s as a little-endian word.
func Load4(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

// Load2 reads the first two bytes of s as a little-endian word.
func Load2(s string) uint64 {
	_ = s[1]
	return uint64(s[0]) | uint64(s[1])<<8
}
