package redis

import goredis "github.com/redis/go-redis/v9"

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
// not a version-1 record.
var completeScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
if #cur < 13 or string.byte(cur, 1) ~= 1 then return -1 end
local tok = ARGV[1]
local n = string.byte(cur, 3)
if n ~= #tok or string.sub(cur, 14, 13 + n) ~= tok then return 0 end
local st = string.byte(cur, 2)
if st ~= 1 and st ~= 2 then return -1 end
if st == 2 then return 1 end
local m = string.byte(cur, 4) * 256 + string.byte(cur, 5)
if #cur < 13 + n + m then return -1 end
redis.call('SET', KEYS[1],
	string.sub(cur, 1, 1) .. '\2' .. string.sub(cur, 3, 5) .. ARGV[2] .. string.sub(cur, 14, 13 + n + m) .. ARGV[3],
	'PX', ARGV[4])
return 1
`)

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
