//! The SSB fact table: orders of 1 to 7 lines each, every order drawn from its own random stream
//! (seeded by its index), so a chunk of orders can be made on any thread in any order.

use std::ops::Range;
use std::sync::Arc;

use crate::column::Dictionary;
use crate::gen::rng::{RowRng, Stream};
use crate::gen::ssb::SsbScale;
use crate::gen::ssb_dimensions::{date_key, first_day};
use crate::gen::ssb_text::{PRIORITIES, SHIP_MODES};
use crate::gen::GenColumn;

/// Order dates fall in the first 2,406 days (1992-01-01 .. 1998-08-02), so that every line's
/// ship and receipt dates (up to 151 days later in TPC-H) stay within the seven years.
const ORDER_DAYS: i64 = 2406;
/// A line's commit date is 30 to 90 days after its order date.
const COMMIT_DELAY: (i64, i64) = (30, 90);

/// `yyyymmdd` keys of every day an order or commit date can fall on, by day offset.
fn day_keys() -> Vec<i32> {
    let first = first_day();
    (0..(ORDER_DAYS + COMMIT_DELAY.1) as i32)
        .map(|offset| date_key(first + offset))
        .collect()
}

/// The price of one unit of a part, in cents, as TPC-H derives it from the key.
fn retail_price(part: i64) -> i64 {
    90_000 + (part / 10) % 20_001 + (part % 1_000) * 100
}

/// The 17 lineorder columns of orders `orders` (0-based order indices).
pub(crate) fn lineorder_chunk(scale: &SsbScale, orders: Range<u64>) -> Vec<GenColumn> {
    let days = day_keys();
    let customers = scale.customers as i64;
    let estimate = (orders.end - orders.start) as usize * 4;
    let int_column = || Vec::<i32>::with_capacity(estimate);
    let (mut orderkey, mut linenumber, mut custkey, mut partkey, mut suppkey) = (
        int_column(),
        int_column(),
        int_column(),
        int_column(),
        int_column(),
    );
    let (mut orderdate, mut priority, mut quantity, mut extendedprice, mut totalprice) = (
        int_column(),
        int_column(),
        int_column(),
        int_column(),
        int_column(),
    );
    let (mut discount, mut revenue, mut supplycost, mut tax, mut commitdate, mut shipmode) = (
        int_column(),
        int_column(),
        int_column(),
        int_column(),
        int_column(),
        int_column(),
    );

    for order in orders {
        let mut rng = RowRng::new(Stream::Lineorder, order);
        let date = rng.between(0, ORDER_DAYS - 1);
        let customer = living_customer(rng.between(1, customers), customers);
        let order_priority = rng.below(PRIORITIES.len()) as i32;
        let lines = rng.between(1, 7);
        let mut order_total = 0i64;
        for line in 1..=lines {
            let part = rng.between(1, scale.parts as i64);
            let supplier = rng.between(1, scale.suppliers as i64);
            let units = rng.between(1, 50);
            let off = rng.between(0, 10);
            let levy = rng.between(0, 8);
            let commit = date + rng.between(COMMIT_DELAY.0, COMMIT_DELAY.1);
            let mode = rng.below(SHIP_MODES.len()) as i32;

            let price = retail_price(part);
            let extended = price * units;
            let discounted = extended * (100 - off) / 100;
            order_total += discounted * (100 + levy) / 100;

            // Dense order keys (dbgen leaves gaps) keep lo_orderkey within i32 up to SF 1,000.
            orderkey.push(order as i32 + 1);
            linenumber.push(line as i32);
            custkey.push(customer as i32);
            partkey.push(part as i32);
            suppkey.push(supplier as i32);
            orderdate.push(days[date as usize]);
            priority.push(order_priority);
            quantity.push(units as i32);
            extendedprice.push(extended as i32);
            discount.push(off as i32);
            revenue.push(discounted as i32);
            supplycost.push((6 * price / 10) as i32);
            tax.push(levy as i32);
            commitdate.push(days[commit as usize]);
            shipmode.push(mode);
        }
        totalprice.extend(std::iter::repeat_n(order_total as i32, lines as usize));
    }

    let dictionary = |values: &[&str]| {
        Arc::new(Dictionary::from_unsorted(
            values.iter().map(|v| v.to_string()).collect(),
        ))
    };
    let rows = orderkey.len();
    vec![
        GenColumn::Int(orderkey),
        GenColumn::Int(linenumber),
        GenColumn::Int(custkey),
        GenColumn::Int(partkey),
        GenColumn::Int(suppkey),
        GenColumn::Int(orderdate),
        GenColumn::Codes {
            codes: priority,
            dictionary: dictionary(&PRIORITIES),
        },
        // Every order has ship priority 0, as in dbgen.
        GenColumn::Codes {
            codes: vec![0; rows],
            dictionary: dictionary(&["0"]),
        },
        GenColumn::Int(quantity),
        GenColumn::Int(extendedprice),
        GenColumn::Int(totalprice),
        GenColumn::Int(discount),
        GenColumn::Int(revenue),
        GenColumn::Int(supplycost),
        GenColumn::Int(tax),
        GenColumn::Int(commitdate),
        GenColumn::Codes {
            codes: shipmode,
            dictionary: dictionary(&SHIP_MODES),
        },
    ]
}

/// TPC-H leaves every third customer without orders: a key divisible by 3 moves to a
/// neighbour (the next one, or the previous one at the end of the range).
fn living_customer(mut key: i64, customers: i64) -> i64 {
    let mut step = 1;
    // Two moves always suffice: one of key + 1 and key - 1 is not divisible by 3.
    for _ in 0..2 {
        if key % 3 != 0 || customers < 2 {
            break;
        }
        key = (key + step).clamp(1, customers);
        step = -step;
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_and_dates_follow_the_specification() {
        assert_eq!(retail_price(1), 90_000 + 100);
        assert_eq!(retail_price(200_000), 90_000 + 20_000);
        let days = day_keys();
        assert_eq!(days[0], 19920101);
        assert_eq!(days[ORDER_DAYS as usize - 1], 19980802);
    }

    #[test]
    fn customers_divisible_by_three_have_no_orders() {
        assert_eq!(living_customer(3, 300), 4);
        assert_eq!(living_customer(300, 300), 299);
        assert_eq!(living_customer(7, 300), 7);
        assert_eq!(living_customer(1, 1), 1);
    }
}
