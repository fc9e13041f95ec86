;; An example WebAssembly UDF for Quiver's ABI (README, "Virtual columns"): one int64 input column,
;; output x * 2 + 1 as int64, nulls where the input is null. Built to a module with wabt
;; (`npm run build:wasm`, or by the tests); nothing binary is committed.
(module
  (import "env" "memory" (memory 1))
  ;; "l" (int64) and "" (the field name), for the output's ArrowSchema.
  (data (i32.const 16) "l\00\00")
  (global $next (mut i32) (i32.const 64))

  ;; A bump allocator: 8-aligned, growing the memory as needed; a fresh instance runs each batch.
  (func $alloc (export "alloc") (param $size i32) (result i32)
    (local $p i32) (local $end i32) (local $have i32)
    (local.set $p (i32.and (i32.add (global.get $next) (i32.const 7)) (i32.const -8)))
    (local.set $end (i32.add (local.get $p) (local.get $size)))
    (local.set $have (i32.mul (memory.size) (i32.const 65536)))
    (if (i32.gt_u (local.get $end) (local.get $have))
      (then
        (if (i32.eq
              (memory.grow (i32.add (i32.div_u (i32.sub (local.get $end) (local.get $have)) (i32.const 65536)) (i32.const 1)))
              (i32.const -1))
          (then unreachable))))
    (global.set $next (local.get $end))
    (local.get $p))

  (func (export "apply") (param $inputs i32) (param $n_inputs i32) (param $rows i32) (result i32)
    (local $in i32) (local $offset i32) (local $src i32) (local $dst i32) (local $i i32)
    (local $buffers i32) (local $array i32) (local $schema i32) (local $pair i32)
    ;; Input 0: its ArrowArray, its offset and its values buffer (buffers[1]).
    (local.set $in (i32.load (local.get $inputs)))
    (local.set $offset (i32.wrap_i64 (i64.load offset=16 (local.get $in))))
    (local.set $src (i32.load offset=4 (i32.load offset=40 (local.get $in))))
    ;; Output values at the same offset, so the input's validity bitmap serves the output too.
    (local.set $dst (call $alloc (i32.mul (i32.add (local.get $offset) (local.get $rows)) (i32.const 8))))
    (local.set $i (local.get $offset))
    (block $done
      (loop $row
        (br_if $done (i32.ge_u (local.get $i) (i32.add (local.get $offset) (local.get $rows))))
        (i64.store
          (i32.add (local.get $dst) (i32.shl (local.get $i) (i32.const 3)))
          (i64.add
            (i64.mul (i64.load (i32.add (local.get $src) (i32.shl (local.get $i) (i32.const 3)))) (i64.const 2))
            (i64.const 1)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $row)))
    (local.set $buffers (call $alloc (i32.const 8)))
    (i32.store (local.get $buffers) (i32.load (i32.load offset=40 (local.get $in))))
    (i32.store offset=4 (local.get $buffers) (local.get $dst))
    ;; The output ArrowArray: length, null_count and offset of the input, two buffers, no children.
    (local.set $array (call $alloc (i32.const 64)))
    (i64.store (local.get $array) (i64.extend_i32_u (local.get $rows)))
    (i64.store offset=8 (local.get $array) (i64.load offset=8 (local.get $in)))
    (i64.store offset=16 (local.get $array) (i64.extend_i32_u (local.get $offset)))
    (i64.store offset=24 (local.get $array) (i64.const 2))
    (i32.store offset=40 (local.get $array) (local.get $buffers))
    ;; The output ArrowSchema: format "l", empty name, nullable.
    (local.set $schema (call $alloc (i32.const 48)))
    (i32.store (local.get $schema) (i32.const 16))
    (i32.store offset=4 (local.get $schema) (i32.const 18))
    (i64.store offset=16 (local.get $schema) (i64.const 2))
    (local.set $pair (call $alloc (i32.const 8)))
    (i32.store (local.get $pair) (local.get $array))
    (i32.store offset=4 (local.get $pair) (local.get $schema))
    (local.get $pair)))
