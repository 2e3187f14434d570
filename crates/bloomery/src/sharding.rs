//! One logical filter split over many small blocked filters ("shards"), so that no single
//! value grows huge and the load spreads over the nodes of a Redis Cluster.
//!
//! Every item lives whole in one shard: its 64-bit hash picks the shard, then, inside the
//! shard, its block and its eight bits exactly as a [`BlockedBloomFilter`] does. A
//! [`ShardPlan`] holds all the arithmetic, so every client and the server agree:
//!
//! 1. hash: `h = XXH3-64(item bytes, seed)` ([`crate::hash::xxh3_64_item`], the blocked
//!    filter's own item hash);
//! 2. shard: `s = (fmix64(h) · S) >> 64` in 128-bit arithmetic ([`route_mix`] is murmur3's
//!    64-bit finaliser). The blocked filter takes the block from h's high 32 bits and the
//!    bits from its low 32 bits, so the shard must come from a re-mixed hash: routed on h's
//!    own high bits, each shard would only ever see the slice of h values that maps to
//!    1/S of its blocks, leaving the rest of its blocks unused (the test
//!    `routing_on_the_raw_hash_would_waste_blocks` shows it);
//! 3. in shard s: block `(h >> 32) · blocks >> 32` and bits as docs/format.md, "2: blocked".
//!
//! Sizing ([`ShardPlan::new`]): for n items at probability p, with at most `max_shard_bytes`
//! per shard, S is a count (at least `min_shards`) for which a blocked filter sized for
//! ceil(n / S) items at p ([`crate::sizing::blocked_num_blocks`]) fits the cap: the
//! smallest, or more where the search's jump passes it (docs/sharding.md, "Sizing").
//! Each shard then holds about n / S items (a shard's load varies by about √(n/S), a
//! fraction that is negligible for the sizes sharding is for), so the whole filter's
//! false-positive rate is one shard's: at most p.
//!
//! The articles' example, 10^10 URLs at 1%:
//!
//! ```
//! use bloomery::sharding::ShardPlan;
//!
//! // The Redis module's default cap per key, 1 GiB: 12 shards of 1.06 GB.
//! let plan = ShardPlan::new(10_000_000_000, 0.01, 1 << 30, 1)?;
//! assert_eq!(plan.shards(), 12);
//! assert_eq!(plan.shard_bytes(), 1_063_177_088);
//! assert_eq!(plan.total_bytes(), 12_758_125_056); // 10.21 bits an item
//! // A smaller shard, 64 MiB, moves between nodes (MIGRATE) in a fraction of a second.
//! let plan = ShardPlan::new(10_000_000_000, 0.01, 64 << 20, 1)?;
//! assert_eq!(plan.shards(), 191);
//! assert_eq!(plan.shard_bytes(), 66_796_480); // 5.2 * 10^7 items each
//! # Ok::<(), bloomery::Error>(())
//! ```
//!
//! Redis keys (the `bloomery-cluster` crate and the CLI use them): the plan's text form
//! ([`ShardPlan::to_text`]) in a plain string at the filter's name, and shard i at
//! [`ShardPlan::shard_key`]`(name, i)` = `{T}i:NAME`, T a hash tag that puts the S shards
//! at evenly spaced cluster slots ([`KeyScheme`]). docs/sharding.md has the whole
//! specification.

use crate::blocked::BlockedBloomFilter;
use crate::error::{Error, FormatProblem, Result};
use crate::hash::{Funnel, xxh3_64_item};
use crate::sizing::{MAX_NUM_BLOCKS, blocked_num_blocks, check_fpp};

/// The most shards a plan has: far more than a cluster has nodes (Redis Cluster has
/// 16,384 slots), and few enough that a client's per-shard bookkeeping stays small.
pub const MAX_SHARDS: u32 = 1 << 20;

/// Bytes of one 512-bit block.
const BLOCK_BYTES: u64 = 64;

/// The first word of the text form.
const TEXT_MAGIC: &str = "bloomery-sharded";

/// The text form's version of plans whose shards are at [`KeyScheme::Spread`] keys.
const TEXT_VERSION: &str = "v2";

/// The text form's version of plans whose shards are at [`KeyScheme::Tagged`] keys.
const TEXT_VERSION_TAGGED: &str = "v1";

/// The hash slots of a Redis Cluster.
pub const CLUSTER_SLOTS: u16 = 16_384;

/// How a plan names its shards' Redis keys: its text form's version says which.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyScheme {
    /// Plans `v1` (bloomery before 2026-11-28): shard s at `{s:NAME}`. CRC16 is linear,
    /// so the slots of one name's tags fall in a pattern of its own: for some names most
    /// shards land on one node of a cluster (`v1_keys_can_crowd_one_node`). Read, not
    /// made.
    Tagged,
    /// Plans `v2`: shard s at `{T}s:NAME`, where T is [`slot_tag`] of slot
    /// `(XXH3-64(NAME) mod 16384 + ⌊s · 16384 / S⌋) mod 16384`: the shards' slots are
    /// evenly spaced around the ring of slots, so a cluster whose nodes own even ranges
    /// holds even numbers of them ([`ShardPlan::shard_slot`]).
    Spread,
}

/// CRC16 as Redis Cluster hashes keys (XMODEM: polynomial 0x1021, initial value 0).
///
/// ```
/// assert_eq!(bloomery::sharding::crc16(b"123456789"), 0x31c3);
/// ```
pub const fn crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0u16;
    let mut i = 0;
    while i < bytes.len() {
        crc ^= (bytes[i] as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        i += 1;
    }
    crc
}

/// The Redis Cluster hash slot of `key`: CRC16 mod 16384 of its hash tag (the bytes
/// between its first `{` and the next `}`, when there are any), else of the whole key.
///
/// ```
/// use bloomery::sharding::key_slot;
///
/// assert_eq!(key_slot(b"foo"), 12182);
/// assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
/// // An empty tag (`{}`) counts for none: the whole key is hashed.
/// assert_eq!(key_slot(b"foo{}{bar}"), bloomery::sharding::crc16(b"foo{}{bar}") % 16384);
/// ```
pub fn key_slot(key: &[u8]) -> u16 {
    let tag = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&len| len > 0)
            .map(|len| &rest[..len])
    });
    crc16(tag.unwrap_or(key)) % CLUSTER_SLOTS
}

/// The characters of [`slot_tag`]s, in their order.
const TAG_ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// The hash tag of `slot` (taken mod 16384): the shortest string of `0-9a-z` whose
/// [`crc16`] mod 16384 is `slot`, the first in alphabetical order among those of its
/// length (1 to 4 characters; computed once per process, 1.7 million CRC16s at most).
///
/// ```
/// use bloomery::sharding::{key_slot, slot_tag};
///
/// assert_eq!(key_slot(format!("{{{}}}", slot_tag(7)).as_bytes()), 7);
/// ```
pub fn slot_tag(slot: u16) -> &'static str {
    static TAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![String::new(); usize::from(CLUSTER_SLOTS)];
        let mut found = 0;
        'lengths: for len in 1..=4u32 {
            for index in 0..TAG_ALPHABET.len().pow(len) {
                // The index's digits in base 36, most significant first: alphabetical order.
                let mut tag = vec![0u8; len as usize];
                let mut rest = index;
                for byte in tag.iter_mut().rev() {
                    *byte = TAG_ALPHABET[rest % TAG_ALPHABET.len()];
                    rest /= TAG_ALPHABET.len();
                }
                let slot = usize::from(crc16(&tag) % CLUSTER_SLOTS);
                if tags[slot].is_empty() {
                    tags[slot] = String::from_utf8(tag).expect("ASCII");
                    found += 1;
                    if found == tags.len() {
                        break 'lengths;
                    }
                }
            }
        }
        assert_eq!(found, tags.len(), "tags of at most 4 characters reach every slot");
        tags
    });
    &tags[usize::from(slot % CLUSTER_SLOTS)]
}

/// murmur3's 64-bit finaliser (`fmix64`), a bijection that spreads every input bit over
/// all output bits: the shard is taken from `route_mix(h)`, not from `h`, whose bits the
/// shard's blocked filter already uses.
///
/// ```
/// assert_eq!(bloomery::sharding::route_mix(0), 0);
/// assert_eq!(bloomery::sharding::route_mix(1), 0xb456_bcfc_34c2_cb2c);
/// ```
#[inline]
pub const fn route_mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// Checks a sharded filter's name: not empty, and not starting with `{` (the form of shard
/// keys, see [`ShardPlan::shard_key`]).
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.starts_with('{') {
        return Err(Error::Parameter {
            name: "a sharded filter's name",
            value: format!("{name:?}"),
            allowed: "non-empty and not starting with '{' (shard keys start with their hash tag)",
        });
    }
    Ok(())
}

/// The geometry of a sharded filter: how many shards, each how many blocks, which seed,
/// and what it was sized for.
///
/// ```
/// use bloomery::sharding::ShardPlan;
///
/// let plan = ShardPlan::new(1_000_000, 0.01, 1 << 20, 16)?;
/// let mut shards: Vec<_> = (0..plan.shards()).map(|_| plan.new_shard()).collect::<Result<_, _>>()?;
/// for item in ["a", "b", "c"] {
///     let hash = plan.hash(item);
///     shards[plan.shard_of(hash) as usize].insert_hash(hash);
/// }
/// let hash = plan.hash("b");
/// assert!(shards[plan.shard_of(hash) as usize].contains_hash(hash));
/// // What goes into the metadata key, and back.
/// assert_eq!(ShardPlan::from_text(&plan.to_text())?, plan);
/// # Ok::<(), bloomery::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShardPlan {
    shards: u32,
    blocks_per_shard: u64,
    seed: u64,
    expected_items: u64,
    fpp: f64,
    keys: KeyScheme,
}

impl ShardPlan {
    /// A plan for `expected_items` at false-positive probability `fpp` with at most
    /// `max_shard_bytes` per shard and at least `min_shards` shards, seed 0: S >=
    /// `min_shards` shards such that a blocked filter for ceil(n / S) items at `fpp` takes
    /// at most `max_shard_bytes`, found by docs/sharding.md's search ("Sizing"): the fewest
    /// such S, or more where its jump passes them.
    pub fn new(expected_items: u64, fpp: f64, max_shard_bytes: u64, min_shards: u32) -> Result<Self> {
        check_fpp(fpp)?;
        let parameter = |name, value: String, allowed| Err(Error::Parameter { name, value, allowed });
        if expected_items == 0 {
            return parameter("expected_items", "0".into(), "at least 1");
        }
        if max_shard_bytes < BLOCK_BYTES {
            return parameter(
                "max_shard_bytes",
                max_shard_bytes.to_string(),
                "at least 64 (one block)",
            );
        }
        if !(1..=MAX_SHARDS).contains(&min_shards) {
            return parameter("min_shards", min_shards.to_string(), "in 1..=1048576");
        }
        let max_blocks = (max_shard_bytes / BLOCK_BYTES).min(MAX_NUM_BLOCKS);
        let mut shards = u64::from(min_shards);
        loop {
            let per_shard = expected_items.div_ceil(shards);
            // Sizing fails beyond 2^32 blocks: then the shard is over any cap too. For one
            // item a shard, its problem is the answer (no blocked filter reaches the rate),
            // told of the items asked for, not of the one item a shard.
            let blocks = match blocked_num_blocks(per_shard, fpp) {
                Ok(blocks) => blocks,
                Err(Error::Sizing { problem, .. }) if per_shard == 1 => {
                    // A sharded filter is of blocked shards: no classic filter to advise.
                    let problem = problem.replace(" or a classic filter", "");
                    return Err(Error::Sizing {
                        expected_items,
                        fpp,
                        problem: format!("sizing a shard of one item: {problem}"),
                    });
                }
                Err(error) if per_shard == 1 => return Err(error),
                Err(_) => u64::MAX,
            };
            if blocks <= max_blocks {
                return Ok(Self {
                    shards: shards as u32,
                    blocks_per_shard: blocks,
                    seed: 0,
                    expected_items,
                    fpp,
                    keys: KeyScheme::Spread,
                });
            }
            if shards >= u64::from(MAX_SHARDS) || per_shard == 1 {
                let problem = if per_shard == 1 {
                    format!(
                        "a shard of one item needs more than {max_shard_bytes} bytes at this fpp; \
                         allow larger shards or a higher fpp"
                    )
                } else {
                    format!(
                        "{MAX_SHARDS} shards of at most {max_shard_bytes} bytes cannot hold it; \
                         allow larger shards or a higher fpp"
                    )
                };
                return Err(Error::Sizing {
                    expected_items,
                    fpp,
                    problem,
                });
            }
            // Blocks per item barely change with the shard's size: scale up by the excess
            // (at least one more shard), and check again.
            let scaled = (shards as f64 * blocks.min(MAX_NUM_BLOCKS << 1) as f64 / max_blocks as f64).ceil();
            shards = (scaled as u64).clamp(shards + 1, u64::from(MAX_SHARDS));
        }
    }

    /// The same plan hashing with `seed` (every client must use the stored one).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// A plan with this exact geometry (what [`from_text`](Self::from_text) checks).
    pub fn from_parts(
        shards: u32,
        blocks_per_shard: u64,
        seed: u64,
        expected_items: u64,
        fpp: f64,
    ) -> Result<Self> {
        check_fpp(fpp)?;
        let parameter = |name, value: String, allowed| Err(Error::Parameter { name, value, allowed });
        if !(1..=MAX_SHARDS).contains(&shards) {
            return parameter("shards", shards.to_string(), "in 1..=1048576");
        }
        if !(1..=MAX_NUM_BLOCKS).contains(&blocks_per_shard) {
            return parameter("blocks", blocks_per_shard.to_string(), "in 1..=2^32");
        }
        if expected_items == 0 {
            return parameter("items", "0".into(), "at least 1");
        }
        Ok(Self {
            shards,
            blocks_per_shard,
            seed,
            expected_items,
            fpp,
            keys: KeyScheme::Spread,
        })
    }

    /// The same plan with its shards at `keys` (plans are made [`KeyScheme::Spread`]).
    pub fn with_key_scheme(mut self, keys: KeyScheme) -> Self {
        self.keys = keys;
        self
    }

    /// How the plan names its shards' keys.
    pub fn key_scheme(&self) -> KeyScheme {
        self.keys
    }

    /// The Redis key of shard `shard` of the filter `name` ([`KeyScheme`]). Either way the
    /// key opens with its hash tag, so nothing in `name` changes its slot, and names that
    /// start with `{` are refused by clients ([`check_name`]), so no filter's metadata key
    /// is another filter's shard key.
    ///
    /// ```
    /// use bloomery::sharding::{KeyScheme, ShardPlan, key_slot};
    ///
    /// let plan = ShardPlan::new(1_000_000_000, 0.01, 64 << 20, 64)?;
    /// assert_eq!(plan.shard_key("urls", 0), "{738}0:urls");
    /// assert_eq!(plan.shard_key("urls", 7), "{1xk}7:urls");
    /// assert_eq!(plan.shard_key("urls", 63), "{50n}63:urls");
    /// assert_eq!(key_slot(plan.shard_key("urls", 7).as_bytes()), plan.shard_slot("urls", 7));
    /// // Plans v1 (bloomery before 2026-11-28) keep their keys.
    /// assert_eq!(plan.with_key_scheme(KeyScheme::Tagged).shard_key("urls", 7), "{7:urls}");
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn shard_key(&self, name: &str, shard: u32) -> String {
        match self.keys {
            KeyScheme::Tagged => format!("{{{shard}:{name}}}"),
            KeyScheme::Spread => format!("{{{}}}{shard}:{name}", slot_tag(self.shard_slot(name, shard))),
        }
    }

    /// The cluster slot of shard `shard` of `name`. With [`KeyScheme::Spread`] keys, the
    /// name's own offset, XXH3-64 of its bytes mod 16384, plus ⌊shard · 16384 / S⌋, mod
    /// 16384: S shards at evenly spaced slots, so each node holds its share of slots' worth
    /// (a node owning a third of the slots in one range holds ⌊S/3⌋ or ⌈S/3⌉ shards).
    pub fn shard_slot(&self, name: &str, shard: u32) -> u16 {
        match self.keys {
            KeyScheme::Tagged => key_slot(self.shard_key(name, shard).as_bytes()),
            KeyScheme::Spread => {
                let slots = u64::from(CLUSTER_SLOTS);
                let offset = crate::hash::xxh3_64_bytes(name.as_bytes(), 0) % slots;
                let step = u64::from(shard) * slots / u64::from(self.shards);
                ((offset + step) % slots) as u16
            }
        }
    }

    /// The number of shards, S.
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// The 512-bit blocks in each shard.
    pub fn blocks_per_shard(&self) -> u64 {
        self.blocks_per_shard
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The items the filter was sized for.
    pub fn expected_items(&self) -> u64 {
        self.expected_items
    }

    /// The false-positive probability it was sized for.
    pub fn fpp(&self) -> f64 {
        self.fpp
    }

    /// Bytes of one shard's bits.
    pub fn shard_bytes(&self) -> u64 {
        self.blocks_per_shard * BLOCK_BYTES
    }

    /// Bytes of all shards' bits.
    pub fn total_bytes(&self) -> u64 {
        self.shard_bytes() * u64::from(self.shards)
    }

    /// The item's 64-bit hash: what clients send to the server (8 bytes an item).
    #[inline]
    pub fn hash<T: Funnel + ?Sized>(&self, item: &T) -> u64 {
        xxh3_64_item(item, self.seed)
    }

    /// The shard (0..S) that holds the item with this hash.
    #[inline]
    pub fn shard_of(&self, hash: u64) -> u32 {
        ((u128::from(route_mix(hash)) * u128::from(self.shards)) >> 64) as u32
    }

    /// An empty shard: a blocked filter of [`blocks_per_shard`](Self::blocks_per_shard)
    /// blocks with the plan's seed, into which the shard's items go by
    /// [`BlockedBloomFilter::insert_hash`].
    pub fn new_shard(&self) -> Result<BlockedBloomFilter> {
        BlockedBloomFilter::with_num_blocks(self.blocks_per_shard, self.seed)
    }

    /// The false-positive probability the sizing formula predicts with `items` items spread
    /// evenly over the shards.
    pub fn fpp_for_items(&self, items: u64) -> f64 {
        crate::sizing::blocked_false_positive_rate(
            self.blocks_per_shard,
            items.div_ceil(u64::from(self.shards)),
        )
    }

    /// The text form kept in the metadata key:
    /// `bloomery-sharded v2 shards=S blocks=B seed=SEED items=N fpp=P` (`v1` for a plan of
    /// tagged keys, [`KeyScheme::Tagged`]), with decimal
    /// integers and the fpp as Rust's `{}` writes it: plain decimal (no exponent), the
    /// fewest digits that read back as the same value.
    pub fn to_text(&self) -> String {
        let version = match self.keys {
            KeyScheme::Tagged => TEXT_VERSION_TAGGED,
            KeyScheme::Spread => TEXT_VERSION,
        };
        format!(
            "{TEXT_MAGIC} {version} shards={} blocks={} seed={} items={} fpp={}",
            self.shards, self.blocks_per_shard, self.seed, self.expected_items, self.fpp
        )
    }

    /// Reads [`to_text`](Self::to_text)'s form strictly: the same words in the same order,
    /// single spaces, canonical decimal numbers (no sign, no leading zeros), nothing else.
    pub fn from_text(text: &str) -> Result<Self> {
        let bad = |problem: String| Error::Format {
            format: "bloomery sharded-filter metadata",
            problem: FormatProblem::Inconsistent(problem),
        };
        let mut words = text.split(' ');
        if words.next() != Some(TEXT_MAGIC) {
            return Err(bad(format!("does not start with '{TEXT_MAGIC} ': {text:?}")));
        }
        let keys = match words.next() {
            Some(TEXT_VERSION) => KeyScheme::Spread,
            Some(TEXT_VERSION_TAGGED) => KeyScheme::Tagged,
            other => {
                return Err(bad(format!(
                    "version {:?}; this library reads {TEXT_VERSION_TAGGED} and {TEXT_VERSION}",
                    other.unwrap_or("")
                )));
            }
        };
        let mut field = |name: &str| -> Result<&str> {
            let word = words.next().ok_or_else(|| bad(format!("{name}= is missing")))?;
            word.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('='))
                .ok_or_else(|| bad(format!("expected {name}=..., found {word:?}")))
        };
        fn integer(value: &str) -> Option<u64> {
            let canonical =
                value == "0" || (!value.starts_with('0') && value.bytes().all(|b| b.is_ascii_digit()));
            canonical.then(|| value.parse().ok()).flatten()
        }
        let mut number = |name: &'static str| -> Result<u64> {
            let value = field(name)?;
            integer(value).ok_or_else(|| bad(format!("{name}={value:?} is not a decimal integer")))
        };
        let shards = number("shards")?;
        let blocks = number("blocks")?;
        let seed = number("seed")?;
        let items = number("items")?;
        let fpp_text = field("fpp")?;
        let fpp: f64 = fpp_text
            .parse()
            .ok()
            .filter(|fpp: &f64| fpp.to_string() == fpp_text)
            .ok_or_else(|| {
                bad(format!(
                    "fpp={fpp_text:?} is not a number in canonical form (plain decimal, no \
                     exponent, the fewest digits that read back the same: docs/sharding.md)"
                ))
            })?;
        if let Some(extra) = words.next() {
            return Err(bad(format!("unexpected {extra:?} after fpp")));
        }
        let shards = u32::try_from(shards).map_err(|_| bad(format!("shards={shards} is too many")))?;
        Self::from_parts(shards, blocks, seed, items, fpp)
            .map(|plan| plan.with_key_scheme(keys))
            .map_err(|error| bad(error.to_string()))
    }
}

impl std::fmt::Display for ShardPlan {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.to_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::blocks::block_index;

    #[test]
    fn the_shard_count_follows_the_cap() {
        let plan = ShardPlan::new(1_000_000_000, 0.01, 1 << 30, 64).unwrap();
        assert_eq!(plan.shards(), 64);
        assert_eq!(
            plan.blocks_per_shard(),
            blocked_num_blocks(1_000_000_000u64.div_ceil(64), 0.01).unwrap()
        );
        // 10^9 at 1% is 1.28 GB: two shards under a 1 GiB cap.
        let plan = ShardPlan::new(1_000_000_000, 0.01, 1 << 30, 1).unwrap();
        assert_eq!(plan.shards(), 2);
        // Every plan fits its cap, and one shard fewer would not.
        for (items, fpp, cap) in [
            (10_000_000_000u64, 0.01, 64u64 << 20),
            (123_456_789, 0.001, 10 << 20),
            (5, 0.1, 64),
        ] {
            let plan = ShardPlan::new(items, fpp, cap, 1).unwrap();
            assert!(plan.shard_bytes() <= cap, "{plan}");
            if plan.shards() > 1 {
                let fewer = u64::from(plan.shards() - 1);
                let blocks = blocked_num_blocks(items.div_ceil(fewer), fpp).unwrap();
                assert!(blocks * 64 > cap, "{plan}: {fewer} shards would fit");
            }
        }
    }

    /// docs/sharding.md's example of the search passing the fewest shards that fit: its
    /// jump from 5 shards goes to 17 where 16 would do. Plans must stay what this search
    /// gives (a create finds an earlier one's plan the one asked only if it computes the
    /// same S), so the test holds the overshoot the page describes.
    #[test]
    fn the_shard_search_is_the_one_the_page_describes() {
        let plan = ShardPlan::new(2_381, 0.01, 215, 5).unwrap();
        assert_eq!((plan.shards(), plan.blocks_per_shard()), (17, 3));
        assert!(blocked_num_blocks(2_381u64.div_ceil(16), 0.01).unwrap() <= 215 / BLOCK_BYTES);
        assert!(blocked_num_blocks(2_381u64.div_ceil(5), 0.01).unwrap() > 215 / BLOCK_BYTES);
    }

    #[test]
    fn impossible_parameters_are_clear_errors() {
        assert!(matches!(
            ShardPlan::new(100, 1.5, 1 << 20, 1),
            Err(Error::Fpp { .. })
        ));
        assert!(ShardPlan::new(0, 0.01, 1 << 20, 1).is_err());
        assert!(ShardPlan::new(100, 0.01, 63, 1).is_err());
        assert!(ShardPlan::new(100, 0.01, 1 << 20, 0).is_err());
        let too_big = ShardPlan::new(u64::MAX, 0.01, 64, 1).unwrap_err().to_string();
        assert!(too_big.contains("shards"), "{too_big}");
        // One item per shard needing more than one block: no shard count fits, and the
        // error says so (not that 2^20 shards were tried).
        let one_item = ShardPlan::new(1_000, 1e-16, 64, 1).unwrap_err().to_string();
        assert!(
            one_item.contains("a shard of one item needs more than 64 bytes"),
            "{one_item}"
        );
        // A rate no blocked filter reaches: told of the items asked for (it said "for 1
        // items", the shard's), and of the shard sized.
        let unreachable = ShardPlan::new(1_000, 1e-30, 1 << 30, 64).unwrap_err().to_string();
        assert!(
            unreachable.starts_with(
                "cannot size a filter for 1000 items at fpp 1e-30: sizing a shard of one item: "
            ) && unreachable.ends_with("; use a higher fpp"),
            "{unreachable}"
        );
    }

    #[test]
    fn the_text_form_round_trips_and_is_strict() {
        let plan = ShardPlan::new(1_000_000_000, 0.01, 1 << 30, 64)
            .unwrap()
            .with_seed(42);
        let text = plan.to_text();
        assert_eq!(
            text,
            format!(
                "bloomery-sharded v2 shards=64 blocks={} seed=42 items=1000000000 fpp=0.01",
                plan.blocks_per_shard()
            )
        );
        assert_eq!(ShardPlan::from_text(&text).unwrap(), plan);
        // v1 plans (shards at {s:NAME}) read as such, and write back the same.
        let v1 = text.replace(" v2 ", " v1 ");
        let tagged = ShardPlan::from_text(&v1).unwrap();
        assert_eq!(tagged, plan.with_key_scheme(KeyScheme::Tagged));
        assert_eq!(tagged.to_text(), v1);
        let odd = ShardPlan::from_parts(3, 5, u64::MAX, 7, 0.1 + 0.2).unwrap();
        assert_eq!(ShardPlan::from_text(&odd.to_text()).unwrap(), odd);
        for bad in [
            "",
            "bloomery-sharded v3 shards=64 blocks=1 seed=0 items=1 fpp=0.01",
            "bloomery-sharded v1 shards=64 blocks=1 seed=0 items=1",
            "bloomery-sharded v1 shards=64 blocks=1 seed=0 items=1 fpp=0.01 extra=1",
            "bloomery-sharded v1 shards=64 blocks=1 seed=0 items=1 fpp=0.010",
            "bloomery-sharded v1 shards=64 blocks=1 seed=0 items=1 fpp=1e-2",
            "bloomery-sharded v1 shards=064 blocks=1 seed=0 items=1 fpp=0.01",
            "bloomery-sharded v1 shards=+64 blocks=1 seed=0 items=1 fpp=0.01",
            "bloomery-sharded v1 blocks=1 shards=64 seed=0 items=1 fpp=0.01",
            "bloomery-sharded v1  shards=64 blocks=1 seed=0 items=1 fpp=0.01",
            "bloomery-sharded v1 shards=0 blocks=1 seed=0 items=1 fpp=0.01",
            "bloomery-sharded v1 shards=64 blocks=0 seed=0 items=1 fpp=0.01",
            "bloomery-sharded v1 shards=64 blocks=4294967297 seed=0 items=1 fpp=0.01",
            "bloomery-sharded v1 shards=64 blocks=1 seed=0 items=0 fpp=0.01",
            "bloomery-sharded v1 shards=64 blocks=1 seed=0 items=1 fpp=1",
            "bloomery-sharded v1 shards=64 blocks=1 seed=0 items=1 fpp=NaN",
            "bloomery-sharded v1 shards=64 blocks=1 seed=18446744073709551616 items=1 fpp=0.01",
        ] {
            assert!(ShardPlan::from_text(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn names_that_look_like_shard_keys_are_refused() {
        assert!(check_name("urls").is_ok());
        assert!(check_name("a{b}c").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("{0:urls}").is_err());
        // The tag opens the key whatever the name holds.
        let plan = ShardPlan::new(1_000, 0.01, 1 << 20, 16).unwrap();
        let tagged = plan.with_key_scheme(KeyScheme::Tagged);
        assert_eq!(tagged.shard_key("a}b", 12), "{12:a}b}");
        assert_eq!(tagged.shard_key("x{y}", 0), "{0:x{y}}");
        for name in ["a}b", "x{y}", "{", "}"] {
            for shard in 0..16 {
                let key = plan.shard_key(name, shard);
                assert_eq!(key_slot(key.as_bytes()), plan.shard_slot(name, shard), "{key}");
            }
        }
    }

    #[test]
    fn every_slot_has_a_tag_of_at_most_four_characters() {
        for slot in 0..CLUSTER_SLOTS {
            let tag = slot_tag(slot);
            assert!((1..=4).contains(&tag.len()), "{slot}: {tag:?}");
            assert!(tag.bytes().all(|b| TAG_ALPHABET.contains(&b)), "{tag:?}");
            assert_eq!(crc16(tag.as_bytes()) % CLUSTER_SLOTS, slot);
        }
        // One-character strings are their slots' tags. That each tag is the first of its
        // length in alphabetical order is checked against an independent walk in Python
        // (crates/bloomery-redis/tests/test_sharded.py, from docs/sharding.md's keys).
        assert_eq!(slot_tag(crc16(b"0") % CLUSTER_SLOTS), "0");
        assert_eq!(slot_tag(crc16(b"z") % CLUSTER_SLOTS), "z");
    }

    /// Shards of `name` in each third of the slots, as a cluster of three primaries made by
    /// `redis-cli --cluster create` owns them (0-5460, 5461-10922, 10923-16383).
    fn per_third(plan: &ShardPlan, name: &str) -> [u32; 3] {
        let mut counts = [0; 3];
        for shard in 0..plan.shards() {
            let slot = key_slot(plan.shard_key(name, shard).as_bytes());
            counts[match slot {
                0..=5460 => 0,
                5461..=10922 => 1,
                _ => 2,
            }] += 1;
        }
        counts
    }

    #[test]
    fn v2_keys_spread_evenly_over_the_nodes() {
        let plan = ShardPlan::new(1_000_000_000, 0.01, 64 << 20, 64).unwrap();
        assert_eq!(plan.shards(), 64);
        for i in 0..2_000 {
            let name = format!("filter-{i}");
            let counts = per_third(&plan, &name);
            assert!(
                counts.iter().all(|&count| (21..=22).contains(&count)),
                "{name}: {counts:?}"
            );
            let mut slots: Vec<u16> = (0..64).map(|shard| plan.shard_slot(&name, shard)).collect();
            slots.sort_unstable();
            slots.dedup();
            assert_eq!(slots.len(), 64, "{name}: shards share slots");
        }
    }

    #[test]
    fn v1_keys_can_crowd_one_node() {
        // The control for the test above: with {s:NAME} tags, CRC16's linearity puts the
        // 64 shards of this name 10 / 5 / 49 over the three thirds, and more than 20 of
        // 2,000 names put more than 38 of their 64 shards in one third.
        let plan = ShardPlan::new(1_000_000_000, 0.01, 64 << 20, 64)
            .unwrap()
            .with_key_scheme(KeyScheme::Tagged);
        assert_eq!(per_third(&plan, "zrhhntocwy"), [10, 5, 49]);
        let crowded = (0..2_000)
            .filter(|i| {
                per_third(&plan, &format!("filter-{i}"))
                    .iter()
                    .any(|&count| count > 38)
            })
            .count();
        assert!(crowded > 20, "{crowded}");
    }

    /// Per shard, the fraction of its blocks that `count` random items routed by `route`
    /// touch, against what uniform hashing predicts (1 - e^(-load)); returns the worst
    /// ratio over shards.
    fn worst_block_use(plan: &ShardPlan, count: u64, route: impl Fn(u64) -> u32) -> f64 {
        let shards = plan.shards() as usize;
        let blocks = plan.blocks_per_shard() as usize;
        let mut used = vec![vec![false; blocks]; shards];
        let mut loads = vec![0u64; shards];
        for i in 0..count {
            let hash = plan.hash(&i);
            let shard = route(hash) as usize;
            used[shard][block_index(hash, blocks)] = true;
            loads[shard] += 1;
        }
        used.iter()
            .zip(&loads)
            .map(|(used, &load)| {
                let fraction = used.iter().filter(|&&block| block).count() as f64 / blocks as f64;
                let expected = 1.0 - (-(load as f64) / blocks as f64).exp();
                fraction / expected
            })
            .fold(f64::INFINITY, f64::min)
    }

    #[test]
    fn every_shard_uses_its_blocks_evenly() {
        let plan = ShardPlan::new(400_000, 0.01, 64 << 10, 8).unwrap();
        assert!(plan.shards() >= 8);
        let worst = worst_block_use(&plan, 400_000, |hash| plan.shard_of(hash));
        assert!(
            worst > 0.97,
            "a shard used {worst:.3} of the blocks uniform hashing would"
        );
        // And the items spread evenly over the shards.
        let mut loads = vec![0u64; plan.shards() as usize];
        for i in 0..400_000u64 {
            loads[plan.shard_of(plan.hash(&i)) as usize] += 1;
        }
        let mean = 400_000.0 / plan.shards() as f64;
        for &load in &loads {
            assert!((load as f64 - mean).abs() < 5.0 * mean.sqrt(), "{loads:?}");
        }
    }

    #[test]
    fn routing_on_the_raw_hash_would_waste_blocks() {
        // The control for the test above: shard by multiply-shift of the hash's own high
        // bits, which the shard's block index also uses, and each shard reaches about 1/S
        // of its blocks.
        let plan = ShardPlan::new(400_000, 0.01, 64 << 10, 8).unwrap();
        let shards = u64::from(plan.shards());
        let worst = worst_block_use(&plan, 400_000, |hash| (((hash >> 32) * shards) >> 32) as u32);
        assert!(worst < 2.0 / shards as f64, "{worst}");
    }

    #[test]
    fn a_sharded_filter_meets_its_planned_rate() {
        let items = 500_000u64;
        for fpp in [0.01, 0.001] {
            let plan = ShardPlan::new(items, fpp, 128 << 10, 16).unwrap().with_seed(7);
            let mut shards: Vec<_> = (0..plan.shards()).map(|_| plan.new_shard().unwrap()).collect();
            for i in 0..items {
                let hash = plan.hash(&i);
                shards[plan.shard_of(hash) as usize].insert_hash(hash);
            }
            for i in 0..items {
                let hash = plan.hash(&i);
                assert!(shards[plan.shard_of(hash) as usize].contains_hash(hash));
            }
            let probes = 2_000_000u64;
            let false_positives = (items..items + probes)
                .filter(|i| {
                    let hash = plan.hash(i);
                    shards[plan.shard_of(hash) as usize].contains_hash(hash)
                })
                .count();
            let measured = false_positives as f64 / probes as f64;
            let predicted = plan.fpp_for_items(items);
            assert!(measured <= fpp, "{plan}: measured {measured}");
            assert!(
                (measured - predicted).abs() < 0.1 * predicted,
                "{plan}: measured {measured}, predicted {predicted}"
            );
        }
    }
}
