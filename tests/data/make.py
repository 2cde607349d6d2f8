#!/usr/bin/env python3
"""Writes the small checked-in data sets that conformance files name with `data: folder PATH`,
with DuckDB. Deterministic: running it again writes the same rows.

    python3 tests/data/make.py

nullable/: tables whose columns hold nulls, as the files users bring do (DuckDB, pandas, Spark
and Polars write every column as nullable).
  people(id, name, city, age, score, team_id): 60 rows; `city`, `age`, `score`, `team_id` and
    `name` hold nulls (and `name` an empty string).
  teams(team_id, team, league, budget): 6 rows, one with a null `team_id`; `league` and
    `budget` hold nulls.
  places(city, country): 5 rows, a city people lack, a null city and a null country.

arrow/: an Arrow IPC file as pyarrow writes one (needs pyarrow).
  readings(sensor, level, code, count, reading, ratio, ok, day, site, label, at): 300 rows of
    int8, int16, uint16, uint32, int64, float32, float64, bool, date32, dictionary-encoded and
    large strings and a timestamp (microseconds), each with nulls.

hive/: a hive-partitioned table as DuckDB writes one (`PARTITION_BY`).
  sales(item, amount, note) under year=…/region=… folders: 400 rows; a null region, and
    regions whose folder names DuckDB percent-encodes (`north east`, `south/west`).

unsigned/: unsigned integers as DuckDB writes them.
  counters(id, small, medium, large): 50 rows of UTINYINT, UINTEGER and UBIGINT (up to 2^62),
    with nulls.
  huge(id, value): a UBIGINT beyond the signed 64-bit range.

decimals/: exact decimals, as DuckDB writes them (INT32 and INT64 values) and as pyarrow does
  (fixed-length bytes; needs pyarrow).
  lines(id, status, qty, price, discount, tax, weight, rate): 400 rows; `price` and `tax` are
    DECIMAL(15,2), `discount` DECIMAL(4,2), `weight` DECIMAL(9,3) with nulls and negative values,
    `rate` a DOUBLE.
  ledger(entry, amount, fee): 50 rows written by pyarrow: `amount` DECIMAL(12,2) and `fee`
    DECIMAL(38,10) whose values fit 18 digits, both as fixed-length bytes.
  huge(id, value): a DECIMAL(38,0) holding a 30-digit value.
  big(id, grp, amount, balance, small): 200 rows of decimals of more than 18 digits, as DuckDB
    writes them (16 fixed bytes): `amount` DECIMAL(38,6) of up to 32 digits, `balance`
    DECIMAL(30,2) with nulls, `small` DECIMAL(20,4) whose values fit 18 digits; negative
    values in each.

times/: timestamps and times of day as DuckDB writes them.
  events(id, kind, at, at_ms, at_ns, at_tz, clock, day, amount): 300 rows; `at` TIMESTAMP
    (microseconds, fractions of a second, instants before 1970), `at_ms` TIMESTAMP_MS, `at_ns`
    TIMESTAMP_NS, `at_tz` TIMESTAMPTZ (stored as UTC), `clock` TIME, `day` DATE; each with nulls.

wide/: group keys whose bits do not fit one 64-bit word, and floating-point keys.
  events(id, account, session, score, ratio, tag, v): 3,000 rows; `account` BIGINT values at both
    ends of the 64-bit range, `session` the same with nulls, `score` a DOUBLE with nulls, NaN,
    -0.0 and 0.0, `ratio` a FLOAT, `tag` a string.

sparse/: keys spread wider than a dense grouping's slots, over few rows.
  visits(account, amount): 40,000 rows; `account` takes 8,000 values from 1 to 4,399,451
    (too wide a range to group in a dense array, narrow enough for a perfect hash table).
  accounts(a_account, a_tier): 9,000 accounts, 8,000 of them visiting; `a_tier` a string.

csv/: a CSV file as DuckDB writes one (a header, empty fields for nulls, quotes where needed).
  weather(station, day, temp, rain, note): 200 rows of integers, dates, floats, booleans and
    strings (some with commas and quotes), each column with nulls.
"""

import pathlib

import duckdb

ROOT = pathlib.Path(__file__).resolve().parent


def main():
    folder = ROOT / "nullable"
    folder.mkdir(exist_ok=True)
    con = duckdb.connect()
    con.execute(
        """
        CREATE TABLE people AS
        SELECT
            i::INTEGER AS id,
            CASE WHEN i % 11 = 0 THEN NULL WHEN i % 13 = 0 THEN '' ELSE 'p' || i END AS name,
            CASE WHEN i % 4 = 0 THEN NULL ELSE ['Oslo', 'Lima', 'Pune', 'Kyiv', 'Baku'][1 + i % 5] END AS city,
            CASE WHEN i % 7 = 3 THEN NULL ELSE (18 + (i * 7) % 50)::INTEGER END AS age,
            CASE WHEN i % 6 = 5 THEN NULL ELSE (i * 37 % 101) / 4.0 END::DOUBLE AS score,
            CASE WHEN i % 5 = 2 THEN NULL ELSE (i % 7)::BIGINT END AS team_id
        FROM range(1, 61) t(i)
        """
    )
    con.execute(
        """
        CREATE TABLE teams AS
        SELECT * FROM (VALUES (0::BIGINT, 'red', 'east', 100), (1, 'blue', NULL, 250),
                              (2, 'green', 'west', NULL), (3, 'gold', 'east', 75),
                              (5, 'grey', NULL, NULL), (NULL, 'none', 'west', 10))
                     t(team_id, team, league, budget)
        """
    )
    con.execute(
        """
        CREATE TABLE places AS
        SELECT * FROM (VALUES ('Oslo', 'Norway'), ('Lima', 'Peru'), ('Pune', NULL),
                              ('Rome', 'Italy'), (NULL, 'Nowhere')) t(city, country)
        """
    )
    for table in ("people", "teams", "places"):
        con.execute(f"COPY {table} TO '{folder / (table + '.parquet')}' (FORMAT parquet)")

    write_decimals(con, ROOT / "decimals")
    write_wide(con, ROOT / "wide")
    write_times(con, ROOT / "times")
    write_sparse(con, ROOT / "sparse")

    folder = ROOT / "csv"
    folder.mkdir(exist_ok=True)
    con.execute(
        """
        CREATE TABLE weather AS
        SELECT
            CASE WHEN i % 17 = 0 THEN NULL ELSE i % 6 END AS station,
            CASE WHEN i % 23 = 0 THEN NULL ELSE DATE '2024-01-01' + (i // 3)::INTEGER END AS day,
            CASE WHEN i % 9 = 4 THEN NULL ELSE ((i * 37) % 90 - 30) / 4.0 END::DOUBLE AS temp,
            CASE WHEN i % 11 = 5 THEN NULL ELSE i % 3 = 0 END AS rain,
            CASE WHEN i % 7 = 1 THEN NULL
                 ELSE ['calm', 'wind, strong', 'say "hi"', 'fog'][1 + i % 4] END AS note
        FROM range(200) t(i)
        """
    )
    con.execute(f"COPY weather TO '{folder / 'weather.csv'}' (HEADER, DELIMITER ',')")

    write_arrow(ROOT / "arrow")

    folder = ROOT / "hive"
    folder.mkdir(exist_ok=True)
    con.execute(
        """
        CREATE TABLE sales AS
        SELECT
            i AS item,
            (i * 37) % 1000 / 4.0 AS amount,
            CASE WHEN i % 9 = 0 THEN NULL ELSE 'n' || (i % 5) END AS note,
            2021 + i % 3 AS year,
            CASE WHEN i % 10 = 7 THEN NULL
                 ELSE ['east', 'west', 'north', 'north east', 'south/west'][1 + i % 5] END AS region
        FROM range(400) t(i)
        """
    )
    con.execute(
        f"COPY (SELECT * FROM sales ORDER BY item) TO '{folder / 'sales'}' "
        "(FORMAT parquet, PARTITION_BY (year, region), OVERWRITE_OR_IGNORE)"
    )

    folder = ROOT / "unsigned"
    folder.mkdir(exist_ok=True)
    con.execute(
        """
        CREATE TABLE counters AS
        SELECT
            i::INTEGER AS id,
            (i * 5)::UTINYINT AS small,
            CASE WHEN i % 7 = 3 THEN NULL ELSE (4000000000 - i)::UINTEGER END AS medium,
            CASE WHEN i % 9 = 4 THEN NULL ELSE (4611686018427387904 - i * 3)::UBIGINT END AS large
        FROM range(50) t(i)
        """
    )
    con.execute(f"COPY counters TO '{folder / 'counters.parquet'}' (FORMAT parquet)")
    con.execute(
        f"COPY (SELECT 1 AS id, 18446744073709551615::UBIGINT AS value) "
        f"TO '{folder / 'huge.parquet'}' (FORMAT parquet)"
    )


def write_times(con, folder):
    folder.mkdir(exist_ok=True)
    con.execute("SET TimeZone = 'UTC'")
    con.execute(
        """
        CREATE TABLE events AS
        SELECT
            i::INTEGER AS id,
            ['open', 'close', 'move'][1 + i % 3] AS kind,
            CASE WHEN i % 17 = 5 THEN NULL
                 ELSE TIMESTAMP '1969-12-30 22:00:00' + to_microseconds(i * 7919 * 1000003 + (i % 4) * 250000)
            END AS at,
            CASE WHEN i % 19 = 7 THEN NULL
                 ELSE (TIMESTAMP '1994-01-01 00:00:00' + to_milliseconds(i * 86400123))::TIMESTAMP_MS
            END AS at_ms,
            CASE WHEN i % 23 = 2 THEN NULL
                 ELSE (TIMESTAMP '2024-02-28 12:00:00' + to_seconds(i * 3607))::TIMESTAMP_NS
            END AS at_ns,
            CASE WHEN i % 13 = 4 THEN NULL
                 ELSE (TIMESTAMP '1999-12-31 23:00:00' + to_minutes(i * 11))::TIMESTAMPTZ
            END AS at_tz,
            CASE WHEN i % 11 = 9 THEN NULL
                 ELSE TIME '00:00:00' + to_microseconds((i * 1234567891) % 86400000000)
            END AS clock,
            CASE WHEN i % 7 = 6 THEN NULL ELSE DATE '1969-12-25' + ((i * 61) % 19000)::INTEGER END AS day,
            (i * 37 % 101)::INTEGER AS amount
        FROM range(300) t(i)
        """
    )
    con.execute(f"COPY events TO '{folder / 'events.parquet'}' (FORMAT parquet)")
    con.execute("RESET TimeZone")


def write_wide(con, folder):
    folder.mkdir(exist_ok=True)
    con.execute(
        """
        CREATE TABLE events AS
        SELECT
            i::INTEGER AS id,
            CASE i % 3 WHEN 0 THEN -9223372036854775807 + i % 37
                       WHEN 1 THEN 9223372036854775807 - i % 41
                       ELSE (i % 29) * 123456789012345 END::BIGINT AS account,
            CASE WHEN i % 11 = 0 THEN NULL
                 WHEN i % 2 = 0 THEN 9223372036854775807 - i % 5
                 ELSE -9223372036854775807 - 1 + i % 7 END::BIGINT AS session,
            CASE WHEN i % 13 = 0 THEN NULL WHEN i % 17 = 0 THEN 'nan'::DOUBLE
                 WHEN i % 19 = 0 THEN -0.0::DOUBLE WHEN i % 23 = 0 THEN 0.0::DOUBLE
                 ELSE (i % 7) * 0.5 END::DOUBLE AS score,
            ((i % 3) * 1.25)::FLOAT AS ratio,
            'tag' || (i % 4) AS tag,
            (i % 6)::INTEGER AS v
        FROM range(3000) t(i)
        """
    )
    con.execute(f"COPY events TO '{folder / 'events.parquet'}' (FORMAT parquet)")


def write_sparse(con, folder):
    folder.mkdir(exist_ok=True)
    con.execute(
        """
        CREATE TABLE visits AS
        SELECT
            ((i * 7919) % 8000 * 550 + 1)::BIGINT AS account,
            (i * 37 % 101)::INTEGER AS amount
        FROM range(40000) t(i)
        """
    )
    con.execute(
        """
        CREATE TABLE accounts AS
        SELECT
            (i * 550 + 1)::BIGINT AS a_account,
            ['gold', 'silver', 'bronze'][1 + i % 3] AS a_tier
        FROM range(9000) t(i)
        """
    )
    for table in ("visits", "accounts"):
        con.execute(f"COPY {table} TO '{folder / (table + '.parquet')}' (FORMAT parquet)")


def write_decimals(con, folder):
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(exist_ok=True)
    con.execute(
        """
        CREATE TABLE lines AS
        SELECT
            i::INTEGER AS id,
            ['open', 'shipped', 'returned'][1 + i % 3] AS status,
            (1 + i % 50)::INTEGER AS qty,
            ((i * 7919) % 1000000 / 100 + 900)::DECIMAL(15, 2) AS price,
            ((i % 11) / 100)::DECIMAL(4, 2) AS discount,
            ((i % 9) / 100)::DECIMAL(15, 2) AS tax,
            CASE WHEN i % 13 = 0 THEN NULL ELSE ((i * 37) % 20001 - 10000) / 1000 END::DECIMAL(9, 3) AS weight,
            ((i * 13) % 400) / 8.0 AS rate
        FROM range(400) t(i)
        """
    )
    con.execute(f"COPY lines TO '{folder / 'lines.parquet'}' (FORMAT parquet)")
    con.execute(
        f"COPY (SELECT 1 AS id, 123456789012345678901234567890::DECIMAL(38, 0) AS value) "
        f"TO '{folder / 'huge.parquet'}' (FORMAT parquet)"
    )
    write_wide_decimals(con, folder)
    n = range(50)
    table = pa.table(
        {
            "entry": pa.array(list(n), pa.int32()),
            "amount": pa.array(
                [decimal.Decimal(i * 123457 % 10000000 - 5000000) / 100 for i in n], pa.decimal128(12, 2)
            ),
            "fee": pa.array(
                [None if i % 7 == 6 else decimal.Decimal(i * 31) / 10**10 for i in n], pa.decimal128(38, 10)
            ),
        }
    )
    pq.write_table(table, folder / "ledger.parquet")


def write_wide_decimals(con, folder):
    con.execute(
        """
        CREATE OR REPLACE TABLE big AS
        SELECT
            i::INTEGER AS id,
            ['a', 'b', 'c', 'd'][1 + i % 4] AS grp,
            ((((i * 7919) % 1000003) - 500000)::HUGEINT * 100000000000000000000 + i * 123457)::VARCHAR
                || '.' || lpad(((i * 37) % 1000000)::VARCHAR, 6, '0')
                AS amount_text,
            CASE WHEN i % 7 = 3 THEN NULL
                ELSE ((i - 100)::HUGEINT * 1234567890123456789012345)::VARCHAR
                    || '.' || lpad((i % 100)::VARCHAR, 2, '0') END AS balance_text,
            ((i * 31 - 5000)::VARCHAR || '.' || lpad(((i * 7) % 10000)::VARCHAR, 4, '0')) AS small_text
        FROM range(200) t(i)
        """
    )
    con.execute(
        f"""
        COPY (SELECT id, grp, amount_text::DECIMAL(38, 6) AS amount,
                     balance_text::DECIMAL(30, 2) AS balance, small_text::DECIMAL(20, 4) AS small
              FROM big ORDER BY id)
        TO '{folder / 'big.parquet'}' (FORMAT parquet)
        """
    )


def write_arrow(folder):
    import datetime

    import pyarrow as pa
    import pyarrow.feather as feather

    folder.mkdir(exist_ok=True)
    n = range(300)

    def column(values, kind, every):
        return pa.array([None if i % every == every - 1 else v for i, v in zip(n, values)], kind)

    table = pa.table(
        {
            "sensor": column([i % 7 - 3 for i in n], pa.int8(), 11),
            "level": column([(i * 37) % 2000 - 1000 for i in n], pa.int16(), 13),
            "code": column([(i * 101) % 60000 for i in n], pa.uint16(), 17),
            "count": column([i * 12345678 for i in n], pa.uint32(), 19),
            "reading": column([i * 1000003 - 50000000 for i in n], pa.int64(), 23),
            "ratio": column([((i * 7) % 40) / 8 for i in n], pa.float32(), 29),
            "value": column([(i * 13) % 97 / 3 for i in n], pa.float64(), 31),
            "ok": column([i % 3 == 0 for i in n], pa.bool_(), 37),
            "day": column([datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 50) for i in n], pa.date32(), 41),
            "site": column(["north", "south", "east", "west", "top"] * 60, pa.string(), 43).dictionary_encode(),
            "label": column([f"L{i % 9}" for i in n], pa.large_string(), 47),
            "at": column([datetime.datetime(2024, 1, 1, i % 24) for i in n], pa.timestamp("us"), 53),
        }
    )
    feather.write_feather(table, folder / "readings.arrow", compression="uncompressed")


if __name__ == "__main__":
    main()
