//! The value domains of SSB's text columns, as the SSB and TPC-H specifications define them:
//! regions and nations, colors, part types and containers, market segments, order priorities,
//! ship modes, and the calendar names of the date table.

/// The five regions, in region-key order.
pub(crate) const REGIONS: [&str; 5] = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"];

/// The 25 nations in nation-key order, each with its region's index in [`REGIONS`]. A nation's
/// key also fixes the country code of phone numbers (10 + key).
pub(crate) const NATIONS: [(&str, usize); 25] = [
    ("ALGERIA", 0),
    ("ARGENTINA", 1),
    ("BRAZIL", 1),
    ("CANADA", 1),
    ("EGYPT", 4),
    ("ETHIOPIA", 0),
    ("FRANCE", 3),
    ("GERMANY", 3),
    ("INDIA", 2),
    ("INDONESIA", 2),
    ("IRAN", 4),
    ("IRAQ", 4),
    ("JAPAN", 2),
    ("JORDAN", 4),
    ("KENYA", 0),
    ("MOROCCO", 0),
    ("MOZAMBIQUE", 0),
    ("PERU", 1),
    ("CHINA", 2),
    ("ROMANIA", 3),
    ("SAUDI ARABIA", 4),
    ("VIETNAM", 2),
    ("RUSSIA", 3),
    ("UNITED KINGDOM", 3),
    ("UNITED STATES", 1),
];

/// A city is its nation's name cut or padded to this many characters, then one digit.
const CITY_PREFIX: usize = 9;

/// City `digit` (0-9) of a nation: `UNITED KI1`, `CHINA    0`.
pub(crate) fn city(nation: &str, digit: u8) -> String {
    let mut city: String = nation.chars().take(CITY_PREFIX).collect();
    while city.len() < CITY_PREFIX {
        city.push(' ');
    }
    city.push(char::from(b'0' + digit % 10));
    city
}

/// The words part names and colors are made of.
pub(crate) const COLORS: [&str; 92] = [
    "almond",
    "antique",
    "aquamarine",
    "azure",
    "beige",
    "bisque",
    "black",
    "blanched",
    "blue",
    "blush",
    "brown",
    "burlywood",
    "burnished",
    "chartreuse",
    "chiffon",
    "chocolate",
    "coral",
    "cornflower",
    "cornsilk",
    "cream",
    "cyan",
    "dark",
    "deep",
    "dim",
    "dodger",
    "drab",
    "firebrick",
    "floral",
    "forest",
    "frosted",
    "gainsboro",
    "ghost",
    "goldenrod",
    "green",
    "grey",
    "honeydew",
    "hot",
    "indian",
    "ivory",
    "khaki",
    "lace",
    "lavender",
    "lawn",
    "lemon",
    "light",
    "lime",
    "linen",
    "magenta",
    "maroon",
    "medium",
    "metallic",
    "midnight",
    "mint",
    "misty",
    "moccasin",
    "navajo",
    "navy",
    "olive",
    "orange",
    "orchid",
    "pale",
    "papaya",
    "peach",
    "peru",
    "pink",
    "plum",
    "powder",
    "puff",
    "purple",
    "red",
    "rose",
    "rosy",
    "royal",
    "saddle",
    "salmon",
    "sandy",
    "seashell",
    "sienna",
    "sky",
    "slate",
    "smoke",
    "snow",
    "spring",
    "steel",
    "tan",
    "thistle",
    "tomato",
    "turquoise",
    "violet",
    "wheat",
    "white",
    "yellow",
];

/// Part types are one word from each list: 6 × 5 × 5 = 150 types.
pub(crate) const TYPE_SIZES: [&str; 6] =
    ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"];
pub(crate) const TYPE_FINISHES: [&str; 5] =
    ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"];
pub(crate) const TYPE_METALS: [&str; 5] = ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"];

/// Containers are a size and a kind: 5 × 8 = 40 containers.
pub(crate) const CONTAINER_SIZES: [&str; 5] = ["SM", "LG", "MED", "JUMBO", "WRAP"];
pub(crate) const CONTAINER_KINDS: [&str; 8] =
    ["CASE", "BOX", "BAG", "JAR", "PACK", "PKG", "CAN", "DRUM"];

pub(crate) const SEGMENTS: [&str; 5] = [
    "AUTOMOBILE",
    "BUILDING",
    "FURNITURE",
    "HOUSEHOLD",
    "MACHINERY",
];

/// Order priorities, already in sorted order so that a value's index is its dictionary code.
pub(crate) const PRIORITIES: [&str; 5] =
    ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"];

/// Ship modes in sorted order (the index is the dictionary code).
pub(crate) const SHIP_MODES: [&str; 7] = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"];

/// Characters of generated addresses.
pub(crate) const ADDRESS_CHARS: &[u8; 64] =
    b"0123456789abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ,";

pub(crate) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Sunday first, as `d_daynuminweek` counts.
pub(crate) const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// The selling season of a month (1-12).
pub(crate) fn selling_season(month: u32) -> &'static str {
    match month {
        1..=3 => "Winter",
        4 => "Spring",
        5..=8 => "Summer",
        9 | 10 => "Fall",
        _ => "Christmas",
    }
}

/// The (month, day) pairs the SSB date table flags as holidays.
pub(crate) const HOLIDAYS: [(u32, u32); 10] = [
    (1, 1),
    (2, 20),
    (4, 20),
    (5, 20),
    (7, 20),
    (8, 20),
    (9, 20),
    (10, 20),
    (11, 20),
    (12, 24),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cities_are_nine_characters_and_a_digit() {
        assert_eq!(city("UNITED KINGDOM", 1), "UNITED KI1");
        assert_eq!(city("CHINA", 0), "CHINA    0");
        assert_eq!(city("UNITED STATES", 9).len(), 10);
    }

    #[test]
    fn domains_are_distinct_and_code_lists_sorted() {
        let mut colors = COLORS.to_vec();
        colors.sort_unstable();
        colors.dedup();
        assert_eq!(colors.len(), 92);
        assert!(PRIORITIES.windows(2).all(|w| w[0] < w[1]));
        assert!(SHIP_MODES.windows(2).all(|w| w[0] < w[1]));
        for region in 0..5 {
            assert_eq!(NATIONS.iter().filter(|(_, r)| *r == region).count(), 5);
        }
    }
}
