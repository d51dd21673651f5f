;; Regression tests for back-edges that run the loop check themselves
;; (WASM_LOOP_EDGE, internal.h): every simple jump form that can branch to
;; a loop, and the forms that still go through the loop's check. Expected
;; values checked with wabt's spectest-interp.
(module
  ;; br_if on a fused compare (BR_LL)
  (func (export "br-ll") (param i32) (result i32)
    (local i32)
    (loop
      (local.set 1 (i32.add (local.get 1) (i32.const 3)))
      (br_if 0 (i32.lt_s (local.get 1) (local.get 0))))
    (local.get 1))
  ;; br_if on a plain value (BR_IF_SIMPLE)
  (func (export "br-simple") (param i32) (result i32)
    (local i32)
    (loop
      (local.set 1 (i32.add (local.get 1) (i32.const 1)))
      (local.set 0 (i32.shr_u (local.get 0) (i32.const 1)))
      (br_if 0 (local.get 0)))
    (local.get 1))
  ;; br_if on i32.eqz, inverted into JMP_IF_NOT
  (func (export "br-eqz") (param i32) (result i32)
    (local i32)
    (loop
      (local.set 1 (i32.add (local.get 1) (i32.const 1)))
      (br_if 0 (i32.eqz (i32.ge_u (local.get 1) (local.get 0)))))
    (local.get 1))
  ;; an unconditional br back to the loop (JMP), left by a br_if outward
  (func (export "br-jmp") (param i32) (result i32)
    (local i32)
    (block
      (loop
        (br_if 1 (i32.ge_u (local.get 1) (local.get 0)))
        (local.set 1 (i32.add (local.get 1) (i32.const 2)))
        (br 0)))
    (local.get 1))
  ;; a back-edge from inside a nested block and an if
  (func (export "nested") (param i32) (result i32)
    (local i32 i32)
    (loop
      (local.set 1 (i32.add (local.get 1) (i32.const 1)))
      (block
        (if (i32.and (local.get 1) (i32.const 1))
          (then (local.set 2 (i32.add (local.get 2) (local.get 1))) (br 2))))
      (br_if 0 (i32.lt_u (local.get 1) (local.get 0))))
    (local.get 2))
  ;; a loop with a parameter: the back-edge unwinds (BR_IF, through the check)
  (func (export "loop-param") (param i32) (result i32)
    (i32.const 0)
    (loop (param i32) (result i32)
      (i32.add (i32.const 5))
      (local.set 0 (i32.sub (local.get 0) (i32.const 1)))
      (br_if 0 (local.get 0))))
  ;; br_table to a loop
  (func (export "br-table") (param i32) (result i32)
    (local i32)
    (block
      (loop
        (local.set 1 (i32.add (local.get 1) (i32.const 1)))
        (br_table 0 1 (i32.ge_u (local.get 1) (local.get 0)))))
    (local.get 1))
  ;; an infinite loop reached only as dead code is never emitted
  (func (export "dead-loop") (result i32)
    (return (i32.const 9))
    (loop (br 0))
    (i32.const 1))
)
(assert_return (invoke "br-ll" (i32.const 10)) (i32.const 12))
(assert_return (invoke "br-ll" (i32.const -5)) (i32.const 3))
(assert_return (invoke "br-simple" (i32.const 1000)) (i32.const 10))
(assert_return (invoke "br-simple" (i32.const 0)) (i32.const 1))
(assert_return (invoke "br-eqz" (i32.const 7)) (i32.const 7))
(assert_return (invoke "br-eqz" (i32.const 0)) (i32.const 1))
(assert_return (invoke "br-jmp" (i32.const 7)) (i32.const 8))
(assert_return (invoke "br-jmp" (i32.const 0)) (i32.const 0))
(assert_return (invoke "nested" (i32.const 10)) (i32.const 25))
(assert_return (invoke "loop-param" (i32.const 4)) (i32.const 20))
(assert_return (invoke "br-table" (i32.const 6)) (i32.const 6))
(assert_return (invoke "dead-loop") (i32.const 9))
