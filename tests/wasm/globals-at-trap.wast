;; What code stores to a global before a trap must be what everyone reads
;; after it: the next call, the host through an export, and another
;; instance importing the global, in both directions; for the globals a
;; module defines (compiled code reaches them through its context) and
;; those it imports, traps by the runtime's call, by a fault of memory 0
;; and inside a loop. Written for a change that moved defined globals into
;; compiled code's context (docs/wasm.md, "Loop ticks, the entry's check, globals";
;; measured, not kept). Expected values checked with wabt's spectest-interp.
(module $A
  (memory 1)
  ;; like clang's __stack_pointer: mutable, neither imported nor exported
  (global $sp (mut i32) (i32.const 1024))
  (global $g (export "g") (mut i64) (i64.const 0))
  (global $f (export "f") (mut f64) (f64.const 0))
  (global $v (mut v128) (v128.const i32x4 0 0 0 0))
  (global $k (export "k") i32 (i32.const 5))

  (func $down (param i32)
    (global.set $sp (i32.sub (global.get $sp) (local.get 0))))
  ;; a store to the global, then a trap in the same function
  (func (export "push-then-trap")
    (call $down (i32.const 16))
    (global.set $g (i64.const 7))
    (global.set $f (f64.const 2.5))
    (unreachable))
  ;; the store in a caller, the trap two calls deeper, by a fault of
  ;; memory 0 (guard mode: the signal handler's way out)
  (func $deep (result i32)
    (call $down (i32.const 32))
    (i32.load (i32.const 65536)))
  (func (export "push-then-oob") (result i32)
    (global.set $g (i64.add (global.get $g) (i64.const 1)))
    (call $deep))
  ;; a v128's both halves, then a division by zero
  (func (export "v-then-div") (param i32) (result i32)
    (global.set $v (v128.const i32x4 1 2 3 4))
    (i32.div_u (i32.const 1) (local.get 0)))
  (func (export "v-lane") (param i32) (result i32)
    (block (result i32)
      (block
        (block
          (block
            (block (br_table 0 1 2 3 (local.get 0)))
            (return (i32x4.extract_lane 0 (global.get $v))))
          (return (i32x4.extract_lane 1 (global.get $v))))
        (return (i32x4.extract_lane 2 (global.get $v))))
      (i32x4.extract_lane 3 (global.get $v))))
  ;; a loop that moves the global each iteration, then traps
  (func (export "loop-then-trap") (param i32)
    (loop $l
      (call $down (i32.const 1))
      (local.set 0 (i32.sub (local.get 0) (i32.const 1)))
      (br_if $l (local.get 0)))
    (unreachable))
  (func (export "sp") (result i32) (global.get $sp))
  (func (export "get-g") (result i64) (global.get $g))
  (func (export "get-f") (result f64) (global.get $f))
  (func (export "get-k") (result i32) (global.get $k))
)

(assert_return (invoke "sp") (i32.const 1024))
(assert_trap (invoke "push-then-trap") "unreachable")
(assert_return (invoke "sp") (i32.const 1008))
(assert_return (get "g") (i64.const 7))
(assert_return (get "f") (f64.const 2.5))
(assert_return (invoke "get-g") (i64.const 7))
(assert_trap (invoke "push-then-oob") "out of bounds memory access")
(assert_return (invoke "sp") (i32.const 976))
(assert_return (get "g") (i64.const 8))
(assert_trap (invoke "v-then-div" (i32.const 0)) "integer divide by zero")
(assert_return (invoke "v-lane" (i32.const 0)) (i32.const 1))
(assert_return (invoke "v-lane" (i32.const 1)) (i32.const 2))
(assert_return (invoke "v-lane" (i32.const 2)) (i32.const 3))
(assert_return (invoke "v-lane" (i32.const 3)) (i32.const 4))
(assert_trap (invoke "loop-then-trap" (i32.const 100)) "unreachable")
(assert_return (invoke "sp") (i32.const 876))
(assert_return (get "k") (i32.const 5))
(assert_return (invoke "get-k") (i32.const 5))

(register "A" $A)

;; Another instance imports A's globals: its code reaches them through the
;; globals array, A's through its context, the same objects.
(module $B
  (global $g (import "A" "g") (mut i64))
  (global $f (import "A" "f") (mut f64))
  (global $own (mut i32) (i32.const 0))
  (func (export "bump-then-trap")
    (global.set $g (i64.add (global.get $g) (i64.const 100)))
    (global.set $f (f64.const -1))
    (global.set $own (i32.const 9))
    (unreachable))
  (func (export "own") (result i32) (global.get $own))
  (func (export "get-g") (result i64) (global.get $g))
)

(assert_trap (invoke $B "bump-then-trap") "unreachable")
(assert_return (invoke $B "own") (i32.const 9))
(assert_return (invoke $A "get-g") (i64.const 108))
(assert_return (invoke $A "get-f") (f64.const -1))
(assert_return (get $A "g") (i64.const 108))
(assert_trap (invoke $A "push-then-trap") "unreachable")
(assert_return (invoke $B "get-g") (i64.const 7))
