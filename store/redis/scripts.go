package redis

import (
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts. Each touches exactly one key (KEYS[1]), so each runs on the
// node that owns the key's slot in a Redis Cluster. They read the fixed
// header described in codec.go; a value whose first byte is not version 1 is
// reported as -1 and left untouched.

// renewScript renews a lease for its own holder. ARGV[1] is the new value,
// ARGV[2] the lease in milliseconds. The key is rewritten only when its
// current value is the same record in progress (same version, status, token
// and fingerprint: every byte outside the time field equal to ARGV[1]); the
// script then returns 1. Otherwise it returns the current value, or false
// when the key is absent, and the caller decides again.
var renewScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return false end
local new = ARGV[1]
if #cur == #new and string.sub(cur, 1, 5) == string.sub(new, 1, 5)
	and string.sub(cur, 14) == string.sub(new, 14) and string.byte(cur, 2) == 1 then
	redis.call('SET', KEYS[1], new, 'PX', ARGV[2])
	return 1
end
return cur
`)

// completeScript stores a response. ARGV[1] is the token, ARGV[2] the 8-byte
// time field (the new ExpiresAt), ARGV[3] the response, ARGV[4] the retention
// in milliseconds. When the key holds a record in progress of this token, it
// becomes completed with the response and expires after the retention,
// keeping its fingerprint; the script returns 1. When this token already
// completed it, the script changes nothing (the first response and retention
// stay: a client may have been replayed them) and returns 1. It returns 0
// when the key is absent or held by another token, and -1 when the value is
// not a version-1 record (or a record in progress that carries response
// bytes).
//
// A response of up to inlineComplete bytes (1 KiB) costs the server what
// the record layout needs and no more: the GET that checks the token,
// status and layout, and one SET ... PX of the completed value, the new
// header, the token and fingerprint taken from the record, and the
// response, built by one Lua concatenation. That is what the least
// hand-written token-checked completion runs (GET, compare, SET of a value
// the client built). INFO commandstats on a private Redis 7.0, 100-byte
// response, medians of 7 batches of 300: 7.1 µs a call, against 9.3 µs for
// the DEL, two SETRANGEs and PEXPIRE it ran before; at 1 KiB 9.6 against
// 10.8; from 2–4 KiB on the concatenation costs more than it saves.
//
// A larger response is not concatenated in Lua: doing so for 1 MiB cost the
// server 3.7–4.7 ms a call, against 1.4 ms for merely receiving it as ARGV.
// Instead the script deletes the key and lets SETRANGE of the now missing
// key allocate a string of exactly the final size with the response at its
// end, then writes the small new header over its start (APPEND would do it
// in place, but grows the string greedily, up to twice the memory).
var completeScript = goredis.NewScript(strings.ReplaceAll(completeSrc, "INLINE", strconv.Itoa(inlineComplete)))

// completeSrc is completeScript's source, INLINE standing for inlineComplete.
const completeSrc = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local v, st, n, m1, m2 = string.byte(cur, 1, 5)
if v ~= 1 or #cur < 13 then return -1 end
local tok = ARGV[1]
if n ~= #tok or string.sub(cur, 14, 13 + n) ~= tok then return 0 end
if st == 2 then return 1 end
if st ~= 1 or #cur ~= 13 + n + m1 * 256 + m2 then return -1 end
local resp = ARGV[3]
if #resp <= INLINE then
	redis.call('SET', KEYS[1], '\1\2' .. string.sub(cur, 3, 5) .. ARGV[2] .. string.sub(cur, 14) .. resp, 'PX', ARGV[4])
	return 1
end
local head = '\1\2' .. string.sub(cur, 3, 5) .. ARGV[2] .. string.sub(cur, 14)
redis.call('DEL', KEYS[1])
redis.call('SETRANGE', KEYS[1], #head, resp)
redis.call('SETRANGE', KEYS[1], 0, head)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`

// inlineComplete is the largest response completeScript concatenates into
// the completed value in Lua; a larger one goes through DEL and SETRANGE
// (measured, see there).
const inlineComplete = 1 << 10

// releaseScript deletes the key when it holds a record in progress of the
// token ARGV[1], returning 1, and otherwise changes nothing and returns 0.
var releaseScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local tok = ARGV[1]
if #cur >= 13 + #tok and string.byte(cur, 1) == 1 and string.byte(cur, 2) == 1
	and string.byte(cur, 3) == #tok and string.sub(cur, 14, 13 + #tok) == tok then
	redis.call('DEL', KEYS[1])
	return 1
end
return 0
`)

// claimScript is the fallback for servers without SET ... NX GET (before
// Redis 7.0): the same decision in one atomic step. ARGV[1] is the value,
// ARGV[2] the lease in milliseconds. It returns false after setting the key,
// or the current value when the key exists.
var claimScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
`)
