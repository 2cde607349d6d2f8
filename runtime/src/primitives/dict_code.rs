//! `dict_code`: a value's code in a `dict` column, by binary search of its ascending
//! dictionary. A join whose probe key is such a column builds its table over codes rather than
//! values: the probe then reads the key's codes and skips the dictionary, and the table has a
//! slot per dictionary entry however spread the values are (SSB's dates: 2,406 slots instead of
//! 69,130 from 19920101 to 19981230).

use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::emit::{basic, CodegenResult, Emitter};

use super::load::{param_int, param_ptr};
use super::primitive;
use super::unpack::load_i32;

/// The code of `value` (an `i32`) in `dictionary`, a column's `entries` distinct values in
/// ascending order, and whether the dictionary holds it (when not, the code is meaningless).
/// The search is unrolled for `entries`: `ceil(log2(entries))` loads and selects, no branch.
pub fn dict_code<'ctx>(
    em: &Emitter<'ctx, '_>,
    dictionary: PointerValue<'ctx>,
    entries: u32,
    value: IntValue<'ctx>,
) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
    let result_ty = em
        .ctx
        .struct_type(&[em.i32().into(), em.i1().into()], false);
    let ty = result_ty.fn_type(&[em.global_ptr().into(), em.i32().into()], false);
    let name = format!("tessera.dict_code.n{entries}");
    let f = primitive(em, &name, ty, |p| {
        let dictionary = param_ptr(p, 0)?;
        let value = param_int(p, 1)?;
        if entries == 0 {
            let none =
                result_ty.const_named_struct(&[p.const_i32(0).into(), p.i1().const_zero().into()]);
            p.b.build_return(Some(&none))?;
            return Ok(());
        }
        // `base` is the last entry not above `value` (or 0), within `left` entries from it.
        let mut base = p.const_i64(0);
        let mut left = entries;
        while left > 1 {
            let half = left / 2;
            let middle = p.b.build_int_add(base, p.const_i64(i64::from(half)), "")?;
            let entry = load_i32(p, dictionary, middle)?;
            let below = p.b.build_int_compare(IntPredicate::SLE, entry, value, "")?;
            base = p.b.build_select(below, middle, base, "")?.into_int_value();
            left -= half;
        }
        let entry = load_i32(p, dictionary, base)?;
        let found =
            p.b.build_int_compare(IntPredicate::EQ, entry, value, "found")?;
        let code = p.b.build_int_truncate(base, p.i32(), "code")?;
        let result = result_ty.get_undef();
        let result = p.b.build_insert_value(result, code, 0, "")?;
        let result = p.b.build_insert_value(result, found, 1, "")?;
        p.b.build_return(Some(&result))?;
        Ok(())
    })?;
    let call =
        em.b.build_call(f, &[dictionary.into(), value.into()], "dict_code")?;
    let pair = basic(call.try_as_basic_value().basic())?.into_struct_value();
    let code = em.b.build_extract_value(pair, 0, "code")?.into_int_value();
    let found = em.b.build_extract_value(pair, 1, "found")?.into_int_value();
    Ok((code, found))
}
