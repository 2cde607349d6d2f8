//! Calendar dates as days since 1970-01-01 (proleptic Gregorian), the representation of the
//! `date` type everywhere in Tessera (and Parquet's `DATE`); timestamps as microseconds since
//! 1970-01-01 00:00:00 (`timestamp`, no time zone: one stored with a zone is read as UTC), and
//! times of day as microseconds since midnight (`time`).

/// Microseconds in a day: a date's day number times this is its midnight as a timestamp.
pub const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Days since 1970-01-01 of a civil date, or `None` when the date does not exist.
pub fn days_from_civil(year: i32, month: u32, day: u32) -> Option<i32> {
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    // Howard Hinnant's algorithm: shift the year to start in March so leap days fall last.
    let y = i64::from(if month <= 2 { year - 1 } else { year });
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let m = i64::from(month);
    let day_of_year = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    i32::try_from(era * 146_097 + day_of_era - 719_468).ok()
}

/// The civil date `(year, month, day)` of a day number.
pub fn civil_from_days(days: i32) -> (i32, u32, u32) {
    let z = i64::from(days) + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = (year_of_era + era * 400 + i64::from(month <= 2)) as i32;
    (year, month, day)
}

pub fn is_leap_year(year: i32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

pub fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap_year(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Parses `yyyy-mm-dd`.
pub fn parse_date(text: &str) -> Option<i32> {
    let mut parts = text.splitn(3, '-');
    let year = parts.next()?.parse().ok()?;
    let month = parts.next()?.parse().ok()?;
    let day = parts.next()?.parse().ok()?;
    days_from_civil(year, month, day)
}

/// Formats as `yyyy-mm-dd`.
pub fn format_days(days: i32) -> String {
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Parses `hh:mm:ss` with an optional fraction of up to six digits (`12:30:00.25`) into
/// microseconds since midnight.
pub fn parse_time(text: &str) -> Option<i64> {
    let (clock, fraction) = match text.split_once('.') {
        Some((clock, fraction)) => (clock, Some(fraction)),
        None => (text, None),
    };
    let mut parts = clock.splitn(3, ':');
    let mut field = |max: i64| {
        let part = parts.next()?;
        let digits = part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit());
        let value: i64 = part.parse().ok()?;
        (digits && value <= max).then_some(value)
    };
    let (hours, minutes, seconds) = (field(23)?, field(59)?, field(59)?);
    let micros = match fraction {
        None => 0,
        Some(digits) if (1..=6).contains(&digits.len()) => {
            let value: i64 = digits.parse().ok()?;
            digits
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| value * 10i64.pow(6 - digits.len() as u32))?
        }
        Some(_) => return None,
    };
    Some(((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros)
}

/// Parses `yyyy-mm-ddThh:mm:ss[.ffffff]` (a space may stand for the `T`) into microseconds
/// since 1970-01-01 00:00:00.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let split = text.find(['T', ' '])?;
    let days = parse_date(&text[..split])?;
    let time = parse_time(&text[split + 1..])?;
    i64::from(days)
        .checked_mul(MICROS_PER_DAY)?
        .checked_add(time)
}

/// Formats microseconds since midnight as `hh:mm:ss`, with the fraction of a second where it
/// is not zero (trailing zeros dropped, as DuckDB prints it).
pub fn format_time(micros: i64) -> String {
    let micros = micros.rem_euclid(MICROS_PER_DAY);
    let seconds = micros / 1_000_000;
    let clock = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    match micros % 1_000_000 {
        0 => clock,
        fraction => {
            let digits = format!("{fraction:06}");
            format!("{clock}.{}", digits.trim_end_matches('0'))
        }
    }
}

/// Formats microseconds since 1970-01-01 00:00:00 as `yyyy-mm-dd hh:mm:ss[.ffffff]`.
pub fn format_timestamp(micros: i64) -> String {
    format!(
        "{} {}",
        format_days(timestamp_day(micros)),
        format_time(micros.rem_euclid(MICROS_PER_DAY))
    )
}

/// The day (as a date's day number) a timestamp falls on.
pub fn timestamp_day(micros: i64) -> i32 {
    let days = micros.div_euclid(MICROS_PER_DAY);
    i32::try_from(days).unwrap_or(if days < 0 { i32::MIN } else { i32::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_day_of_four_centuries() {
        let start = days_from_civil(1800, 1, 1).unwrap();
        let end = days_from_civil(2200, 12, 31).unwrap();
        for days in start..=end {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), Some(days));
        }
    }

    #[test]
    fn known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), Some(0));
        assert_eq!(parse_date("1992-01-01"), Some(8035));
        assert_eq!(format_days(10_592), "1999-01-01");
        assert_eq!(parse_date("1993-02-29"), None);
        assert_eq!(
            parse_date("1996-02-29").map(format_days).as_deref(),
            Some("1996-02-29")
        );
    }

    #[test]
    fn timestamps_and_times() {
        let noon = parse_timestamp("1992-01-01T12:00:00").unwrap();
        assert_eq!(noon, 8035 * MICROS_PER_DAY + 12 * 3_600_000_000);
        assert_eq!(format_timestamp(noon), "1992-01-01 12:00:00");
        assert_eq!(parse_timestamp("1992-01-01 12:00:00"), Some(noon));
        let fraction = parse_timestamp("1969-12-31T23:59:59.25").unwrap();
        assert_eq!(fraction, -750_000);
        assert_eq!(format_timestamp(fraction), "1969-12-31 23:59:59.25");
        assert_eq!(timestamp_day(fraction), -1);
        assert_eq!(parse_time("00:00:01.000001"), Some(1_000_001));
        assert_eq!(format_time(1_000_001), "00:00:01.000001");
        for bad in [
            "24:00:00",
            "1:00:00",
            "12:60:00",
            "12:00:00.1234567",
            "12:00",
            "12:00:00.x",
            "+1:00:00",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
        assert_eq!(parse_timestamp("1992-02-30T00:00:00"), None);
        assert_eq!(parse_timestamp("1992-01-01"), None);
    }
}
