//! RedisBloom's scalable Bloom filter (the `BF.*` type of RedisBloom 2.6.28), bit for bit:
//! the same hashing, sizing, bit layout and growth, so that on the same items it sets the
//! same bits, meets the same false positives and grows at the same moments. Written to
//! RedisBloom's behaviour (learned from its source, not copied) and checked against its
//! replies, for Redis deployments moving from RedisBloom (and, later, for reading its dumps).
//!
//! A chain of links. Each link is a plain Bloom filter sized for `entries` items at error
//! rate `e`: `bpe = |ln e| / (ln 2)²` bits per entry, `floor(entries · bpe)` bits (at least
//! one) rounded up to whole 64-bit words, and `ceil(ln 2 · bpe)` hashes. An item's two
//! hashes are `a = MurmurHash64A(item, 0xc6a4a7935bd1e995)` and `b = MurmurHash64A(item,
//! a)`; hash `i` sets bit `(a + i·b) mod m` (64-bit wrapping arithmetic), bit `x` being bit
//! `x mod 8` of byte `x / 8` (so bit `x mod 64` of little-endian word `x / 64`). An item is
//! present if any link has all its bits. A new item goes into the newest link; when that
//! link holds `entries` items a new one starts with `entries · expansion` entries at half
//! its error rate. The first link of a scaling chain is at half the requested rate, the
//! only link of a non-scaling one at the full rate, which reports itself full instead of
//! growing. An insert that finds the item already present changes nothing and is not
//! counted.

use crate::error::{Error, Result, inconsistent};
use crate::format::native::{ParamReader, ParamWriter, Persist, Variant};
use crate::sizing::check_fpp;

/// The most links a chain may have (RedisBloom has no limit; 1024 links at expansion 1
/// already hold 1024 times the first link's items, with rates down to 2^-1024 of it).
pub const MAX_LINKS: usize = 1024;

/// The most words one link may have: 2^34 (128 GiB); a larger link is refused when sized.
pub const MAX_LINK_WORDS: u64 = 1 << 34;

/// ln 2 and (ln 2)² as RedisBloom writes them: its sizing uses these roundings, not
/// `std::f64::consts::LN_2` (which could round a hash count differently).
#[allow(clippy::approx_constant)]
const LN2: f64 = 0.693147180559945;
const LN2_SQUARED: f64 = 0.480453013918201;

/// The seed of an item's first hash.
const SEED: u64 = 0xc6a4a7935bd1e995;

/// MurmurHash64A (Austin Appleby, public domain) of `data` with `seed`, reading 8-byte
/// blocks little-endian.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4a7935bd1e995;
    const R: u32 = 47;
    // RedisBloom passes the length as a C int: lengths past 2^31 would differ, and Redis
    // strings stop at 512 MB.
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
        for (index, &byte) in tail.iter().enumerate() {
            h ^= u64::from(byte) << (8 * index);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// An item's two hashes.
fn item_hashes(item: &[u8]) -> (u64, u64) {
    let a = murmur64a(item, SEED);
    (a, murmur64a(item, a))
}

/// Bits per entry at error rate `error`.
fn bits_per_entry(error: f64) -> f64 {
    (error.ln() / LN2_SQUARED).abs()
}

/// The hashes of a link at error rate `error`.
fn hashes_for(error: f64) -> u64 {
    (LN2 * bits_per_entry(error)).ceil() as u64
}

/// The shape of a link: (words, hashes).
fn link_shape(entries: u64, error: f64) -> Result<(u64, u32)> {
    let sizing = |problem: String| Error::Sizing {
        expected_items: entries,
        fpp: error,
        problem,
    };
    if entries == 0 || !(error > 0.0 && error < 1.0) {
        return Err(sizing(
            "RedisBloom's links need at least one entry and a rate in (0, 1)".into(),
        ));
    }
    let bits = ((entries as f64 * bits_per_entry(error)) as u64).max(1);
    let words = bits.div_ceil(64);
    if words > MAX_LINK_WORDS {
        return Err(sizing(format!(
            "it needs {words} 64-bit words, more than the {MAX_LINK_WORDS} a link may have"
        )));
    }
    let hashes = u32::try_from(hashes_for(error)).map_err(|_| sizing("too many hashes".into()))?;
    Ok((words, hashes.max(1)))
}

/// One link of the chain.
#[derive(Clone, Debug, PartialEq)]
struct Link {
    words: Vec<u64>,
    hashes: u32,
    entries: u64,
    error: f64,
    len: u64,
}

impl Link {
    fn new(entries: u64, error: f64) -> Result<Self> {
        let (words, hashes) = link_shape(entries, error)?;
        let mut bits = Vec::new();
        bits.try_reserve_exact(words as usize)
            .map_err(|_| Error::Sizing {
                expected_items: entries,
                fpp: error,
                problem: format!("{} bytes could not be allocated", words * 8),
            })?;
        bits.resize(words as usize, 0);
        Ok(Self {
            words: bits,
            hashes,
            entries,
            error,
            len: 0,
        })
    }

    fn num_bits(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    fn positions(&self, (a, b): (u64, u64)) -> impl Iterator<Item = u64> {
        let bits = self.num_bits();
        (0..u64::from(self.hashes)).map(move |i| a.wrapping_add(i.wrapping_mul(b)) % bits)
    }

    fn contains(&self, hashes: (u64, u64)) -> bool {
        self.positions(hashes)
            .all(|x| self.words[(x / 64) as usize] & (1 << (x % 64)) != 0)
    }

    fn insert(&mut self, hashes: (u64, u64)) {
        let bits = self.num_bits();
        let (a, b) = hashes;
        for i in 0..u64::from(self.hashes) {
            let x = a.wrapping_add(i.wrapping_mul(b)) % bits;
            self.words[(x / 64) as usize] |= 1 << (x % 64);
        }
    }
}

/// One link of a [`RedisBloomFilter`], as [`RedisBloomFilter::links`] reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkInfo {
    /// The items it takes before the next link starts.
    pub entries: u64,
    /// The items added to it.
    pub len: u64,
    /// Its bits (64 × its words).
    pub num_bits: u64,
    /// Its hashes.
    pub num_hashes: u32,
    /// Its error rate.
    pub error: f64,
}

/// RedisBloom's scalable filter, bit for bit (see the [module](self) documentation).
///
/// ```
/// use bloomery::RedisBloomFilter;
///
/// let mut filter = RedisBloomFilter::new(4, 0.01, 1, true)?;
/// for i in 0..100 {
///     filter.insert(i.to_string().as_bytes())?;
/// }
/// // RedisBloom 2.6.28 answers the same: 92 items added (8 were false positives), 23 links.
/// assert_eq!((filter.len(), filter.links().len()), (92, 23));
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RedisBloomFilter {
    links: Vec<Link>,
    expansion: u32,
    scaling: bool,
}

impl RedisBloomFilter {
    /// A chain starting with room for `capacity` items at error rate `error` (half of it for
    /// the first link of a scaling chain), each new link `expansion` times the last.
    pub fn new(capacity: u64, error: f64, expansion: u32, scaling: bool) -> Result<Self> {
        check_fpp(error)?;
        check_expansion(expansion)?;
        let first_error = if scaling { error * 0.5 } else { error };
        Ok(Self {
            links: vec![Link::new(capacity, first_error)?],
            expansion,
            scaling,
        })
    }

    /// The bytes of the first link of such a chain, computed without allocating.
    pub fn first_link_bytes(capacity: u64, error: f64, scaling: bool) -> Result<u64> {
        check_fpp(error)?;
        let first_error = if scaling { error * 0.5 } else { error };
        Ok(link_shape(capacity, first_error)?.0 * 8)
    }

    /// Whether `item` might be present.
    pub fn contains(&self, item: &[u8]) -> bool {
        let hashes = item_hashes(item);
        self.links.iter().any(|link| link.contains(hashes))
    }

    /// Adds `item`: `Ok(false)` if it was (probably) present already; `Err(Error::Full)` when
    /// a non-scaling chain holds its capacity or a scaling one cannot grow further.
    pub fn insert(&mut self, item: &[u8]) -> Result<bool> {
        self.insert_within(item, None)
    }

    /// As [`insert`](Self::insert), refusing with [`Error::MemoryLimit`] (before allocating) a
    /// new link that would take the chain past `memory_limit` bytes.
    pub fn insert_within(&mut self, item: &[u8], memory_limit: Option<u64>) -> Result<bool> {
        let hashes = item_hashes(item);
        if self.links.iter().any(|link| link.contains(hashes)) {
            return Ok(false);
        }
        let newest = self.links.last().expect("at least one link");
        if newest.len >= newest.entries {
            if !self.scaling || self.links.len() >= MAX_LINKS {
                return Err(Error::Full {
                    capacity: self.capacity(),
                });
            }
            let entries = newest
                .entries
                .checked_mul(u64::from(self.expansion))
                .ok_or(Error::Full {
                    capacity: self.capacity(),
                })?;
            let error = newest.error * 0.5;
            if let Some(limit) = memory_limit {
                let (words, _) = link_shape(entries, error)?;
                let needed = (self.memory_bytes() as u64).saturating_add(words.saturating_mul(8));
                if needed > limit {
                    return Err(Error::MemoryLimit { needed, limit });
                }
            }
            let link = Link::new(entries, error)?;
            self.links.push(link);
        }
        let newest = self.links.last_mut().expect("at least one link");
        newest.insert(hashes);
        newest.len += 1;
        Ok(true)
    }

    /// Items added (inserts that returned `Ok(true)`).
    pub fn len(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, link| sum.saturating_add(link.len))
    }

    /// Whether no item was added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The items the links hold before the next one is needed (RedisBloom's `Capacity`).
    pub fn capacity(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, link| sum.saturating_add(link.entries))
    }

    /// The growth factor.
    pub fn expansion(&self) -> u32 {
        self.expansion
    }

    /// Whether the chain grows.
    pub fn scaling(&self) -> bool {
        self.scaling
    }

    /// Each link's shape and fill, oldest first.
    pub fn links(&self) -> Vec<LinkInfo> {
        self.links
            .iter()
            .map(|link| LinkInfo {
                entries: link.entries,
                len: link.len,
                num_bits: link.num_bits(),
                num_hashes: link.hashes,
                error: link.error,
            })
            .collect()
    }

    /// Bytes of bits in all links.
    pub fn memory_bytes(&self) -> usize {
        self.links.iter().map(|link| link.words.len() * 8).sum()
    }

    /// The probability that a fresh item is reported present now.
    pub fn expected_fpp(&self) -> f64 {
        1.0 - self
            .links
            .iter()
            .map(|link| {
                let set: u64 = link.words.iter().map(|word| u64::from(word.count_ones())).sum();
                1.0 - crate::sizing::fill_fpp(set, link.num_bits(), link.hashes)
            })
            .product::<f64>()
    }
}

fn check_expansion(expansion: u32) -> Result<()> {
    if expansion == 0 {
        return Err(Error::Parameter {
            name: "expansion",
            value: "0".into(),
            allowed: "at least 1",
        });
    }
    Ok(())
}

impl crate::FilterStats for RedisBloomFilter {
    fn estimated_len(&self) -> u64 {
        self.len()
    }

    fn expected_fpp(&self) -> f64 {
        RedisBloomFilter::expected_fpp(self)
    }

    fn memory_bytes(&self) -> usize {
        RedisBloomFilter::memory_bytes(self)
    }
}

/// Parameters: `flags` u32 (0: RedisBloom's 64-bit hashes and positions modulo the bit
/// count; other values are reserved), `expansion` u32, `scaling` u8, link count u32, then
/// per link its `entries` u64, items u64, `error` f64, hashes u32 and word count u64.
/// Payload: the links' words in order, little-endian.
impl Persist for RedisBloomFilter {
    const VARIANT: Variant = Variant::RedisBloom;

    fn params(&self) -> Vec<u8> {
        let mut params = ParamWriter::new()
            .u32(0)
            .u32(self.expansion)
            .u8(u8::from(self.scaling))
            .u32(self.links.len() as u32);
        for link in &self.links {
            params = params
                .u64(link.entries)
                .u64(link.len)
                .f64(link.error)
                .u32(link.hashes)
                .u64(link.words.len() as u64);
        }
        params.finish()
    }

    fn payload_pieces(&self) -> Vec<std::borrow::Cow<'_, [u8]>> {
        self.links
            .iter()
            .map(|link| crate::format::native::words_as_le_bytes(&link.words))
            .collect()
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        let mut reader = ParamReader::new(params);
        let flags = reader.u32()?;
        if flags != 0 {
            return Err(inconsistent(format!("redisbloom flags {flags}; 0 allowed")));
        }
        let expansion = reader.u32()?;
        check_expansion(expansion)?;
        let scaling = match reader.u8()? {
            0 => false,
            1 => true,
            other => return Err(inconsistent(format!("scaling flag {other}; 0 or 1 allowed"))),
        };
        let count = reader.u32()? as usize;
        if count == 0 || count > MAX_LINKS {
            return Err(inconsistent(format!("{count} links; 1..={MAX_LINKS} allowed")));
        }
        let mut links = Vec::with_capacity(count);
        let mut rest = payload;
        for index in 0..count {
            let entries = reader.u64()?;
            let len = reader.u64()?;
            let error = reader.f64()?;
            let hashes = reader.u32()?;
            let words = reader.u64()?;
            if entries == 0 || !(error > 0.0 && error < 1.0) {
                return Err(inconsistent(format!(
                    "link {index}: entries {entries} and error {error}; at least 1 and in (0, 1) allowed"
                )));
            }
            if u64::from(hashes) != hashes_for(error).max(1) {
                return Err(inconsistent(format!(
                    "link {index}: {hashes} hashes where its error rate {error} gives {}",
                    hashes_for(error).max(1)
                )));
            }
            if words == 0 || words > MAX_LINK_WORDS || words.saturating_mul(8) > rest.len() as u64 {
                return Err(inconsistent(format!(
                    "link {index}: {words} words, with {} payload bytes left",
                    rest.len()
                )));
            }
            let (bytes, tail) = rest.split_at(words as usize * 8);
            rest = tail;
            links.push(Link {
                words: bytes
                    .chunks_exact(8)
                    .map(|word| u64::from_le_bytes(word.try_into().expect("8 bytes")))
                    .collect(),
                hashes,
                entries,
                error,
                len,
            });
        }
        reader.finish()?;
        if !rest.is_empty() {
            return Err(inconsistent(format!(
                "{} payload bytes after the last link",
                rest.len()
            )));
        }
        Ok(Self {
            links,
            expansion,
            scaling,
        })
    }

    fn from_parts_of_version(version: u16, params: &[u8], payload: &[u8]) -> Result<Self> {
        // Variant 9 exists from format version 2 on.
        if version < 2 {
            return Err(inconsistent(format!(
                "format version {version} has no redisbloom variant (it was added in version 2)"
            )));
        }
        Self::from_parts(params, payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur64a_matches_the_reference() {
        // Values of the reference C implementation (MurmurHash64A), every tail length.
        let vectors: [(&[u8], u64, u64); 7] = [
            (b"", 0x0, 0x0000000000000000),
            (b"hello", 0x0, 0x1e68d17c457bf117),
            (b"hello, world!!!", 0x1234, 0x1fa0b36b10744ed3),
            (b"0", 0xc6a4a7935bd1e995, 0xd9d9bcaf40fdaad5),
            (b"99", 0xc6a4a7935bd1e995, 0x6b662397f13e2168),
            (b"abcdefgh", 0x7, 0xa89b26892d2057ed),
            (b"abcdefghi", 0x7, 0xc21d5f88bde4fcc2),
        ];
        for (data, seed, hash) in vectors {
            assert_eq!(murmur64a(data, seed), hash, "{data:?}");
        }
    }

    #[test]
    fn links_are_sized_as_redisbloom_sizes_them() {
        // BF.DEBUG of RedisBloom 2.6.28 (its flow tests test_debug and test_insert).
        assert_eq!(link_shape(10, 0.005).unwrap(), (2, 8));
        assert_eq!(link_shape(20, 0.0025).unwrap(), (4, 9));
        assert_eq!(link_shape(40, 0.00125).unwrap(), (9, 10));
        assert_eq!(link_shape(80, 0.000625).unwrap(), (20, 11));
        assert_eq!(link_shape(50_000, 0.0005).unwrap(), (12_360, 11));
        assert_eq!(link_shape(3200, 1.5625e-05).unwrap(), (1152, 16));
        // A rate near 1 still gets one bit (rounded to one word) and one hash.
        assert_eq!(link_shape(100, 0.9999999999999999).unwrap(), (1, 1));
    }

    #[test]
    fn a_non_scaling_chain_is_full_at_its_capacity() {
        let mut filter = RedisBloomFilter::new(3, 0.01, 2, false).unwrap();
        for item in ["0", "1", "2"] {
            assert!(filter.insert(item.as_bytes()).unwrap());
        }
        assert!(matches!(
            filter.insert(b"extra"),
            Err(Error::Full { capacity: 3 })
        ));
        assert_eq!(filter.links()[0].error, 0.01);
    }

    #[test]
    fn growth_past_a_memory_limit_is_refused() {
        let mut filter = RedisBloomFilter::new(10, 0.01, 2, true).unwrap();
        let limit = Some(filter.memory_bytes() as u64);
        let refused = (0..100u32)
            .map(|i| filter.insert_within(&i.to_le_bytes(), limit))
            .find(Result::is_err);
        assert!(matches!(refused, Some(Err(Error::MemoryLimit { .. }))));
        assert_eq!(filter.links().len(), 1);
    }

    #[test]
    fn round_trips_and_refuses_inconsistent_parameters() {
        let mut filter = RedisBloomFilter::new(10, 0.01, 2, true).unwrap();
        for i in 0..100u32 {
            filter.insert(&i.to_le_bytes()).unwrap();
        }
        let copy = RedisBloomFilter::from_bytes(&filter.to_bytes()).unwrap();
        assert_eq!(copy, filter);
        let mut params = filter.params();
        // The first link's hashes (after flags, expansion, scaling, count, entries, items, error).
        params[4 + 4 + 1 + 4 + 8 + 8 + 8] ^= 1;
        assert!(RedisBloomFilter::from_parts(&params, &filter.payload()).is_err());
        let mut params = filter.params();
        params[0] = 1;
        assert!(RedisBloomFilter::from_parts(&params, &filter.payload()).is_err());
    }
}
