//! Geospatial commands: GEOADD, GEOPOS, GEODIST, GEOHASH and the searches
//! (GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their `_RO`
//! forms) over a sorted set whose scores are 52-bit geohashes, as Redis 7.2
//! keeps them: the same scores, replies, error texts and search order.
//!
//! A point's score interleaves 26 bits of latitude (even bits) with 26 bits of
//! longitude (odd bits), each the coordinate's fixed-point offset within its
//! range (latitudes limited to the Web Mercator band). A search covers the
//! circle or box with the geohash cell of a size estimated from the radius
//! and its eight neighbours, reads each cell's score range in order, and keeps
//! the points inside the shape (haversine distance on Redis's earth radius).

use crate::args;
use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::commands::typed;
use crate::value::Value;
use crate::zset::{Entry, ZSetValue};
use crate::{errors, Context, Keyspace};
use bytes::Bytes;
use resp::Frame;

const SEARCH_COMPLEXITY: &str = "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape";

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "geoadd",
        arity: -5,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, RW | UPDATE)],
        categories: &["write", "geo", "slow"],
        group: "geo",
        summary: "Adds one or more members to a geospatial index. The key is created if it doesn't exist.",
        since: "3.2.0",
        complexity: "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
        handler: Handler::Keyspace(geoadd),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "geodist",
        arity: -4,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "geo", "slow"],
        group: "geo",
        summary: "Returns the distance between two members of a geospatial index.",
        since: "3.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(geodist),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "geohash",
        arity: -2,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "geo", "slow"],
        group: "geo",
        summary: "Returns members from a geospatial index as geohash strings.",
        since: "3.2.0",
        complexity: "O(1) for each member requested.",
        handler: Handler::Keyspace(geohash),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "geopos",
        arity: -2,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "geo", "slow"],
        group: "geo",
        summary: "Returns the longitude and latitude of members from a geospatial index.",
        since: "3.2.0",
        complexity: "O(1) for each member requested.",
        handler: Handler::Keyspace(geopos),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "georadius",
        arity: -6,
        flags: WRITE | DENYOOM,
        key_specs: &[
            KeySpec::single(1, RO | ACCESS),
            KeySpec::unknown(OW | UPDATE, STORE_NOTES),
        ],
        categories: &["write", "geo", "slow"],
        group: "geo",
        summary: "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.",
        since: "3.2.0",
        complexity: SEARCH_COMPLEXITY,
        handler: Handler::Keyspace(georadius),
        get_keys: Some(radius_keys),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "georadius_ro",
        arity: -6,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "geo", "slow"],
        group: "geo",
        summary: "Returns members from a geospatial index that are within a distance from a coordinate.",
        since: "3.2.10",
        complexity: SEARCH_COMPLEXITY,
        handler: Handler::Keyspace(georadius_ro),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "georadiusbymember",
        arity: -5,
        flags: WRITE | DENYOOM,
        key_specs: &[
            KeySpec::single(1, RO | ACCESS),
            KeySpec::unknown(OW | UPDATE, STORE_NOTES),
        ],
        categories: &["write", "geo", "slow"],
        group: "geo",
        summary: "Queries a geospatial index for members within a distance from a member, optionally stores the result.",
        since: "3.2.0",
        complexity: SEARCH_COMPLEXITY,
        handler: Handler::Keyspace(georadiusbymember),
        get_keys: Some(radius_keys),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "georadiusbymember_ro",
        arity: -5,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "geo", "slow"],
        group: "geo",
        summary: "Returns members from a geospatial index that are within a distance from a member.",
        since: "3.2.10",
        complexity: SEARCH_COMPLEXITY,
        handler: Handler::Keyspace(georadiusbymember_ro),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "geosearch",
        arity: -7,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "geo", "slow"],
        group: "geo",
        summary: "Queries a geospatial index for members inside an area of a box or a circle.",
        since: "6.2.0",
        complexity: SEARCH_COMPLEXITY,
        handler: Handler::Keyspace(geosearch),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "geosearchstore",
        arity: -8,
        flags: WRITE | DENYOOM,
        key_specs: &[
            KeySpec::single(1, OW | UPDATE),
            KeySpec::single(2, RO | ACCESS),
        ],
        categories: &["write", "geo", "slow"],
        group: "geo",
        summary: "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.",
        since: "6.2.0",
        complexity: SEARCH_COMPLEXITY,
        handler: Handler::Keyspace(geosearchstore),
        ..CommandSpec::DEFAULT
    },
];

const STORE_NOTES: &str = "For the optional STORE and STOREDIST keywords. Marked 'unknown' because they can appear anywhere among the options";

/// GEORADIUS's keys: the source, and the destination of STORE or STOREDIST.
fn radius_keys(arguments: &[Bytes]) -> Vec<(usize, u32)> {
    let mut keys = vec![(1, RO | ACCESS)];
    // GEORADIUSBYMEMBER key member radius unit; GEORADIUS key lon lat radius unit.
    let by_member = arguments
        .first()
        .is_some_and(|name| args::is_keyword(name, "georadiusbymember"));
    let first_option = if by_member { 5 } else { 6 };
    let mut index = first_option;
    while index < arguments.len() {
        let word = &arguments[index];
        if args::is_keyword(word, "count") {
            index += 1;
        } else if (args::is_keyword(word, "store") || args::is_keyword(word, "storedist"))
            && index + 1 < arguments.len()
        {
            keys.push((index + 1, OW | UPDATE));
            index += 1;
        }
        index += 1;
    }
    keys
}

// ---- Geohash ------------------------------------------------------------------------

const STEP_MAX: u32 = 26;
const LAT_MIN: f64 = -85.051_128_78;
const LAT_MAX: f64 = 85.051_128_78;
const LONG_MIN: f64 = -180.0;
const LONG_MAX: f64 = 180.0;
const EARTH_RADIUS_IN_METERS: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Range {
    min: f64,
    max: f64,
}

const MERCATOR_LONGITUDE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
const MERCATOR_LATITUDE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// A cell: `bits` of `step` bits per coordinate. The zero cell (no bits,
/// step 0) marks a neighbour left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Cell {
    bits: u64,
    step: u32,
}

impl Cell {
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

#[derive(Debug, Clone, Copy)]
struct Area {
    longitude: Range,
    latitude: Range,
}

/// Spreads the 32 bits of `value` to the even bit positions.
fn spread(value: u32) -> u64 {
    let mut x = u64::from(value);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// The even bit positions of `value` gathered into 32 bits.
fn squash(value: u64) -> u32 {
    let mut x = value & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    (x | (x >> 16)) as u32
}

/// The cell of `step` holding the point (Redis's `geohashEncode`), `None`
/// when the point is outside the ranges.
fn encode(
    longitude_range: Range,
    latitude_range: Range,
    longitude: f64,
    latitude: f64,
    step: u32,
) -> Option<Cell> {
    if !(LONG_MIN..=LONG_MAX).contains(&longitude)
        || !(LAT_MIN..=LAT_MAX).contains(&latitude)
        || latitude < latitude_range.min
        || latitude > latitude_range.max
        || longitude < longitude_range.min
        || longitude > longitude_range.max
    {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let latitude_offset =
        (latitude - latitude_range.min) / (latitude_range.max - latitude_range.min) * scale;
    let longitude_offset =
        (longitude - longitude_range.min) / (longitude_range.max - longitude_range.min) * scale;
    Some(Cell {
        bits: spread(latitude_offset as u32) | (spread(longitude_offset as u32) << 1),
        step,
    })
}

/// The area a cell covers (Redis's `geohashDecode`).
fn decode(longitude_range: Range, latitude_range: Range, cell: Cell) -> Area {
    let latitude_bits = f64::from(squash(cell.bits));
    let longitude_bits = f64::from(squash(cell.bits >> 1));
    let scale = (1u64 << cell.step) as f64;
    let latitude_span = latitude_range.max - latitude_range.min;
    let longitude_span = longitude_range.max - longitude_range.min;
    Area {
        latitude: Range {
            min: latitude_range.min + (latitude_bits / scale) * latitude_span,
            max: latitude_range.min + ((latitude_bits + 1.0) / scale) * latitude_span,
        },
        longitude: Range {
            min: longitude_range.min + (longitude_bits / scale) * longitude_span,
            max: longitude_range.min + ((longitude_bits + 1.0) / scale) * longitude_span,
        },
    }
}

/// A score's bits as Redis's `(uint64_t)` cast gives them on x86-64, for
/// scores that are no geohash too (GEOPOS of any sorted set's member): below
/// 2^63 truncated as a signed integer, at or above it offset by 2^63, and the
/// "integer indefinite" 2^63 where either is out of range.
fn score_bits(score: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let truncate = |value: f64| {
        if value.is_nan() || !(-TWO_63..TWO_63).contains(&value) {
            1u64 << 63
        } else {
            value as i64 as u64
        }
    };
    if score >= TWO_63 {
        truncate(score - TWO_63) ^ (1 << 63)
    } else {
        truncate(score)
    }
}

/// A stored score's point: the centre of its cell, clamped to the ranges.
fn point_of_score(score: f64) -> [f64; 2] {
    let cell = Cell {
        bits: score_bits(score),
        step: STEP_MAX,
    };
    let area = decode(MERCATOR_LONGITUDE, MERCATOR_LATITUDE, cell);
    let longitude = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let latitude = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [longitude, latitude]
}

/// The score a point is stored with.
fn score_of_point(longitude: f64, latitude: f64) -> Option<u64> {
    encode(
        MERCATOR_LONGITUDE,
        MERCATOR_LATITUDE,
        longitude,
        latitude,
        STEP_MAX,
    )
    .map(align_52)
}

/// A cell's bits moved to the top of 52 (its lowest score).
fn align_52(cell: Cell) -> u64 {
    cell.bits << (52 - cell.step * 2)
}

fn degrees_to_radians(degrees: f64) -> f64 {
    degrees * (std::f64::consts::PI / 180.0)
}

fn radians_to_degrees(radians: f64) -> f64 {
    radians / (std::f64::consts::PI / 180.0)
}

fn latitude_distance(latitude1: f64, latitude2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (degrees_to_radians(latitude2) - degrees_to_radians(latitude1)).abs()
}

/// Haversine distance in meters (Redis's `geohashGetDistance`).
fn distance(longitude1: f64, latitude1: f64, longitude2: f64, latitude2: f64) -> f64 {
    let longitude1 = degrees_to_radians(longitude1);
    let longitude2 = degrees_to_radians(longitude2);
    let v = ((longitude2 - longitude1) / 2.0).sin();
    if v == 0.0 {
        return latitude_distance(latitude1, latitude2);
    }
    let latitude1r = degrees_to_radians(latitude1);
    let latitude2r = degrees_to_radians(latitude2);
    let u = ((latitude2r - latitude1r) / 2.0).sin();
    let a = u * u + latitude1r.cos() * latitude2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// Longitude bits of a cell (odd positions) and latitude bits (even).
const LONGITUDE_BITS: u64 = 0xAAAA_AAAA_AAAA_AAAA;
const LATITUDE_BITS: u64 = 0x5555_5555_5555_5555;

/// Moves a cell by one along the coordinate whose bits `moving` selects
/// (`+1` east or north, `-1` west or south): Redis's `geohash_move_x` and
/// `geohash_move_y`, which add or subtract one in those bits alone.
fn move_cell(cell: Cell, moving: u64, direction: i8) -> Cell {
    let shift = 64 - cell.step * 2;
    let kept = cell.bits & !moving;
    let part = cell.bits & moving;
    // The other coordinate's bits, set, carry the addition across them.
    let filler = (!moving).checked_shr(shift).unwrap_or(0);
    let part = if direction > 0 {
        part.wrapping_add(filler.wrapping_add(1))
    } else {
        (part | filler).wrapping_sub(filler.wrapping_add(1))
    };
    Cell {
        bits: kept | (part & moving.checked_shr(shift).unwrap_or(0)),
        step: cell.step,
    }
}

fn move_x(cell: Cell, direction: i8) -> Cell {
    move_cell(cell, LONGITUDE_BITS, direction)
}

fn move_y(cell: Cell, direction: i8) -> Cell {
    move_cell(cell, LATITUDE_BITS, direction)
}

/// The searched cell's steps for a radius (Redis's
/// `geohashEstimateStepsByRadius`).
fn estimate_steps(range_meters: f64, latitude: f64) -> u32 {
    if range_meters == 0.0 {
        return STEP_MAX;
    }
    let mut range = range_meters;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&latitude) {
        step -= 1;
        if !(-80.0..=80.0).contains(&latitude) {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u32
}

#[derive(Debug, Clone, Copy)]
enum Shape {
    Circle { radius: f64 },
    Box { width: f64, height: f64 },
}

#[derive(Debug, Clone, Copy)]
struct Search {
    center: [f64; 2],
    shape: Shape,
    /// Meters per unit of the shape's sizes.
    conversion: f64,
}

impl Search {
    /// `[min longitude, min latitude, max longitude, max latitude]` around
    /// the shape (Redis's `geohashBoundingBox`).
    fn bounds(&self) -> [f64; 4] {
        let [longitude, latitude] = self.center;
        let (height, width) = match self.shape {
            Shape::Circle { radius } => (radius * self.conversion, radius * self.conversion),
            Shape::Box { width, height } => (
                self.conversion * height / 2.0,
                self.conversion * width / 2.0,
            ),
        };
        let latitude_delta = radians_to_degrees(height / EARTH_RADIUS_IN_METERS);
        let longitude_delta_top = radians_to_degrees(
            width / EARTH_RADIUS_IN_METERS / degrees_to_radians(latitude + latitude_delta).cos(),
        );
        let longitude_delta_bottom = radians_to_degrees(
            width / EARTH_RADIUS_IN_METERS / degrees_to_radians(latitude - latitude_delta).cos(),
        );
        let longitude_delta = if latitude < 0.0 {
            longitude_delta_bottom
        } else {
            longitude_delta_top
        };
        [
            longitude - longitude_delta,
            latitude - latitude_delta,
            longitude + longitude_delta,
            latitude + latitude_delta,
        ]
    }

    /// The cells to read, in Redis's order: the centre's, then north, south,
    /// east, west, north-east, north-west, south-east, south-west (Redis's
    /// `geohashCalculateAreasByShapeWGS84`); zero cells are left out.
    fn cells(&self) -> [Cell; 9] {
        let [min_longitude, min_latitude, max_longitude, max_latitude] = self.bounds();
        let [longitude, latitude] = self.center;
        let radius_meters = match self.shape {
            Shape::Circle { radius } => radius,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;
        let mut steps = estimate_steps(radius_meters, latitude);
        let around = |steps: u32| {
            let cell = encode(
                MERCATOR_LONGITUDE,
                MERCATOR_LATITUDE,
                longitude,
                latitude,
                steps,
            )
            .unwrap_or_default();
            let neighbours = [
                cell,
                move_y(cell, 1),
                move_y(cell, -1),
                move_x(cell, 1),
                move_x(cell, -1),
                move_y(move_x(cell, 1), 1),
                move_y(move_x(cell, -1), 1),
                move_y(move_x(cell, 1), -1),
                move_y(move_x(cell, -1), -1),
            ];
            (cell, neighbours)
        };
        let (mut cell, mut neighbours) = around(steps);
        let decoded = |cell: Cell| decode(MERCATOR_LONGITUDE, MERCATOR_LATITUDE, cell);
        let decrease = decoded(neighbours[1]).latitude.max < max_latitude
            || decoded(neighbours[2]).latitude.min > min_latitude
            || decoded(neighbours[3]).longitude.max < max_longitude
            || decoded(neighbours[4]).longitude.min > min_longitude;
        if steps > 1 && decrease {
            steps -= 1;
            (cell, neighbours) = around(steps);
        }
        if steps >= 2 {
            let area = decoded(cell);
            let zero = Cell::default();
            // Indexes: 1 north, 2 south, 3 east, 4 west, 5 north-east,
            // 6 north-west, 7 south-east, 8 south-west.
            if area.latitude.min < min_latitude {
                for index in [2, 8, 7] {
                    neighbours[index] = zero;
                }
            }
            if area.latitude.max > max_latitude {
                for index in [1, 5, 6] {
                    neighbours[index] = zero;
                }
            }
            if area.longitude.min < min_longitude {
                for index in [4, 8, 6] {
                    neighbours[index] = zero;
                }
            }
            if area.longitude.max > max_longitude {
                for index in [3, 7, 5] {
                    neighbours[index] = zero;
                }
            }
        }
        neighbours
    }

    /// The point's distance from the centre in meters when it lies inside
    /// the shape.
    fn contains(&self, point: [f64; 2]) -> Option<f64> {
        let [longitude, latitude] = self.center;
        match self.shape {
            Shape::Circle { radius } => {
                let meters = distance(longitude, latitude, point[0], point[1]);
                (meters <= radius * self.conversion).then_some(meters)
            }
            Shape::Box { width, height } => {
                if latitude_distance(point[1], latitude) > height * self.conversion / 2.0 {
                    return None;
                }
                if distance(point[0], point[1], longitude, point[1]) > width * self.conversion / 2.0
                {
                    return None;
                }
                Some(distance(longitude, latitude, point[0], point[1]))
            }
        }
    }
}

/// A point found by a search.
struct Found {
    member: Bytes,
    score: f64,
    point: [f64; 2],
    /// Meters from the centre.
    distance: f64,
}

/// The points of `zset` inside the search's shape, cell by cell in Redis's
/// order; with `limit` (ANY), stops once that many are found.
fn collect(zset: &ZSetValue, search: &Search, limit: usize) -> Vec<Found> {
    let mut found = Vec::new();
    let cells = search.cells();
    let mut last: Option<usize> = None;
    for (index, cell) in cells.iter().enumerate() {
        if cell.is_zero() {
            continue;
        }
        // A huge radius can make neighbours the same cell as the last read.
        if let Some(last) = last {
            if cells[last] == *cell && last != 0 {
                continue;
            }
        }
        if limit != 0 && !found.is_empty() && found.len() >= limit {
            break;
        }
        let min = align_52(*cell) as f64;
        let max = align_52(Cell {
            bits: cell.bits + 1,
            step: cell.step,
        }) as f64;
        let start = zset.partition_point(|entry| entry.score < min);
        for entry in zset.iter_from(start, false) {
            if entry.score >= max {
                break;
            }
            let point = point_of_score(entry.score);
            if let Some(meters) = search.contains(point) {
                found.push(Found {
                    member: Bytes::copy_from_slice(entry.member()),
                    score: entry.score,
                    point,
                    distance: meters,
                });
            }
            if limit != 0 && found.len() >= limit {
                break;
            }
        }
        last = Some(index);
    }
    found
}

// ---- Argument parsing ----------------------------------------------------------------

/// A longitude and latitude in range (Redis's `extractLongLatOrReply`).
fn parse_point(longitude: &[u8], latitude: &[u8]) -> Result<[f64; 2], Frame> {
    let longitude = args::parse_f64(longitude)?;
    let latitude = args::parse_f64(latitude)?;
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return Err(Frame::error_owned(format!(
            "ERR invalid longitude,latitude pair {longitude:.6},{latitude:.6}"
        )));
    }
    Ok([longitude, latitude])
}

/// Meters per unit: `m`, `km`, `ft` or `mi`.
fn parse_unit(unit: &[u8]) -> Result<f64, Frame> {
    if args::is_keyword(unit, "m") {
        Ok(1.0)
    } else if args::is_keyword(unit, "km") {
        Ok(1000.0)
    } else if args::is_keyword(unit, "ft") {
        Ok(0.3048)
    } else if args::is_keyword(unit, "mi") {
        Ok(1609.34)
    } else {
        Err(Frame::error(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

fn parse_size(argument: &[u8], not_numeric: &'static str) -> Result<f64, Frame> {
    args::parse_float_text(argument).ok_or_else(|| Frame::error(not_numeric))
}

/// A radius and its unit: the radius and meters per unit.
fn parse_radius(radius: &[u8], unit: &[u8]) -> Result<(f64, f64), Frame> {
    let radius = parse_size(radius, "ERR need numeric radius")?;
    if radius < 0.0 {
        return Err(Frame::error("ERR radius cannot be negative"));
    }
    Ok((radius, parse_unit(unit)?))
}

/// A point's stored position, `None` when the member is absent.
fn member_point(zset: &ZSetValue, member: &[u8]) -> Option<[f64; 2]> {
    zset.score(member).map(point_of_score)
}

const NOT_DECODED: &str = "ERR could not decode requested zset member";

// ---- GEOADD, GEOPOS, GEODIST, GEOHASH --------------------------------------------------

fn geoadd(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let mut first = 2;
    let (mut nx, mut xx) = (false, false);
    while let Some(option) = arguments.get(first) {
        if args::is_keyword(option, "nx") {
            nx = true;
        } else if args::is_keyword(option, "xx") {
            xx = true;
        } else if !args::is_keyword(option, "ch") {
            break;
        }
        first += 1;
    }
    if !(arguments.len() - first).is_multiple_of(3) || (nx && xx) {
        return Frame::error(errors::SYNTAX);
    }
    // ZADD with the options as given and a score per point.
    let mut zadd: Vec<Bytes> = Vec::with_capacity(first + (arguments.len() - first) / 3 * 2);
    zadd.push(Bytes::from_static(b"zadd"));
    zadd.extend(arguments[1..first].iter().cloned());
    for triple in arguments[first..].chunks(3) {
        let [longitude, latitude] = match parse_point(&triple[0], &triple[1]) {
            Ok(point) => point,
            Err(error) => return error,
        };
        let Some(score) = score_of_point(longitude, latitude) else {
            return Frame::error(errors::SYNTAX);
        };
        zadd.push(Bytes::from(score.to_string()));
        zadd.push(triple[2].clone());
    }
    super::zsets::zadd(keyspace, context, &zadd)
}

/// A coordinate as Redis writes it for GEOPOS and WITHCOORD (`%.17Lf` with
/// trailing zeros trimmed): a bulk string in RESP2, a double in RESP3.
fn coordinate(value: f64) -> Frame {
    let mut text = format!("{value:.17}");
    if text.contains('.') {
        while text.ends_with('0') {
            text.pop();
        }
        if text.ends_with('.') {
            text.pop();
        }
    }
    if text == "-0" {
        text = "0".to_string();
    }
    Frame::DoubleText(Bytes::from(text))
}

fn point_frame(point: [f64; 2]) -> Frame {
    Frame::Array(vec![coordinate(point[0]), coordinate(point[1])])
}

/// A distance as Redis writes it: four decimals.
fn distance_frame(meters: f64, conversion: f64) -> Frame {
    Frame::Bulk(Bytes::from(format!("{:.4}", meters / conversion)))
}

fn geopos(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let zset = match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
        Ok(zset) => zset,
        Err(error) => return error,
    };
    Frame::Array(
        arguments[2..]
            .iter()
            .map(|member| {
                zset.as_ref()
                    .and_then(|zset| member_point(zset, member))
                    .map_or(Frame::NullArray, point_frame)
            })
            .collect(),
    )
}

fn geodist(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let conversion = match arguments.len() {
        4 => 1.0,
        5 => match parse_unit(&arguments[4]) {
            Ok(conversion) => conversion,
            Err(error) => return error,
        },
        _ => return Frame::error(errors::SYNTAX),
    };
    let zset = match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
        Ok(Some(zset)) => zset,
        Ok(None) => return Frame::Null,
        Err(error) => return error,
    };
    match (
        member_point(zset, &arguments[2]),
        member_point(zset, &arguments[3]),
    ) {
        (Some(first), Some(second)) => distance_frame(
            distance(first[0], first[1], second[0], second[1]),
            conversion,
        ),
        _ => Frame::Null,
    }
}

fn geohash(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let zset = match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
        Ok(zset) => zset,
        Err(error) => return error,
    };
    let standard_latitude = Range {
        min: -90.0,
        max: 90.0,
    };
    Frame::Array(
        arguments[2..]
            .iter()
            .map(|member| {
                let Some([longitude, latitude]) =
                    zset.as_ref().and_then(|zset| member_point(zset, member))
                else {
                    return Frame::Null;
                };
                // Re-encoded over the standard latitude range, as geohash.org
                // spells it; 52 bits make ten characters, the eleventh is 0.
                let Some(cell) = encode(
                    MERCATOR_LONGITUDE,
                    standard_latitude,
                    longitude,
                    latitude,
                    STEP_MAX,
                ) else {
                    return Frame::Null;
                };
                let text: Vec<u8> = (0..11)
                    .map(|index| {
                        let symbol = if index == 10 {
                            0
                        } else {
                            ((cell.bits >> (52 - (index + 1) * 5)) & 0x1f) as usize
                        };
                        ALPHABET[symbol]
                    })
                    .collect();
                Frame::Bulk(Bytes::from(text))
            })
            .collect(),
    )
}

// ---- Searches -------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// GEORADIUS (`store` whether STORE is allowed).
    Radius { store: bool },
    /// GEORADIUSBYMEMBER.
    ByMember { store: bool },
    /// GEOSEARCH, GEOSEARCHSTORE (`store`).
    Search { store: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    None,
    Ascending,
    Descending,
}

fn georadius(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    search_generic(keyspace, context, arguments, Kind::Radius { store: true })
}

fn georadius_ro(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    search_generic(keyspace, context, arguments, Kind::Radius { store: false })
}

fn georadiusbymember(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    search_generic(keyspace, context, arguments, Kind::ByMember { store: true })
}

fn georadiusbymember_ro(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
) -> Frame {
    search_generic(
        keyspace,
        context,
        arguments,
        Kind::ByMember { store: false },
    )
}

fn geosearch(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    search_generic(keyspace, context, arguments, Kind::Search { store: false })
}

fn geosearchstore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    search_generic(keyspace, context, arguments, Kind::Search { store: true })
}

/// What a search does once planned: answer, or store (delete when empty).
enum Outcome {
    Reply(Frame),
    Store {
        destination: Bytes,
        entries: Vec<Entry>,
    },
}

/// Redis's `georadiusGeneric`, with its order of checks.
fn search_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    kind: Kind,
) -> Frame {
    let source = match kind {
        Kind::Search { store: true } => 2,
        _ => 1,
    };
    let outcome = match typed::read::<ZSetValue>(keyspace, context, &arguments[source]) {
        Ok(zset) => plan(zset.map(|zset| &*zset), arguments, kind),
        Err(error) => return error,
    };
    match outcome {
        Outcome::Reply(reply) => reply,
        Outcome::Store {
            destination,
            entries,
        } => {
            let stored = entries.len();
            if stored == 0 {
                keyspace.delete(context, &destination);
            } else {
                let zset = ZSetValue::from_entries(entries).unwrap_or_default();
                keyspace.set(context, &destination, Value::ZSet(zset), None);
            }
            Frame::Integer(stored as i64)
        }
    }
}

fn plan(zset: Option<&ZSetValue>, arguments: &[Bytes], kind: Kind) -> Outcome {
    use Outcome::Reply;
    let mut center: Option<[f64; 2]> = None;
    let mut shape: Option<(Shape, f64)> = None;
    let mut destination: Option<Bytes> = None;
    let base = match kind {
        Kind::Radius { .. } => {
            match parse_point(&arguments[2], &arguments[3]) {
                Ok(point) => center = Some(point),
                Err(error) => return Reply(error),
            }
            match parse_radius(&arguments[4], &arguments[5]) {
                Ok((radius, conversion)) => shape = Some((Shape::Circle { radius }, conversion)),
                Err(error) => return Reply(error),
            }
            6
        }
        Kind::ByMember { .. } => {
            if let Some(zset) = &zset {
                match member_point(zset, &arguments[2]) {
                    Some(point) => center = Some(point),
                    None => return Reply(Frame::error(NOT_DECODED)),
                }
                match parse_radius(&arguments[3], &arguments[4]) {
                    Ok((radius, conversion)) => {
                        shape = Some((Shape::Circle { radius }, conversion))
                    }
                    Err(error) => return Reply(error),
                }
            }
            5
        }
        Kind::Search { store } => {
            if store {
                destination = Some(arguments[1].clone());
                3
            } else {
                2
            }
        }
    };
    let searching = matches!(kind, Kind::Search { .. });
    let may_store = matches!(
        kind,
        Kind::Radius { store: true } | Kind::ByMember { store: true }
    );
    let (mut with_distance, mut with_hash, mut with_coordinates) = (false, false, false);
    let (mut from_member, mut from_point, mut by_radius, mut by_box) = (false, false, false, false);
    let mut order = Order::None;
    let mut any = false;
    let mut count: i64 = 0;
    let mut store_distance = false;
    let options = &arguments[base.min(arguments.len())..];
    let mut index = 0;
    while index < options.len() {
        let word = &options[index];
        let remaining = options.len() - index - 1;
        if args::is_keyword(word, "withdist") {
            with_distance = true;
        } else if args::is_keyword(word, "withhash") {
            with_hash = true;
        } else if args::is_keyword(word, "withcoord") {
            with_coordinates = true;
        } else if args::is_keyword(word, "any") {
            any = true;
        } else if args::is_keyword(word, "asc") {
            order = Order::Ascending;
        } else if args::is_keyword(word, "desc") {
            order = Order::Descending;
        } else if args::is_keyword(word, "count") && remaining >= 1 {
            count = match args::parse_i64(&options[index + 1]) {
                Ok(count) => count,
                Err(error) => return Reply(error),
            };
            if count <= 0 {
                return Reply(Frame::error("ERR COUNT must be > 0"));
            }
            index += 1;
        } else if (args::is_keyword(word, "store") || args::is_keyword(word, "storedist"))
            && remaining >= 1
            && may_store
        {
            destination = Some(options[index + 1].clone());
            store_distance = args::is_keyword(word, "storedist");
            index += 1;
        } else if args::is_keyword(word, "storedist") && kind == (Kind::Search { store: true }) {
            store_distance = true;
        } else if args::is_keyword(word, "frommember") && remaining >= 1 && searching && !from_point
        {
            if let Some(zset) = &zset {
                match member_point(zset, &options[index + 1]) {
                    Some(point) => center = Some(point),
                    None => return Reply(Frame::error(NOT_DECODED)),
                }
            }
            from_member = true;
            index += 1;
        } else if args::is_keyword(word, "fromlonlat")
            && remaining >= 2
            && searching
            && !from_member
        {
            match parse_point(&options[index + 1], &options[index + 2]) {
                Ok(point) => center = Some(point),
                Err(error) => return Reply(error),
            }
            from_point = true;
            index += 2;
        } else if args::is_keyword(word, "byradius") && remaining >= 2 && searching && !by_box {
            match parse_radius(&options[index + 1], &options[index + 2]) {
                Ok((radius, conversion)) => shape = Some((Shape::Circle { radius }, conversion)),
                Err(error) => return Reply(error),
            }
            by_radius = true;
            index += 2;
        } else if args::is_keyword(word, "bybox") && remaining >= 3 && searching && !by_radius {
            let width = match parse_size(&options[index + 1], "ERR need numeric width") {
                Ok(width) => width,
                Err(error) => return Reply(error),
            };
            let height = match parse_size(&options[index + 2], "ERR need numeric height") {
                Ok(height) => height,
                Err(error) => return Reply(error),
            };
            if width < 0.0 || height < 0.0 {
                return Reply(Frame::error("ERR height or width cannot be negative"));
            }
            let conversion = match parse_unit(&options[index + 3]) {
                Ok(conversion) => conversion,
                Err(error) => return Reply(error),
            };
            shape = Some((Shape::Box { width, height }, conversion));
            by_box = true;
            index += 3;
        } else {
            return Reply(Frame::error(errors::SYNTAX));
        }
        index += 1;
    }
    if destination.is_some() && (with_distance || with_hash || with_coordinates) {
        let what = if kind == (Kind::Search { store: true }) {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Reply(Frame::error_owned(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(&arguments[0]);
    if searching && !(from_member || from_point) {
        return Reply(Frame::error_owned(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if searching && !(by_radius || by_box) {
        return Reply(Frame::error_owned(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Reply(Frame::error("ERR the ANY argument requires COUNT argument"));
    }
    let (Some(zset), Some(center), Some((shape, conversion))) = (zset, center, shape) else {
        // No source key.
        return match destination {
            Some(destination) => Outcome::Store {
                destination,
                entries: Vec::new(),
            },
            None => Reply(Frame::Array(Vec::new())),
        };
    };
    if count != 0 && order == Order::None && !any {
        order = Order::Ascending;
    }
    let search = Search {
        center,
        shape,
        conversion,
    };
    let limit = if any { count as usize } else { 0 };
    let mut found = collect(zset, &search, limit);
    if found.is_empty() && destination.is_none() {
        return Reply(Frame::Array(Vec::new()));
    }
    let returned = if count == 0 {
        found.len()
    } else {
        found.len().min(count as usize)
    };
    match order {
        Order::Ascending => found.sort_by(|a, b| a.distance.total_cmp(&b.distance)),
        Order::Descending => found.sort_by(|a, b| b.distance.total_cmp(&a.distance)),
        Order::None => {}
    }
    found.truncate(returned);
    let Some(destination) = destination else {
        let options =
            usize::from(with_distance) + usize::from(with_hash) + usize::from(with_coordinates);
        return Reply(Frame::Array(
            found
                .into_iter()
                .map(|point| {
                    if options == 0 {
                        return Frame::Bulk(point.member);
                    }
                    let mut parts = vec![Frame::Bulk(point.member)];
                    if with_distance {
                        parts.push(distance_frame(point.distance, conversion));
                    }
                    if with_hash {
                        parts.push(Frame::Integer(point.score as i64));
                    }
                    if with_coordinates {
                        parts.push(point_frame(point.point));
                    }
                    Frame::Array(parts)
                })
                .collect(),
        ));
    };
    let entries: Vec<Entry> = found
        .iter()
        .map(|point| {
            let score = if store_distance {
                point.distance / conversion
            } else {
                point.score
            };
            Entry::new(score, &point.member)
        })
        .collect();
    Outcome::Store {
        destination,
        entries,
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::Harness;
    use resp::Frame;

    fn bulk(text: &str) -> Frame {
        Frame::bulk(text.to_string())
    }

    fn coordinate(text: &str) -> Frame {
        Frame::DoubleText(bytes::Bytes::from(text.to_string()))
    }

    fn text(frame: &Frame) -> String {
        format!("{frame:?}")
    }

    /// Redis's documentation example, with the replies Redis gives.
    #[test]
    fn sicily_as_in_redis_documentation() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&[
                "GEOADD",
                "Sicily",
                "13.361389",
                "38.115556",
                "Palermo",
                "15.087269",
                "37.502669",
                "Catania"
            ]),
            Frame::Integer(2)
        );
        assert_eq!(
            h.run(&["ZSCORE", "Sicily", "Palermo"]),
            Frame::Double(3479099956230698.0)
        );
        assert_eq!(
            h.run(&["GEODIST", "Sicily", "Palermo", "Catania"]),
            bulk("166274.1516")
        );
        assert_eq!(
            h.run(&["GEODIST", "Sicily", "Palermo", "Catania", "km"]),
            bulk("166.2742")
        );
        assert_eq!(
            h.run(&["GEOPOS", "Sicily", "Palermo", "NonExisting"]),
            Frame::Array(vec![
                Frame::Array(vec![
                    coordinate("13.36138933897018433"),
                    coordinate("38.11555639549629859")
                ]),
                Frame::NullArray
            ])
        );
        assert_eq!(
            h.run(&["GEOHASH", "Sicily", "Palermo", "Catania"]),
            Frame::Array(vec![bulk("sqc8b49rny0"), bulk("sqdtr74hyu0")])
        );
        assert_eq!(
            h.run(&[
                "GEORADIUS",
                "Sicily",
                "15",
                "37",
                "200",
                "km",
                "WITHDIST",
                "ASC"
            ]),
            Frame::Array(vec![
                Frame::Array(vec![bulk("Catania"), bulk("56.4413")]),
                Frame::Array(vec![bulk("Palermo"), bulk("190.4424")]),
            ])
        );
        assert_eq!(
            text(&h.run(&[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYBOX",
                "400",
                "400",
                "km",
                "ASC",
                "WITHCOORD",
                "WITHDIST"
            ])),
            text(&Frame::Array(vec![
                Frame::Array(vec![
                    bulk("Catania"),
                    bulk("56.4413"),
                    Frame::Array(vec![
                        coordinate("15.08726745843887329"),
                        coordinate("37.50266842333162032")
                    ])
                ]),
                Frame::Array(vec![
                    bulk("Palermo"),
                    bulk("190.4424"),
                    Frame::Array(vec![
                        coordinate("13.36138933897018433"),
                        coordinate("38.11555639549629859")
                    ])
                ]),
            ]))
        );
        assert_eq!(
            h.run(&[
                "GEOSEARCHSTORE",
                "near",
                "Sicily",
                "FROMMEMBER",
                "Palermo",
                "BYRADIUS",
                "100",
                "km",
                "STOREDIST"
            ]),
            Frame::Integer(1)
        );
        assert_eq!(
            h.run(&["ZRANGE", "near", "0", "-1", "WITHSCORES"]),
            Frame::Array(vec![bulk("Palermo"), Frame::Double(0.0)])
        );
    }

    /// Members of any sorted set have a position: the score's bits as
    /// Redis's cast reads them, clamped (values taken from Redis).
    #[test]
    fn any_score_decodes_as_redis_decodes_it() {
        let mut h = Harness::new();
        h.run(&[
            "ZADD",
            "t",
            "-1",
            "a",
            "-1e308",
            "b",
            "inf",
            "c",
            "1e17",
            "e",
            "4503599627370495",
            "g",
            "4503599627370496",
            "h",
            "9.3e18",
            "j",
            "2e19",
            "k",
        ]);
        let expected = [
            ("a", "180", "85.0511287799999991"),
            ("b", "180", "-85.05112751263942528"),
            ("c", "-179.99999731779098511", "-85.05112751263942528"),
            ("e", "180", "85.0511287799999991"),
            ("g", "179.99999731779098511", "85.05112751263942528"),
            ("h", "-179.99999731779098511", "85.0511287799999991"),
            ("j", "180", "85.0511287799999991"),
            ("k", "-179.99999731779098511", "-85.05112751263942528"),
        ];
        for (member, longitude, latitude) in expected {
            assert_eq!(
                h.run(&["GEOPOS", "t", member]),
                Frame::Array(vec![Frame::Array(vec![
                    coordinate(longitude),
                    coordinate(latitude)
                ])]),
                "{member}"
            );
        }
    }

    #[test]
    fn geo_errors_are_redis_texts() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["GEOADD", "g", "200", "10", "m"]),
            Frame::error_owned(
                "ERR invalid longitude,latitude pair 200.000000,10.000000".to_string()
            )
        );
        assert_eq!(
            h.run(&["GEOADD", "g", "NX", "XX", "1", "2", "m"]),
            Frame::error("ERR syntax error")
        );
        h.run(&["GEOADD", "g", "1", "2", "m"]);
        assert_eq!(
            h.run(&["GEODIST", "g", "m", "m", "yards"]),
            Frame::error("ERR unsupported unit provided. please use M, KM, FT, MI")
        );
        assert_eq!(
            h.run(&["GEORADIUS", "g", "1", "2", "-1", "m"]),
            Frame::error("ERR radius cannot be negative")
        );
        assert_eq!(
            h.run(&["GEOSEARCH", "g", "BYRADIUS", "1", "m", "ASC", "WITHDIST"]),
            Frame::error_owned(
                "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH"
                    .to_string()
            )
        );
        assert_eq!(
            h.run(&["GEOSEARCH", "g", "FROMMEMBER", "x", "BYRADIUS", "1", "m"]),
            Frame::error("ERR could not decode requested zset member")
        );
        assert_eq!(
            h.run(&["GEORADIUS", "g", "1", "2", "1", "m", "ANY"]),
            Frame::error("ERR the ANY argument requires COUNT argument")
        );
        assert_eq!(
            h.run(&["GEORADIUS", "g", "1", "2", "1", "m", "STORE", "d", "WITHDIST"]),
            Frame::error_owned(
                "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
                    .to_string()
            )
        );
        assert_eq!(
            h.run(&["GEORADIUS_RO", "g", "1", "2", "1", "m", "STORE", "d"]),
            Frame::error("ERR syntax error")
        );
        assert_eq!(
            h.run(&[
                "GEOSEARCH",
                "missing",
                "FROMMEMBER",
                "x",
                "BYBOX",
                "1",
                "1",
                "m"
            ]),
            Frame::Array(Vec::new())
        );
    }
}
