-- A mixed Lua benchmark for profgen's A/B runs: recursion, tables, strings, closures, sorting,
-- coroutines, floating point and the garbage collector. Deterministic (own PRNG, no time or I/O
-- beyond the final checksum). usage: lua bench.lua [SIZE]; the work grows linearly with SIZE.
local size = tonumber(arg and arg[1]) or 30

local seed = 12345
local function rand(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n
end

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local function tables(n)
  local t, sum = {}, 0
  for i = 1, n do t[i] = { id = i, key = "k" .. rand(1000), v = rand(100000) } end
  local by = {}
  for _, r in ipairs(t) do
    local b = by[r.key]
    if not b then b = {}; by[r.key] = b end
    b[#b + 1] = r.v
  end
  for _, b in pairs(by) do for _, v in ipairs(b) do sum = sum + v end end
  return sum
end

local function strings(n)
  local parts = {}
  for i = 1, n do
    parts[#parts + 1] = string.format("%05d:%s", rand(100000), string.rep(string.char(97 + rand(26)), 1 + rand(8)))
  end
  local s = table.concat(parts, ",")
  local count = 0
  for w in s:gmatch("%d+:(%a+)") do count = count + #w end
  s = s:gsub("(%d+):", function(d) return tostring(#d) end)
  return count + #s + #s:upper():lower()
end

local function closures(n)
  local fs = {}
  for i = 1, 64 do
    local k = i
    fs[i] = function(x) return (x * k + 7) % 1000003 end
  end
  local x = 1
  for i = 1, n do x = fs[(i % 64) + 1](x) end
  return x
end

local function sorting(n)
  local a = {}
  for i = 1, n do a[i] = rand(1000000) end
  table.sort(a)
  local b = {}
  for i = 1, n do b[i] = { rand(100), rand(100) } end
  table.sort(b, function(p, q) if p[1] ~= q[1] then return p[1] < q[1] end return p[2] < q[2] end)
  return a[1] + a[n] + b[1][1] + b[n][2]
end

local function coroutines(n)
  local gen = coroutine.wrap(function()
    for i = 1, n do coroutine.yield(i * 3 % 17) end
    return nil
  end)
  local sum = 0
  while true do
    local v = gen()
    if not v then break end
    sum = sum + v
  end
  return sum
end

local function nbody(n)
  local x, y, vx, vy = {}, {}, {}, {}
  for i = 1, 5 do x[i], y[i], vx[i], vy[i] = i * 1.5, i * -0.7, 0.01 * i, -0.02 * i end
  for _ = 1, n do
    for i = 1, 5 do
      for j = i + 1, 5 do
        local dx, dy = x[i] - x[j], y[i] - y[j]
        local d2 = dx * dx + dy * dy + 0.01
        local mag = 0.001 / (d2 * math.sqrt(d2))
        vx[i], vy[i] = vx[i] - dx * mag, vy[i] - dy * mag
        vx[j], vy[j] = vx[j] + dx * mag, vy[j] + dy * mag
      end
    end
    for i = 1, 5 do x[i], y[i] = x[i] + vx[i], y[i] + vy[i] end
  end
  return math.floor((x[1] + y[5]) * 1000)
end

local check = 0
for round = 1, size do
  check = (check + fib(18) + tables(2000) + strings(600) + closures(20000) + sorting(1500)
    + coroutines(3000) + nbody(1000) + round) % 1000000007
  collectgarbage("step", 0)
end
print(string.format("lua bench size %d checksum %d", size, check))
