package redis

import (
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts. Each touches exactly one key (KEYS[1]), so each runs on the
// node that owns the key's slot in a Redis Cluster. They read the fixed
// header described in codec.go, of version 2 or 1; a value of any other
// version is reported as -1 and left untouched.
//
// Every script that must tell a live lease from a lapsed one judges it the
// same way: a record in progress of version 2 is written with PX
// lease+LapsedKept, so its lease is live while its PTTL is above LapsedKept
// (on the server's clock, as PX itself); a version-1 one was written with
// PX lease and is live while it exists. A completed record is live while it
// exists. commitScript, run once per large completion, takes the check from
// luaPrelude; the scripts on a call's path (acquire, renew, complete,
// release) inline it and the header checks they need, which costs the
// server 5–14 % less per run than defining hdr and live as closures on
// every run (INFO commandstats on a private Redis 7.0, medians of 201
// interleaved batches of 50: contended acquire 14.7 → 13.9 µs, renew 21.9
// → 20.1, release 11.8 → 10.7, on a loaded 2-core machine).
//
// Each starts with redis.replicate_commands(): a server before Redis 5.0
// replicates a script, and writes it to the AOF, verbatim by default, and
// a replica or an AOF load running it again would read its own, later,
// PTTL and TIME and could decide otherwise (skip the write); it also
// refuses writes after TIME. From 5.0 on effects replication is the
// default, and from 7.0 the call does nothing.

// luaPrelude defines hdr (the header size of a version byte, nil for an
// unknown one) and live (whether the record in progress cur under KEYS[1]
// holds a live lease). KEPT stands for LapsedKept in milliseconds.
//
// PTTL counts whole milliseconds, and a server whose clock is finer may
// round the remaining time down (miniredis does): in the lease's last
// millisecond, PTTL equal to KEPT, live compares the lease deadline in the
// value with the server's TIME instead. On Redis that is the instant of the
// deadline itself, so the two agree but for the skew between the clock that
// wrote the value and the server's, within that one millisecond.
//
// It starts with redis.replicate_commands() (see above).
const luaPrelude = `
if redis.replicate_commands then redis.replicate_commands() end
local function hdr(v)
	if v == 2 then return 25 elseif v == 1 then return 13 end
	return nil
end
local function live(cur)
	if string.byte(cur, 1) ~= 2 or string.byte(cur, 2) ~= 1 then return true end
	local ttl = redis.call('PTTL', KEYS[1])
	if ttl ~= KEPT then return ttl < 0 or ttl > KEPT end
	local a, b, c, d, e, f, g, h = string.byte(cur, 6, 13)
	local at = ((((((a * 256 + b) * 256 + c) * 256 + d) * 256 + e) * 256 + f) * 256 + g) * 256 + h
	local t = redis.call('TIME')
	return at * 1000 > tonumber(t[1]) * 1000000 + tonumber(t[2])
end
`

// script returns the script of body, after luaPrelude and with KEPT and
// INLINE replaced by their values.
func script(body string) *goredis.Script { return bareScript(luaPrelude + body) }

// returnIfLapsed is the lease check the renew, complete and release scripts
// inline (a Lua function call of luaPrelude's live costs server time on
// every call): inside "if v == 2 then", with the record in cur, it returns 0
// when the lease has lapsed, judged as live judges it.
const returnIfLapsed = `	local ttl = redis.call('PTTL', KEYS[1])
	if ttl == KEPT then
		local a, b, c, d, e, f, g, i = string.byte(cur, 6, 13)
		local at = ((((((a * 256 + b) * 256 + c) * 256 + d) * 256 + e) * 256 + f) * 256 + g) * 256 + i
		local t = redis.call('TIME')
		if at * 1000 <= tonumber(t[1]) * 1000000 + tonumber(t[2]) then return 0 end
	elseif ttl >= 0 and ttl < KEPT then
		return 0
	end
`

// bareScript returns the script of src with KEPT and INLINE replaced by
// their values, without luaPrelude: for a script on every call's path that
// inlines the checks it needs (see completeScript).
func bareScript(src string) *goredis.Script {
	src = strings.ReplaceAll(src, "KEPT", strconv.FormatInt(keptMillis, 10))
	src = strings.ReplaceAll(src, "INLINE", strconv.Itoa(inlineComplete))
	return goredis.NewScript(src)
}

// acquireScript claims a key that SET ... NX GET found holding a record in
// progress, whose lease the server's clock must judge. ARGV[1] is the
// caller's new value (version 2, in progress, Attempt 1, Fence from the
// Store's clock), ARGV[2] its PX (lease+LapsedKept). It returns a pair:
//
//   - {1, value}: the key was absent (released meanwhile) and now holds
//     ARGV[1], or it held the caller's own live lease (same token and
//     fingerprint), now renewed: ARGV[1] with the record's Attempt and Fence
//     kept (a version-1 record is rewritten as version 2, Attempt 0, Fence
//     0);
//   - {2, value}: it held a lapsed lease, now taken over: ARGV[1] with
//     Attempt one more than the lapsed record's (at least 2) and Fence the
//     largest of the lapsed Fence+1, the server's TIME in microseconds and
//     ARGV[1]'s Fence;
//   - {0, cur}: a live record the caller cannot take (another token's lease,
//     another fingerprint, a completed record), unchanged, to classify;
//   - {-1}: the value is not a record.
//
// The integers are split into 32-bit halves (Lua numbers are doubles), so
// fences are exact over their whole range.
var acquireScript = bareScript(`
if redis.replicate_commands then redis.replicate_commands() end
local new = ARGV[1]
local cur = redis.call('GET', KEYS[1])
if not cur then
	redis.call('SET', KEYS[1], new, 'PX', ARGV[2])
	return {1, new}
end
local v, st = string.byte(cur, 1, 2)
local h = 25
if v == 1 then h = 13 elseif v ~= 2 then return {-1} end
if #cur < h or (st ~= 1 and st ~= 2) then return {-1} end
local live = st == 2 or v == 1
if not live then
	local ttl = redis.call('PTTL', KEYS[1])
	if ttl ~= KEPT then
		live = ttl < 0 or ttl > KEPT
	else
		local a, b, c, d, e, f, g, i = string.byte(cur, 6, 13)
		local at = ((((((a * 256 + b) * 256 + c) * 256 + d) * 256 + e) * 256 + f) * 256 + g) * 256 + i
		local t = redis.call('TIME')
		live = at * 1000 > tonumber(t[1]) * 1000000 + tonumber(t[2])
	end
end
if live then
	if st == 1 and string.sub(cur, 3, 5) == string.sub(new, 3, 5) and string.sub(cur, h + 1) == string.sub(new, 26) then
		local af = string.rep('\0', 12)
		if h == 25 then af = string.sub(cur, 14, 25) end
		local v = string.sub(new, 1, 13) .. af .. string.sub(new, 26)
		redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
		return {1, v}
	end
	return {0, cur}
end
local function u32(s, i)
	local a, b, c, d = string.byte(s, i, i + 3)
	return ((a * 256 + b) * 256 + c) * 256 + d
end
local function be32(n)
	local d = n % 256
	n = (n - d) / 256
	local c = n % 256
	n = (n - c) / 256
	local b = n % 256
	return string.char((n - b) / 256, b, c, d)
end
local two32 = 4294967296
local attempt = u32(cur, 14)
if attempt < 1 then attempt = 1 end
if attempt < two32 - 1 then attempt = attempt + 1 end
local hi, lo = u32(cur, 18), u32(cur, 22) + 1
if lo == two32 then hi, lo = hi + 1, 0 end
if hi == two32 then hi, lo = two32 - 1, two32 - 1 end
local t = redis.call('TIME')
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local thi = math.floor(us / two32)
local tlo = us - thi * two32
if thi > hi or (thi == hi and tlo > lo) then hi, lo = thi, tlo end
local chi, clo = u32(new, 18), u32(new, 22)
if chi > hi or (chi == hi and clo > lo) then hi, lo = chi, clo end
local v = string.sub(new, 1, 13) .. be32(attempt) .. be32(hi) .. be32(lo) .. string.sub(new, 26)
redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
return {2, v}
`)

// renewScript extends a live lease of its holder: Store.Renew. ARGV[1] is
// the token, ARGV[2] the 8-byte time field (the new LockedUntil), ARGV[3]
// the PX (lease+LapsedKept). When the key holds a record in progress of this
// token whose lease is live, it rewrites the time field and the expiry,
// keeping Attempt and Fence (a version-1 record becomes version 2, Attempt
// 0, Fence 0, so that its expiry can include the LapsedKept window), and
// returns 1. In every other case (absent, lapsed, completed, another
// token's) it writes nothing and returns 0; -1 for a value that is not a
// record.
var renewScript = bareScript(`
if redis.replicate_commands then redis.replicate_commands() end
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local v, st, n = string.byte(cur, 1, 3)
local h = 25
if v == 1 then h = 13 elseif v ~= 2 then return -1 end
if #cur < h then return -1 end
local tok = ARGV[1]
if st ~= 1 or n ~= #tok or string.sub(cur, h + 1, h + n) ~= tok then return 0 end
if v == 2 then
` + returnIfLapsed + `
	redis.call('SET', KEYS[1], '\2' .. string.sub(cur, 2, 5) .. ARGV[2] .. string.sub(cur, 14), 'PX', ARGV[3])
	return 1
end
redis.call('SET', KEYS[1], '\2' .. string.sub(cur, 2, 5) .. ARGV[2] .. '\0\0\0\0\0\0\0\0\0\0\0\0' .. string.sub(cur, 14), 'PX', ARGV[3])
return 1
`)

// completeScript stores a response. ARGV[1] is the token, ARGV[2] the 8-byte
// time field (the new ExpiresAt), ARGV[3] the response, ARGV[4] the retention
// in milliseconds. When the key holds a record in progress of this token, it
// becomes completed with the response and expires after the retention,
// keeping its fingerprint; the script returns 1. When this token already
// completed it, the script changes nothing (the first response and retention
// stay: a client may have been replayed them) and returns 1. It returns 0
// when the key is absent, held by another token or by this token's lapsed
// lease, and -1 when the value is not a record (or a record in progress
// that carries response bytes). The completed record keeps the version,
// Attempt and Fence of the record in progress.
//
// A response of up to inlineComplete bytes (3 KiB) costs the server what
// the record layout needs and no more: the GET that checks the token,
// status and layout, the PTTL that tells a live lease from a lapsed one
// (only the server's clock can; TIME too in the lease's last millisecond,
// see luaPrelude), and one SET ... PX of the completed value, the new
// header, the token and fingerprint taken from the record, and the
// response, built by one Lua concatenation. The least hand-written
// token-checked completion runs GET, compare, SET of a value the client
// built, and no lease check.
//
// It is the one script on every cycle's path, so it does not start with
// luaPrelude: it inlines the header and lease checks it needs instead of
// defining hdr and live as closures on every run, and builds the value in
// one concatenation instead of a header first. It still calls
// redis.replicate_commands first (a table lookup and a call that does
// nothing from Redis 7.0 on, not measurable here): on a server before
// Redis 5.0 a script is otherwise replicated and written to the AOF
// verbatim, and a replica or an AOF load running it again would read its
// own PTTL, later, and could skip the write. INFO commandstats on a private
// Redis 7.0 (2-core machine under load), medians of 301 interleaved
// batches of 50 calls: at 100 bytes 1.46–1.49× the hand-written script's
// server time before, 1.38–1.40× now (about 1 µs a call less); at 1 KiB
// 1.54× before, 1.43× now. The rest of the difference is the PTTL command.
// Against the DEL, two SETRANGEs and PEXPIRE that a larger response takes
// (below), the concatenation saves 15 % of the server time at 1056 bytes
// (a sealed 1 KiB response, store/seal) and 11 % at 2 KiB, breaks even
// at 3–4 KiB and costs more from 5 KiB on (same measurement, 151–201
// batches): hence 3 KiB.
//
// A larger response is not concatenated in Lua: doing so for 1 MiB cost the
// server 3.7–4.7 ms a call, against 1.4 ms for merely receiving it as ARGV.
// Instead the script deletes the key and lets SETRANGE of the now missing
// key allocate a string of exactly the final size with the response at its
// end, then writes the small new header over its start (APPEND would do it
// in place, but grows the string greedily, up to twice the memory).
//
// A record in progress whose lease lapsed is, as everywhere, not the
// token's any more: the script returns 0 for it and leaves it kept.
var completeScript = bareScript(`
if redis.replicate_commands then redis.replicate_commands() end
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local v, st, n, m1, m2 = string.byte(cur, 1, 5)
local h = 25
if v == 1 then h = 13 elseif v ~= 2 then return -1 end
if #cur < h then return -1 end
local tok = ARGV[1]
if n ~= #tok or string.sub(cur, h + 1, h + n) ~= tok then return 0 end
if st == 2 then return 1 end
if st ~= 1 or #cur ~= h + n + m1 * 256 + m2 then return -1 end
if v == 2 then
` + returnIfLapsed + `
end
local resp = ARGV[3]
if #resp <= INLINE then
	redis.call('SET', KEYS[1], string.char(v, 2, n, m1, m2) .. ARGV[2] .. string.sub(cur, 14) .. resp, 'PX', ARGV[4])
	return 1
end
local head = string.char(v, 2, n, m1, m2) .. ARGV[2] .. string.sub(cur, 14)
redis.call('DEL', KEYS[1])
redis.call('SETRANGE', KEYS[1], #head, resp)
redis.call('SETRANGE', KEYS[1], 0, head)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// inlineComplete is the largest response completeScript concatenates into
// the completed value in Lua; a larger one goes through DEL and SETRANGE
// (measured, see there). It was 1 KiB, which put a sealed 1 KiB response
// (32 bytes more) on the costlier path.
const inlineComplete = 3 << 10

// releaseScript deletes the key when it holds a live lease of the token
// ARGV[1], returning 1, and otherwise changes nothing and returns 0: a
// lapsed lease of the token is left kept, as store.Release says.
var releaseScript = bareScript(`
if redis.replicate_commands then redis.replicate_commands() end
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local v, st, n = string.byte(cur, 1, 3)
local h = 25
if v == 1 then h = 13 elseif v ~= 2 then return 0 end
local tok = ARGV[1]
if st ~= 1 or n ~= #tok or #cur < h + n or string.sub(cur, h + 1, h + n) ~= tok then return 0 end
if v == 2 then
` + returnIfLapsed + `
end
redis.call('DEL', KEYS[1])
return 1
`)

// claimScript is the fallback for servers without SET ... NX GET (before
// Redis 7.0): the same decision in one atomic step. ARGV[1] is the value,
// ARGV[2] its PX in milliseconds (lease+LapsedKept). It returns false after setting the key,
// or the current value when the key exists.
var claimScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
`)
