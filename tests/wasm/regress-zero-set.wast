;; Regression tests for dropping 't.const 0; local.set x' on the way from a
;; function's entry while x is a declared local not yet written (it holds
;; zero already): written locals, parameters, -0.0 and code after a label
;; keep their sets. Expected values checked with wabt's spectest-interp.
(module
  ;; fib as clang emits it: 'i32.const 0; local.set 1' twice before the loop
  (func $fib (export "fib") (param i32) (result i32)
    (local i32)
    (local.set 1 (i32.const 0))
    (block
      (br_if 0 (i32.lt_u (local.get 0) (i32.const 2)))
      (local.set 1 (i32.const 0))
      (loop
        (local.set 1 (i32.add (call $fib (i32.add (local.get 0) (i32.const -1))) (local.get 1)))
        (br_if 0 (i32.gt_u (local.tee 0 (i32.add (local.get 0) (i32.const -2))) (i32.const 1)))))
    (i32.add (local.get 0) (local.get 1)))
  ;; written, then set to zero again: the set stays
  (func (export "rewrite") (param i32) (result i32)
    (local i32)
    (local.set 1 (local.get 0))
    (local.set 1 (i32.const 0))
    (local.get 1))
  (func (export "rewrite-tee") (param i32) (result i32)
    (local i32)
    (drop (local.tee 1 (local.get 0)))
    (local.set 1 (i32.const 0))
    (local.get 1))
  ;; a parameter is not zero on entry
  (func (export "param") (param i32) (result i32)
    (local.set 0 (i32.const 0))
    (local.get 0))
  ;; -0.0 is not the initial value
  (func (export "neg-zero-f32") (result i32)
    (local f32)
    (local.set 0 (f32.const -0))
    (i32.reinterpret_f32 (local.get 0)))
  (func (export "neg-zero-f64") (result i64)
    (local f64)
    (local.set 0 (f64.const -0))
    (i64.reinterpret_f64 (local.get 0)))
  (func (export "zero-i64-f64") (result i64)
    (local i64 f64)
    (local.set 0 (i64.const 0))
    (local.set 1 (f64.const 0))
    (i64.add (local.get 0) (i64.reinterpret_f64 (local.get 1))))
  ;; a loop header is a label: a set inside the loop stays
  (func (export "loop") (param i32) (result i32)
    (local i32 i32)
    (loop
      (local.set 2 (i32.add (local.get 2) (local.get 1)))
      (local.set 1 (i32.const 0))
      (local.set 1 (i32.add (local.get 1) (i32.const 5)))
      (br_if 0 (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))
    (local.get 2))
  ;; written in one arm of an if, zeroed after its end
  (func (export "if") (param i32) (result i32)
    (local i32)
    (if (local.get 0) (then (local.set 1 (i32.const 9))))
    (local.set 1 (i32.const 0))
    (local.get 1))
  ;; written in the then arm, zeroed later in the same arm
  (func (export "then") (param i32) (result i32)
    (local i32)
    (if (local.get 0)
      (then (local.set 1 (i32.const 9)) (local.set 1 (i32.const 0)))
      (else (local.set 1 (i32.const 0))))
    (local.get 1))
  ;; a local beyond the first 64 (not tracked)
  (func (export "far") (result i32)
    (local i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64
           i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64
           i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64
           i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i64 i32)
    (local.set 64 (i32.const 3))
    (local.set 64 (i32.const 0))
    (local.get 64))
)
(assert_return (invoke "fib" (i32.const 0)) (i32.const 0))
(assert_return (invoke "fib" (i32.const 1)) (i32.const 1))
(assert_return (invoke "fib" (i32.const 10)) (i32.const 55))
(assert_return (invoke "fib" (i32.const 20)) (i32.const 6765))
(assert_return (invoke "rewrite" (i32.const 7)) (i32.const 0))
(assert_return (invoke "rewrite-tee" (i32.const 7)) (i32.const 0))
(assert_return (invoke "param" (i32.const 7)) (i32.const 0))
(assert_return (invoke "neg-zero-f32") (i32.const 0x80000000))
(assert_return (invoke "neg-zero-f64") (i64.const 0x8000000000000000))
(assert_return (invoke "zero-i64-f64") (i64.const 0))
(assert_return (invoke "loop" (i32.const 3)) (i32.const 10))
(assert_return (invoke "if" (i32.const 1)) (i32.const 0))
(assert_return (invoke "if" (i32.const 0)) (i32.const 0))
(assert_return (invoke "then" (i32.const 1)) (i32.const 0))
(assert_return (invoke "then" (i32.const 0)) (i32.const 0))
(assert_return (invoke "far") (i32.const 0))
