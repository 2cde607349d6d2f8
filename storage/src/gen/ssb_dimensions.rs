//! The SSB dimension tables: part, supplier, customer and date, each row drawn from its own
//! random stream (seeded by its key) with the distributions of the SSB specification.

use crate::date::{civil_from_days, days_from_civil, days_in_month};
use crate::gen::rng::{RowRng, Stream};
use crate::gen::ssb_text::{
    city, selling_season, ADDRESS_CHARS, COLORS, CONTAINER_KINDS, CONTAINER_SIZES, HOLIDAYS,
    MONTHS, NATIONS, REGIONS, SEGMENTS, TYPE_FINISHES, TYPE_METALS, TYPE_SIZES, WEEKDAYS,
};
use crate::gen::GenColumn;

/// The date table covers this many days from [`first_day`]: seven years less one day, as
/// dbgen generates it (1992-01-01 through 1998-12-30).
pub(crate) const DATE_ROWS: usize = 2556;

/// 1992-01-01, the first day of the date table and of order dates.
pub(crate) fn first_day() -> i32 {
    days_from_civil(1992, 1, 1).unwrap_or(8035)
}

/// A date as the SSB's integer key, `yyyymmdd`.
pub(crate) fn date_key(days: i32) -> i32 {
    let (year, month, day) = civil_from_days(days);
    year * 10_000 + month as i32 * 100 + day as i32
}

/// `p_partkey`, `p_name`, `p_mfgr`, `p_category`, `p_brand1`, `p_color`, `p_type`, `p_size`,
/// `p_container` for parts `1..=parts`.
pub(crate) fn part_table(parts: u64) -> Vec<GenColumn> {
    let n = parts as usize;
    let mut key = Vec::with_capacity(n);
    let mut name = Vec::with_capacity(n);
    let mut mfgr = Vec::with_capacity(n);
    let mut category = Vec::with_capacity(n);
    let mut brand = Vec::with_capacity(n);
    let mut color = Vec::with_capacity(n);
    let mut kind = Vec::with_capacity(n);
    let mut size = Vec::with_capacity(n);
    let mut container = Vec::with_capacity(n);
    for part in 1..=parts {
        let mut rng = RowRng::new(Stream::Part, part);
        // Three different colors: the first is the part's color, the other two its name.
        let mut colors = [0usize; 3];
        for i in 0..colors.len() {
            let mut pick = rng.below(COLORS.len());
            while colors[..i].contains(&pick) {
                pick = rng.below(COLORS.len());
            }
            colors[i] = pick;
        }
        // Manufacturer 1-5, category 1-5 within it, brand 1-40 within the category.
        let m = rng.between(1, 5);
        let c = rng.between(1, 5);
        let b = rng.between(1, 40);
        let t = rng.below(TYPE_SIZES.len() * TYPE_FINISHES.len() * TYPE_METALS.len());
        let k = rng.below(CONTAINER_SIZES.len() * CONTAINER_KINDS.len());
        key.push(part as i32);
        name.push(format!("{} {}", COLORS[colors[1]], COLORS[colors[2]]));
        mfgr.push(format!("MFGR#{m}"));
        category.push(format!("MFGR#{m}{c}"));
        brand.push(format!("MFGR#{m}{c}{b:02}"));
        color.push(COLORS[colors[0]].to_string());
        kind.push(format!(
            "{} {} {}",
            TYPE_SIZES[t / 25],
            TYPE_FINISHES[t / 5 % 5],
            TYPE_METALS[t % 5]
        ));
        size.push(rng.between(1, 50) as i32);
        container.push(format!(
            "{} {}",
            CONTAINER_SIZES[k / 8],
            CONTAINER_KINDS[k % 8]
        ));
    }
    vec![
        GenColumn::Int(key),
        GenColumn::Text(name),
        GenColumn::Text(mfgr),
        GenColumn::Text(category),
        GenColumn::Text(brand),
        GenColumn::Text(color),
        GenColumn::Text(kind),
        GenColumn::Int(size),
        GenColumn::Text(container),
    ]
}

/// A random address of 6 to 24 characters (40% to 160% of 15, as the specification says).
fn address(rng: &mut RowRng) -> String {
    let len = rng.between(6, 24) as usize;
    let mut text = String::with_capacity(len);
    let mut bits = 0u64;
    for i in 0..len {
        // Ten six-bit characters per draw.
        if i % 10 == 0 {
            bits = rng.next_u64();
        }
        text.push(char::from(ADDRESS_CHARS[(bits & 63) as usize]));
        bits >>= 6;
    }
    text
}

/// A phone number whose country code (10 + nation key) tells the nation: `23-456-789-0123`.
fn phone(rng: &mut RowRng, nation: usize) -> String {
    format!(
        "{:02}-{:03}-{:03}-{:04}",
        10 + nation,
        rng.between(100, 999),
        rng.between(100, 999),
        rng.between(1000, 9999)
    )
}

/// Name, address, city, nation, region and phone of a supplier or customer.
struct Party {
    name: Vec<String>,
    address: Vec<String>,
    city: Vec<String>,
    nation: Vec<String>,
    region: Vec<String>,
    phone: Vec<String>,
}

impl Party {
    fn with_capacity(n: usize) -> Party {
        Party {
            name: Vec::with_capacity(n),
            address: Vec::with_capacity(n),
            city: Vec::with_capacity(n),
            nation: Vec::with_capacity(n),
            region: Vec::with_capacity(n),
            phone: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, rng: &mut RowRng, name: String) {
        self.address.push(address(rng));
        let nation = rng.below(NATIONS.len());
        let (nation_name, region) = NATIONS[nation];
        self.city.push(city(nation_name, rng.below(10) as u8));
        self.nation.push(nation_name.to_string());
        self.region.push(REGIONS[region].to_string());
        self.phone.push(phone(rng, nation));
        self.name.push(name);
    }
}

/// `s_suppkey`, `s_name`, `s_address`, `s_city`, `s_nation`, `s_region`, `s_phone`.
pub(crate) fn supplier_table(suppliers: u64) -> Vec<GenColumn> {
    let mut keys = Vec::with_capacity(suppliers as usize);
    let mut party = Party::with_capacity(suppliers as usize);
    for supplier in 1..=suppliers {
        let mut rng = RowRng::new(Stream::Supplier, supplier);
        keys.push(supplier as i32);
        party.push(&mut rng, format!("Supplier#{supplier:09}"));
    }
    vec![
        GenColumn::Int(keys),
        GenColumn::Text(party.name),
        GenColumn::Text(party.address),
        GenColumn::Text(party.city),
        GenColumn::Text(party.nation),
        GenColumn::Text(party.region),
        GenColumn::Text(party.phone),
    ]
}

/// `c_custkey`, `c_name`, `c_address`, `c_city`, `c_nation`, `c_region`, `c_phone`,
/// `c_mktsegment`.
pub(crate) fn customer_table(customers: u64) -> Vec<GenColumn> {
    let mut keys = Vec::with_capacity(customers as usize);
    let mut party = Party::with_capacity(customers as usize);
    let mut segment = Vec::with_capacity(customers as usize);
    for customer in 1..=customers {
        let mut rng = RowRng::new(Stream::Customer, customer);
        keys.push(customer as i32);
        party.push(&mut rng, format!("Customer#{customer:09}"));
        segment.push(rng.pick(&SEGMENTS).to_string());
    }
    vec![
        GenColumn::Int(keys),
        GenColumn::Text(party.name),
        GenColumn::Text(party.address),
        GenColumn::Text(party.city),
        GenColumn::Text(party.nation),
        GenColumn::Text(party.region),
        GenColumn::Text(party.phone),
        GenColumn::Text(segment),
    ]
}

/// The date table's columns while they are filled.
#[derive(Default)]
struct DateColumns {
    datekey: Vec<i32>,
    date: Vec<String>,
    dayofweek: Vec<String>,
    month: Vec<String>,
    year: Vec<i32>,
    yearmonthnum: Vec<i32>,
    yearmonth: Vec<String>,
    daynuminweek: Vec<i32>,
    daynuminmonth: Vec<i32>,
    daynuminyear: Vec<i32>,
    monthnuminyear: Vec<i32>,
    weeknuminyear: Vec<i32>,
    sellingseason: Vec<String>,
    lastdayinweekfl: Vec<i32>,
    lastdayinmonthfl: Vec<i32>,
    holidayfl: Vec<i32>,
    weekdayfl: Vec<i32>,
}

/// The 17 columns of the date table, one row per day from 1992-01-01.
pub(crate) fn date_table() -> Vec<GenColumn> {
    let mut t = DateColumns::default();
    let first = first_day();
    for days in first..first + DATE_ROWS as i32 {
        let (year, month, day) = civil_from_days(days);
        // 1970-01-01 was a Thursday; weekday 0 is Sunday.
        let weekday = (days + 4).rem_euclid(7) as usize;
        let day_of_year = (days - days_from_civil(year, 1, 1).unwrap_or(days)) + 1;
        let month_name = MONTHS[month as usize - 1];
        t.datekey.push(date_key(days));
        t.date.push(format!("{month_name} {day}, {year}"));
        t.dayofweek.push(WEEKDAYS[weekday].to_string());
        t.month.push(month_name.to_string());
        t.year.push(year);
        t.yearmonthnum.push(year * 100 + month as i32);
        t.yearmonth.push(format!("{}{year}", &month_name[..3]));
        t.daynuminweek.push(weekday as i32 + 1);
        t.daynuminmonth.push(day as i32);
        t.daynuminyear.push(day_of_year);
        t.monthnuminyear.push(month as i32);
        // The SSB counts weeks as day-of-year / 7 + 1 (days 1-6 are week 1).
        t.weeknuminyear.push(day_of_year / 7 + 1);
        t.sellingseason.push(selling_season(month).to_string());
        t.lastdayinweekfl.push(i32::from(weekday == 6));
        t.lastdayinmonthfl
            .push(i32::from(day == days_in_month(year, month)));
        t.holidayfl
            .push(i32::from(HOLIDAYS.contains(&(month, day))));
        t.weekdayfl.push(i32::from((1..=5).contains(&weekday)));
    }
    vec![
        GenColumn::Int(t.datekey),
        GenColumn::Text(t.date),
        GenColumn::Text(t.dayofweek),
        GenColumn::Text(t.month),
        GenColumn::Int(t.year),
        GenColumn::Int(t.yearmonthnum),
        GenColumn::Text(t.yearmonth),
        GenColumn::Int(t.daynuminweek),
        GenColumn::Int(t.daynuminmonth),
        GenColumn::Int(t.daynuminyear),
        GenColumn::Int(t.monthnuminyear),
        GenColumn::Int(t.weeknuminyear),
        GenColumn::Text(t.sellingseason),
        GenColumn::Int(t.lastdayinweekfl),
        GenColumn::Int(t.lastdayinmonthfl),
        GenColumn::Int(t.holidayfl),
        GenColumn::Int(t.weekdayfl),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(column: &GenColumn) -> &[String] {
        match column {
            GenColumn::Text(values) => values,
            _ => panic!("a text column"),
        }
    }

    fn ints(column: &GenColumn) -> &[i32] {
        match column {
            GenColumn::Int(values) => values,
            _ => panic!("an integer column"),
        }
    }

    #[test]
    fn the_date_table_starts_on_a_wednesday_and_knows_its_calendar() {
        let table = date_table();
        assert_eq!(ints(&table[0])[0], 19920101);
        assert_eq!(*ints(&table[0]).last().unwrap(), 19981230);
        assert_eq!(text(&table[1])[0], "January 1, 1992");
        assert_eq!(text(&table[2])[0], "Wednesday");
        assert_eq!(ints(&table[7])[0], 4);
        assert_eq!(text(&table[6])[365], "Dec1992");
        // 1992-01-04 was a Saturday: the last day of its week, not a weekday.
        assert_eq!(ints(&table[13])[3], 1);
        assert_eq!(ints(&table[16])[3], 0);
        // 1992-01-31 is the last day of January; 1992-02-29 of a leap February.
        assert_eq!(ints(&table[14])[30], 1);
        assert_eq!(ints(&table[14])[59], 1);
        assert_eq!(ints(&table[14])[58], 0);
        assert_eq!(ints(&table[11])[5], 1);
        assert_eq!(ints(&table[11])[6], 2);
        assert_eq!(text(&table[12])[340], "Christmas");
    }

    #[test]
    fn parts_follow_the_category_hierarchy() {
        let table = part_table(500);
        let mfgr = text(&table[2]);
        let category = text(&table[3]);
        let brand = text(&table[4]);
        for row in 0..500 {
            assert!(category[row].starts_with(&mfgr[row]));
            assert!(brand[row].starts_with(&category[row]));
            assert_eq!(brand[row].len(), 9);
            let name: Vec<&str> = text(&table[1])[row].split(' ').collect();
            assert_eq!(name.len(), 2);
            assert!(!name.contains(&text(&table[5])[row].as_str()));
        }
    }
}
