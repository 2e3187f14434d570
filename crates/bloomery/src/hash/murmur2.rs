//! Austin Appleby's MurmurHash2 (32-bit) and MurmurHash64A, as RedisBloom hashes items
//! with them (see [`crate::redisbloom`]). Both read the input as little-endian words, the
//! byte order of every machine RedisBloom's files come from, so a filter answers the same
//! on every platform.

const M32: u32 = 0x5bd1_e995;
const M64: u64 = 0xc6a4_a793_5bd1_e995;

/// MurmurHash2, 32 bits, with `seed`. Inputs longer than `i32::MAX` bytes hash as the
/// reference does with the length truncated to 32 bits (they never reach a filter).
pub fn murmur2_32(data: &[u8], seed: u32) -> u32 {
    let mut hash = seed ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes(word.try_into().expect("4 bytes"));
        k = k.wrapping_mul(M32);
        k ^= k >> 24;
        k = k.wrapping_mul(M32);
        hash = hash.wrapping_mul(M32) ^ k;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            hash ^= u32::from(byte) << (8 * i);
        }
        hash = hash.wrapping_mul(M32);
    }
    hash ^= hash >> 13;
    hash = hash.wrapping_mul(M32);
    hash ^ (hash >> 15)
}

/// MurmurHash64A with `seed`.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    let mut hash = seed ^ (data.len() as u64).wrapping_mul(M64);
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let mut k = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M64);
        k ^= k >> 47;
        k = k.wrapping_mul(M64);
        hash ^= k;
        hash = hash.wrapping_mul(M64);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            hash ^= u64::from(byte) << (8 * i);
        }
        hash = hash.wrapping_mul(M64);
    }
    hash ^= hash >> 47;
    hash = hash.wrapping_mul(M64);
    hash ^ (hash >> 47)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (input, RedisBloom's `a` and `b` with 64-bit hashing, and with 32-bit hashing), as
    /// the reference C code (MurmurHash2.c as RedisBloom 2.6.28 ships it) computed them:
    /// a = hash(input, seed), b = hash(input, a), with RedisBloom's seeds. Every tail
    /// length of both functions is covered.
    const REFERENCE: [(&[u8], u64, u64, u32, u32); 11] = [
        (
            b"",
            0x1ab11ea5a7b2c56e,
            0xbbddcb5ab56dd547,
            0x106e08d9,
            0x456d9087,
        ),
        (
            b"a",
            0x4292cee227b9150a,
            0x7e9b527031f50c11,
            0xa2d0b27c,
            0x2e36e8b4,
        ),
        (
            b"ab",
            0x2db1bf3a2e66542c,
            0x293d5ccc2e02cc02,
            0x12d8262a,
            0x87ae788a,
        ),
        (
            b"abc",
            0xca52f3863690cd7b,
            0x492e507dc7ce3d23,
            0x1c94221b,
            0x08e2b515,
        ),
        (
            b"abcd",
            0xc19f5358d983a6bf,
            0xe0cf7f46f508e46e,
            0xb11ab5f4,
            0x7796ea9c,
        ),
        (
            b"abcde",
            0xf27f6d3730b4f30f,
            0x7c733ac54ddf1280,
            0x1b897edd,
            0x263bdc4f,
        ),
        (
            b"abcdef",
            0x01ddc66cbc7b3e37,
            0x1b348e32fa3fef62,
            0x6f7fdafc,
            0x6f42db29,
        ),
        (
            b"abcdefg",
            0x9fa0b24601c1e9a9,
            0x593e9b0945664832,
            0xeb595499,
            0x3219f5ed,
        ),
        (
            b"abcdefgh",
            0xd435df7a565a8af1,
            0xbf3d673c0b1029cf,
            0xc70d55dd,
            0xd8fd56f3,
        ),
        (
            b"scaled:0",
            0x766bf35cfc981a7d,
            0x01b0456995702257,
            0x6692d9a8,
            0x94eacede,
        ),
        (
            b"hello, world! 0123456789",
            0x4e132ab29181f599,
            0xece6c7dc4192c438,
            0x200ad509,
            0x7b587d14,
        ),
    ];

    #[test]
    fn both_hashes_match_the_reference_code() {
        for (input, a64, b64, a32, b32) in REFERENCE {
            assert_eq!(murmur64a(input, 0xc6a4_a793_5bd1_e995), a64, "{input:?}");
            assert_eq!(murmur64a(input, a64), b64, "{input:?}");
            assert_eq!(murmur2_32(input, 0x9747_b28c), a32, "{input:?}");
            assert_eq!(murmur2_32(input, a32), b32, "{input:?}");
        }
    }
}
