//! `exp` and `ln` in double precision, as IR. The NVPTX backend has no instructions for them in
//! double precision and Tessera links no device math library, so both targets use this code,
//! which also makes CPU and GPU results agree bit for bit. Accuracy is a few units in the last
//! place: Cody–Waite range reduction and Taylor/atanh series with enough terms for |error| below
//! 2e-16 on the reduced ranges.

use inkwell::values::{FloatValue, IntValue};
use inkwell::FloatPredicate;

use crate::emit::{basic, CodegenError, CodegenResult, Emitter};

use super::primitive;

const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
const LOG2_E: f64 = std::f64::consts::LOG2_E;
/// Adding and subtracting this rounds a double below 2^51 in magnitude to the nearest integer.
const ROUNDER: f64 = 6_755_399_441_055_744.0;

/// e^x.
pub fn exp<'ctx>(em: &Emitter<'ctx, '_>, x: FloatValue<'ctx>) -> CodegenResult<FloatValue<'ctx>> {
    call_unary(em, "tessera.exp.f64", x, |p, x| {
        let f64t = p.ctx.f64_type();
        let c = |v: f64| f64t.const_float(v);
        // Beyond these, e^x is infinite or zero in double precision; clamping keeps 2^n finite
        // in the reconstruction, and the special cases are patched in at the end.
        let clamped = min_max(p, x, -746.0, 710.0)?;
        let t = p.b.build_float_mul(clamped, c(LOG2_E), "")?;
        let n =
            p.b.build_float_sub(p.b.build_float_add(t, c(ROUNDER), "")?, c(ROUNDER), "n")?;
        let r =
            p.b.build_float_sub(clamped, p.b.build_float_mul(n, c(LN2_HI), "")?, "")?;
        let r =
            p.b.build_float_sub(r, p.b.build_float_mul(n, c(LN2_LO), "")?, "r")?;
        // e^r for |r| <= ln2/2 by Horner over 1/k!, k = 0..13.
        let mut poly = c(1.0 / factorial(13));
        for k in (0..13).rev() {
            poly =
                p.b.build_float_add(p.b.build_float_mul(poly, r, "")?, c(1.0 / factorial(k)), "")?;
        }
        // 2^n in two halves, so that n down to -1075 and up to 1024 both stay representable.
        let n_int = p.b.build_float_to_signed_int(n, p.i64(), "")?;
        let half = p.b.build_int_signed_div(n_int, p.const_i64(2), "")?;
        let rest = p.b.build_int_sub(n_int, half, "")?;
        let scaled = p.b.build_float_mul(poly, pow2(p, half)?, "")?;
        let result = p.b.build_float_mul(scaled, pow2(p, rest)?, "")?;
        let over =
            p.b.build_float_compare(FloatPredicate::OGT, x, c(709.782_712_893_384), "")?;
        let under =
            p.b.build_float_compare(FloatPredicate::OLT, x, c(-745.2), "")?;
        let result =
            p.b.build_select(over, c(f64::INFINITY), result, "")?
                .into_float_value();
        let result =
            p.b.build_select(under, c(0.0), result, "")?
                .into_float_value();
        // NaN stays NaN.
        let nan = p.b.build_float_compare(FloatPredicate::UNO, x, x, "")?;
        Ok(p.b.build_select(nan, x, result, "")?.into_float_value())
    })
}

/// The natural logarithm: NaN below zero, -inf at zero.
pub fn ln<'ctx>(em: &Emitter<'ctx, '_>, x: FloatValue<'ctx>) -> CodegenResult<FloatValue<'ctx>> {
    call_unary(em, "tessera.ln.f64", x, |p, x| {
        let f64t = p.ctx.f64_type();
        let i64t = p.i64();
        let c = |v: f64| f64t.const_float(v);
        // Subnormals: scale into the normal range first.
        let tiny =
            p.b.build_float_compare(FloatPredicate::OLT, x, c(f64::MIN_POSITIVE), "")?;
        let scaled = p.b.build_float_mul(x, c(18_014_398_509_481_984.0), "")?; // 2^54
        let v = p.b.build_select(tiny, scaled, x, "")?.into_float_value();
        let bias =
            p.b.build_select(tiny, p.const_i64(54), p.const_i64(0), "")?
                .into_int_value();
        let bits = p.b.build_bit_cast(v, i64t, "")?.into_int_value();
        let exponent_bits = p.b.build_right_shift(bits, p.const_i64(52), false, "")?;
        let exponent_bits = p.b.build_and(exponent_bits, p.const_i64(0x7ff), "")?;
        let exponent = p.b.build_int_sub(exponent_bits, p.const_i64(1023), "")?;
        let exponent = p.b.build_int_sub(exponent, bias, "e")?;
        let mantissa_bits =
            p.b.build_and(bits, p.const_i64(0x000f_ffff_ffff_ffff), "")?;
        let mantissa_bits =
            p.b.build_or(mantissa_bits, p.const_i64(0x3ff0_0000_0000_0000), "")?;
        let m =
            p.b.build_bit_cast(mantissa_bits, f64t, "")?
                .into_float_value();
        // Bring m into [sqrt(1/2), sqrt(2)) so the series converges fast.
        let big =
            p.b.build_float_compare(FloatPredicate::OGT, m, c(std::f64::consts::SQRT_2), "")?;
        let halved = p.b.build_float_mul(m, c(0.5), "")?;
        let m = p.b.build_select(big, halved, m, "")?.into_float_value();
        let bump = p.b.build_int_z_extend(big, i64t, "")?;
        let exponent = p.b.build_int_add(exponent, bump, "")?;
        // ln(m) = 2 atanh(f) = 2 (f + f^3/3 + f^5/5 + ...), f = (m-1)/(m+1), |f| <= 0.1716.
        let f = p.b.build_float_div(
            p.b.build_float_sub(m, c(1.0), "")?,
            p.b.build_float_add(m, c(1.0), "")?,
            "f",
        )?;
        let s = p.b.build_float_mul(f, f, "s")?;
        let mut series = c(1.0 / 25.0);
        for k in (0..12).rev() {
            series = p.b.build_float_add(
                p.b.build_float_mul(series, s, "")?,
                c(1.0 / f64::from(2 * k + 1)),
                "",
            )?;
        }
        let ln_m =
            p.b.build_float_mul(p.b.build_float_mul(c(2.0), f, "")?, series, "")?;
        let e = p.b.build_signed_int_to_float(exponent, f64t, "")?;
        let hi = p.b.build_float_mul(e, c(LN2_HI), "")?;
        let lo = p.b.build_float_mul(e, c(LN2_LO), "")?;
        let result =
            p.b.build_float_add(p.b.build_float_add(ln_m, lo, "")?, hi, "")?;
        // Special values: ln(0) = -inf, ln(negative) = NaN, ln(inf) = inf, ln(NaN) = NaN.
        let zero =
            p.b.build_float_compare(FloatPredicate::OEQ, x, c(0.0), "")?;
        let negative =
            p.b.build_float_compare(FloatPredicate::OLT, x, c(0.0), "")?;
        let infinite =
            p.b.build_float_compare(FloatPredicate::OEQ, x, c(f64::INFINITY), "")?;
        let nan = p.b.build_float_compare(FloatPredicate::UNO, x, x, "")?;
        let result =
            p.b.build_select(zero, c(f64::NEG_INFINITY), result, "")?
                .into_float_value();
        let result =
            p.b.build_select(negative, c(f64::NAN), result, "")?
                .into_float_value();
        let result =
            p.b.build_select(infinite, x, result, "")?
                .into_float_value();
        Ok(p.b.build_select(nan, x, result, "")?.into_float_value())
    })
}

fn call_unary<'ctx>(
    em: &Emitter<'ctx, '_>,
    name: &str,
    x: FloatValue<'ctx>,
    body: impl FnOnce(&Emitter<'ctx, '_>, FloatValue<'ctx>) -> CodegenResult<FloatValue<'ctx>>,
) -> CodegenResult<FloatValue<'ctx>> {
    let f64t = em.ctx.f64_type();
    let f = primitive(em, name, f64t.fn_type(&[f64t.into()], false), |p| {
        let x = p
            .function
            .get_nth_param(0)
            .ok_or_else(|| CodegenError::Invalid(format!("{name} takes a value")))?
            .into_float_value();
        let result = body(p, x)?;
        p.b.build_return(Some(&result))?;
        Ok(())
    })?;
    let call = em.b.build_call(f, &[x.into()], "")?;
    Ok(basic(call.try_as_basic_value().basic())?.into_float_value())
}

/// 2^n for -1022 <= n <= 1023, built from its bits.
pub fn pow2<'ctx>(p: &Emitter<'ctx, '_>, n: IntValue<'ctx>) -> CodegenResult<FloatValue<'ctx>> {
    let biased = p.b.build_int_add(n, p.const_i64(1023), "")?;
    let bits = p.b.build_left_shift(biased, p.const_i64(52), "")?;
    Ok(p.b
        .build_bit_cast(bits, p.ctx.f64_type(), "")?
        .into_float_value())
}

fn min_max<'ctx>(
    p: &Emitter<'ctx, '_>,
    x: FloatValue<'ctx>,
    lo: f64,
    hi: f64,
) -> CodegenResult<FloatValue<'ctx>> {
    let f64t = p.ctx.f64_type();
    let below =
        p.b.build_float_compare(FloatPredicate::OLT, x, f64t.const_float(lo), "")?;
    let x =
        p.b.build_select(below, f64t.const_float(lo), x, "")?
            .into_float_value();
    let above =
        p.b.build_float_compare(FloatPredicate::OGT, x, f64t.const_float(hi), "")?;
    Ok(p.b
        .build_select(above, f64t.const_float(hi), x, "")?
        .into_float_value())
}

fn factorial(k: u32) -> f64 {
    (1..=k).map(f64::from).product()
}
