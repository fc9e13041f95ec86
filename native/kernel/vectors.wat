;; Distance kernels of the serving index (src/serving/kernel.ts), in WebAssembly SIMD over the
;; index's shared memory. Addresses are byte offsets; n is the number of floats, a multiple of 4
;; (vectors are stored padded with zeros to it, which adds nothing to either distance).
(module
  (import "env" "memory" (memory 1 65536 shared))

  ;; Squared L2 distance of the n floats at a and at b: four lanes, 16 floats a turn while they last.
  (func $l2sq (export "l2sq") (param $a i32) (param $b i32) (param $n i32) (result f32)
    (local $s0 v128) (local $s1 v128) (local $d v128) (local $end i32) (local $end16 i32)
    (local.set $end (i32.add (local.get $a) (i32.shl (local.get $n) (i32.const 2))))
    (local.set $end16 (i32.add (local.get $a) (i32.shl (i32.and (local.get $n) (i32.const -16)) (i32.const 2))))
    (block $done16
      (loop $by16
        (br_if $done16 (i32.ge_u (local.get $a) (local.get $end16)))
        (local.set $d (f32x4.sub (v128.load (local.get $a)) (v128.load (local.get $b))))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $d) (local.get $d))))
        (local.set $d (f32x4.sub (v128.load offset=16 (local.get $a)) (v128.load offset=16 (local.get $b))))
        (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (local.get $d) (local.get $d))))
        (local.set $d (f32x4.sub (v128.load offset=32 (local.get $a)) (v128.load offset=32 (local.get $b))))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $d) (local.get $d))))
        (local.set $d (f32x4.sub (v128.load offset=48 (local.get $a)) (v128.load offset=48 (local.get $b))))
        (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (local.get $d) (local.get $d))))
        (local.set $a (i32.add (local.get $a) (i32.const 64)))
        (local.set $b (i32.add (local.get $b) (i32.const 64)))
        (br $by16)))
    (block $done4
      (loop $by4
        (br_if $done4 (i32.ge_u (local.get $a) (local.get $end)))
        (local.set $d (f32x4.sub (v128.load (local.get $a)) (v128.load (local.get $b))))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $d) (local.get $d))))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (br $by4)))
    (local.set $s0 (f32x4.add (local.get $s0) (local.get $s1)))
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $s0)) (f32x4.extract_lane 1 (local.get $s0)))
      (f32.add (f32x4.extract_lane 2 (local.get $s0)) (f32x4.extract_lane 3 (local.get $s0)))))

  ;; Dot product of the n floats at a and at b.
  (func $dot (export "dot") (param $a i32) (param $b i32) (param $n i32) (result f32)
    (local $s0 v128) (local $s1 v128) (local $end i32) (local $end16 i32)
    (local.set $end (i32.add (local.get $a) (i32.shl (local.get $n) (i32.const 2))))
    (local.set $end16 (i32.add (local.get $a) (i32.shl (i32.and (local.get $n) (i32.const -16)) (i32.const 2))))
    (block $done16
      (loop $by16
        (br_if $done16 (i32.ge_u (local.get $a) (local.get $end16)))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (v128.load (local.get $a)) (v128.load (local.get $b)))))
        (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (v128.load offset=16 (local.get $a)) (v128.load offset=16 (local.get $b)))))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (v128.load offset=32 (local.get $a)) (v128.load offset=32 (local.get $b)))))
        (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (v128.load offset=48 (local.get $a)) (v128.load offset=48 (local.get $b)))))
        (local.set $a (i32.add (local.get $a) (i32.const 64)))
        (local.set $b (i32.add (local.get $b) (i32.const 64)))
        (br $by16)))
    (block $done4
      (loop $by4
        (br_if $done4 (i32.ge_u (local.get $a) (local.get $end)))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (v128.load (local.get $a)) (v128.load (local.get $b)))))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (br $by4)))
    (local.set $s0 (f32x4.add (local.get $s0) (local.get $s1)))
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $s0)) (f32x4.extract_lane 1 (local.get $s0)))
      (f32.add (f32x4.extract_lane 2 (local.get $s0)) (f32x4.extract_lane 3 (local.get $s0)))))

  ;; From the query at q to `count` vectors whose byte addresses are the i32s at addrs: squared L2
  ;; distances (dots = 0) or dot products (dots = 1), as f32s at out.
  (func (export "many") (param $q i32) (param $addrs i32) (param $count i32) (param $out i32) (param $n i32) (param $dots i32)
    (local $end i32)
    (local.set $end (i32.add (local.get $addrs) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $addrs) (local.get $end)))
        (f32.store (local.get $out)
          (if (result f32) (local.get $dots)
            (then (call $dot (local.get $q) (i32.load (local.get $addrs)) (local.get $n)))
            (else (call $l2sq (local.get $q) (i32.load (local.get $addrs)) (local.get $n)))))
        (local.set $addrs (i32.add (local.get $addrs) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $each))))
)
