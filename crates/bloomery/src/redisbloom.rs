//! RedisBloom's scalable Bloom filter (`BF.*` in RedisBloom 2.x), bit for bit: the same
//! hashing, bit positions, growth and item counts, and its `BF.SCANDUMP` byte form, so a
//! filter made by RedisBloom moves into bloomery (from an RDB file or through
//! `BF.SCANDUMP`/`BF.LOADCHUNK`) and answers exactly as before, and moves back.
//!
//! What RedisBloom does, as implemented here (its source is RSALv2/SSPL; this is written
//! from its observable behaviour and checked against filters RedisBloom 2.6.28 made, in
//! `tests/data/redisbloom/`):
//!
//! - A filter is a chain of links (sub-filters), each a plain bit array with its own
//!   capacity (`entries`), error rate, bits per entry `bpe = |ln(error)| / ln(2)^2`,
//!   `hashes = ceil(0.693147180559945 · bpe)` and size. Links are created with
//!   `bits = trunc(entries · bpe)` (at least 1) rounded up to whole 64-bit words, in chains
//!   with option NOROUND (all RedisBloom 2.x creates); chains without it (RedisBloom 1.x's)
//!   grow power-of-two links, and ENTS_IS_BITS ones links of `2^entries` bits (see
//!   `link_shape`).
//! - An item's bytes hash to `(a, b)`: with option FORCE64 (every filter RedisBloom 2.x
//!   creates) `a = MurmurHash64A(item, 0xc6a4a7935bd1e995)`, `b = MurmurHash64A(item, a)`;
//!   without it (older filters) the same with 32-bit MurmurHash2 and seed `0x9747b28c`.
//!   Bit `i` (for `i` in `0..hashes`) is `(a + i·b) mod m` in 64-bit wrapping arithmetic,
//!   where `m` is `2^n2` for links with `n2 > 0` (older power-of-two links) and `bits`
//!   otherwise; bit `x` is bit `x mod 8` of byte `x / 8`.
//! - Adding an item: if any link reports it present, nothing changes ("already added").
//!   Otherwise, when the newest link holds `entries` items, a new link is added with
//!   `entries · growth` capacity and half the error rate (unless the filter is
//!   NONSCALING: then the add is refused; RedisBloom cannot add the link either when the
//!   growth is 0 or the halved error rate is 0, and neither can this), and the item is set
//!   in the newest link; it counts as added (the link's and the filter's sizes grow by
//!   one) only if one of its bits was 0.
//! - A NONSCALING filter's first link has the requested error rate; a scaling filter's
//!   first link has half of it.
//!
//! ```
//! use bloomery::redisbloom::RedisBloomFilter;
//!
//! // BF.RESERVE k 0.01 100, then BF.ADD k apple
//! let mut filter = RedisBloomFilter::new(100, 0.01, 2, false)?;
//! assert!(filter.insert(b"apple")?);
//! assert!(filter.contains(b"apple"));
//! assert!(!filter.insert(b"apple")?); // RedisBloom answers 0: already added
//! // BF.SCANDUMP's pieces rebuild it exactly (BF.LOADCHUNK's path).
//! let mut copy = RedisBloomFilter::from_scandump_header(&filter.scandump_header())?;
//! let mut iterator = 1;
//! while let Some((next, data)) = filter.scandump_chunk(iterator, 1 << 20) {
//!     copy.load_scandump_chunk(next, data)?;
//!     iterator = next;
//! }
//! assert_eq!(copy, filter);
//! # Ok::<(), bloomery::Error>(())
//! ```

use std::borrow::Cow;

use crate::any::GrowthLimit;
use crate::bits::{TryClone, impl_try_clone};
use crate::error::{Error, Result, first_sub_filter_error, inconsistent};
use crate::format::native::{ParamReader, ParamWriter, Persist, Variant};
use crate::hash::{murmur2_32, murmur64a};

/// Option bit: link sizes are not rounded to a power of two (set by RedisBloom 2.x).
pub const OPT_NOROUND: u32 = 1;
/// Option bit: a link's capacity was given as a number of bits (never on saved chains).
pub const OPT_ENTS_IS_BITS: u32 = 2;
/// Option bit: 64-bit hashing (MurmurHash64A; set by RedisBloom 2.x).
pub const OPT_FORCE64: u32 = 4;
/// Option bit: the filter does not grow (NONSCALING).
pub const OPT_NO_SCALING: u32 = 8;
const KNOWN_OPTIONS: u32 = OPT_NOROUND | OPT_ENTS_IS_BITS | OPT_FORCE64 | OPT_NO_SCALING;

/// RedisBloom's constants, to its printed precision (they decide `hashes`, so the exact
/// `LN_2` would give other hash counts at some error rates).
#[allow(clippy::approx_constant)]
const LN2: f64 = 0.693147180559945;
const LN2_SQUARED: f64 = 0.480453013918201;
/// Each new link's error rate is this times the last one's.
const TIGHTENING: f64 = 0.5;

/// Bytes of the dumped chain header before the links, and of each dumped link
/// (RedisBloom's packed little-endian structs).
const CHAIN_HEADER_BYTES: usize = 8 + 4 + 4 + 4;
const LINK_HEADER_BYTES: usize = 8 + 8 + 8 + 8 + 8 + 4 + 8 + 1;

/// Bytes RedisBloom counts for the chain and for each link besides its bits (`BF.INFO`'s
/// Size is `CHAIN_OVERHEAD + Σ (LINK_OVERHEAD + bytes)`, its structs' sizes on 64-bit
/// machines).
const CHAIN_OVERHEAD: u64 = 32;
const LINK_OVERHEAD: u64 = 64;

/// The most links RedisBloom can grow a chain to: each new link has half the last one's
/// error rate, and RedisBloom cannot add a link once that halving reaches 0. From any first
/// link's error rate below 1 that makes at most 1075 links (the halvings run through the
/// subnormals; 1074 from `BF.RESERVE`'s first links, at most half a rate below 1, and
/// `BF.RESERVE k 0.01 10 EXPANSION 1` stops at 1067 links: the test
/// `halving_a_first_rate_below_1_reaches_0_within_redisbloom_most_links`), and RedisBloom
/// 1.x and 2.0 tightened faster. [`RedisBloomFilter::insert`] grows a chain exactly as far.
pub const REDISBLOOM_MOST_LINKS: usize = 1075;

/// The most links a chain may have when it is loaded: RedisBloom sets no limit on load
/// (a crafted `BF.LOADCHUNK` header or RDB value may hold any number), so this is a bound
/// on cost, well above [`REDISBLOOM_MOST_LINKS`]. With the hash count of each link held to
/// what its error rate makes (at most 1076), a lookup probes at most 2048 × 1076 ≈ 2.2·10^6
/// bits, and a chain's link records take at most 2048 × 53 bytes in a dump's header.
pub const MAX_LINKS: usize = 2048;

/// The format name in errors.
const FORMAT: &str = "RedisBloom";

/// One sub-filter of the chain.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    entries: u64,
    error: f64,
    hashes: u32,
    bpe: f64,
    bits: u64,
    n2: u8,
    size: u64,
    bitmap: Vec<u8>,
}

impl TryClone for Link {
    fn try_clone(&self) -> Result<Self> {
        Ok(Self {
            bitmap: crate::bits::try_copy_bytes(&self.bitmap)?,
            ..*self
        })
    }
}

/// A link's shape, as RedisBloom sizes a new link: its capacity (raised to what rounded
/// bits hold), bits per entry, bytes of bits, hash functions and `n2`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LinkShape {
    entries: u64,
    bpe: f64,
    bytes: u64,
    hashes: u32,
    n2: u8,
}

/// The shape of a link for `entries` items at `error` in a chain with `options`, without
/// bits. RedisBloom sizes it three ways, by the chain's options (checked in this order):
///
/// - ENTS_IS_BITS: `entries` is log2 of the bits (so `n2`), and the capacity is what those
///   bits hold at this error rate. RedisBloom refuses more than 64; 64 is refused here
///   too, as RedisBloom's shift by 64 gives a link it cannot load back (`n2` 64).
/// - NOROUND (every chain RedisBloom 2.x creates): `trunc(entries · bpe)` bits, at least 1.
///   Past 2^63 bits it is refused; with `wrap`, from 2^64 on it is 1 bit, as RedisBloom's
///   `(uint64_t)` conversion gives on x86-64 (see [`RedisBloomFilter::new_replayed`]).
/// - neither (RedisBloom 1.x's chains, which RedisBloom 2.x keeps growing the same way):
///   the next power of two above `entries · bpe` bits (`n2 = logb(entries · bpe) + 1`), the
///   capacity raised by the items the extra bits hold at `bpe` each.
///
/// In every case the bits are then rounded up to whole 64-bit words.
fn link_shape(entries: u64, error: f64, options: u32) -> Result<LinkShape> {
    link_shape_with(entries, error, options, false)
}

/// [`link_shape`], with RedisBloom's x86-64 link of one word past 2^64 bits if `wrap`.
fn link_shape_with(entries: u64, error: f64, options: u32, wrap: bool) -> Result<LinkShape> {
    if entries < 1 {
        return Err(Error::Parameter {
            name: "capacity",
            value: entries.to_string(),
            allowed: "at least 1",
        });
    }
    if !(error > 0.0 && error < 1.0) {
        return Err(Error::Fpp { value: error });
    }
    let (bpe, hashes) = bpe_and_hashes(error);
    let too_large = |problem: String| Error::Sizing {
        expected_items: entries,
        fpp: error,
        problem,
    };
    let (entries, bits, n2) = if options & OPT_ENTS_IS_BITS != 0 {
        if entries > 63 {
            return Err(too_large(format!(
                "a chain sized in bits makes links of 2^capacity bits, and {entries} is over 63"
            )));
        }
        let bits = 1u64 << entries;
        // C's double-to-integer conversion: truncated, and 0 for a bpe above the bits.
        ((bits as f64 / bpe) as u64, bits, entries as u8)
    } else {
        let wanted = entries as f64 * bpe;
        if wrap && options & OPT_NOROUND != 0 && wanted >= 2f64.powi(64) {
            // RedisBloom's `(uint64_t)(entries * bpe)` of a value past 2^64 is 0 on x86-64
            // (then its "at least one bit"): it makes a link of one 64-bit word, answers
            // the command OK and takes its items (a capacity from about 1.9 * 10^18 at
            // 0.01).
            (entries, 1, 0)
        } else if !wanted.is_finite() || wanted >= (u64::MAX / 2) as f64 {
            return Err(too_large("the link would need more than 2^63 bits".into()));
        } else if options & OPT_NOROUND != 0 {
            (entries, (wanted as u64).max(1), 0)
        } else {
            // `logb`: the binary exponent, read from the bits (`log2` rounds a value just
            // below a power of two up to it: 15.999999999999998 gave 4 where `logb` gives
            // 3, so a link of twice RedisBloom's bits and capacity). `wanted` is normal (at
            // least bpe > 0 and below 2^63); a subnormal one reads as -1023, refused below.
            let exponent = ((wanted.to_bits() >> 52) & 0x7ff) as i64 - 1023;
            if exponent < 0 {
                return Err(too_large(format!(
                    "{wanted} bits round to no power of two (RedisBloom's n2 would be negative)"
                )));
            }
            let n2 = exponent as u32 + 1;
            let bits = 1u64 << n2;
            // As RedisBloom: the spare bits, then the items they hold, each truncated.
            let spare_bits = (bits as f64 - wanted) as u64;
            let spare_items = (spare_bits as f64 / bpe) as u64;
            (entries.saturating_add(spare_items), bits, n2 as u8)
        }
    };
    let bytes = bits.div_ceil(64) * 8;
    Ok(LinkShape {
        entries,
        bpe,
        bytes,
        hashes: hashes as u32,
        n2,
    })
}

/// RedisBloom's bits per entry and hash functions (a whole number) for error rate `error`.
fn bpe_and_hashes(error: f64) -> (f64, f64) {
    let bpe = (error.ln() / LN2_SQUARED).abs();
    (bpe, (LN2 * bpe).ceil())
}

impl Link {
    /// A new, empty link for `entries` items at `error` in a chain with `options`.
    fn new(entries: u64, error: f64, options: u32) -> Result<Self> {
        Self::shaped(link_shape(entries, error, options)?, error)
    }

    /// A new, empty link of this shape at `error`.
    fn shaped(shape: LinkShape, error: f64) -> Result<Self> {
        let LinkShape {
            entries,
            bpe,
            bytes,
            hashes,
            n2,
        } = shape;
        let length = usize::try_from(bytes).map_err(|_| Error::Sizing {
            expected_items: entries,
            fpp: error,
            problem: format!("{bytes} bytes do not fit this machine's address space"),
        })?;
        // Fallibly: a chain grows to sizes its (possibly crafted) parameters set, and a
        // size the system refuses is an error, not an abort.
        let bitmap = crate::bits::try_zeroed_vec(length)?;
        Ok(Link {
            entries,
            error,
            hashes,
            bpe,
            bits: bytes * 8,
            n2,
            size: 0,
            bitmap,
        })
    }

    /// The link `fields` describe (checked by the caller), with `bitmap` for its bits.
    fn from_fields(fields: &RdbLink<'_>, bitmap: Vec<u8>) -> Self {
        Link {
            entries: fields.entries,
            error: fields.error,
            hashes: fields.hashes,
            bpe: fields.bpe,
            bits: fields.bits,
            n2: fields.n2,
            size: fields.size,
            bitmap,
        }
    }

    /// The positions' modulus.
    fn modulus(&self) -> u64 {
        if self.n2 > 0 { 1u64 << self.n2 } else { self.bits }
    }

    fn positions(&self, hash: (u64, u64)) -> impl Iterator<Item = u64> + '_ {
        let modulus = self.modulus();
        (0..u64::from(self.hashes)).map(move |i| hash.0.wrapping_add(i.wrapping_mul(hash.1)) % modulus)
    }

    fn contains(&self, hash: (u64, u64)) -> bool {
        self.positions(hash)
            .all(|x| self.bitmap[(x >> 3) as usize] & (1 << (x & 7)) != 0)
    }

    /// Sets the item's bits; whether one was 0.
    fn insert(&mut self, hash: (u64, u64)) -> bool {
        let mut changed = false;
        let modulus = self.modulus();
        for i in 0..u64::from(self.hashes) {
            let x = hash.0.wrapping_add(i.wrapping_mul(hash.1)) % modulus;
            let byte = &mut self.bitmap[(x >> 3) as usize];
            let mask = 1u8 << (x & 7);
            if *byte & mask == 0 {
                *byte |= mask;
                changed = true;
            }
        }
        changed
    }

    /// The link's capacity.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Items counted into the link.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The link's error rate.
    pub fn error(&self) -> f64 {
        self.error
    }

    /// Hash functions.
    pub fn hashes(&self) -> u32 {
        self.hashes
    }

    /// Bits.
    pub fn bits(&self) -> u64 {
        self.bits
    }

    /// The link's bit array.
    pub fn bitmap(&self) -> &[u8] {
        &self.bitmap
    }
}

/// A link's fields as RedisBloom stores them in its RDB encoding (and, bits aside, in
/// its dumped header), for [`RedisBloomFilter::from_rdb_parts`] and
/// [`RedisBloomFilter::rdb_links`].
#[derive(Clone, Debug, PartialEq)]
pub struct RdbLink<'a> {
    /// Capacity.
    pub entries: u64,
    /// Error rate.
    pub error: f64,
    /// Hash functions.
    pub hashes: u32,
    /// Bits per entry.
    pub bpe: f64,
    /// Bits.
    pub bits: u64,
    /// log2 of the bits for power-of-two links, else 0.
    pub n2: u8,
    /// The bit array.
    pub bitmap: Cow<'a, [u8]>,
    /// Items counted into the link.
    pub size: u64,
}

/// RedisBloom's scalable filter (see the [module](self) documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct RedisBloomFilter {
    size: u64,
    options: u32,
    growth: u32,
    links: Vec<Link>,
}

impl_try_clone!(RedisBloomFilter, fallible: [links], copied: [size, options, growth]);

/// The hash pair of an item under `options`.
fn hash_pair(options: u32, item: &[u8]) -> (u64, u64) {
    if options & OPT_FORCE64 != 0 {
        let a = murmur64a(item, 0xc6a4_a793_5bd1_e995);
        (a, murmur64a(item, a))
    } else {
        let a = murmur2_32(item, 0x9747_b28c);
        (u64::from(a), u64::from(murmur2_32(item, a)))
    }
}

impl RedisBloomFilter {
    /// Removes every item: the chain goes back to its first link, emptied, as RedisBloom
    /// starts a filter of the same parameters.
    pub fn clear(&mut self) {
        self.links.truncate(1);
        for link in &mut self.links {
            link.bitmap.fill(0);
            link.size = 0;
        }
        self.size = 0;
    }

    /// What `BF.RESERVE key error_rate capacity [EXPANSION growth] [NONSCALING]` creates in
    /// RedisBloom 2.x (options FORCE64 and NOROUND, plus NO_SCALING).
    pub fn new(capacity: u64, error_rate: f64, growth: u32, nonscaling: bool) -> Result<Self> {
        Self::new_with(capacity, error_rate, growth, nonscaling, false)
    }

    /// As [`new`](Self::new), and also where `capacity · bpe` is 2^64 bits or more, which
    /// `new` refuses: RedisBloom 2.6.28 on x86-64 answers `BF.RESERVE key 0.01
    /// 9223372036854775807` OK with a first link of one 64-bit word (its `(uint64_t)`
    /// conversion of the bits gives 0, raised to 1) and takes items into it. For a server
    /// replaying such a primary's commands (or its AOF), where refusing would lose them.
    ///
    /// ```
    /// use bloomery::redisbloom::RedisBloomFilter;
    ///
    /// assert!(RedisBloomFilter::new(i64::MAX as u64, 0.01, 2, false).is_err());
    /// let mut chain = RedisBloomFilter::new_replayed(i64::MAX as u64, 0.01, 2, false)?;
    /// assert_eq!(chain.links()[0].bits(), 64);
    /// assert!(chain.insert(b"kept")? && chain.contains(b"kept"));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn new_replayed(capacity: u64, error_rate: f64, growth: u32, nonscaling: bool) -> Result<Self> {
        Self::new_with(capacity, error_rate, growth, nonscaling, true)
    }

    fn new_with(capacity: u64, error_rate: f64, growth: u32, nonscaling: bool, wrap: bool) -> Result<Self> {
        if growth < 1 {
            return Err(Error::Parameter {
                name: "expansion",
                value: growth.to_string(),
                allowed: "at least 1",
            });
        }
        let options = OPT_FORCE64 | OPT_NOROUND | if nonscaling { OPT_NO_SCALING } else { 0 };
        let first_error = if nonscaling {
            error_rate
        } else {
            error_rate * TIGHTENING
        };
        if !(error_rate > 0.0 && error_rate < 1.0) {
            return Err(Error::Fpp { value: error_rate });
        }
        let first = link_shape_with(capacity, first_error, options, wrap)
            .and_then(|shape| Link::shaped(shape, first_error))
            .map_err(|error| first_sub_filter_error(error, capacity, error_rate, first_error))?;
        Ok(Self {
            size: 0,
            options,
            growth,
            links: vec![first],
        })
    }

    /// Bytes of bits the first link of [`new`](Self::new) would take, computed without
    /// allocating.
    pub fn first_link_bytes(capacity: u64, error_rate: f64, nonscaling: bool) -> Result<u64> {
        // As `new` refuses it, before the first link's share of it is judged.
        if !(error_rate > 0.0 && error_rate < 1.0) {
            return Err(Error::Fpp { value: error_rate });
        }
        let first_error = if nonscaling {
            error_rate
        } else {
            error_rate * TIGHTENING
        };
        link_shape(capacity, first_error, OPT_NOROUND)
            .map(|shape| shape.bytes)
            .map_err(|error| first_sub_filter_error(error, capacity, error_rate, first_error))
    }

    /// Whether the item might be present.
    pub fn contains(&self, item: &[u8]) -> bool {
        let hash = hash_pair(self.options, item);
        self.links.iter().rev().any(|link| link.contains(hash))
    }

    /// Adds the item as RedisBloom's `BF.ADD` does: `Ok(true)` when added (RedisBloom
    /// answers 1), `Ok(false)` when it was already present (0), [`Error::Full`] for a
    /// NONSCALING filter at capacity, [`Error::SubFilterLimit`] for a scaling one at
    /// capacity with [`MAX_LINKS`] links, and [`Error::Sizing`] where RedisBloom cannot add
    /// the next link either.
    pub fn insert(&mut self, item: &[u8]) -> Result<bool> {
        self.insert_within(item, None)
    }

    /// As [`insert`](Self::insert), refusing with [`Error::MemoryLimit`], before
    /// allocating, a new link that would take the filter's bits past `memory_limit` bytes.
    pub fn insert_within(&mut self, item: &[u8], memory_limit: Option<u64>) -> Result<bool> {
        self.insert_limited(item, memory_limit.into())
    }

    /// As [`insert_within`](Self::insert_within), under any [`GrowthLimit`].
    pub(crate) fn insert_limited(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        let hash = hash_pair(self.options, item);
        if self.links.iter().rev().any(|link| link.contains(hash)) {
            return Ok(false);
        }
        let newest = self.links.last().expect("a chain has a link");
        if newest.size >= newest.entries {
            if self.options & OPT_NO_SCALING != 0 {
                return Err(Error::Full {
                    capacity: self.capacity(),
                });
            }
            self.grow(limit)?;
        }
        let newest = self.links.last_mut().expect("a chain has a link");
        if newest.insert(hash) {
            // A crafted file may bring counts near 2^64: they stop there, the chain's
            // still the sum of its links' (a link's is at most the chain's).
            if let Some(total) = self.size.checked_add(1) {
                self.size = total;
                newest.size += 1;
            }
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Adds the item whatever the chain's capacity: where [`insert`](Self::insert) refuses
    /// it (a NONSCALING chain at capacity, one at [`MAX_LINKS`] or unable to make the next
    /// link), it goes into the newest link beyond that link's capacity, so the rate there
    /// rises above the promise instead of the item being lost. Nothing limits growth (see
    /// [`insert_past_capacity_within`](Self::insert_past_capacity_within)). For a server
    /// replaying adds that another accepted (a replica of a RedisBloom primary made with
    /// other defaults, an AOF RedisBloom wrote), where a refusal would be a false negative.
    ///
    /// ```
    /// use bloomery::redisbloom::RedisBloomFilter;
    ///
    /// let mut chain = RedisBloomFilter::new(10, 0.01, 2, true)?; // NONSCALING
    /// for i in 0..10u32 {
    ///     chain.insert(&i.to_le_bytes())?;
    /// }
    /// assert!(matches!(chain.insert(b"one more"), Err(bloomery::Error::Full { .. })));
    /// assert!(chain.insert_past_capacity(b"one more")?);
    /// assert!(chain.contains(b"one more"));
    /// assert_eq!(chain.len(), 11);
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn insert_past_capacity(&mut self, item: &[u8]) -> Result<bool> {
        self.insert_past_capacity_within(item, GrowthLimit::None)
    }

    /// As [`insert_past_capacity`](Self::insert_past_capacity), with each new link held
    /// to `limit` before it is allocated: a link it refuses is not made, and the item goes
    /// into the newest link instead. For a server replaying a RedisBloom primary's adds,
    /// which RedisBloom replicates as given even where it could not allocate the next link
    /// (its `BF.MADD` then answers "problem inserting into filter" for the items that
    /// needed it): a replay that tried to allocate that link would stop the server.
    ///
    /// ```
    /// use bloomery::any::GrowthLimit;
    /// use bloomery::redisbloom::RedisBloomFilter;
    ///
    /// let mut chain = RedisBloomFilter::new(10, 0.01, u32::MAX, false)?;
    /// for i in 0..10u32 {
    ///     chain.insert(&i.to_le_bytes())?;
    /// }
    /// // The next link would hold 10 · (2^32 - 1) items: about 67 GB of bits.
    /// assert!(chain.insert_past_capacity_within(b"one more", GrowthLimit::Total(1 << 30))?);
    /// assert!(chain.contains(b"one more"));
    /// assert_eq!(chain.links().len(), 1);
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn insert_past_capacity_within(&mut self, item: &[u8], limit: GrowthLimit<'_>) -> Result<bool> {
        match self.insert_limited(item, limit) {
            Err(_) => {
                // Refused only at a growth step, the item absent: into the newest.
                let hash = hash_pair(self.options, item);
                let newest = self.links.last_mut().expect("a chain has a link");
                newest.insert(hash);
                if let Some(total) = self.size.checked_add(1) {
                    self.size = total;
                    newest.size = newest.size.saturating_add(1);
                }
                Ok(true)
            }
            answer => answer,
        }
    }

    /// Items added (`BF.CARD`, BF.INFO's "Number of items inserted").
    pub fn len(&self) -> u64 {
        self.size
    }

    /// Whether no item was added.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The sum of the links' capacities (BF.INFO's Capacity).
    pub fn capacity(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, link| sum.saturating_add(link.entries))
    }

    /// The links.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The option bits (`OPT_*`).
    pub fn options(&self) -> u32 {
        self.options
    }

    /// How much larger each new link is (BF.INFO's Expansion rate).
    pub fn growth(&self) -> u32 {
        self.growth
    }

    /// Whether the filter was made NONSCALING: it refuses items past its capacity from the
    /// start ([`can_grow`](Self::can_grow) says whether a scaling one still grows).
    pub fn is_nonscaling(&self) -> bool {
        self.options & OPT_NO_SCALING != 0
    }

    /// Whether the filter adds a link when its newest is full: false when it is
    /// NONSCALING, or where RedisBloom cannot add the link either (growth 0, an error rate
    /// halved to 0, a link too large), or at [`MAX_LINKS`]. Then it refuses items beyond
    /// its [`capacity`](Self::capacity).
    pub fn can_grow(&self) -> bool {
        !self.is_nonscaling() && self.next_link().is_ok()
    }

    /// The next link's capacity, error rate and bytes of bits, or why there can be no
    /// next one.
    fn next_link(&self) -> Result<(u64, f64, u64)> {
        let newest = self.links.last().expect("a chain has a link");
        // Where RedisBloom cannot add the link either (it answers "problem inserting
        // into filter" and keeps the chain as it was): growth 0, which RedisBloom keeps
        // from an `EXPANSION` of 2^32 or more (it truncates the value to 32 bits), and
        // an error rate halved to 0.
        let cannot_grow = |problem: String| Error::Sizing {
            expected_items: newest.entries,
            fpp: newest.error,
            problem,
        };
        if self.growth == 0 {
            return Err(cannot_grow(
                "the chain's growth is 0, so a new link would hold no items".into(),
            ));
        }
        let entries = newest
            .entries
            .checked_mul(u64::from(self.growth))
            .ok_or_else(|| {
                cannot_grow(format!(
                    "the next link's capacity overflows (growth {})",
                    self.growth
                ))
            })?;
        let error = newest.error * TIGHTENING;
        if error <= 0.0 {
            return Err(cannot_grow(format!(
                "the next link's error rate, half of {:e}, is 0 in floating point",
                newest.error
            )));
        }
        if self.links.len() >= MAX_LINKS {
            return Err(Error::SubFilterLimit {
                limit: MAX_LINKS as u64,
                capacity: self.capacity(),
            });
        }
        let bytes = link_shape(entries, error, self.options)?.bytes;
        Ok((entries, error, bytes))
    }

    /// Adds the next link, refused before allocating where it would pass `limit`.
    fn grow(&mut self, limit: GrowthLimit<'_>) -> Result<()> {
        let (entries, error, bytes) = self.next_link()?;
        limit.check(self.bitmap_bytes(), bytes)?;
        self.links.push(Link::new(entries, error, self.options)?);
        Ok(())
    }

    /// Bytes of bits in all links.
    pub fn bitmap_bytes(&self) -> u64 {
        self.links.iter().map(|link| link.bitmap.len() as u64).sum()
    }

    /// BF.INFO's Size: the bytes RedisBloom counts for the filter.
    pub fn redisbloom_size(&self) -> u64 {
        CHAIN_OVERHEAD
            + self
                .links
                .iter()
                .map(|link| LINK_OVERHEAD + link.bitmap.len() as u64)
                .sum::<u64>()
    }

    /// The probability that a fresh item is reported present: one minus the product over
    /// links of one minus each link's rate at its fill.
    pub fn expected_fpp(&self) -> f64 {
        let mut absent = 1.0;
        for link in &self.links {
            let ones: u64 = link.bitmap.iter().map(|byte| u64::from(byte.count_ones())).sum();
            let fill = ones as f64 / link.bits as f64;
            absent *= 1.0 - fill.powi(link.hashes as i32);
        }
        1.0 - absent
    }

    /// The header `BF.SCANDUMP key 0` returns: RedisBloom's dumped chain (its packed
    /// little-endian structs: size u64, links u32, options u32, growth u32, then per link
    /// bytes u64, bits u64, size u64, error f64, bpe f64, hashes u32, entries u64, n2 u8).
    pub fn scandump_header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHAIN_HEADER_BYTES + LINK_HEADER_BYTES * self.links.len());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&(self.links.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.options.to_le_bytes());
        out.extend_from_slice(&self.growth.to_le_bytes());
        for link in &self.links {
            out.extend_from_slice(&(link.bitmap.len() as u64).to_le_bytes());
            out.extend_from_slice(&link.bits.to_le_bytes());
            out.extend_from_slice(&link.size.to_le_bytes());
            out.extend_from_slice(&link.error.to_le_bytes());
            out.extend_from_slice(&link.bpe.to_le_bytes());
            out.extend_from_slice(&link.hashes.to_le_bytes());
            out.extend_from_slice(&link.entries.to_le_bytes());
            out.push(link.n2);
        }
        out
    }

    /// The piece `BF.SCANDUMP key iterator` returns for `iterator >= 1`: the next
    /// iterator and up to `max_len` bytes of the links' bits from offset `iterator - 1`
    /// (never crossing a link's end), or `None` past the end (RedisBloom then answers
    /// iterator 0). RedisBloom's own pieces are at most 16 MiB.
    pub fn scandump_chunk(&self, iterator: u64, max_len: usize) -> Option<(u64, &[u8])> {
        let (link, offset) = self.link_at(iterator.checked_sub(1)?)?;
        let bitmap = &self.links[link].bitmap[offset..];
        let piece = &bitmap[..bitmap.len().min(max_len.max(1))];
        Some((iterator + piece.len() as u64, piece))
    }

    /// The link holding bit-array offset `position` (counted over all links in order) and
    /// the offset inside it.
    fn link_at(&self, position: u64) -> Option<(usize, usize)> {
        let mut start = 0u64;
        for (index, link) in self.links.iter().enumerate() {
            let end = start + link.bitmap.len() as u64;
            if position < end {
                return Some((index, (position - start) as usize));
            }
            start = end;
        }
        None
    }

    /// A filter from a `BF.SCANDUMP` header (piece 1), with every link's bits zero until
    /// [`load_scandump_chunk`](Self::load_scandump_chunk) fills them. Every field is
    /// checked as RedisBloom checks it, and the sizes against each other.
    pub fn from_scandump_header(header: &[u8]) -> Result<Self> {
        Self::from_scandump_header_checked(header, Checks::Bounded)
    }

    /// As [`from_scandump_header`](Self::from_scandump_header), with RedisBloom's own
    /// checks only: a link's hash count is held to what its stored bits per entry make
    /// (RedisBloom's check), not also to what its error rate makes. For a server replaying
    /// a RedisBloom primary's `BF.LOADCHUNK` (or its AOF): the primary took the header and
    /// serves the items its pieces hold, and pays the same lookups; refusing it loses them.
    ///
    /// ```
    /// use bloomery::redisbloom::RedisBloomFilter;
    ///
    /// let chain = RedisBloomFilter::new(10, 0.01, 2, false)?;
    /// let mut header = chain.scandump_header();
    /// // The link's error rate (at byte 20 + 24) set to 0.5, its 8 hash functions kept:
    /// // RedisBloom takes it, bloomery's bound (at most the 2 that 0.5 makes, and one more)
    /// // does not.
    /// header[44..52].copy_from_slice(&0.5f64.to_le_bytes());
    /// assert!(RedisBloomFilter::from_scandump_header(&header).is_err());
    /// assert_eq!(RedisBloomFilter::from_scandump_header_replayed(&header)?.links()[0].hashes(), 8);
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn from_scandump_header_replayed(header: &[u8]) -> Result<Self> {
        Self::from_scandump_header_checked(header, Checks::RedisBloom)
    }

    fn from_scandump_header_checked(header: &[u8], checks: Checks) -> Result<Self> {
        let (size, count, options, growth) = parse_chain_header(header)?;
        if header.len() != CHAIN_HEADER_BYTES + LINK_HEADER_BYTES * count {
            return Err(bad(format!(
                "a header of {count} links is {} bytes, found {}",
                CHAIN_HEADER_BYTES + LINK_HEADER_BYTES * count,
                header.len()
            )));
        }
        // Every field is checked before any link's bits are allocated.
        let mut fields = Vec::with_capacity(count);
        for raw in header[CHAIN_HEADER_BYTES..].chunks_exact(LINK_HEADER_BYTES) {
            let word = |at: usize| u64::from_le_bytes(raw[at..at + 8].try_into().expect("8 bytes"));
            let link = RdbLink {
                bits: word(8),
                size: word(16),
                error: f64::from_bits(word(24)),
                bpe: f64::from_bits(word(32)),
                hashes: u32::from_le_bytes(raw[40..44].try_into().expect("4 bytes")),
                entries: word(44),
                n2: raw[52],
                bitmap: Cow::Borrowed(&[]),
            };
            let bytes = word(0);
            check_link(&link, bytes, checks)?;
            let length = usize::try_from(bytes).map_err(|_| bad(format!("a link of {bytes} bytes")))?;
            fields.push((link, length));
        }
        check_sizes(size, fields.iter().map(|(link, _)| link))?;
        // Fallibly: a caller that did not weigh `scandump_header_bytes` first gets an error
        // for sizes the system refuses, not an abort.
        let links = fields
            .into_iter()
            .map(|(link, length)| {
                let bitmap = crate::bits::try_zeroed_vec(length)?;
                Ok(Link::from_fields(&link, bitmap))
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            size,
            options,
            growth,
            links,
        })
    }

    /// The filter whose `BF.SCANDUMP` pieces, in order, are `stream`: the header (piece
    /// 1), then every link's bits. That is the pieces RedisBloom's migration loop
    /// (`BF.SCANDUMP key iterator` from 0 until it answers iterator 0) gives, joined, from a
    /// RedisBloom server or from the bloomery module's RedisBloom-layout keys. Every field
    /// is checked as [`from_scandump_header`](Self::from_scandump_header) checks it, and
    /// the bits must be exactly the ones the header announces.
    ///
    /// ```
    /// use bloomery::redisbloom::RedisBloomFilter;
    ///
    /// let mut filter = RedisBloomFilter::new(100, 0.01, 2, false)?;
    /// filter.insert(b"apple")?;
    /// let stream = filter.scandump_stream();
    /// let back = RedisBloomFilter::from_scandump_stream(&stream)?;
    /// assert!(back.contains(b"apple") && back == filter);
    /// assert!(RedisBloomFilter::from_scandump_stream(&stream[..stream.len() - 1]).is_err());
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn from_scandump_stream(stream: &[u8]) -> Result<Self> {
        let (_, count, _, _) = parse_chain_header(stream)?;
        let header_len = CHAIN_HEADER_BYTES + LINK_HEADER_BYTES * count;
        if stream.len() < header_len {
            return Err(bad(format!(
                "a header of {count} links is {header_len} bytes, the stream has {}",
                stream.len()
            )));
        }
        let (header, bits) = stream.split_at(header_len);
        // Said as RedisBloom's data (the header's own errors are): a stream of the header
        // piece alone, or of some pieces missing, is the likely mistake.
        Self::from_header_and_bits(header, bits, |announced, found| {
            bad(format!(
                "the header announces {announced} bytes of bits, the pieces after it hold {found}"
            ))
        })
    }

    /// The `BF.SCANDUMP` pieces of this filter joined: the header, then every link's bits
    /// (read back by [`from_scandump_stream`](Self::from_scandump_stream)). To load it into
    /// RedisBloom, `BF.LOADCHUNK key 1 HEADER`, then the bits in pieces, each with the
    /// iterator 1 + (its end's offset in the bits), a piece not crossing a link's end.
    pub fn scandump_stream(&self) -> Vec<u8> {
        let mut out = self.scandump_header();
        for link in &self.links {
            out.extend_from_slice(&link.bitmap);
        }
        out
    }

    /// The filter from its `BF.SCANDUMP` header and every link's bits after it;
    /// `mismatch(announced, found)` is the error when the bits are not the header's.
    fn from_header_and_bits(
        header: &[u8],
        mut bits: &[u8],
        mismatch: impl FnOnce(u64, usize) -> Error,
    ) -> Result<Self> {
        let announced = Self::scandump_header_bytes(header)?;
        if announced != bits.len() as u64 {
            return Err(mismatch(announced, bits.len()));
        }
        let mut filter = Self::from_scandump_header(header)?;
        for link in &mut filter.links {
            let (mine, rest) = bits.split_at(link.bitmap.len());
            link.bitmap.copy_from_slice(mine);
            bits = rest;
        }
        Ok(filter)
    }

    /// Bytes of bits a `BF.SCANDUMP` header announces, checked as
    /// [`from_scandump_header`](Self::from_scandump_header) checks it but without
    /// allocating (for a caller that holds the filter to a memory cap first).
    pub fn scandump_header_bytes(header: &[u8]) -> Result<u64> {
        let (_, count, _, _) = parse_chain_header(header)?;
        if header.len() != CHAIN_HEADER_BYTES + LINK_HEADER_BYTES * count {
            return Err(bad("the header's length does not match its link count".into()));
        }
        header[CHAIN_HEADER_BYTES..]
            .chunks_exact(LINK_HEADER_BYTES)
            .try_fold(0u64, |sum, raw| {
                sum.checked_add(u64::from_le_bytes(raw[0..8].try_into().expect("8 bytes")))
                    .ok_or_else(|| bad("the links' sizes overflow".into()))
            })
    }

    /// Puts a `BF.SCANDUMP` piece in place, as `BF.LOADCHUNK key iterator data` does:
    /// `iterator` is the one `BF.SCANDUMP` returned with `data`, so the piece starts at
    /// offset `iterator - 1 - data.len()`; it must lie inside one link. Its bytes are ORed
    /// into the link's bits, where RedisBloom copies them over: the same on the empty links
    /// the header piece makes, but a filter that took items between pieces (its key is
    /// live from the header piece on, and RedisBloom's migration loop does not stop
    /// writers) keeps them, where a copy would answer them absent. As RedisBloom: an
    /// iterator of 0 or below the piece's length is bad data, a start before the first
    /// byte or past the last is "invalid offset - no link found", and an empty piece that
    /// starts inside a link changes nothing.
    pub fn load_scandump_chunk(&mut self, iterator: u64, data: &[u8]) -> Result<()> {
        let (link, offset) = self.piece_place(iterator, data)?;
        let bitmap = &mut self.links[link].bitmap;
        for (bits, &piece) in bitmap[offset..offset + data.len()].iter_mut().zip(data) {
            *bits |= piece;
        }
        Ok(())
    }

    /// As [`load_scandump_chunk`](Self::load_scandump_chunk), first growing the chain as
    /// RedisBloom grows it (its next links, each held to `limit`) while the piece starts
    /// past the chain's last byte. For a server replaying a RedisBloom primary's
    /// `BF.LOADCHUNK` (or its AOF): RedisBloom copies a piece over a link's bits, clearing
    /// those of items added before it, so it counts more of the next adds as new than this
    /// chain (which ORs the piece in and keeps them), and grows its next link sooner; a
    /// piece it then loads into that link found none here ("invalid offset - no link
    /// found"), and the items the piece brought were lost. The links' shapes follow from
    /// the chain's parameters alone, so a link made here lies where the primary's does.
    /// ORing, never copying, keeps every item this chain held (a replay of an AOF bloomery
    /// wrote, whose pieces went into live links that kept their items, included).
    ///
    /// ```
    /// use bloomery::any::GrowthLimit;
    /// use bloomery::redisbloom::RedisBloomFilter;
    ///
    /// let grown = {
    ///     let mut chain = RedisBloomFilter::new(10, 0.01, 2, false)?;
    ///     for i in 0..15u32 {
    ///         chain.insert(&i.to_le_bytes())?;
    ///     }
    ///     chain
    /// };
    /// let first = grown.links()[0].bitmap().len() as u64;
    /// let second = grown.links()[1].bitmap();
    /// let iterator = 1 + first + second.len() as u64;
    ///
    /// let mut chain = RedisBloomFilter::new(10, 0.01, 2, false)?;
    /// assert!(chain.load_scandump_chunk(iterator, second).is_err()); // no second link yet
    /// chain.load_scandump_chunk_growing(iterator, second, GrowthLimit::None)?;
    /// assert_eq!(chain.links().len(), 2);
    /// assert!((10..15u32).all(|i| chain.contains(&i.to_le_bytes())));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn load_scandump_chunk_growing(
        &mut self,
        iterator: u64,
        data: &[u8],
        limit: GrowthLimit<'_>,
    ) -> Result<()> {
        if let Some(start) = piece_start(iterator, data.len()) {
            while start >= self.bitmap_bytes() && !self.is_nonscaling() {
                match self.grow(limit) {
                    Ok(()) => {}
                    // The system refused the link's memory: say so, not "no link found".
                    Err(error @ Error::OutOfMemory { .. }) => return Err(error),
                    // A link it cannot size or may not have: the piece is refused below.
                    Err(_) => break,
                }
            }
        }
        self.load_scandump_chunk(iterator, data)
    }

    /// The bytes a piece of `len` bytes ending at `iterator` (as `BF.SCANDUMP` numbers
    /// them) covers, if it lies inside one link: what a server that ORed a piece in
    /// replicates, so that its replicas hold what this filter holds.
    pub fn scandump_piece_bytes(&self, iterator: u64, len: usize) -> Option<&[u8]> {
        let (link, offset) = self.link_at(piece_start(iterator, len)?)?;
        self.links[link].bitmap.get(offset..offset.checked_add(len)?)
    }

    /// Where a piece goes: its link and the offset in it, or RedisBloom's refusal.
    fn piece_place(&self, iterator: u64, data: &[u8]) -> Result<(usize, usize)> {
        let start = iterator
            .checked_sub(data.len() as u64)
            .filter(|_| iterator > 0)
            .ok_or_else(|| {
                bad(format!(
                    "iterator {iterator} cannot end a piece of {} bytes",
                    data.len()
                ))
            })?;
        let (link, offset) = start
            .checked_sub(1)
            .and_then(|start| self.link_at(start))
            .ok_or_else(|| {
                bad(format!(
                    "invalid offset - no link found (the piece would start at offset {}, outside the filter's bits)",
                    start as i128 - 1
                ))
            })?;
        let bitmap = &self.links[link].bitmap;
        if data.len() > bitmap.len() - offset {
            return Err(bad(format!(
                "invalid chunk - Too big for current filter (a piece of {} bytes at offset {offset} runs past its link's {} bytes)",
                data.len(),
                bitmap.len()
            )));
        }
        Ok((link, offset))
    }

    /// A filter from the fields RedisBloom's RDB encoding stores (its encoding versions 0
    /// to 4: size, links, options, growth, then per link entries, error, hashes, bpe,
    /// bits, n2, the bit array, size), checked as RedisBloom checks them and for
    /// consistency.
    pub fn from_rdb_parts(size: u64, options: u32, growth: u32, links: Vec<RdbLink<'_>>) -> Result<Self> {
        Self::from_rdb_parts_checked(size, options, growth, links, Checks::Bounded)
    }

    /// As [`from_rdb_parts`](Self::from_rdb_parts), with RedisBloom's own checks only (see
    /// [`from_scandump_header_replayed`](Self::from_scandump_header_replayed)): for a
    /// replica's full sync from a RedisBloom primary, its `RESTORE`s, and a server loading
    /// its own RDB or AOF.
    pub fn from_rdb_parts_replayed(
        size: u64,
        options: u32,
        growth: u32,
        links: Vec<RdbLink<'_>>,
    ) -> Result<Self> {
        Self::from_rdb_parts_checked(size, options, growth, links, Checks::RedisBloom)
    }

    fn from_rdb_parts_checked(
        size: u64,
        options: u32,
        growth: u32,
        links: Vec<RdbLink<'_>>,
        checks: Checks,
    ) -> Result<Self> {
        check_chain(links.len(), options)?;
        for link in &links {
            check_link(link, link.bitmap.len() as u64, checks)?;
        }
        check_sizes(size, links.iter())?;
        Ok(Self {
            size,
            options,
            growth,
            links: links
                .into_iter()
                .map(|mut link| {
                    // Moved out, not copied: the caller's bits may be most of the filter.
                    let bitmap = std::mem::take(&mut link.bitmap).into_owned();
                    Link::from_fields(&link, bitmap)
                })
                .collect(),
        })
    }

    /// The links as RedisBloom's RDB encoding stores them, borrowing the bits.
    pub fn rdb_links(&self) -> Vec<RdbLink<'_>> {
        self.links
            .iter()
            .map(|link| RdbLink {
                entries: link.entries,
                error: link.error,
                hashes: link.hashes,
                bpe: link.bpe,
                bits: link.bits,
                n2: link.n2,
                bitmap: Cow::Borrowed(&link.bitmap),
                size: link.size,
            })
            .collect()
    }
}

fn bad(problem: String) -> Error {
    Error::format(FORMAT, crate::FormatProblem::Inconsistent(problem))
}

/// The chain header's fields; checks the link count and options.
fn parse_chain_header(header: &[u8]) -> Result<(u64, usize, u32, u32)> {
    if header.len() < CHAIN_HEADER_BYTES {
        return Err(bad(format!(
            "a header is at least {CHAIN_HEADER_BYTES} bytes, found {}",
            header.len()
        )));
    }
    let size = u64::from_le_bytes(header[0..8].try_into().expect("8 bytes"));
    let count = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes")) as usize;
    let options = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes"));
    let growth = u32::from_le_bytes(header[16..20].try_into().expect("4 bytes"));
    check_chain(count, options)?;
    Ok((size, count, options, growth))
}

/// The chain's link count and options. Any growth loads, 0 included: RedisBloom keeps 0
/// from `BF.RESERVE ... EXPANSION 4294967296` (its 64-bit value truncated to 32 bits) and
/// loads it back; such a chain serves its items and only refuses to grow (see
/// [`RedisBloomFilter::insert`]).
fn check_chain(count: usize, options: u32) -> Result<()> {
    if count == 0 || count > MAX_LINKS {
        return Err(bad(format!("{count} links; 1..={MAX_LINKS} allowed")));
    }
    if options & !KNOWN_OPTIONS != 0 {
        return Err(bad(format!("unknown option bits {options:#x}")));
    }
    Ok(())
}

/// Which checks a link's fields pass before it loads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Checks {
    /// RedisBloom's, and the hash count held to what the link's error rate makes.
    Bounded,
    /// RedisBloom's only: what a RedisBloom primary took (a replay).
    RedisBloom,
}

/// RedisBloom's own integrity check of a link, and its bits against its bytes.
fn check_link(link: &RdbLink<'_>, bytes: u64, checks: Checks) -> Result<()> {
    if !(link.error > 0.0 && link.error < 1.0) {
        return Err(bad(format!(
            "a link's error rate {} is not in (0, 1)",
            link.error
        )));
    }
    if link.n2 > 63 || (link.n2 != 0 && link.bits < 1u64 << link.n2) {
        return Err(bad(format!(
            "a link's n2 {} does not fit its {} bits",
            link.n2, link.bits
        )));
    }
    if link.bits == 0 || Some(link.bits) != bytes.checked_mul(8) {
        return Err(bad(format!(
            "a link's {} bits do not match its {bytes} bytes",
            link.bits
        )));
    }
    if !link.bpe.is_finite() || link.hashes == 0 || f64::from(link.hashes) != (LN2 * link.bpe).ceil() {
        return Err(bad(format!(
            "a link's {} hash functions do not match its {} bits per entry",
            link.hashes, link.bpe
        )));
    }
    // Beyond RedisBloom's check: the hash functions its error rate makes (one more for
    // rounding), at most 1076 for any positive f64. A crafted dump could otherwise ask
    // for 2·10^9, each lookup of a full link then looping that often. Not for a replay:
    // the primary took it (and pays the same lookups).
    if checks == Checks::RedisBloom {
        return Ok(());
    }
    let most = bpe_and_hashes(link.error).1 + 1.0;
    if f64::from(link.hashes) > most {
        return Err(bad(format!(
            "a link's {} hash functions are more than its error rate {} makes ({most})",
            link.hashes, link.error
        )));
    }
    Ok(())
}

/// The chain's size is the sum of its links' sizes (RedisBloom's check).
fn check_sizes<'a, 'b: 'a>(size: u64, mut links: impl Iterator<Item = &'a RdbLink<'b>>) -> Result<()> {
    let total = links
        .try_fold(0u64, |sum, link| sum.checked_add(link.size))
        .ok_or_else(|| bad("the links' sizes overflow".into()))?;
    if total != size {
        return Err(bad(format!("size {size} is not the links' total {total}")));
    }
    Ok(())
}

/// Format version 2's variant 9: no parameters of its own beyond a layout number, and the
/// payload is the filter's `BF.SCANDUMP` form, the header followed by every link's bits.
const LAYOUT_SCANDUMP: u32 = 1;

impl Persist for RedisBloomFilter {
    const VARIANT: Variant = Variant::RedisBloom;

    fn params(&self) -> Vec<u8> {
        ParamWriter::new()
            .u32(LAYOUT_SCANDUMP)
            .u32(self.scandump_header().len() as u32)
            .finish()
    }

    fn payload_pieces(&self) -> Vec<Cow<'_, [u8]>> {
        let mut pieces = vec![Cow::Owned(self.scandump_header())];
        pieces.extend(self.links.iter().map(|link| Cow::Borrowed(&link.bitmap[..])));
        pieces
    }

    fn from_parts(params: &[u8], payload: &[u8]) -> Result<Self> {
        let mut reader = ParamReader::new(params);
        let layout = reader.u32()?;
        let header_len = reader.u32()? as usize;
        reader.finish()?;
        if layout != LAYOUT_SCANDUMP {
            return Err(inconsistent(format!(
                "unknown RedisBloom layout {layout}; this library reads 1"
            )));
        }
        if header_len > payload.len() {
            return Err(inconsistent(format!(
                "a {header_len}-byte header in a {}-byte payload",
                payload.len()
            )));
        }
        let (header, bits) = payload.split_at(header_len);
        Self::from_header_and_bits(header, bits, |announced, found| {
            inconsistent(format!(
                "the header announces {announced} bytes of bits, the payload has {found}"
            ))
        })
    }

    fn from_parts_of_version(version: u16, params: &[u8], payload: &[u8]) -> Result<Self> {
        if version < 2 {
            return Err(inconsistent(format!(
                "format version {version} has no RedisBloom variant (it was added in version 2)"
            )));
        }
        Self::from_parts(params, payload)
    }
}

/// Where a piece of `len` bytes ending at `iterator` (as `BF.SCANDUMP` numbers them)
/// starts in the links' bits counted in order, if the numbers allow one.
fn piece_start(iterator: u64, len: usize) -> Option<u64> {
    iterator
        .checked_sub(len as u64)
        .filter(|_| iterator > 0)?
        .checked_sub(1)
}
