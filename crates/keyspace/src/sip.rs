//! SipHash-1-3 of one byte string, computed in one call. The result is the
//! one a streaming SipHash-1-3 hasher gives for the same key and a single
//! `write` of the bytes (no length prefix), so tables keep their layout; the
//! one-shot form reads whole words and skips the streaming hasher's tail
//! buffering, which dominated hashing short keys.

#[inline(always)]
fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// SipHash-1-3 of `data` under the key `(k0, k1)`.
#[inline]
pub fn sip13(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let m = u64::from_le_bytes(word.try_into().expect("chunks of eight"));
        v[3] ^= m;
        round(&mut v);
        v[0] ^= m;
    }
    // The last block: the remaining bytes, little-endian, under the length's
    // low byte.
    let mut last = (data.len() as u64) << 56;
    for (at, &byte) in words.remainder().iter().enumerate() {
        last |= u64::from(byte) << (8 * at);
    }
    v[3] ^= last;
    round(&mut v);
    v[0] ^= last;
    v[2] ^= 0xff;
    round(&mut v);
    round(&mut v);
    round(&mut v);
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use siphasher::sip::SipHasher13;
    use std::hash::Hasher;

    fn streamed(k0: u64, k1: u64, data: &[u8]) -> u64 {
        let mut hasher = SipHasher13::new_with_keys(k0, k1);
        hasher.write(data);
        hasher.finish()
    }

    #[test]
    fn every_length_up_to_three_words_hashes_as_the_streaming_hasher() {
        let data: Vec<u8> = (0..=40u8).map(|byte| byte.wrapping_mul(37)).collect();
        for length in 0..=data.len() {
            assert_eq!(
                sip13(
                    0x0706_0504_0302_0100,
                    0x0f0e_0d0c_0b0a_0908,
                    &data[..length]
                ),
                streamed(
                    0x0706_0504_0302_0100,
                    0x0f0e_0d0c_0b0a_0908,
                    &data[..length]
                ),
                "{length} bytes"
            );
        }
    }

    proptest! {
        #[test]
        fn any_bytes_hash_as_the_streaming_hasher(
            k0 in any::<u64>(),
            k1 in any::<u64>(),
            data in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            prop_assert_eq!(sip13(k0, k1, &data), streamed(k0, k1, &data));
        }
    }
}
