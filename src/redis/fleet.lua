-- fleet.lua — every change to a shared breaker or budget, as one script.
--
-- Redis runs a script atomically, so the read-decide-write of a breaker
-- (add this batch of counts, is a rule reached, open it, publish) can never
-- interleave with another instance's: that is what lets thresholds mean
-- fleet totals. One script with an operation name rather than one per
-- operation, so there is one SHA to load and one NOSCRIPT path.
--
-- KEYS[1]  the breaker's hash, the budget's or the rate limiter's string,
--          the concurrency limit's sorted set
-- ARGV     op, channel, name, now (Unix ms, the caller's clock), ttl (ms),
--          then the rules (breaker ops; empty strings from admin tools,
--          which fall back to what instances stored), then the op's own.
--
-- Breaker hash fields: state, epoch, reason, until, brk (the break in
-- force), base, samp, opens, lastopen, run (the fleet's consecutive
-- failures), succ (half-open successes), ticket, p<i> = "ticket start" for
-- each probe slot, w<i> = "bucket total failures slow" for the window.
-- Numbers are written with %.0f: Lua's own tostring would round them.

if redis.replicate_commands then pcall(redis.replicate_commands) end

local op, key, chan, name = ARGV[1], KEYS[1], ARGV[2], ARGV[3]
local now, ttl = tonumber(ARGV[4]), tonumber(ARGV[5])

local function int(x) return string.format('%.0f', x) end

-- ---- the budget: gRPC tokens in thousandths, leased to instances ----------

if op == 'lease' then
  local max, delta, want = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
  local t = tonumber(redis.call('GET', key)) or max
  t = math.max(0, math.min(max, t + delta))
  local g = math.max(0, math.min(want, t - math.floor(max / 2)))
  t = t - g
  redis.call('SET', key, int(t), 'PX', ttl)
  return {t, g}
end

-- ---- the rate limiter: GCRA, one theoretical arrival time per key ---------
--
-- The key holds TAT in the callers' wall µs; a request for n permits is
-- admitted when TAT + n*t - burst*t <= now, t the emission interval (µs).
-- The key lives as long as its TAT is ahead, plus the client's ttl, so it
-- expires only once the bucket would be full anyway. Answers {1, 0} or
-- {2, µs until the same request would be admitted}.

if op == 'gcra' then
  local now_us, t, burst, n = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  local tat = math.max(tonumber(redis.call('GET', key)) or now_us, now_us)
  local new_tat = tat + n * t
  local allow_at = new_tat - burst * t
  if now_us < allow_at then return {2, allow_at - now_us} end
  redis.call('SET', key, int(new_tat), 'PX', ttl + math.ceil((new_tat - now_us) / 1000))
  return {1, 0}
end

-- ---- the concurrency limit: a sorted set of leases -------------------------
--
-- One member per permit held, "INSTANCE:SEQ" (the instance id travels as
-- the name), scored with its expiry in the callers' wall ms. A lease whose
-- expiry has come is gone: every op drops those first, so the permits of an
-- instance that died come back once its leases lapse. Live instances push
-- their leases' expiry back from the sync thread; a lease that already
-- lapsed is not revived. Answers {1 granted or 2 denied, leases live, ms
-- until the oldest lapses (acquire) or leases renewed (renew)}.

if op == 'cacquire' or op == 'crelease' or op == 'crenew' then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now))
  if op == 'crelease' then
    redis.call('ZREM', key, name .. ':' .. int(tonumber(ARGV[6])))
    return {1, redis.call('ZCARD', key), 0}
  end
  if op == 'crenew' then
    local lease, prefix, n = tonumber(ARGV[6]), name .. ':', 0
    for _, m in ipairs(redis.call('ZRANGE', key, 0, -1)) do
      if string.sub(m, 1, #prefix) == prefix then
        redis.call('ZADD', key, 'XX', int(now + lease), m)
        n = n + 1
      end
    end
    if n > 0 then redis.call('PEXPIRE', key, ttl + lease) end
    return {1, redis.call('ZCARD', key), n}
  end
  local max, lease, seq = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
  local live = redis.call('ZCARD', key)
  if live >= max then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return {2, live, tonumber(oldest[2]) - now}
  end
  redis.call('ZADD', key, int(now + lease), name .. ':' .. int(seq))
  redis.call('PEXPIRE', key, ttl + lease)
  return {1, live + 1, 0}
end

-- ---- the breaker -----------------------------------------------------------

local raw = redis.call('HGETALL', key)
if op == 'status' and raw[1] == nil then return {4} end
local h = {}
for i = 1, #raw, 2 do h[raw[i]] = raw[i + 1] end

local function num(f, d) return tonumber(h[f]) or d end
local function rule(i, f, d) return tonumber(ARGV[i]) or num(f, d) end

local kind = tonumber(ARGV[6]) or 0
local threshold, ratio = tonumber(ARGV[7]) or 0, tonumber(ARGV[8]) or 1
local minimum = tonumber(ARGV[9]) or 0
local samp = rule(10, 'samp', 30000)
local slow_on, slow_ratio = tonumber(ARGV[11]) == 1, tonumber(ARGV[12]) or 1
local base = rule(13, 'base', 5000)
local growth, maxbrk = tonumber(ARGV[14]) or 1, tonumber(ARGV[15]) or base
local probes, to_close = tonumber(ARGV[16]) or 1, tonumber(ARGV[17]) or 1
local probe_timeout = tonumber(ARGV[18]) or 0
local width = math.max(1, math.floor(samp / 10))

local function server_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- A key that does not exist is a closed breaker. Its epoch starts at the
-- server's clock in microseconds, so a key recreated after a restart always
-- looks newer to an instance than anything it had cached.
local s = {
  state = num('state', 0), epoch = num('epoch', 0), reason = num('reason', 0),
  ['until'] = num('until', 0), brk = num('brk', base), opens = num('opens', 0),
  lastopen = num('lastopen', 0), run = num('run', 0), succ = num('succ', 0),
  ticket = num('ticket', 0)
}
if raw[1] == nil then s.epoch = server_us() end
local old_epoch = s.epoch

local function bucket(i)
  local v = h['w' .. i]
  if v == nil then return nil end
  local id, t, f, sl = string.match(v, '^(%-?%d+) (%d+) (%d+) (%d+)$')
  return tonumber(id), tonumber(t), tonumber(f), tonumber(sl)
end

local function window()
  local cur = math.floor(now / width)
  local t, f, sl = 0, 0, 0
  for i = 0, 9 do
    local id, bt, bf, bs = bucket(i)
    if id ~= nil and id > cur - 10 then t, f, sl = t + bt, f + bf, sl + bs end
  end
  return t, f, sl
end

-- Counts land in the bucket of `now`. A slot holding a newer bucket (an
-- instance whose clock runs behind) takes them rather than being wiped.
local function window_add(dt, df, ds)
  local cur = math.floor(now / width)
  local i = cur % 10
  local id, t, f, sl = bucket(i)
  if id == nil or id < cur then id, t, f, sl = cur, 0, 0, 0 end
  h['w' .. i] = int(id) .. ' ' .. int(t + dt) .. ' ' .. int(f + df) .. ' ' .. int(sl + ds)
end

local function clear(prefix, n)
  for i = 0, n - 1 do h[prefix .. i] = nil end
end

local function transition(to, why)
  s.state, s.reason, s.epoch = to, why, s.epoch + 1
  s.run, s.succ = 0, 0
  clear('p', 64)
  clear('w', 10)
  if to == 0 then s.brk = base end
end

local function open(why, from_half_open)
  if not from_half_open then
    s.brk = base
  elseif growth > 1 then
    s.brk = math.min(math.floor(s.brk * growth), maxbrk)
  end
  transition(1, why)
  s['until'] = now + s.brk
  s.opens, s.lastopen = s.opens + 1, now
end

local function reached(part, total, share)
  return total > 0 and total >= minimum and part / total >= share
end

local code, slot, ticket, retry = 0, 0, 0, 0

if op == 'sync' then
  local epoch, ok, failed, slow = tonumber(ARGV[19]), tonumber(ARGV[20]), tonumber(ARGV[21]), tonumber(ARGV[22])
  local trailing, any_success, trip = tonumber(ARGV[23]), tonumber(ARGV[24]), tonumber(ARGV[25])
  if s.state == 0 and epoch == s.epoch and ok + failed > 0 then
    if bit.band(kind, 2) ~= 0 or slow_on then window_add(ok + failed, failed, slow) end
    if any_success > 0 then s.run = trailing else s.run = s.run + failed end
    local t, f, sl = window()
    if failed > 0 and bit.band(kind, 1) ~= 0 and s.run >= threshold then
      open(1, false)
    elseif failed > 0 and bit.band(kind, 2) ~= 0 and reached(f, t, ratio) then
      open(2, false)
    elseif slow > 0 and slow_on and reached(sl, t, slow_ratio) then
      open(3, false)
    end
  end
  if trip > 0 and s.state == 0 then open(trip, false) end
elseif op == 'probe' then
  if s.state == 1 and now >= s['until'] then transition(2, 4) end
  if s.state == 2 then
    local limit = probe_timeout > 0 and probe_timeout or s.brk
    local free, oldest, oldest_at = nil, nil, nil
    for i = 0, probes - 1 do
      local v = h['p' .. i]
      if v == nil then free = i break end
      local at = tonumber(string.match(v, ' (%-?%d+)$'))
      if oldest == nil or at < oldest_at then oldest, oldest_at = i, at end
    end
    if free == nil and now >= oldest_at + limit then free = oldest end
    if free ~= nil then
      s.ticket = s.ticket + 1
      h['p' .. free] = int(s.ticket) .. ' ' .. int(now)
      code, slot, ticket = 1, free, s.ticket
    else
      code, retry = 2, oldest_at + limit - now
    end
  elseif s.state == 1 then
    code, retry = 2, s['until'] - now
  elseif s.state == 3 then
    code, retry = 2, -1
  end
elseif op == 'result' then
  local epoch, i, t, result = tonumber(ARGV[19]), tonumber(ARGV[20]), tonumber(ARGV[21]), tonumber(ARGV[22])
  local v = h['p' .. i]
  if s.state ~= 2 or epoch ~= s.epoch or v == nil or tonumber(string.match(v, '^(%d+)')) ~= t then
    code = 3
  else
    h['p' .. i] = nil
    if result == 1 then
      open(5, true)
    elseif result == 0 then
      s.succ = s.succ + 1
      if s.succ >= to_close then transition(0, 6) end
    end
  end
elseif op == 'isolate' then
  if s.state ~= 3 then transition(3, 7) end
elseif op == 'close' then
  if s.state ~= 0 then transition(0, 8) end
elseif op == 'reset' then
  local epoch = math.max(server_us(), s.epoch + 1)
  h = {}
  s = { state = 0, epoch = epoch, reason = 9, ['until'] = 0, brk = base, opens = 0,
        lastopen = 0, run = 0, succ = 0, ticket = 0 }
end

-- ---- write back, publish, answer -------------------------------------------

if op ~= 'status' then
  h.base, h.samp = int(base), int(samp)
  for f, v in pairs(s) do h[f] = int(v) end
  local flat = {}
  for f, v in pairs(h) do flat[#flat + 1] = f; flat[#flat + 1] = v end
  redis.call('DEL', key)
  redis.call('HSET', key, unpack(flat))
  redis.call('PEXPIRE', key, ttl)
  if s.epoch ~= old_epoch then
    redis.call('PUBLISH', chan, int(s.state) .. ' ' .. int(s.epoch) .. ' ' ..
      int(s['until']) .. ' ' .. int(s.reason) .. ' ' .. name)
  end
end

local inflight = 0
for i = 0, 63 do if h['p' .. i] ~= nil then inflight = inflight + 1 end end
local t, f, sl = window()
local left = ttl
if op == 'status' then left = redis.call('PTTL', key) end
return {code, s.state, s.epoch, s['until'], s.reason, s.run, t, f, sl, s.brk,
        s.opens, s.lastopen, s.succ, inflight, slot, ticket, retry, left}
