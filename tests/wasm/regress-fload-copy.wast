;; Regression tests for float operators fused with the load of their right
;; operand (OP_FLOAD_L, OP_FLOAD_LI) and for runs of local-to-local copies
;; (OP_COPY_N). Expected values checked with wabt's spectest-interp.
(module
  (memory 1)
  (data (i32.const 0) "\00\00\00\00\00\00\08\40")  ;; f64 3.0 at 0
  (data (i32.const 8) "\00\00\00\00\00\00\14\40")  ;; f64 5.0 at 8
  (data (i32.const 16) "\00\00\20\41")             ;; f32 10.0 at 16
  ;; f64.mul, the load through local + constant (FLOAD_LI)
  (func (export "mul-li") (param i32 f64) (result f64)
    (f64.mul (local.get 1) (f64.load (i32.add (local.get 0) (i32.const 8)))))
  ;; the sum local + constant wraps at 32 bits, then the offset is added
  ;; without wrapping (a 33-bit address)
  (func (export "add-li-wrap") (param i32 f64) (result f64)
    (f64.add (local.get 1) (f64.load offset=8 (i32.add (local.get 0) (i32.const -8)))))
  ;; operand order is kept for sub: left - loaded
  (func (export "sub-l") (param i32 f64) (result f64)
    (f64.sub (local.get 1) (f64.load (local.get 0))))
  ;; f32 with an offset (FLOAD_L)
  (func (export "f32-add-l") (param i32 f32) (result f32)
    (f32.add (local.get 1) (f32.load offset=16 (local.get 0))))
  (func (export "f32-sub-li") (param i32 f32) (result f32)
    (f32.sub (local.get 1) (f32.load (i32.add (local.get 0) (i32.const 16)))))
  ;; the left operand computed on the stack, then the fused load
  (func (export "dot2") (param i32) (result f64)
    (f64.add
      (f64.mul (f64.load (local.get 0)) (f64.load offset=8 (local.get 0)))
      (f64.mul (f64.load offset=8 (local.get 0)) (f64.load offset=8 (local.get 0)))))
  ;; a load out of bounds traps
  (func (export "mul-oob") (param i32) (result f64)
    (f64.mul (f64.const 1) (f64.load (local.get 0))))
  (func (export "mul-li-oob") (param i32) (result f64)
    (f64.mul (f64.const 1) (f64.load (i32.add (local.get 0) (i32.const 1)))))
  ;; copies run in order: rotation
  (func (export "rotate") (param i32 i32 i32) (result i32)
    (local i32)
    (local.set 3 (local.get 2))
    (local.set 2 (local.get 1))
    (local.set 1 (local.get 0))
    (local.set 0 (local.get 3))
    (i32.add (i32.add (i32.mul (local.get 0) (i32.const 100))
                      (i32.mul (local.get 1) (i32.const 10)))
             (local.get 2)))
  ;; a later copy reads what an earlier one wrote
  (func (export "chain") (param i32) (result i32)
    (local i32 i32 i32)
    (local.set 1 (local.get 0))
    (local.set 2 (local.get 1))
    (local.set 3 (local.get 2))
    (local.get 3))
  ;; two runs split by a label
  (func (export "split") (param i32 i32) (result i32)
    (local i32)
    (local.set 2 (local.get 0))
    (block (local.set 0 (local.get 1)))
    (local.set 1 (local.get 2))
    (i32.sub (local.get 0) (local.get 1)))
  ;; 64-bit values copied whole
  (func (export "copy64") (param i64) (result i64)
    (local i64 i64)
    (local.set 1 (local.get 0))
    (local.set 2 (local.get 1))
    (i64.add (local.get 2) (local.get 1)))
)
(assert_return (invoke "mul-li" (i32.const 0) (f64.const 2)) (f64.const 10))
(assert_return (invoke "add-li-wrap" (i32.const 8) (f64.const 1)) (f64.const 6))
(assert_trap (invoke "add-li-wrap" (i32.const 0) (f64.const 1)) "out of bounds memory access")
(assert_return (invoke "sub-l" (i32.const 0) (f64.const 1)) (f64.const -2))
(assert_return (invoke "sub-l" (i32.const 8) (f64.const 1)) (f64.const -4))
(assert_return (invoke "f32-add-l" (i32.const 0) (f32.const 0.5)) (f32.const 10.5))
(assert_return (invoke "f32-sub-li" (i32.const 0) (f32.const 0.5)) (f32.const -9.5))
(assert_return (invoke "dot2" (i32.const 0)) (f64.const 40))
(assert_trap (invoke "mul-oob" (i32.const 65529)) "out of bounds memory access")
(assert_return (invoke "mul-oob" (i32.const 65528)) (f64.const 0))
(assert_trap (invoke "mul-li-oob" (i32.const 65528)) "out of bounds memory access")
(assert_return (invoke "mul-li-oob" (i32.const -1)) (f64.const 3))
(assert_return (invoke "rotate" (i32.const 1) (i32.const 2) (i32.const 3)) (i32.const 312))
(assert_return (invoke "chain" (i32.const 42)) (i32.const 42))
(assert_return (invoke "split" (i32.const 7) (i32.const 3)) (i32.const -4))
(assert_return (invoke "copy64" (i64.const 0x100000001)) (i64.const 0x200000002))
