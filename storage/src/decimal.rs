//! Exact decimal values: their text, and the conversions every backend computes alike (the
//! kernels' code, the host's evaluation of grouped results, constant folding). A decimal is a
//! count of `10^-scale` units, 64-bit up to 18 digits and 128-bit beyond (up to 38); a
//! conversion that drops digits rounds half away from zero, as DuckDB and PostgreSQL do.

use crate::types::DecimalType;

/// `10^digits`, for up to 18 digits.
pub fn power_of_ten(digits: u32) -> i64 {
    10i64.pow(digits)
}

/// `10^digits`, for up to 38 digits.
pub fn power_of_ten_wide(digits: u32) -> i128 {
    10i128.pow(digits)
}

/// Writes the decimal whose raw value is `raw` at `scale` as SQL prints it: every digit of the
/// scale, a leading `0` before the point, `-` for a negative value (`-0.50` for -50 at scale 2).
pub fn format(raw: impl Into<i128>, scale: u8) -> String {
    let raw: i128 = raw.into();
    let digits = raw.unsigned_abs().to_string();
    let scale = usize::from(scale);
    let sign = if raw < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    format!("{sign}{whole}.{fraction}")
}

/// Reads decimal text (`12.5`, `-0.05`, `3`; not `1e2`) as a raw value at `scale`; `None`
/// when it has more fractional digits than `scale` (trailing zeros aside) or more than 18
/// digits in all.
pub fn parse(text: &str, scale: u8) -> Option<i64> {
    parse_wide(text, scale)
        .filter(|&raw| fits_precision_wide(raw, DecimalType::NARROW_PRECISION))
        .and_then(|raw| i64::try_from(raw).ok())
}

/// [`parse`] for decimals of up to 38 digits.
pub fn parse_wide(text: &str, scale: u8) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = whole
        .bytes()
        .chain(fraction.bytes())
        .all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !all_digits {
        return None;
    }
    let fraction = fraction.trim_end_matches('0');
    let missing = usize::from(scale).checked_sub(fraction.len())?;
    let mut raw: i128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        raw = raw.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    let raw = raw.checked_mul(10i128.checked_pow(u32::try_from(missing).ok()?)?)?;
    if !fits_precision_wide(raw, DecimalType::MAX_PRECISION) {
        return None;
    }
    Some(if negative { -raw } else { raw })
}

/// The fewest digits after the point that write `x` exactly in decimal (`0.05` needs 2), when
/// that many and the digits before the point fit 18 digits: the decimal a float literal
/// stands for.
pub fn literal_type(x: f64) -> Option<(i64, DecimalType)> {
    if !x.is_finite() {
        return None;
    }
    // Rust writes the shortest text that reads back as `x`, never with an exponent.
    let text = format!("{x}");
    let scale = text.split_once('.').map_or(0, |(_, f)| f.len());
    let scale = u8::try_from(scale).ok()?;
    let raw = parse(&text, scale)?;
    let digits = raw.unsigned_abs().checked_ilog10().map_or(1, |d| d + 1);
    let precision = digits.max(u32::from(scale)).max(1);
    let decimal = DecimalType::new(u64::from(precision), u64::from(scale)).ok()?;
    Some((raw, decimal))
}

/// Whether `raw` has at most `precision` digits.
pub fn fits_precision(raw: i64, precision: u8) -> bool {
    fits_precision_wide(i128::from(raw), precision)
}

/// Whether `raw` has at most `precision` digits (up to 38).
pub fn fits_precision_wide(raw: i128, precision: u8) -> bool {
    raw.unsigned_abs() < 10u128.pow(u32::from(precision))
}

/// `raw / 10^digits`, rounded half away from zero.
pub fn divide_rounding(raw: i64, digits: u32) -> i64 {
    // The quotient of a 64-bit value is one too.
    divide_rounding_wide(i128::from(raw), digits) as i64
}

/// [`divide_rounding`] of a 128-bit value.
pub fn divide_rounding_wide(raw: i128, digits: u32) -> i128 {
    let divisor = power_of_ten_wide(digits);
    let (quotient, remainder) = (raw / divisor, raw % divisor);
    if remainder.unsigned_abs() * 2 >= divisor.unsigned_abs() {
        quotient + raw.signum()
    } else {
        quotient
    }
}

/// The raw value at `to` of `raw` at scale `from`: more digits multiply (`None` past 64 bits),
/// fewer round half away from zero.
pub fn rescale(raw: i64, from: u8, to: u8) -> Option<i64> {
    rescale_wide(i128::from(raw), from, to).and_then(|raw| i64::try_from(raw).ok())
}

/// [`rescale`] of a 128-bit value (`None` past 128 bits).
pub fn rescale_wide(raw: i128, from: u8, to: u8) -> Option<i128> {
    if to >= from {
        raw.checked_mul(10i128.checked_pow(u32::from(to - from))?)
    } else {
        Some(divide_rounding_wide(raw, u32::from(from - to)))
    }
}

/// The raw value at decimal `to` of `raw` at scale `from` (an integer is a decimal of scale 0),
/// as a cast computes it: rescaled, then checked against `to`'s precision; `None` when it does
/// not fit.
pub fn convert(raw: i64, from: u8, to: DecimalType) -> Option<i64> {
    convert_wide(i128::from(raw), from, to).and_then(|raw| i64::try_from(raw).ok())
}

/// [`convert`] of a 128-bit value, to a decimal of up to 38 digits.
pub fn convert_wide(raw: i128, from: u8, to: DecimalType) -> Option<i128> {
    rescale_wide(raw, from, to.scale).filter(|&raw| fits_precision_wide(raw, to.precision))
}

/// The decimal as a float (the nearest `f64` to the quotient).
pub fn to_float(raw: impl Into<i128>, scale: u8) -> f64 {
    raw.into() as f64 / power_of_ten_wide(u32::from(scale)) as f64
}

/// `x` at `scale`, rounded half away from zero; `None` for NaN, infinities and values beyond
/// `precision` digits.
pub fn from_float(x: f64, decimal: DecimalType) -> Option<i64> {
    from_float_wide(x, decimal).and_then(|raw| i64::try_from(raw).ok())
}

/// [`from_float`] to a decimal of up to 38 digits.
pub fn from_float_wide(x: f64, decimal: DecimalType) -> Option<i128> {
    let scaled = (x * power_of_ten_wide(u32::from(decimal.scale)) as f64).round();
    let limit = 10f64.powi(i32::from(decimal.precision));
    (scaled.abs() < limit).then_some(scaled as i128)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_every_digit_of_the_scale() {
        assert_eq!(format(1234, 2), "12.34");
        assert_eq!(format(-50, 2), "-0.50");
        assert_eq!(format(5, 3), "0.005");
        assert_eq!(format(-7, 0), "-7");
        assert_eq!(parse("12.34", 2), Some(1234));
        assert_eq!(parse("-0.5", 2), Some(-50));
        assert_eq!(parse("3", 2), Some(300));
        assert_eq!(parse("1.230", 2), Some(123));
        assert_eq!(parse("1.235", 2), None);
        assert_eq!(parse("1e2", 2), None);
        assert_eq!(parse("1234567890123456789", 0), None);
    }

    #[test]
    fn rounds_half_away_from_zero() {
        assert_eq!(rescale(125, 2, 1), Some(13));
        assert_eq!(rescale(-125, 2, 1), Some(-13));
        assert_eq!(rescale(124, 2, 1), Some(12));
        assert_eq!(rescale(12, 1, 3), Some(1200));
        assert_eq!(rescale(i64::MAX / 2, 0, 1), None);
        assert_eq!(divide_rounding(125, 1), 13);
        assert_eq!(from_float(0.125, DecimalType::new(3, 2).unwrap()), Some(13));
        assert_eq!(from_float(1e30, DecimalType::new(18, 2).unwrap()), None);
    }

    #[test]
    fn decimals_of_38_digits_read_write_and_convert_exactly() {
        let raw = 123_456_789_012_345_678_901_234_567_890i128;
        assert_eq!(format(raw, 6), "123456789012345678901234.567890");
        assert_eq!(format(-raw, 0), "-123456789012345678901234567890");
        assert_eq!(parse_wide("123456789012345678901234.56789", 6), Some(raw));
        // 38 digits at most, and a narrow parse refuses more than 18.
        assert!(parse_wide(&"9".repeat(38), 0).is_some());
        assert_eq!(parse_wide(&"9".repeat(39), 0), None);
        assert_eq!(parse("1234567890123456789", 0), None);
        assert_eq!(
            rescale_wide(raw, 6, 2),
            Some(12_345_678_901_234_567_890_123_457)
        );
        assert_eq!(rescale_wide(-125, 2, 1), Some(-13));
        assert_eq!(rescale_wide(raw, 0, 20), None);
        let wide = DecimalType::new(38, 4).unwrap();
        assert_eq!(
            convert_wide(raw, 6, wide),
            Some(1_234_567_890_123_456_789_012_345_679)
        );
        assert_eq!(convert_wide(raw, 0, DecimalType::new(30, 2).unwrap()), None);
        // The float's own value, every digit of it.
        assert_eq!(
            from_float_wide(1e30, DecimalType::new(38, 2).unwrap()),
            Some(1e32 as i128)
        );
        assert_eq!(to_float(raw, 6), 1.2345678901234568e23);
        assert!(wide.is_wide() && !DecimalType::new(18, 2).unwrap().is_wide());
    }

    #[test]
    fn a_float_literal_is_the_decimal_it_is_written_as() {
        let (raw, decimal) = literal_type(0.05).unwrap();
        assert_eq!((raw, decimal.precision, decimal.scale), (5, 2, 2));
        let (raw, decimal) = literal_type(12.5).unwrap();
        assert_eq!((raw, decimal.precision, decimal.scale), (125, 3, 1));
        assert!(literal_type(f64::NAN).is_none());
        assert!(literal_type(0.1 + 0.2).is_none_or(|(_, d)| d.scale == 17));
    }
}
