;; Regression tests for an I form fused with the i32 operator that takes its
;; result (OP_ICHAIN_S, OP_ICHAIN_L, OP_ICHAIN_I; pairs in WASM_I_CHAINS):
;; the I form's result is the right operand of a stack operator (form S) and
;; the left one of a local or constant operator (forms L and I). Expected
;; values checked with wabt's spectest-interp.
(module
  ;; form L, and then xor: (x & c) ^ y
  (func (export "and-xor-l") (param i32 i32) (result i32)
    (i32.xor (i32.and (i32.mul (local.get 0) (i32.const 1)) (i32.const 0xff00)) (local.get 1)))
  ;; form S, and then sub: y - (x & 1), y pushed first
  (func (export "and-sub-s") (param i32 i32) (result i32)
    (i32.mul (local.get 1) (i32.const 1))
    (i32.mul (local.get 0) (i32.const 1))
    (i32.const 1)
    (i32.and)
    (i32.sub))
  ;; form I, reverse subtraction then and: (0 - (x & 1)) & poly
  (func (export "rsub-and-i") (param i32) (result i32)
    (i32.and (i32.sub (i32.const 0) (i32.and (local.get 0) (i32.const 1))) (i32.const 0xedb88320)))
  ;; form S with rsub first: y & (5 - x)
  (func (export "rsub-and-s") (param i32 i32) (result i32)
    (i32.mul (local.get 1) (i32.const 1))
    (i32.const 5)
    (i32.mul (local.get 0) (i32.const 1))
    (i32.sub)
    (i32.and))
  ;; bit fields: (x >> s) & m, form I; (x >> s) ^ y, form L; shift counts
  ;; taken mod 32
  (func (export "shr-and-i") (param i32) (result i32)
    (i32.and (i32.shr_u (i32.mul (local.get 0) (i32.const 1)) (i32.const 36)) (i32.const 0xf0f)))
  (func (export "shr-xor-l") (param i32 i32) (result i32)
    (i32.xor (i32.shr_u (i32.mul (local.get 0) (i32.const 1)) (i32.const 7)) (local.get 1)))
  ;; form S, (x >> 1) xor'd into the value below
  (func (export "shr-xor-s") (param i32 i32) (result i32)
    (i32.mul (local.get 1) (i32.const 1))
    (i32.mul (local.get 0) (i32.const 1))
    (i32.const 1)
    (i32.shr_u)
    (i32.xor))
  ;; addressing and an LCG step, wrapping at 32 bits
  (func (export "shl-add-l") (param i32 i32) (result i32)
    (i32.add (i32.shl (i32.mul (local.get 0) (i32.const 1)) (i32.const 2)) (local.get 1)))
  (func (export "mul-add-i") (param i32) (result i32)
    (i32.add (i32.mul (i32.add (local.get 0) (i32.const 0)) (i32.const 1103515245)) (i32.const 12345)))
  (func (export "and-add-s") (param i32 i32) (result i32)
    (i32.mul (local.get 1) (i32.const 1))
    (i32.mul (local.get 0) (i32.const 1))
    (i32.const 0xff)
    (i32.and)
    (i32.add))
  ;; a chain, then the result into a local and a branch on it
  (func (export "chain-set-br") (param i32) (result i32)
    (local i32)
    (local.set 1 (i32.and (i32.shr_u (i32.mul (local.get 0) (i32.const 1)) (i32.const 4)) (i32.const 0xf)))
    (block
      (br_if 0 (i32.and (i32.shr_u (i32.mul (local.get 0) (i32.const 1)) (i32.const 8)) (i32.const 1)))
      (local.set 1 (i32.add (local.get 1) (i32.const 100))))
    (local.get 1))
  ;; a label between the two: no fusion across it
  (func (export "chain-label") (param i32) (result i32)
    (i32.and (i32.mul (local.get 0) (i32.const 1)) (i32.const 0xff))
    (block (result i32) (i32.const 1))
    (i32.sub))
  ;; the bitwise CRC-32 step as clang emits it, 8 steps per byte
  (func (export "crc-byte") (param i32) (result i32)
    (local i32 i32)
    (local.set 1 (i32.xor (local.get 0) (i32.const -1)))
    (local.set 2 (i32.const 8))
    (loop
      (i32.const 0)
      (local.set 1
        (i32.xor
          (i32.shr_u (local.get 1) (i32.const 1))
          (i32.and (i32.sub (i32.const 0) (i32.and (local.get 1) (i32.const 1)))
                   (i32.const 0xedb88320))))
      (drop)
      (local.set 2 (i32.sub (local.get 2) (i32.const 1)))
      (br_if 0 (local.get 2)))
    (i32.xor (local.get 1) (i32.const -1)))
)
(assert_return (invoke "and-xor-l" (i32.const 0x12345678) (i32.const 0xf0f0)) (i32.const 0xa6f0))
(assert_return (invoke "and-sub-s" (i32.const 3) (i32.const 10)) (i32.const 9))
(assert_return (invoke "and-sub-s" (i32.const 3) (i32.const 0)) (i32.const -1))
(assert_return (invoke "rsub-and-i" (i32.const 1)) (i32.const 0xedb88320))
(assert_return (invoke "rsub-and-i" (i32.const 2)) (i32.const 0))
(assert_return (invoke "rsub-and-s" (i32.const 7) (i32.const -1)) (i32.const -2))
(assert_return (invoke "rsub-and-s" (i32.const 1) (i32.const 6)) (i32.const 4))
(assert_return (invoke "shr-and-i" (i32.const 0xabcdef12)) (i32.const 0x0e01))
(assert_return (invoke "shr-xor-l" (i32.const 0x80000000) (i32.const 1)) (i32.const 0x01000001))
(assert_return (invoke "shr-xor-s" (i32.const 6) (i32.const 1)) (i32.const 2))
(assert_return (invoke "shl-add-l" (i32.const 0x40000001) (i32.const 8)) (i32.const 12))
(assert_return (invoke "mul-add-i" (i32.const 12345)) (i32.const 3554416254))
(assert_return (invoke "and-add-s" (i32.const 0x1ff) (i32.const -1)) (i32.const 0xfe))
(assert_return (invoke "chain-set-br" (i32.const 0x1f0)) (i32.const 15))
(assert_return (invoke "chain-set-br" (i32.const 0x2f0)) (i32.const 115))
(assert_return (invoke "chain-label" (i32.const 0x1ff)) (i32.const 0xfe))
(assert_return (invoke "crc-byte" (i32.const 0x31)) (i32.const 0x83dcefb7))
(assert_return (invoke "crc-byte" (i32.const 0)) (i32.const 0xd202ef8d))
