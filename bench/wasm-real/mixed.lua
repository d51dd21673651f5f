-- SPDX-License-Identifier: MIT
-- A mixed Lua 5.4 workload for bench/wasm-real.sh: recursive calls, a
-- table sort, string formatting and pattern matching, float math and
-- closures. It prints one line of results, the same in every engine.
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local t = {}
for i = 1, 200000 do t[i] = (i * 7919) % 100003 end
table.sort(t)
local parts = {}
for i = 1, 50000 do parts[#parts + 1] = string.format("%d:%x", i, t[i]) end
local s = table.concat(parts, ",")
local count = 0
for _ in s:gmatch("%d+:") do count = count + 1 end
local acc = 0.0
for i = 1, 1000000 do acc = acc + math.sin(i) * math.sqrt(i) end
local mk = function(k) return function(x) return x * k + 1 end end
local g, z = mk(3), 0
for i = 1, 300000 do z = (g(z) + i) % 1000003 end
print(fib(27), count, #s, string.format("%.6f", acc), z)
