//! Each primitive on the host target, alone: a small function calls it, LLVM compiles the
//! module to an object file, the executor's loader links it into this process, and the results
//! are compared with plain Rust.

use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target as LlvmTarget, TargetMachine,
};
use inkwell::OptimizationLevel;
use tessera_storage::DataType;

use super::hash::{self, status, HashKind, HashTableLayout};
use super::load::{init_flags, load, load_sel};
use super::math;
use super::reduce::{combine, identity, ReduceOp};
use crate::emit::{Emitter, TileArray};
use crate::exec::jit::LoadedObject;
use crate::tile::{Target, TileShape};

const TILE: TileShape = TileShape {
    threads: 1,
    items_per_thread: 8,
};

/// Compiles `module` for this machine and links it in.
pub(super) fn link(module: &Module<'_>) -> LoadedObject {
    LlvmTarget::initialize_native(&InitializationConfig::default()).expect("native target");
    let triple = TargetMachine::get_default_triple();
    let machine = LlvmTarget::from_triple(&triple)
        .expect("host target")
        .create_target_machine(
            &triple,
            "generic",
            "",
            OptimizationLevel::Default,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .expect("target machine");
    module.set_triple(&triple);
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    module.verify().expect("valid IR");
    let object = machine
        .write_to_memory_buffer(module, FileType::Object)
        .expect("object file");
    LoadedObject::load(&[object.as_slice().to_vec()]).expect("links")
}

/// A function `name(ptr a, ptr b, ptr c, i64 n)` whose body `body` builds.
fn function<'ctx, 'm>(
    context: &'ctx Context,
    module: &'m Module<'ctx>,
    name: &str,
    body: impl FnOnce(&Emitter<'ctx, 'm>),
) {
    function_for_tile(context, module, name, TILE, body);
}

/// [`function`] for tiles of `tile`.
pub(super) fn function_for_tile<'ctx, 'm>(
    context: &'ctx Context,
    module: &'m Module<'ctx>,
    name: &str,
    tile: TileShape,
    body: impl FnOnce(&Emitter<'ctx, 'm>),
) {
    let ptr = context.ptr_type(inkwell::AddressSpace::default());
    let ty = context.void_type().fn_type(
        &[
            ptr.into(),
            ptr.into(),
            ptr.into(),
            context.i64_type().into(),
        ],
        false,
    );
    let em = Emitter::new_function(
        context,
        module,
        Target::Host,
        tile,
        name,
        ty,
        Linkage::External,
    )
    .expect("function");
    body(&em);
    em.b.build_return(None).expect("return");
}

pub(super) fn arg<'ctx>(em: &Emitter<'ctx, '_>, i: u32) -> inkwell::values::BasicValueEnum<'ctx> {
    em.function.get_nth_param(i).expect("parameter")
}

type Function4 = unsafe extern "C" fn(*mut u8, *mut u8, *mut u8, i64);

pub(super) fn call(object: &LoadedObject, name: &str, a: *mut u8, b: *mut u8, c: *mut u8, n: i64) {
    let address = object.symbol(name).expect("symbol");
    // SAFETY: every function here is built by `function` with exactly this signature, and the
    // pointers passed are valid for what it reads and writes.
    unsafe { std::mem::transmute::<usize, Function4>(address as usize)(a, b, c, n) }
}

/// Copies a tile array out to memory at `out`.
pub(super) fn store_tile<'ctx>(
    em: &Emitter<'ctx, '_>,
    array: TileArray<'ctx>,
    out: inkwell::values::PointerValue<'ctx>,
) {
    em.for_each_item(|item| {
        let value = em.get(array, item)?;
        let target = em.offset_ptr(array.elem, out, item.index)?;
        em.b.build_store(target, value)?;
        Ok(())
    })
    .expect("store");
}

#[test]
fn load_reads_full_and_last_tiles() {
    let context = Context::create();
    let module = context.create_module("load");
    function(&context, &module, "load_tile", |em| {
        let values = em.tile_array(em.i32().into(), "values").expect("array");
        let column = arg(em, 0).into_pointer_value();
        let start = arg(em, 3).into_int_value();
        // The number of rows left from `start`, capped at the tile, as kernels compute it.
        let rows = em.const_i64(11);
        let left = em.b.build_int_sub(rows, start, "").expect("sub");
        let full = em.const_i64(8);
        let fewer =
            em.b.build_int_compare(inkwell::IntPredicate::SLT, left, full, "")
                .expect("cmp");
        let count =
            em.b.build_select(fewer, left, full, "")
                .expect("select")
                .into_int_value();
        let count = em.b.build_int_truncate(count, em.i32(), "").expect("trunc");
        load(em, column, start, count, values).expect("load");
        store_tile(em, values, arg(em, 1).into_pointer_value());
    });
    let object = link(&module);
    let mut column: Vec<i32> = (0..11).map(|i| i * 10 + 1).collect();
    let mut out = vec![-1i32; 8];
    call(
        &object,
        "load_tile",
        column.as_mut_ptr().cast(),
        out.as_mut_ptr().cast(),
        std::ptr::null_mut(),
        0,
    );
    assert_eq!(out, (0..8).map(|i| i * 10 + 1).collect::<Vec<_>>());
    call(
        &object,
        "load_tile",
        column.as_mut_ptr().cast(),
        out.as_mut_ptr().cast(),
        std::ptr::null_mut(),
        8,
    );
    // Rows 8..11, then zeros past the table's end.
    assert_eq!(out, vec![81, 91, 101, 0, 0, 0, 0, 0]);
}

#[test]
fn load_sel_reads_selected_items_and_zeroes_the_rest() {
    let context = Context::create();
    let module = context.create_module("load_sel");
    function(&context, &module, "load_selected", |em| {
        let flags = em.tile_array(em.i8().into(), "flags").expect("array");
        let flag_bytes = arg(em, 1).into_pointer_value();
        em.for_each_item(|item| {
            let value = em.b.build_load(
                em.i8(),
                em.offset_ptr(em.i8().into(), flag_bytes, item.index)?,
                "",
            )?;
            em.set(flags, item, value)
        })
        .expect("flags");
        let values = em
            .tile_array(em.ctx.f64_type().into(), "values")
            .expect("array");
        load_sel(
            em,
            arg(em, 0).into_pointer_value(),
            em.const_i64(0),
            flags,
            values,
        )
        .expect("load_sel");
        store_tile(em, values, arg(em, 2).into_pointer_value());
    });
    let object = link(&module);
    let mut column: Vec<f64> = (0..8).map(|i| f64::from(i) + 0.5).collect();
    let mut flags: Vec<u8> = vec![1, 0, 0, 1, 1, 0, 0, 1];
    let mut out = vec![-1.0f64; 8];
    call(
        &object,
        "load_selected",
        column.as_mut_ptr().cast(),
        flags.as_mut_ptr(),
        out.as_mut_ptr().cast(),
        0,
    );
    assert_eq!(out, vec![0.5, 0.0, 0.0, 3.5, 4.5, 0.0, 0.0, 7.5]);
}

#[test]
fn init_flags_marks_the_rows_of_the_tile() {
    let context = Context::create();
    let module = context.create_module("flags");
    function(&context, &module, "flags", |em| {
        let flags = em.tile_array(em.i8().into(), "flags").expect("array");
        let count =
            em.b.build_int_truncate(arg(em, 3).into_int_value(), em.i32(), "")
                .expect("trunc");
        init_flags(em, count, flags).expect("init_flags");
        store_tile(em, flags, arg(em, 0).into_pointer_value());
    });
    let object = link(&module);
    for rows in [0i64, 3, 8] {
        let mut out = vec![7u8; 8];
        call(
            &object,
            "flags",
            out.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            rows,
        );
        let expected: Vec<u8> = (0..8).map(|i| u8::from(i < rows)).collect();
        assert_eq!(out, expected, "{rows} rows");
    }
}

#[test]
fn tile_offsets_say_where_each_items_run_begins() {
    let context = Context::create();
    let module = context.create_module("offsets");
    function(&context, &module, "offsets", |em| {
        let counts = em.tile_array(em.i32().into(), "counts").expect("array");
        let offsets = em.tile_array(em.i64().into(), "offsets").expect("array");
        let input = arg(em, 0).into_pointer_value();
        em.for_each_item(|item| {
            let at = em.offset_ptr(em.i32().into(), input, item.index)?;
            em.set(counts, item, em.b.build_load(em.i32(), at, "")?)
        })
        .expect("read counts");
        let total = super::scan::tile_offsets(em, counts, offsets).expect("offsets");
        store_tile(em, offsets, arg(em, 1).into_pointer_value());
        em.b.build_store(arg(em, 2).into_pointer_value(), total)
            .expect("store total");
    });
    let object = link(&module);
    // Counts past 2^31 together: the offsets are 64-bit.
    let counts: [i32; 8] = [3, 0, 0, 1, i32::MAX, 0, i32::MAX, 2];
    let mut offsets = [-1i64; 8];
    let mut total = -1i64;
    call(
        &object,
        "offsets",
        counts.as_ptr() as *mut u8,
        offsets.as_mut_ptr().cast(),
        (&mut total as *mut i64).cast(),
        8,
    );
    let mut expected = [0i64; 8];
    let mut running = 0i64;
    for (i, count) in counts.iter().enumerate() {
        expected[i] = running;
        running += i64::from(*count);
    }
    assert_eq!(offsets, expected);
    assert_eq!(total, running);
}

#[test]
fn reductions_fold_with_their_identity() {
    // On the host a block is one thread, so a block reduction is the thread's own fold;
    // `combine` and `identity` are what every reduction is made of, on both targets.
    let context = Context::create();
    let module = context.create_module("reduce");
    for (name, op) in [
        ("sum", ReduceOp::Add),
        ("least", ReduceOp::Min),
        ("most", ReduceOp::Max),
    ] {
        function(&context, &module, name, |em| {
            let i64t = em.i64();
            let f64t = em.ctx.f64_type();
            let acc_i = em.alloca(i64t.into(), "i").expect("alloca");
            let acc_f = em.alloca(f64t.into(), "f").expect("alloca");
            em.b.build_store(acc_i, identity(op, i64t.into()).expect("identity"))
                .expect("store");
            em.b.build_store(acc_f, identity(op, f64t.into()).expect("identity"))
                .expect("store");
            let ints = arg(em, 0).into_pointer_value();
            let floats = arg(em, 1).into_pointer_value();
            em.for_each_item(|item| {
                let wide = em.b.build_int_z_extend(item.index, i64t, "")?;
                let x =
                    em.b.build_load(i64t, em.offset_ptr(i64t.into(), ints, wide)?, "")?;
                let y =
                    em.b.build_load(f64t, em.offset_ptr(f64t.into(), floats, wide)?, "")?;
                let a = em.b.build_load(i64t, acc_i, "")?;
                em.b.build_store(acc_i, combine(em, op, a, x)?)?;
                let b = em.b.build_load(f64t, acc_f, "")?;
                em.b.build_store(acc_f, combine(em, op, b, y)?)?;
                Ok(())
            })
            .expect("fold");
            let out = arg(em, 2).into_pointer_value();
            let i = em.b.build_load(i64t, acc_i, "").expect("load");
            em.b.build_store(out, i).expect("store");
            let f = em.b.build_load(f64t, acc_f, "").expect("load");
            let second = em
                .offset_ptr(i64t.into(), out, em.const_i64(1))
                .expect("ptr");
            em.b.build_store(second, f).expect("store");
        });
    }
    let object = link(&module);
    let mut ints: Vec<i64> = vec![5, -3, 12, 0, 7, i64::from(i32::MAX) + 9, -40, 2];
    let mut floats: Vec<f64> = vec![0.5, -2.25, 8.0, 1e-3, -1e6, 3.0, 7.5, 2.0];
    for (name, expected_i, expected_f) in [
        ("sum", ints.iter().sum::<i64>(), floats.iter().sum::<f64>()),
        ("least", -40, -1e6),
        ("most", i64::from(i32::MAX) + 9, 8.0),
    ] {
        let mut out = [0u64; 2];
        call(
            &object,
            name,
            ints.as_mut_ptr().cast(),
            floats.as_mut_ptr().cast(),
            out.as_mut_ptr().cast(),
            0,
        );
        assert_eq!(out[0] as i64, expected_i, "{name}");
        assert_eq!(f64::from_bits(out[1]), expected_f, "{name}");
    }
}

/// Inserts `keys` into a table of `layout` (payload: the key times ten), then looks up `probes`;
/// returns each probe's payload (or -1 when absent) and the status words. A set of keys has no
/// payload: a probe that finds its key returns the key times ten all the same.
fn build_and_probe(
    layout: &HashTableLayout,
    keys: &[i32],
    probes: &[i32],
    branch_free: bool,
) -> (Vec<i32>, Vec<u32>) {
    let context = Context::create();
    let module = context.create_module("hash");
    let layout_for_build = layout.clone();
    function(&context, &module, "build", |em| {
        let table = arg(em, 0).into_pointer_value();
        let keys_ptr = arg(em, 1).into_pointer_value();
        let status_ptr = arg(em, 2).into_pointer_value();
        let n = arg(em, 3).into_int_value();
        em.for_each_strided(n, |i| {
            let key =
                em.b.build_load(em.i32(), em.offset_ptr(em.i32().into(), keys_ptr, i)?, "")?
                    .into_int_value();
            let slot = hash::insert(em, &layout_for_build, table, key, status_ptr)?;
            if layout_for_build.is_key_set() {
                return Ok(());
            }
            let inserted = em.b.build_is_not_null(slot, "")?;
            em.if_then(inserted, || {
                let (field, _) = hash::payload_ptr(em, &layout_for_build, slot, 0)?;
                let payload = em.b.build_int_mul(key, em.const_i32(10), "")?;
                em.b.build_store(field, payload)?;
                Ok(())
            })
        })
        .expect("build");
    });
    let layout_for_probe = layout.clone();
    function(&context, &module, "probe", |em| {
        let table = arg(em, 0).into_pointer_value();
        let probes_ptr = arg(em, 1).into_pointer_value();
        let out = arg(em, 2).into_pointer_value();
        let n = arg(em, 3).into_int_value();
        em.for_each_strided(n, |i| {
            let key =
                em.b.build_load(em.i32(), em.offset_ptr(em.i32().into(), probes_ptr, i)?, "")?
                    .into_int_value();
            let target = em.offset_ptr(em.i32().into(), out, i)?;
            if layout_for_probe.is_key_set() {
                let present = if branch_free {
                    hash::set_contains(em, &layout_for_probe, table, key)?
                } else {
                    let word = hash::find(em, &layout_for_probe, table, key)?;
                    em.b.build_is_not_null(word, "")?
                };
                let found = em.b.build_int_mul(key, em.const_i32(10), "")?;
                let value = em.b.build_select(present, found, em.const_i32(-1), "")?;
                em.b.build_store(target, value)?;
            } else if branch_free {
                let (slot, inside) = hash::probe_perfect(em, &layout_for_probe, table, key)?;
                let (present, fields) = hash::read_slot(em, &layout_for_probe, slot)?;
                let hit = em.b.build_and(inside, present, "")?;
                let value =
                    em.b.build_select(hit, fields[0], em.const_i32(-1).into(), "")?;
                em.b.build_store(target, value)?;
            } else {
                let slot = hash::find(em, &layout_for_probe, table, key)?;
                em.b.build_store(target, em.const_i32(-1))?;
                let hit = em.b.build_is_not_null(slot, "")?;
                em.if_then(hit, || {
                    let (field, ty) = hash::payload_ptr(em, &layout_for_probe, slot, 0)?;
                    let value = em.b.build_load(ty, field, "")?;
                    em.b.build_store(target, value)?;
                    Ok(())
                })?;
            }
            Ok(())
        })
        .expect("probe");
    });
    let object = link(&module);
    let mut table = vec![0u64; (layout.bytes() as usize).div_ceil(8)];
    let mut keys = keys.to_vec();
    let mut status = vec![0u32; status::WORDS as usize];
    call(
        &object,
        "build",
        table.as_mut_ptr().cast(),
        keys.as_mut_ptr().cast(),
        status.as_mut_ptr().cast(),
        keys.len() as i64,
    );
    let mut probes = probes.to_vec();
    let mut out = vec![0i32; probes.len()];
    call(
        &object,
        "probe",
        table.as_mut_ptr().cast(),
        probes.as_mut_ptr().cast(),
        out.as_mut_ptr().cast(),
        probes.len() as i64,
    );
    (out, status)
}

#[test]
fn perfect_tables_find_what_was_built() {
    let layout = HashTableLayout::new(
        HashKind::Perfect {
            min: 100,
            slots: 50,
        },
        DataType::I32,
        &[DataType::I32],
    );
    let keys = [100, 105, 149, 120];
    let probes = [100, 101, 105, 149, 150, 99, -7, 120];
    let expected = vec![1000, -1, 1050, 1490, -1, -1, -1, 1200];
    for branch_free in [false, true] {
        let (found, status) = build_and_probe(&layout, &keys, &probes, branch_free);
        assert_eq!(found, expected, "branch free: {branch_free}");
        assert!(status.iter().all(|&w| w == 0));
    }
}

#[test]
fn perfect_tables_report_duplicates_and_keys_out_of_range() {
    let layout = HashTableLayout::new(
        HashKind::Perfect { min: 0, slots: 10 },
        DataType::I32,
        &[DataType::I32],
    );
    let (_, status) = build_and_probe(&layout, &[3, 3], &[], false);
    assert_eq!(status[status::DUPLICATE_KEY as usize], 1);
    let (_, status) = build_and_probe(&layout, &[3, 10], &[], false);
    assert_eq!(status[status::KEY_OUT_OF_RANGE as usize], 1);
}

#[test]
fn sets_of_keys_find_what_was_built_across_words() {
    // 70 keys: two whole words of bits and part of a third.
    let layout = HashTableLayout::new(
        HashKind::Perfect {
            min: -10,
            slots: 70,
        },
        DataType::I32,
        &[],
    );
    assert!(layout.is_key_set());
    assert_eq!(layout.bytes(), 12);
    let keys = [-10, 21, 22, 53, 59, 0];
    let probes = [
        -10,
        -11,
        21,
        23,
        22,
        53,
        54,
        59,
        60,
        0,
        1,
        i32::MIN,
        i32::MAX,
    ];
    let expected: Vec<i32> = probes
        .iter()
        .map(|p| if keys.contains(p) { p * 10 } else { -1 })
        .collect();
    for branch_free in [false, true] {
        let (found, status) = build_and_probe(&layout, &keys, &probes, branch_free);
        assert_eq!(found, expected, "branch free: {branch_free}");
        assert!(status.iter().all(|&w| w == 0));
    }
    let (_, status) = build_and_probe(&layout, &[22, 5, 22], &[], false);
    assert_eq!(status[status::DUPLICATE_KEY as usize], 1);
    let (_, status) = build_and_probe(&layout, &[3, 60], &[], false);
    assert_eq!(status[status::KEY_OUT_OF_RANGE as usize], 1);
    // Semi and anti joins share keys: a repeat is no error.
    let (found, status) = build_and_probe(&layout.sharing_keys(), &[7, 7], &[7, 8], true);
    assert_eq!(found, vec![70, -1]);
    assert!(status.iter().all(|&w| w == 0));
}

#[test]
fn open_tables_find_what_was_built_including_the_minimum_key() {
    let layout = HashTableLayout::new(
        HashKind::Open { capacity: 16 },
        DataType::I32,
        &[DataType::I32],
    );
    // Colliding keys, negative keys, zero, and i32::MIN (whose stored form is the empty slot).
    let keys = [0, 16, 32, -5, i32::MIN, 7_000_001];
    let probes = [0, 16, 32, 48, -5, i32::MIN, 7_000_001, 1];
    let (found, status) = build_and_probe(&layout, &keys, &probes, false);
    let expected: Vec<i32> = probes
        .iter()
        .map(|p| {
            if keys.contains(p) {
                p.wrapping_mul(10)
            } else {
                -1
            }
        })
        .collect();
    assert_eq!(found, expected);
    assert!(status.iter().all(|&w| w == 0));
    let (_, status) = build_and_probe(&layout, &[9, 9], &[], false);
    assert_eq!(status[status::DUPLICATE_KEY as usize], 1);
}

#[test]
fn exp_and_ln_are_accurate() {
    let context = Context::create();
    let module = context.create_module("math");
    for (name, exp) in [("exp", true), ("ln", false)] {
        function(&context, &module, name, |em| {
            let f64t = em.ctx.f64_type();
            let input = arg(em, 0).into_pointer_value();
            let output = arg(em, 1).into_pointer_value();
            em.for_each_strided(arg(em, 3).into_int_value(), |i| {
                let x =
                    em.b.build_load(f64t, em.offset_ptr(f64t.into(), input, i)?, "")?
                        .into_float_value();
                let y = if exp {
                    math::exp(em, x)?
                } else {
                    math::ln(em, x)?
                };
                em.b.build_store(em.offset_ptr(f64t.into(), output, i)?, y)?;
                Ok(())
            })
            .expect("loop");
        });
    }
    let object = link(&module);
    let mut inputs: Vec<f64> = (-700..=700).map(|i| f64::from(i) * 1.013).collect();
    inputs.extend([
        0.0,
        1e-300,
        5e-324,
        0.5,
        1.0,
        2.0,
        1e300,
        f64::INFINITY,
        -1.0,
        f64::NAN,
    ]);
    let mut out = vec![0.0f64; inputs.len()];
    for (name, reference) in [
        ("exp", f64::exp as fn(f64) -> f64),
        ("ln", f64::ln as fn(f64) -> f64),
    ] {
        call(
            &object,
            name,
            inputs.as_mut_ptr().cast(),
            out.as_mut_ptr().cast(),
            std::ptr::null_mut(),
            inputs.len() as i64,
        );
        for (x, y) in inputs.iter().zip(&out) {
            let expected = reference(*x);
            if expected.is_nan() {
                assert!(y.is_nan(), "{name}({x}) = {y}");
            } else if expected.is_infinite() || expected == 0.0 {
                assert_eq!(*y, expected, "{name}({x})");
            } else {
                let error = ((y - expected) / expected).abs();
                assert!(
                    error < 4e-16,
                    "{name}({x}) = {y}, expected {expected} (relative error {error:e})"
                );
            }
        }
    }
}

/// The parts of `layout` for each of `keys` (`i64`), through `partition::part_of` on the host.
fn parts_of(layout: &HashTableLayout, parts: u32, keys: &[i64]) -> Vec<i32> {
    let context = Context::create();
    let module = context.create_module("parts");
    function(&context, &module, "parts", |em| {
        let input = arg(em, 0).into_pointer_value();
        let output = arg(em, 1).into_pointer_value();
        em.for_range(
            em.const_i64(0),
            arg(em, 3).into_int_value(),
            em.const_i64(1),
            |i| {
                let key =
                    em.b.build_load(em.i64(), em.offset_ptr(em.i64().into(), input, i)?, "")?;
                let part = super::partition::part_of(em, layout, parts, key.into_int_value())?;
                em.b.build_store(em.offset_ptr(em.i32().into(), output, i)?, part)?;
                Ok(())
            },
        )
        .expect("loop");
    });
    let object = link(&module);
    let mut out = vec![-1i32; keys.len()];
    call(
        &object,
        "parts",
        keys.as_ptr() as *mut u8,
        out.as_mut_ptr().cast(),
        std::ptr::null_mut(),
        keys.len() as i64,
    );
    out
}

#[test]
fn parts_are_ranges_of_consecutive_slots() {
    // A perfect table of 1000 slots from 100 in 8 parts: slots 0-127 in part 0, 128-255 in 1,
    // ..., the last part short; keys outside the range fall in part 0 (they match nothing).
    let perfect = HashTableLayout::new(
        HashKind::Perfect {
            min: 100,
            slots: 1000,
        },
        DataType::I64,
        &[DataType::I32],
    );
    let keys: Vec<i64> = (100..1100).chain([99, 5000, -7]).collect();
    let parts = parts_of(&perfect, 8, &keys);
    for (key, part) in keys.iter().zip(&parts) {
        let expected = if (100..1100).contains(key) {
            ((key - 100) / 128) as i32
        } else {
            0
        };
        assert_eq!(*part, expected, "key {key}");
    }
    // An open table: a key's part is where its probe starts, the top bits of its home slot, so
    // every part holds keys and each key's part is below the count.
    let open = HashTableLayout::new(HashKind::Open { capacity: 1 << 12 }, DataType::I32, &[]);
    let keys: Vec<i64> = (0..4096).map(|k| k * 7919 - 9000).collect();
    let parts = parts_of(&open, 16, &keys);
    let mut seen = [0usize; 16];
    for part in &parts {
        assert!((0..16).contains(part), "part {part}");
        seen[*part as usize] += 1;
    }
    assert!(seen.iter().all(|n| *n > 100), "{seen:?}");
}

/// 128-bit sums, minima and maxima built from 64-bit atomics (`wide_atomics`) stay exact while
/// threads update one accumulator at once: carries between the words, and values whose words
/// each win or lose on their own.
#[test]
fn wide_atomic_updates_are_exact_under_contention() {
    use crate::wide_atomics::{self, MAX_IDENTITY_WORD, MIN_IDENTITY_WORD};
    let context = Context::create();
    let module = context.create_module("wide_atomics");
    for (name, op) in [
        ("wide_add", inkwell::AtomicRMWBinOp::Add),
        ("wide_min", inkwell::AtomicRMWBinOp::Min),
        ("wide_max", inkwell::AtomicRMWBinOp::Max),
    ] {
        // a: the accumulator; b: n values; each value is added in turn.
        function(&context, &module, name, |em| {
            let i128t = em.ctx.i128_type();
            let i64t = em.i64();
            let accumulator = arg(em, 0).into_pointer_value();
            let values = arg(em, 1).into_pointer_value();
            let count = arg(em, 3).into_int_value();
            let index = em.alloca(i64t.into(), "index").expect("alloca");
            em.b.build_store(index, i64t.const_zero()).expect("store");
            let head = em.ctx.append_basic_block(em.function, "head");
            let step = em.ctx.append_basic_block(em.function, "step");
            let done = em.ctx.append_basic_block(em.function, "done");
            em.b.build_unconditional_branch(head).expect("branch");
            em.b.position_at_end(head);
            let at =
                em.b.build_load(i64t, index, "")
                    .expect("load")
                    .into_int_value();
            let more =
                em.b.build_int_compare(inkwell::IntPredicate::SLT, at, count, "")
                    .expect("compare");
            em.b.build_conditional_branch(more, step, done)
                .expect("branch");
            em.b.position_at_end(step);
            let value =
                em.b.build_load(
                    i128t,
                    em.offset_ptr(i128t.into(), values, at).expect("ptr"),
                    "",
                )
                .expect("load")
                .into_int_value();
            wide_atomics::update(em, op, accumulator, value).expect("update");
            let next =
                em.b.build_int_add(at, i64t.const_int(1, false), "")
                    .expect("add");
            em.b.build_store(index, next).expect("store");
            em.b.build_unconditional_branch(head).expect("branch");
            em.b.position_at_end(done);
        });
    }
    let object = link(&module);
    // Values near both ends of 38 digits and across the low word's wrap, per thread.
    let threads = 8;
    let per_thread: Vec<Vec<i128>> = (0..threads)
        .map(|t| {
            (0..2000i128)
                .map(|i| {
                    let big = 10i128.pow(37) - i * 7_919 * (t + 1);
                    match i % 4 {
                        0 => big,
                        1 => -big,
                        2 => (u64::MAX as i128) - i,
                        _ => -(i * 1_000_003 + t),
                    }
                })
                .collect()
        })
        .collect();
    let all: Vec<i128> = per_thread.iter().flatten().copied().collect();
    for (name, start, expected) in [
        ("wide_add", 0, all.iter().sum::<i128>()),
        (
            "wide_min",
            wide_atomics::identity(MIN_IDENTITY_WORD),
            *all.iter().min().expect("values"),
        ),
        (
            "wide_max",
            wide_atomics::identity(MAX_IDENTITY_WORD),
            *all.iter().max().expect("values"),
        ),
    ] {
        let mut accumulator = [start];
        let target = accumulator.as_mut_ptr() as usize;
        // Looked up once: the JIT materializes a symbol at its first lookup.
        let address = object.symbol(name).expect("symbol") as usize;
        std::thread::scope(|scope| {
            for values in &per_thread {
                scope.spawn(move || {
                    let mut values = values.clone();
                    // SAFETY: `function` built this with the signature `Function4`; the
                    // accumulator outlives the scope, and each thread passes its own values.
                    unsafe {
                        std::mem::transmute::<usize, Function4>(address)(
                            target as *mut u8,
                            values.as_mut_ptr().cast(),
                            std::ptr::null_mut(),
                            values.len() as i64,
                        )
                    }
                });
            }
        });
        assert_eq!(accumulator[0], expected, "{name}");
    }
}
