//! Redis's HyperLogLog representation, byte for byte, so that a value written by
//! PFADD here reads back in Redis (GET, then SET there) and the other way round.
//!
//! A HyperLogLog is a string value:
//!
//! ```text
//! +------+----------+-----------+---------------------------+-----------
//! | HYLL | encoding | 3 unused  | cached cardinality (8 LE) | registers
//! +------+----------+-----------+---------------------------+-----------
//! ```
//!
//! The cached cardinality is valid unless the top bit of its last byte is set.
//! There are 16384 registers of 6 bits (the first 14 bits of a 64-bit
//! MurmurHash64A pick a register, the position of the first set bit in the other
//! 50 is the value). Two encodings:
//!
//! - **dense** (0): the registers packed least significant bit first, 12288 bytes;
//! - **sparse** (1): run-length opcodes. `00xxxxxx` ZERO (1..64 zero registers),
//!   `01xxxxxx yyyyyyyy` XZERO (1..16384 zero registers, 14-bit length),
//!   `1vvvvvxx` VAL (1..4 registers holding 1..32).
//!
//! A sparse value turns dense when an update would make it longer than
//! `hll-sparse-max-bytes` (3000, header included) or needs a register above 32.
//! The cardinality estimate is the one Redis 7 uses (Otmar Ertl's improved raw
//! estimator over the register histogram), computed with the same double
//! operations so the same registers give the same count.

/// The header: magic, encoding, three unused bytes, cached cardinality.
pub const HEADER_BYTES: usize = 16;
/// Registers in every HyperLogLog (2^14).
pub const REGISTERS: usize = 1 << PRECISION_BITS;
/// Bits of the hash that pick the register.
const PRECISION_BITS: u32 = 14;
/// Bits of the hash left for the run of zeros.
const RUN_BITS: u32 = 64 - PRECISION_BITS;
const REGISTER_BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << REGISTER_BITS) - 1;
/// Length of a dense value, header included.
pub const DENSE_BYTES: usize = HEADER_BYTES + (REGISTERS * REGISTER_BITS).div_ceil(8);
/// `hll-sparse-max-bytes`' default: the longest sparse value, header included.
pub const SPARSE_MAX_BYTES: usize = 3000;

const MAGIC: &[u8; 4] = b"HYLL";
const ENCODING_DENSE: u8 = 0;
const ENCODING_SPARSE: u8 = 1;
/// Byte 15's top bit: set when the cached cardinality is stale.
const CACHE_INVALID_BIT: u8 = 0x80;

const HASH_SEED: u64 = 0xadc8_3b19;

const ZERO_MAX_LENGTH: usize = 64;
const XZERO_MAX_LENGTH: usize = 16384;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LENGTH: usize = 4;

/// The registers of an HLL value do not add up (a sparse value whose opcodes
/// cover more or fewer than 16384 registers). Redis answers `INVALIDOBJ`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// Whether `bytes` pass Redis's check of an HLL string: long enough for the
/// header, the magic, a known encoding, and the exact dense length when dense.
/// (The registers of a sparse value are only checked when read.)
pub fn is_hll(bytes: &[u8]) -> bool {
    bytes.len() >= HEADER_BYTES
        && &bytes[..4] == MAGIC
        && bytes[4] <= ENCODING_SPARSE
        && (bytes[4] != ENCODING_DENSE || bytes.len() == DENSE_BYTES)
}

pub fn is_dense(hll: &[u8]) -> bool {
    hll[4] == ENCODING_DENSE
}

/// A new, empty HLL as Redis creates it: sparse, one XZERO opcode covering every
/// register, cached cardinality 0 (valid).
pub fn new_sparse() -> Vec<u8> {
    let mut hll = Vec::with_capacity(HEADER_BYTES + 2);
    hll.extend_from_slice(MAGIC);
    hll.push(ENCODING_SPARSE);
    hll.resize(HEADER_BYTES, 0);
    let mut remaining = REGISTERS;
    while remaining > 0 {
        let run = remaining.min(XZERO_MAX_LENGTH);
        hll.extend_from_slice(&xzero(run));
        remaining -= run;
    }
    hll
}

/// The cached cardinality, if it is valid.
pub fn cached_cardinality(hll: &[u8]) -> Option<u64> {
    if hll[15] & CACHE_INVALID_BIT != 0 {
        return None;
    }
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hll[8..16]);
    Some(u64::from_le_bytes(bytes))
}

pub fn set_cached_cardinality(hll: &mut [u8], cardinality: u64) {
    hll[8..16].copy_from_slice(&cardinality.to_le_bytes());
}

pub fn invalidate_cache(hll: &mut [u8]) {
    hll[15] |= CACHE_INVALID_BIT;
}

/// MurmurHash64A (Austin Appleby), reading 8-byte blocks little endian, as Redis
/// does on every platform.
pub fn murmur_hash64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (position, &byte) in tail.iter().enumerate() {
            h ^= (byte as u64) << (8 * position);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register `element` belongs to and the value it proposes: one more than
/// the number of zero bits before the first set bit of the hash's upper 50 bits
/// (1..=51).
pub fn register_and_value(element: &[u8]) -> (usize, u8) {
    let hash = murmur_hash64a(element, HASH_SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The guard bit bounds the count at RUN_BITS + 1.
    let rest = (hash >> PRECISION_BITS) | (1 << RUN_BITS);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---- Dense registers ------------------------------------------------------------

/// Register `index` of a dense register area (the bytes after the header).
pub fn dense_get(registers: &[u8], index: usize) -> u8 {
    let byte = index * REGISTER_BITS / 8;
    let shift = (index * REGISTER_BITS) & 7;
    let low = registers[byte] as u32;
    let high = registers.get(byte + 1).copied().unwrap_or(0) as u32;
    (((low >> shift) | (high << (8 - shift))) & REGISTER_MAX as u32) as u8
}

fn dense_put(registers: &mut [u8], index: usize, value: u8) {
    let byte = index * REGISTER_BITS / 8;
    let shift = (index * REGISTER_BITS) & 7;
    let value = value as u32;
    let mask = REGISTER_MAX as u32;
    registers[byte] &= !((mask << shift) as u8);
    registers[byte] |= (value << shift) as u8;
    if let Some(next) = registers.get_mut(byte + 1) {
        *next &= !((mask >> (8 - shift)) as u8);
        *next |= (value >> (8 - shift)) as u8;
    }
}

/// Raises register `index` to `value` if it is lower; true if it changed.
fn dense_raise(registers: &mut [u8], index: usize, value: u8) -> bool {
    if value > dense_get(registers, index) {
        dense_put(registers, index, value);
        true
    } else {
        false
    }
}

// ---- Sparse opcodes ---------------------------------------------------------------

fn is_zero(opcode: u8) -> bool {
    opcode & 0xc0 == 0
}

fn is_xzero(opcode: u8) -> bool {
    opcode & 0xc0 == 0x40
}

fn is_val(opcode: u8) -> bool {
    opcode & 0x80 != 0
}

fn zero_length(opcode: u8) -> usize {
    (opcode & 0x3f) as usize + 1
}

/// An XZERO's length; a second byte missing at the end of the value reads as 0,
/// as the terminating NUL of Redis's string does.
fn xzero_length(sparse: &[u8], at: usize) -> usize {
    let low = sparse.get(at + 1).copied().unwrap_or(0) as usize;
    (((sparse[at] & 0x3f) as usize) << 8 | low) + 1
}

fn val_value(opcode: u8) -> u8 {
    ((opcode >> 2) & 0x1f) + 1
}

fn val_length(opcode: u8) -> usize {
    (opcode & 0x3) as usize + 1
}

fn zero(length: usize) -> u8 {
    debug_assert!((1..=ZERO_MAX_LENGTH).contains(&length));
    (length - 1) as u8
}

fn xzero(length: usize) -> [u8; 2] {
    debug_assert!((1..=XZERO_MAX_LENGTH).contains(&length));
    let stored = length - 1;
    [(stored >> 8) as u8 | 0x40, (stored & 0xff) as u8]
}

fn val(value: u8, length: usize) -> u8 {
    debug_assert!((1..=VAL_MAX_VALUE).contains(&value));
    debug_assert!((1..=VAL_MAX_LENGTH).contains(&length));
    ((value - 1) << 2) | (length - 1) as u8 | 0x80
}

/// A zero run of `length` as ZERO or XZERO, appended to `out`.
fn push_zero_run(out: &mut Vec<u8>, length: usize) {
    if length > ZERO_MAX_LENGTH {
        out.extend_from_slice(&xzero(length));
    } else {
        out.push(zero(length));
    }
}

/// One decoded opcode: how many registers it covers, their value, its size.
struct Opcode {
    span: usize,
    value: u8,
    bytes: usize,
}

fn decode(sparse: &[u8], at: usize) -> Opcode {
    let opcode = sparse[at];
    if is_zero(opcode) {
        Opcode {
            span: zero_length(opcode),
            value: 0,
            bytes: 1,
        }
    } else if is_xzero(opcode) {
        Opcode {
            span: xzero_length(sparse, at),
            value: 0,
            bytes: 2,
        }
    } else {
        Opcode {
            span: val_length(opcode),
            value: val_value(opcode),
            bytes: 1,
        }
    }
}

/// Calls `visit(first register, span, value)` for every VAL opcode of a sparse
/// register area; `Corrupt` unless they cover exactly the 16384 registers. A
/// VAL run that would pass the end stops the walk (and so fails), as in Redis.
fn walk_sparse(sparse: &[u8], mut visit: impl FnMut(usize, usize, u8)) -> Result<(), Corrupt> {
    let mut at = 0;
    let mut index = 0usize;
    while at < sparse.len() {
        let opcode = decode(sparse, at);
        if opcode.value != 0 {
            if index + opcode.span > REGISTERS {
                break;
            }
            visit(index, opcode.span, opcode.value);
        }
        index += opcode.span;
        at += opcode.bytes;
    }
    if index == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// Converts a sparse value to dense in place (keeping the header's cached
/// cardinality); a dense value is left alone.
pub fn to_dense(hll: &mut Vec<u8>) -> Result<(), Corrupt> {
    if is_dense(hll) {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_BYTES];
    dense[..HEADER_BYTES].copy_from_slice(&hll[..HEADER_BYTES]);
    dense[4] = ENCODING_DENSE;
    let registers = &mut dense[HEADER_BYTES..];
    walk_sparse(&hll[HEADER_BYTES..], |first, span, value| {
        for index in first..first + span {
            dense_put(registers, index, value);
        }
    })?;
    *hll = dense;
    Ok(())
}

/// Raises register `index` of a sparse value to `value` if it is lower, splitting
/// the opcode that covers it and merging equal neighbours afterwards exactly as
/// Redis does (so the bytes match), or promoting the value to dense when the
/// result would not fit. True if the register changed.
fn sparse_raise(hll: &mut Vec<u8>, index: usize, value: u8) -> Result<bool, Corrupt> {
    if value > VAL_MAX_VALUE {
        return promote_and_raise(hll, index, value);
    }
    // Step 1: the opcode covering `index`, and the one before it.
    let mut at = HEADER_BYTES;
    let mut previous: Option<usize> = None;
    let mut first = 0usize;
    let mut opcode = None;
    while at < hll.len() {
        let found = decode(hll, at);
        if index < first + found.span {
            opcode = Some(found);
            break;
        }
        previous = Some(at);
        at += found.bytes;
        first += found.span;
    }
    let Some(opcode) = opcode else {
        return Err(Corrupt);
    };
    let last = first + opcode.span - 1;
    let byte = hll[at];

    // Step 2: the cases that change one byte in place.
    if is_val(byte) {
        if opcode.value >= value {
            return Ok(false);
        }
        if opcode.span == 1 {
            hll[at] = val(value, 1);
            return Ok(merge_neighbours(hll, previous));
        }
    }
    if is_zero(byte) && opcode.span == 1 {
        hll[at] = val(value, 1);
        return Ok(merge_neighbours(hll, previous));
    }

    // Step 3: split the opcode into up to three.
    let mut sequence = Vec::with_capacity(5);
    if opcode.value == 0 {
        if index != first {
            push_zero_run(&mut sequence, index - first);
        }
        sequence.push(val(value, 1));
        if index != last {
            push_zero_run(&mut sequence, last - index);
        }
    } else {
        if index != first {
            sequence.push(val(opcode.value, index - first));
        }
        sequence.push(val(value, 1));
        if index != last {
            sequence.push(val(opcode.value, last - index));
        }
    }
    let old_length = hll.len();
    let new_length = old_length + sequence.len() - opcode.bytes;
    if new_length > old_length && new_length > SPARSE_MAX_BYTES {
        return promote_and_raise(hll, index, value);
    }
    // An XZERO cut short by the end of the value still counts as two bytes, as
    // in Redis (whose second byte is the string's terminator).
    let end = (at + opcode.bytes).min(old_length);
    hll.splice(at..end, sequence);
    hll.truncate(new_length);
    Ok(merge_neighbours(hll, previous))
}

/// Step 4 of a sparse update: merges adjacent VAL opcodes of equal value whose
/// runs fit one opcode, looking at up to five opcodes from the one before the
/// change. Invalidates the cache; always answers true (the register changed).
fn merge_neighbours(hll: &mut Vec<u8>, previous: Option<usize>) -> bool {
    let mut at = previous.unwrap_or(HEADER_BYTES);
    let mut budget = 5;
    while at < hll.len() && budget > 0 {
        budget -= 1;
        let byte = hll[at];
        if is_xzero(byte) {
            at += 2;
            continue;
        }
        if is_zero(byte) {
            at += 1;
            continue;
        }
        if let Some(&next) = hll.get(at + 1) {
            if is_val(next) && val_value(byte) == val_value(next) {
                let length = val_length(byte) + val_length(next);
                if length <= VAL_MAX_LENGTH {
                    hll[at + 1] = val(val_value(byte), length);
                    hll.remove(at);
                    continue;
                }
            }
        }
        at += 1;
    }
    invalidate_cache(hll);
    true
}

fn promote_and_raise(hll: &mut Vec<u8>, index: usize, value: u8) -> Result<bool, Corrupt> {
    to_dense(hll)?;
    let changed = dense_raise(&mut hll[HEADER_BYTES..], index, value);
    debug_assert!(changed, "a promotion always changes the register");
    Ok(changed)
}

/// Raises register `index` to `value` if lower, in either encoding (PFMERGE's
/// write step). True if it changed.
pub fn raise(hll: &mut Vec<u8>, index: usize, value: u8) -> Result<bool, Corrupt> {
    if is_dense(hll) {
        Ok(dense_raise(&mut hll[HEADER_BYTES..], index, value))
    } else {
        sparse_raise(hll, index, value)
    }
}

/// Adds one element (PFADD); true if a register changed. The caller invalidates
/// the cached cardinality of a changed dense value.
pub fn add(hll: &mut Vec<u8>, element: &[u8]) -> Result<bool, Corrupt> {
    let (index, value) = register_and_value(element);
    raise(hll, index, value)
}

/// PFSELFTEST: checks this implementation on `rng`'s values. The dense
/// registers must read back what was written, for 1000 random fillings; then
/// one sparse and one dense value take the same elements (up to 1,000,000),
/// and at each power of ten both must give the same count, within five
/// standard errors of the truth (the sparse value turns dense on the way,
/// past its size limit, as PFADD's does).
pub fn self_test(rng: &mut crate::Rng) -> Result<(), String> {
    let mut registers = vec![0u8; DENSE_BYTES - HEADER_BYTES];
    let mut written = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (index, value) in written.iter_mut().enumerate() {
            *value = (rng.next_u64() % (REGISTER_MAX as u64 + 1)) as u8;
            dense_put(&mut registers, index, *value);
        }
        for (index, &value) in written.iter().enumerate() {
            let read = dense_get(&registers, index);
            if read != value {
                return Err(format!(
                    "TESTFAILED Register error at index {index}: expected {value}, got {read}"
                ));
            }
        }
    }
    let mut sparse = new_sparse();
    let mut dense = new_sparse();
    to_dense(&mut dense).map_err(|_| "TESTFAILED converting to dense".to_string())?;
    let relative_error = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint = 1u64;
    let seed = rng.next_u64();
    for element in 1..=1_000_000u64 {
        let bytes = (element ^ seed).to_le_bytes();
        let added = add(&mut sparse, &bytes).map_err(|_| "TESTFAILED sparse add".to_string())?;
        if added && sparse.len() > SPARSE_MAX_BYTES {
            to_dense(&mut sparse).map_err(|_| "TESTFAILED promotion".to_string())?;
        }
        add(&mut dense, &bytes).map_err(|_| "TESTFAILED dense add".to_string())?;
        if element != checkpoint {
            continue;
        }
        let (from_sparse, from_dense) = (
            count(&sparse).map_err(|_| "TESTFAILED sparse count".to_string())?,
            count(&dense).map_err(|_| "TESTFAILED dense count".to_string())?,
        );
        if from_sparse != from_dense {
            return Err(format!(
                "TESTFAILED Sparse and dense disagree at {element}: {from_sparse} and {from_dense}"
            ));
        }
        // Five standard errors, and never less than one element.
        let allowed = (element as f64 * relative_error * 5.0).max(1.0);
        if (from_dense as f64 - element as f64).abs() > allowed {
            return Err(format!(
                "TESTFAILED Too big error. card:{element} abserr:{}",
                (from_dense as f64 - element as f64).abs()
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

// ---- Counting -----------------------------------------------------------------------

/// How many registers hold each value (0..=63).
type Histogram = [u32; 64];

fn histogram(hll: &[u8]) -> Result<Histogram, Corrupt> {
    let mut histogram = [0u32; 64];
    let registers = &hll[HEADER_BYTES..];
    if is_dense(hll) {
        for index in 0..REGISTERS {
            histogram[dense_get(registers, index) as usize] += 1;
        }
        return Ok(histogram);
    }
    // Redis counts every opcode's run, then checks the total.
    let mut at = 0;
    let mut total = 0usize;
    while at < registers.len() {
        let opcode = decode(registers, at);
        histogram[opcode.value as usize] += opcode.span as u32;
        total += opcode.span;
        at += opcode.bytes;
    }
    if total == REGISTERS {
        Ok(histogram)
    } else {
        Err(Corrupt)
    }
}

/// The estimated cardinality of an HLL value (not using the cache).
pub fn count(hll: &[u8]) -> Result<u64, Corrupt> {
    Ok(estimate(&histogram(hll)?))
}

/// Raises `max[i]` to register `i` of `hll` for every register (the union that
/// multi-key PFCOUNT and PFMERGE build).
pub fn merge_into(max: &mut [u8; REGISTERS], hll: &[u8]) -> Result<(), Corrupt> {
    let registers = &hll[HEADER_BYTES..];
    if is_dense(hll) {
        for (index, slot) in max.iter_mut().enumerate() {
            *slot = (*slot).max(dense_get(registers, index));
        }
        return Ok(());
    }
    walk_sparse(registers, |first, span, value| {
        for slot in &mut max[first..first + span] {
            *slot = (*slot).max(value);
        }
    })
}

/// The estimated cardinality of one register per byte (a union).
pub fn count_registers(max: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u32; 64];
    for &value in max.iter() {
        histogram[(value & REGISTER_MAX) as usize] += 1;
    }
    estimate(&histogram)
}

/// Ertl's improved raw estimator ("New cardinality estimation algorithms for
/// HyperLogLog sketches", 2017), as Redis 7 computes it.
fn estimate(histogram: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let q = RUN_BITS as usize;
    let mut z = m * tau((m - histogram[q + 1] as f64) / m);
    for j in (1..=q).rev() {
        z += histogram[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    // 1 / (2 ln 2): the estimator's constant for an infinite number of registers.
    const ALPHA_INFINITY: f64 = 0.721_347_520_444_481_7;
    (ALPHA_INFINITY * m * m / z).round() as u64
}

/// sigma(x) = x + sum over k >= 1 of x^(2^k) * 2^(k-1), iterated until it stops
/// changing.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if previous == z {
            return z;
        }
    }
}

/// tau(x) = (1 - x - sum over k >= 1 of (1 - x^(2^-k))^2 * 2^-k) / 3, iterated
/// until it stops changing.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        let gap = 1.0 - x;
        z -= gap * gap * y;
        if previous == z {
            return z / 3.0;
        }
    }
}

/// The opcodes of a sparse value as text (`z:<run>`, `Z:<run>`, `v:<value>,<run>`),
/// for tests and debugging.
pub fn describe_sparse(hll: &[u8]) -> String {
    let sparse = &hll[HEADER_BYTES..];
    let mut words = Vec::new();
    let mut at = 0;
    while at < sparse.len() {
        let opcode = decode(sparse, at);
        let byte = sparse[at];
        words.push(if is_zero(byte) {
            format!("z:{}", opcode.span)
        } else if is_xzero(byte) {
            format!("Z:{}", opcode.span)
        } else {
            format!("v:{},{}", opcode.value, opcode.span)
        });
        at += opcode.bytes;
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_value_matches_redis() {
        let hll = new_sparse();
        let mut expected = b"HYLL\x01\x00\x00\x00".to_vec();
        expected.extend_from_slice(&[0; 8]);
        expected.extend_from_slice(&[0x7f, 0xff]);
        assert_eq!(hll, expected);
        assert!(is_hll(&hll));
        assert_eq!(cached_cardinality(&hll), Some(0));
        assert_eq!(count(&hll), Ok(0));
        assert_eq!(describe_sparse(&hll), "Z:16384");
        assert_eq!(DENSE_BYTES, 12304);
    }

    #[test]
    fn dense_registers_are_packed_as_redis_packs_them() {
        let mut registers = vec![0u8; DENSE_BYTES - HEADER_BYTES];
        // Register 0 is the low 6 bits of byte 0; register 1 the top 2 bits of
        // byte 0 and the low 4 of byte 1; register 2 the top 4 of byte 1 and the
        // low 2 of byte 2; register 3 the top 6 of byte 2.
        dense_put(&mut registers, 0, 0b10_1010);
        assert_eq!(registers[0], 0b0010_1010);
        dense_put(&mut registers, 1, 0b11_0111);
        assert_eq!(registers[0], 0b1110_1010);
        assert_eq!(registers[1], 0b0000_1101);
        dense_put(&mut registers, 3, 63);
        assert_eq!(registers[2], 0b1111_1100);
        dense_put(&mut registers, REGISTERS - 1, 63);
        assert_eq!(registers[registers.len() - 1], 0b1111_1100);
        assert_eq!(dense_get(&registers, 0), 0b10_1010);
        assert_eq!(dense_get(&registers, 1), 0b11_0111);
        assert_eq!(dense_get(&registers, 2), 0);
        assert_eq!(dense_get(&registers, 3), 63);
        assert_eq!(dense_get(&registers, REGISTERS - 1), 63);
        // Every register keeps its own value.
        let values: Vec<u8> = (0..REGISTERS).map(|i| (i * 7 % 64) as u8).collect();
        for (index, &value) in values.iter().enumerate() {
            dense_put(&mut registers, index, value);
        }
        for (index, &value) in values.iter().enumerate() {
            assert_eq!(dense_get(&registers, index), value, "register {index}");
        }
    }

    #[test]
    fn murmur_hash_vectors() {
        // Computed by hand from the algorithm: the empty input is the seed mixed
        // with a zero length.
        let m: u64 = 0xc6a4_a793_5bd1_e995;
        let mut h = HASH_SEED;
        h ^= h >> 47;
        h = h.wrapping_mul(m);
        h ^= h >> 47;
        assert_eq!(murmur_hash64a(b"", HASH_SEED), h);
        // One tail byte: h = (seed ^ 1*m) ^ byte, times m, then the final mix.
        let mut h = HASH_SEED ^ m;
        h ^= b'a' as u64;
        h = h.wrapping_mul(m);
        h ^= h >> 47;
        h = h.wrapping_mul(m);
        h ^= h >> 47;
        assert_eq!(murmur_hash64a(b"a", HASH_SEED), h);
    }

    #[test]
    fn sparse_updates_split_and_merge_like_redis() {
        let mut hll = new_sparse();
        assert_eq!(raise(&mut hll, 0, 3), Ok(true));
        assert_eq!(describe_sparse(&hll), "v:3,1 Z:16383");
        assert_eq!(cached_cardinality(&hll), None);
        assert_eq!(raise(&mut hll, 0, 2), Ok(false));
        assert_eq!(raise(&mut hll, 1, 3), Ok(true));
        assert_eq!(describe_sparse(&hll), "v:3,2 Z:16382");
        assert_eq!(raise(&mut hll, 100, 1), Ok(true));
        assert_eq!(describe_sparse(&hll), "v:3,2 Z:98 v:1,1 Z:16283");
        assert_eq!(raise(&mut hll, 70, 5), Ok(true));
        assert_eq!(describe_sparse(&hll), "v:3,2 Z:68 v:5,1 z:29 v:1,1 Z:16283");
        // New runs next to an equal VAL merge into it.
        assert_eq!(raise(&mut hll, 2, 3), Ok(true));
        assert_eq!(raise(&mut hll, 3, 3), Ok(true));
        assert!(describe_sparse(&hll).starts_with("v:3,4 Z:66 v:5,1"));
        // A VAL run split in the middle.
        assert_eq!(raise(&mut hll, 1, 7), Ok(true));
        assert!(describe_sparse(&hll).starts_with("v:3,1 v:7,1 v:3,2 Z:66"));
        assert_eq!(raise(&mut hll, REGISTERS - 1, 32), Ok(true));
        assert!(describe_sparse(&hll).ends_with("Z:16282 v:32,1"));
        assert!(!is_dense(&hll));
        // A value above 32 promotes.
        assert_eq!(raise(&mut hll, 5, 33), Ok(true));
        assert!(is_dense(&hll));
        assert_eq!(hll.len(), DENSE_BYTES);
        let registers = &hll[HEADER_BYTES..];
        assert_eq!(dense_get(registers, 0), 3);
        assert_eq!(dense_get(registers, 1), 7);
        assert_eq!(dense_get(registers, 5), 33);
        assert_eq!(dense_get(registers, 70), 5);
        assert_eq!(dense_get(registers, REGISTERS - 1), 32);
    }

    #[test]
    fn sparse_and_dense_count_alike() {
        let mut sparse = new_sparse();
        let mut dense = new_sparse();
        to_dense(&mut dense).unwrap();
        for element in 0..2000u32 {
            let element = element.to_string();
            assert_eq!(
                add(&mut sparse, element.as_bytes()),
                add(&mut dense, element.as_bytes())
            );
            if element.ends_with("00") {
                assert_eq!(count(&sparse), count(&dense), "{element}");
            }
        }
        // 2000 elements no longer fit 3000 bytes of sparse opcodes.
        assert!(is_dense(&sparse));
        assert_eq!(&sparse[HEADER_BYTES..], &dense[HEADER_BYTES..]);
    }

    #[test]
    fn corrupt_sparse_values_are_detected() {
        let mut short = new_sparse();
        short[HEADER_BYTES + 1] = 0xfe; // XZERO of 16383
        assert_eq!(count(&short), Err(Corrupt));
        let mut max = [0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &short), Err(Corrupt));
        assert_eq!(to_dense(&mut short.clone()), Err(Corrupt));
        // Register 16383 is not covered.
        assert_eq!(raise(&mut short, REGISTERS - 1, 1), Err(Corrupt));
        let mut long = new_sparse();
        long.push(0x00); // one more zero register
        assert_eq!(count(&long), Err(Corrupt));
        assert_eq!(merge_into(&mut max, &long), Err(Corrupt));
        // A VAL past the end: counting fails, but the union stops before it and
        // accepts the value, as Redis's does.
        let mut past_end = new_sparse();
        past_end.push(val(2, 1));
        assert_eq!(count(&past_end), Err(Corrupt));
        assert_eq!(merge_into(&mut max, &past_end), Ok(()));
    }

    #[test]
    fn estimator_edges() {
        let mut max = [0u8; REGISTERS];
        assert_eq!(count_registers(&max), 0);
        max[0] = 1;
        assert_eq!(count_registers(&max), 1);
        max.fill(51);
        // Every register saturated: the estimate is large but finite.
        assert!(count_registers(&max) > 1u64 << 50);
    }
}
