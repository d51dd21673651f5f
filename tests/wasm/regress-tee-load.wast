;; Regression tests for a load whose base was just written by a tee
;; ('local.tee z; i32.const c; i32.add; load'): the tee becomes a set and the
;; load reads through z (OP_LOAD_LI), fusing on into OP_FLOAD2. Expected
;; values checked with wabt's spectest-interp.
(module
  (memory 1)
  (data (i32.const 0) "\01\02\03\04\05\06\07\08\f0\ff\ff\ff\00\00\00\00")
  (data (i32.const 16) "\00\00\00\00\00\00\08\40\00\00\00\00\00\00\00\40")  ;; f64 3.0, 2.0
  ;; a plain local.tee; the local keeps the base
  (func (export "tee-load") (param i32) (result i32)
    (local i32)
    (i32.load (i32.add (local.tee 1 (i32.mul (local.get 0) (i32.const 1))) (i32.const 4)))
    (local.get 1)
    (i32.add))
  (func (export "tee-load8-s") (param i32) (result i32)
    (local i32)
    (i32.load8_s offset=1 (i32.add (local.tee 1 (i32.mul (local.get 0) (i32.const 1))) (i32.const 7))))
  ;; a fused tee (LL and LI forms of i32.add), as clang emits for matmul
  (func (export "tee-ll-load") (param i32 i32) (result i32)
    (local i32)
    (i32.load (i32.add (local.tee 2 (i32.add (local.get 0) (local.get 1))) (i32.const 2)))
    (local.get 2)
    (i32.add))
  (func (export "tee-li-load") (param i32) (result i64)
    (local i32)
    (i64.load32_s (i32.add (local.tee 1 (i32.add (local.get 0) (i32.const 4))) (i32.const 4)))
    (i64.extend_i32_u (local.get 1))
    (i64.add))
  ;; both operands of f64.mul loaded, the first through the tee'd base
  (func (export "tee-fload2") (param i32 i32) (result f64)
    (local i32)
    (f64.mul
      (f64.load (i32.add (local.tee 2 (i32.add (local.get 0) (local.get 1))) (i32.const 8)))
      (f64.load (i32.add (local.get 2) (i32.const 16))))
    (f64.convert_i32_u (local.get 2))
    (f64.add))
  ;; the sum wraps at 32 bits, then the offset is added without wrapping
  (func (export "tee-wrap") (param i32) (result i32)
    (local i32)
    (i32.load offset=4 (i32.add (local.tee 1 (i32.add (local.get 0) (i32.const 0))) (i32.const -4))))
  ;; the local written before the load traps stays written
  (func (export "tee-oob") (param i32) (result i32)
    (local i32)
    (block
      (drop (i32.load (i32.add (local.tee 1 (i32.add (local.get 0) (i32.const 0))) (i32.const 65536)))))
    (local.get 1))
  (global $g (mut i32) (i32.const 0))
  (func (export "tee-oob-set") (param i32)
    (local i32)
    (global.set $g (i32.load (i32.add (local.tee 1 (i32.add (local.get 0) (i32.const 0))) (i32.const 65536)))))
)
(assert_return (invoke "tee-load" (i32.const 0)) (i32.const 0x08070605))
(assert_return (invoke "tee-load" (i32.const 2)) (i32.const 0xfff00809))
(assert_return (invoke "tee-load8-s" (i32.const 0)) (i32.const -16))
(assert_return (invoke "tee-load8-s" (i32.const 1)) (i32.const -1))
(assert_return (invoke "tee-ll-load" (i32.const 1) (i32.const 1)) (i32.const 0x08070607))
(assert_return (invoke "tee-li-load" (i32.const 0)) (i64.const -12))
(assert_return (invoke "tee-li-load" (i32.const -4)) (i64.const 0x0000000008070605))
(assert_return (invoke "tee-fload2" (i32.const 4) (i32.const 4)) (f64.const 14))
(assert_trap (invoke "tee-wrap" (i32.const 0)) "out of bounds memory access")
(assert_return (invoke "tee-wrap" (i32.const 4)) (i32.const 0x08070605))
(assert_return (invoke "tee-wrap" (i32.const 8)) (i32.const 0xfffffff0))
(assert_trap (invoke "tee-oob" (i32.const 1)) "out of bounds memory access")
(assert_return (invoke "tee-oob" (i32.const -65536)) (i32.const -65536))
(assert_trap (invoke "tee-oob-set" (i32.const 0)) "out of bounds memory access")
