//! Sizing: from (expected items n, false-positive probability p) to (bits m, hashes k),
//! and back.
//!
//! With k independent hashes into m bits, after n insertions a given bit is still 0 with
//! probability (1 - 1/m)^(kn) ≈ e^(-kn/m), so a fresh item is a false positive with
//! probability p ≈ (1 - e^(-kn/m))^k. For fixed m/n this is smallest at k = (m/n) ln 2,
//! where half the bits are set and p = 2^-k; solving for m gives
//! m = -n ln p / (ln 2)^2, about 1.44 log2(1/p) bits per item: 9.59 bits for 1%,
//! 14.38 for 0.1% (Bloom 1970; Broder & Mitzenmacher, "Network Applications of Bloom
//! Filters", 2004).
//!
//! The integer results follow Guava's `BloomFilter.optimalNumOfBits` and
//! `optimalNumOfHashFunctions` exactly (a truncating cast for m, round-half-up for k, an
//! expected count of 0 treated as 1), and the bit array is rounded up to whole 64-bit
//! words, so a filter sized here has the same shape as Guava's. Every row of Guava's own
//! output (`tests/data/guava/sizing.tsv`, 183 (n, p) pairs) is checked in the tests. For
//! n = 10^7 and p = 1%: m = 95,850,583 bits (11.4 MiB), k = 7; the classic experiment
//! (`cargo run --release --example classic`) measures 100,075 false positives in 10^7
//! fresh probes, 1.0008%.

use crate::error::{Error, Result};

/// The largest number of hash functions: Guava's format stores it in one unsigned byte.
pub const MAX_NUM_HASHES: u32 = 255;

/// The largest number of 64-bit words: Guava's format stores the count as a Java `int`.
pub const MAX_NUM_WORDS: u64 = i32::MAX as u64;

/// The largest number of bits a Guava-compatible filter can have: 2^31 - 1 words of 64
/// bits, about 16 GiB, room for 1.4 × 10^10 items at 1%.
pub const MAX_NUM_BITS: u64 = max_num_bits();

const fn max_num_bits() -> u64 {
    // On a 32-bit target the address space (isize::MAX bytes) is the tighter limit.
    let address_space_words = isize::MAX as u64 / 8;
    if MAX_NUM_WORDS < address_space_words {
        MAX_NUM_WORDS * 64
    } else {
        address_space_words * 64
    }
}

/// Checks that `fpp` lies strictly between 0 and 1.
///
/// ```
/// assert!(bloomery::sizing::check_fpp(0.01).is_ok());
/// let err = bloomery::sizing::check_fpp(1.5).unwrap_err();
/// assert_eq!(err.to_string(), "fpp (false-positive probability) must be in (0, 1), got 1.5");
/// ```
pub fn check_fpp(fpp: f64) -> Result<()> {
    if fpp > 0.0 && fpp < 1.0 {
        Ok(())
    } else {
        Err(Error::Fpp { value: fpp })
    }
}

/// Checks that `num_hashes` is in `1..=255`.
pub fn check_num_hashes(num_hashes: u32) -> Result<()> {
    if (1..=MAX_NUM_HASHES).contains(&num_hashes) {
        Ok(())
    } else {
        Err(Error::NumHashes {
            value: num_hashes.into(),
            max: MAX_NUM_HASHES.into(),
        })
    }
}

/// The optimal number of bits for `expected_items` at false-positive probability `fpp`:
/// `floor(-n ln p / (ln 2)^2)`, as Guava's `optimalNumOfBits` (before rounding up to whole
/// words; `expected_items == 0` is treated as 1, as `BloomFilter.create` does).
///
/// ```
/// use bloomery::sizing::optimal_num_bits;
///
/// assert_eq!(optimal_num_bits(1_000_000, 0.01)?, 9_585_058);
/// assert!(optimal_num_bits(1_000, 0.0).is_err());
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn optimal_num_bits(expected_items: u64, fpp: f64) -> Result<u64> {
    check_fpp(fpp)?;
    let n = expected_items.max(1) as f64;
    let ln2 = 2f64.ln();
    // `as` truncates toward zero and saturates, like Java's (long) cast.
    Ok((-n * fpp.ln() / (ln2 * ln2)) as u64)
}

/// The optimal number of hash functions for `expected_items` in `num_bits` bits:
/// `max(1, round((m / n) ln 2))`, as Guava's `optimalNumOfHashFunctions` (not yet checked
/// against [`MAX_NUM_HASHES`]).
///
/// ```
/// assert_eq!(bloomery::sizing::optimal_num_hashes(1_000_000, 9_585_058), 7);
/// ```
pub fn optimal_num_hashes(expected_items: u64, num_bits: u64) -> u32 {
    let n = expected_items.max(1) as f64;
    let k = (num_bits as f64 / n * 2f64.ln()).round();
    // Saturating cast; anything above 255 is rejected by `check_num_hashes`.
    (k as u32).max(1)
}

/// The number of 64-bit words that hold `num_bits` bits, checked against the format's and
/// the address space's limits.
pub fn num_words_for_bits(num_bits: u64) -> Result<usize> {
    if num_bits == 0 || num_bits > MAX_NUM_BITS {
        return Err(Error::NumBits {
            value: num_bits.into(),
            max: MAX_NUM_BITS,
            why: "Guava's format holds at most 2^31 - 1 64-bit words",
        });
    }
    Ok(num_bits.div_ceil(64) as usize)
}

/// The fewest bits a filter whose k positions come from Guava's double hashing
/// (`(h1 + i·h2) mod m`, [`crate::hash::mitz64_indices`]) needs for `expected_items` at
/// `fpp`, beside what the usual formula gives: √([`DOUBLE_HASHING_PAIRS`] · n / fpp).
///
/// Double hashing puts each item's k positions on an arithmetic progression mod m. A fresh
/// item whose progression runs along an added item's (the same step, its start within k
/// steps: about 2k of the m² (start, step) pairs, counting both directions) finds most of
/// its bits set by that one item, so beyond the fill^k of independent positions a filter
/// of m bits holding n items answers "present" for about c·n/m² of fresh items, c about 6
/// at half the bits set by that count (the example below measures 5.6 to 11.6). That
/// floor is far below the rate in filters of many items (at 1%, 10^6 items, c = 6:
/// 6·10^-8), but not in small ones at low rates: Guava's shape for 1,000 items at 10^-6
/// answers about 10^-5, for 10 items at 10^-3 about 3·10^-3
/// (`cargo run --release -p bloomery --example double_hashing_floor`). With m at least
/// this many bits the floor is at most a tenth of `fpp` for c = 6; Guava's shape, its bits
/// rounded up to whole words, has them from 61 items on at 1%, from 290 at 0.1%
/// ([`ClassicShape::for_rate`]).
///
/// ```
/// use bloomery::sizing::double_hashing_bits;
///
/// assert_eq!(double_hashing_bits(1_000, 1e-6), 244_949);
/// ```
pub fn double_hashing_bits(expected_items: u64, fpp: f64) -> u64 {
    // `as` saturates: so many bits are refused by the sizing.
    (DOUBLE_HASHING_PAIRS * expected_items as f64 / fpp).sqrt().ceil() as u64
}

/// The fewest bits at which `num_hashes` hashes per item answer at most `fpp` holding
/// `expected_items` (0 counts as 1) by the usual formula, (1 - e^(-kn/m))^k ≤ p:
/// `ceil(-k·n / ln(1 - p^(1/k)))`, with ln(1 - x) computed as `ln_1p(-x)`.
///
/// Guava's m = -n ln p / (ln 2)^2 meets p only with the real-valued k = (m/n) ln 2; with
/// k rounded to an integer its rate is above p, a little at the usual rates (k = 7 at 1%:
/// 1.004%) and far above once k rounds to 1 (m/n below 2.16, p above about 0.35: 0.740 at
/// 0.7, 0.988 at 0.9, for 10^4 items, as the example computes).
/// [`ClassicShape::for_rate`] takes at least these bits.
///
/// ```
/// use bloomery::sizing::{ClassicShape, false_positive_rate, optimal_num_bits, rate_bits};
///
/// let rate = |bits, k| false_positive_rate(bits, 10_000, k);
/// let guava = optimal_num_bits(10_000, 0.01)?;
/// assert_eq!(format!("{:.5}", rate(guava, 7)), "0.01004");
/// for (p, guava_rate) in [(0.7, "0.740"), (0.9, "0.988")] {
///     let shape = ClassicShape::for_fpp(10_000, p)?;
///     assert_eq!(shape.num_hashes, 1);
///     assert_eq!(format!("{:.3}", rate(shape.num_bits(), 1)), guava_rate);
///     let bits = rate_bits(10_000, p, 1);
///     assert!(rate(bits, 1) <= p && rate(bits - 1, 1) > p);
/// }
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn rate_bits(expected_items: u64, fpp: f64, num_hashes: u32) -> u64 {
    let n = expected_items.max(1) as f64;
    let k = f64::from(num_hashes);
    // `as` saturates (p^(1/k) rounding to 1 gives infinity): refused by the sizing.
    (-k * n / (-fpp.powf(1.0 / k)).ln_1p()).ceil() as u64
}

/// The constant of [`double_hashing_bits`]: ten times the floor's c of about 6.
pub const DOUBLE_HASHING_PAIRS: f64 = 60.0;

/// The floor's c that [`ClassicShape::for_rate`] takes off the rate its formula must meet:
/// 12, about the most measured (5.6 to 11.6, see [`double_hashing_bits`]). With at least
/// [`double_hashing_bits`] bits the floor is then at most a fifth of the rate.
pub const FLOOR_PAIRS: f64 = 12.0;

/// The shape of a Guava-compatible filter: bits (whole 64-bit words) and hash count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassicShape {
    /// Number of 64-bit words in the bit array.
    pub num_words: usize,
    /// Number of hash functions (bit positions per item).
    pub num_hashes: u32,
}

impl ClassicShape {
    /// Guava's shape for `expected_items` at `fpp`: `optimal_num_bits` rounded up to whole
    /// words, and `optimal_num_hashes` of the unrounded bit count.
    ///
    /// Guava refuses parameters that give 0 bits (p close to 1 with few items); here they
    /// get one word, the smallest filter there is.
    ///
    /// This shape is Guava's, for compatibility, and does not quite meet `fpp`: its k is
    /// rounded, so holding `expected_items` it answers a little above `fpp` (1.004% at 1%),
    /// and far above it from about 0.35 on, where k rounds to 1 (0.740 at 0.7, 0.988 at
    /// 0.9: see [`rate_bits`]). The filters not bound to Guava use
    /// [`for_rate`](Self::for_rate), which meets it.
    ///
    /// ```
    /// use bloomery::sizing::ClassicShape;
    ///
    /// let shape = ClassicShape::for_fpp(10_000_000, 0.01)?;
    /// assert_eq!((shape.num_bits(), shape.num_hashes), (95_850_624, 7));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn for_fpp(expected_items: u64, fpp: f64) -> Result<Self> {
        let num_bits = optimal_num_bits(expected_items, fpp)?.max(1);
        let num_hashes = optimal_num_hashes(expected_items, num_bits);
        Self::new(num_bits, num_hashes).map_err(|error| {
            let problem = match error {
                Error::NumBits { .. } => format!(
                    "it needs {num_bits} bits, more than the {MAX_NUM_BITS} of Guava's format (2^31 - 1 64-bit words)"
                ),
                Error::NumHashes { .. } => format!(
                    "it needs {num_hashes} hash functions, more than the {MAX_NUM_HASHES} Guava's format holds"
                ),
                other => other.to_string(),
            };
            Error::Sizing {
                expected_items,
                fpp,
                problem,
            }
        })
    }

    /// The shape for `expected_items` at `fpp` of a filter that derives its k positions as
    /// Guava does but is not bound to Guava's sizing (counting, retouched, allow-listed,
    /// rotating filters and the scalable filter's sub-filters): Guava's shape, its k kept,
    /// with at least [`double_hashing_bits`], which keep the double hashing's floor
    /// (c·n/m², c about 6) to a tenth of `fpp` (it lifts the rate of few items at a low
    /// rate), and at least the [`rate_bits`] at which the formula's rate with that k,
    /// holding `expected_items`, leaves room for that floor at c = [`FLOOR_PAIRS`]:
    /// `rate_bits` of `fpp` less the floor at the larger of the two bounds (none for
    /// k = 1, whose one position is no progression). Guava's shape answers above `fpp`
    /// by the formula alone, far above from about 0.35 on. The bits are a little more
    /// than Guava's at the usual rates (at 1%, 10^6 items: 9.593 bits per item for k = 7,
    /// Guava's 9.585; for 1,000 items, where the floor counts, 9.664, Guava's 9.600), so
    /// its shape is Guava's only where rounding up to whole words absorbs the difference.
    ///
    /// ```
    /// use bloomery::sizing::ClassicShape;
    ///
    /// use bloomery::sizing::false_positive_rate;
    ///
    /// for p in [0.99, 0.9, 0.7, 0.4, 0.35, 0.1, 0.01, 0.001] {
    ///     let (rate, guava) = (ClassicShape::for_rate(10_000, p)?, ClassicShape::for_fpp(10_000, p)?);
    ///     assert_eq!(rate.num_hashes, guava.num_hashes);
    ///     assert!(rate.num_words >= guava.num_words);
    ///     assert!(false_positive_rate(rate.num_bits(), 10_000, rate.num_hashes) <= p);
    /// }
    /// let guava = ClassicShape::for_fpp(10_000, 0.9)?; // k = 1
    /// assert_eq!((guava.num_words, ClassicShape::for_rate(10_000, 0.9)?.num_words), (35, 68));
    /// for (n, bits, guava) in [(1_000_000, 9_593_024, 9_585_088), (1_000, 9_664, 9_600)] {
    ///     assert_eq!(ClassicShape::for_rate(n, 0.01)?.num_bits(), bits);
    ///     assert_eq!(ClassicShape::for_fpp(n, 0.01)?.num_bits(), guava);
    /// }
    /// let small = ClassicShape::for_rate(1_000, 1e-6)?;
    /// assert_eq!((small.num_bits(), small.num_hashes), (244_992, 20));
    /// # Ok::<(), bloomery::Error>(())
    /// ```
    pub fn for_rate(expected_items: u64, fpp: f64) -> Result<Self> {
        let guava = Self::for_fpp(expected_items, fpp)?;
        let k = guava.num_hashes;
        let floor_bits = double_hashing_bits(expected_items, fpp);
        // The floor, c·n/m² at the bits the rate and the floor's bound ask (c taken at
        // FLOOR_PAIRS, the most measured), comes off the rate the formula must meet: at
        // least that many bits, it is at most that. One position has no progression to
        // run along another's: no floor for k = 1.
        let first = rate_bits(expected_items, fpp, k).max(floor_bits) as f64;
        let floor = if k == 1 {
            0.0
        } else {
            FLOOR_PAIRS * expected_items.max(1) as f64 / (first * first)
        };
        let least = rate_bits(expected_items, fpp - floor, k).max(floor_bits);
        if least <= guava.num_bits() {
            return Ok(guava);
        }
        Self::new(least, guava.num_hashes).map_err(|error| Error::Sizing {
            expected_items,
            fpp,
            problem: format!(
                "it needs {} bits to keep that rate with {} hash functions: {error}",
                // `rate_bits` saturates: 2^64 - 1 is "that many or more".
                if least == u64::MAX {
                    "2^64 - 1 or more".to_string()
                } else {
                    least.to_string()
                },
                guava.num_hashes
            ),
        })
    }

    /// A shape with `num_bits` (rounded up to whole words) and `num_hashes`, checked.
    pub fn new(num_bits: u64, num_hashes: u32) -> Result<Self> {
        let num_words = num_words_for_bits(num_bits)?;
        check_num_hashes(num_hashes)?;
        Ok(Self {
            num_words,
            num_hashes,
        })
    }

    /// The number of bits, a multiple of 64.
    pub fn num_bits(&self) -> u64 {
        self.num_words as u64 * 64
    }
}

/// The expected false-positive probability of a classic filter with `num_bits` bits and
/// `num_hashes` hashes after `num_items` distinct insertions: `(1 - e^(-kn/m))^k`.
///
/// ```
/// use bloomery::sizing::false_positive_rate;
///
/// let p = false_positive_rate(95_850_624, 10_000_000, 7);
/// assert!((p - 0.01).abs() < 0.0001, "{p}");
/// ```
pub fn false_positive_rate(num_bits: u64, num_items: u64, num_hashes: u32) -> f64 {
    if num_bits == 0 {
        return 1.0;
    }
    let k = f64::from(num_hashes);
    let fill = -(-k * num_items as f64 / num_bits as f64).exp_m1();
    fill.powf(k)
}

/// An estimate of the distinct items in a filter where each item sets `bits_per_item` of
/// `num_bits` bits and `bits_set` are set: n ≈ -(m/k) ln(1 - x/m) (Swamidass & Baldi,
/// "Mathematical correction for fingerprint similarity measures", 2007), computed in
/// Guava's operation order and rounded half up as its `approximateElementCount`, so the
/// classic filter's answer agrees with Guava's to the last bit. Saturates at `u64::MAX`
/// when every bit is set (the estimate is then infinite).
///
/// ```
/// use bloomery::sizing::estimated_items;
///
/// assert_eq!(estimated_items(0, 9_600, 7), 0);
/// assert_eq!(estimated_items(9_600, 9_600, 7), u64::MAX);
/// ```
pub fn estimated_items(bits_set: u64, num_bits: u64, bits_per_item: u32) -> u64 {
    let fraction_set = bits_set as f64 / num_bits as f64;
    let estimate = -(-fraction_set).ln_1p() * num_bits as f64 / f64::from(bits_per_item);
    // f64::round is half away from zero, Guava's HALF_UP for this non-negative value;
    // `as` saturates the infinity of a full filter.
    estimate.round() as u64
}

/// What a filter was sized for, kept in the files of the variants whose shape alone does
/// not say (blocked filters: any (n, p) pair maps to some block count), so that a tool can
/// tell when the filter holds more items than it was made for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizedFor {
    /// The expected number of distinct items.
    pub expected_items: u64,
    /// The false-positive probability at that many items.
    pub fpp: f64,
}

impl SizedFor {
    /// A sizing for `expected_items` at `fpp`; 0 items are recorded as 1, which is what
    /// the sizing formulas make a filter for (as Guava does).
    pub fn new(expected_items: u64, fpp: f64) -> Self {
        Self {
            expected_items: expected_items.max(1),
            fpp,
        }
    }

    /// Checks a stored sizing: fpp in (0, 1) (its items are at least 1 when made by
    /// [`new`](Self::new)).
    pub fn check(self) -> Result<Self> {
        check_fpp(self.fpp)?;
        Ok(self)
    }
}

/// The most items a Guava-sized filter of `num_bits` bits and `num_hashes` hashes can have
/// been sized for: Guava picks k = round(m/n · ln 2), so n ≤ m · ln 2 / (k − ½). A filter
/// holding more items than this is certainly past its sizing (its false-positive rate is
/// above the one it was made for); below it, it may or may not be.
///
/// ```
/// use bloomery::sizing::{ClassicShape, sized_capacity};
///
/// // 10^7 items at 1%: 95,850,624 bits and 7 hashes, consistent with up to 10.2 million.
/// let shape = ClassicShape::for_fpp(10_000_000, 0.01)?;
/// assert_eq!(sized_capacity(shape.num_bits(), shape.num_hashes), 10_221_321);
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn sized_capacity(num_bits: u64, num_hashes: u32) -> u64 {
    (num_bits as f64 * std::f64::consts::LN_2 / (f64::from(num_hashes) - 0.5)) as u64
}

/// The most items a counting, retouched or allow-listed filter of `num_bits` bits and
/// `num_hashes` hashes can have been sized for: [`sized_capacity`], whose bound holds for
/// Guava's hash count whatever bits [`ClassicShape::for_rate`] added (and for the Guava
/// shapes those filters had before it), but for k = 1 (rates above about 35%), where
/// Guava's k bounds nothing: then also `m² / 60`, since `for_rate` gives at least
/// [`double_hashing_bits`] (`m² · p / 60` items at most, p < 1), whichever is larger.
///
/// ```
/// use bloomery::sizing::{ClassicShape, rate_capacity, sized_capacity};
///
/// let capacity = |n, p| -> Result<u64, bloomery::Error> {
///     let shape = ClassicShape::for_rate(n, p)?;
///     Ok(rate_capacity(shape.num_bits(), shape.num_hashes))
/// };
/// assert_eq!(capacity(1_000_000, 0.999999)?, 87_324_057);
/// let near_one = ClassicShape::for_rate(1_000_000, 0.999999)?; // k = 1
/// assert_eq!(sized_capacity(near_one.num_bits(), near_one.num_hashes), 100_345); // below n
/// let guava = ClassicShape::for_rate(10_000_000, 0.01)?; // k = 7: the same bound as Guava's
/// assert_eq!(capacity(10_000_000, 0.01)?, sized_capacity(guava.num_bits(), guava.num_hashes));
/// assert_eq!(capacity(10, 1e-3)?, 60); // an upper bound: loose where for_rate added bits
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn rate_capacity(num_bits: u64, num_hashes: u32) -> u64 {
    let guava = sized_capacity(num_bits, num_hashes);
    if num_hashes > 1 {
        return guava;
    }
    let bits = num_bits as f64;
    // A hair over the bound, so that floating-point rounding never puts it below the items
    // the shape was made for; `as` saturates.
    let by_bits = (bits * bits / DOUBLE_HASHING_PAIRS * (1.0 + 1e-9)) as u64;
    guava.max(by_bits)
}

/// The probability that a fresh item finds all its `num_hashes` positions among the
/// `bits_set` of `num_bits` bits: `(x/m)^k` (Guava's `expectedFpp`).
///
/// ```
/// assert_eq!(bloomery::sizing::fill_fpp(4_800, 9_600, 7), 0.5f64.powi(7));
/// ```
pub fn fill_fpp(bits_set: u64, num_bits: u64, num_hashes: u32) -> f64 {
    (bits_set as f64 / num_bits as f64).powf(f64::from(num_hashes))
}

/// Bits in one block of the blocked filter: one 64-byte cache line.
pub const BLOCK_BITS: u64 = 512;
/// Lanes (64-bit words) per block; an item sets one bit in each, so k = 8.
pub const BLOCK_LANES: u32 = 8;
/// The most blocks a blocked filter can address: the block index is a 32-bit
/// multiply-shift of the hash, so 2^32 blocks (256 GiB).
pub const MAX_NUM_BLOCKS: u64 = 1 << 32;

/// The false-positive probability of a blocked filter with `num_blocks` 512-bit blocks
/// after `num_items` insertions.
///
/// A block holding x items answers a fresh item falsely with probability
/// (1 - (1 - 1/64)^x)^8: each of its 8 lanes must have the fresh item's bit set, and each
/// of the x items set one of 64 bits in that lane. Block loads are Poisson with mean
/// λ = n / blocks, so the rate is Σ_x Pois(x; λ) · (1 - (63/64)^x)^8 (Putze, Sanders &
/// Singler, "Cache-, Hash- and Space-Efficient Bloom Filters", 2007), plus the chance that
/// the fresh item's 32-bit key, which picks its 8 bits, is one of its block's x keys (about
/// x / 2^32: a floor under the rate, a hundredth of it from about 10^-7 down). Busy blocks cost
/// more than quiet ones save, so a blocked filter needs more bits than a classic one for
/// the same p: see [`blocked_num_blocks`].
///
/// ```
/// use bloomery::sizing::blocked_false_positive_rate;
///
/// // 10^6 items in 19,726 blocks (10.1 bits per item): just under 1%.
/// let p = blocked_false_positive_rate(19_726, 1_000_000);
/// assert!(p < 0.01 && p > 0.0099, "{p}");
/// ```
pub fn blocked_false_positive_rate(num_blocks: u64, num_items: u64) -> f64 {
    poisson_block_rate(num_blocks, num_items, 64.0, true)
}

/// The keys an item's bits in its block come from: its hash's low 32 bits, 2^32 of them.
const BLOCK_KEYS: f64 = 4_294_967_296.0;

/// The false-positive probability of a filter of `num_blocks` blocks, each of eight words
/// of `word_bits` bits, where an item sets one bit in each word of one block: the Poisson
/// mixture Σ_x Pois(x; n / blocks) · (1 - (1 - 1/word_bits)^x)^8 (see
/// [`blocked_false_positive_rate`]; the split-block filter is the same with 32-bit words).
///
/// All eight bits come from the hash's low 32 bits (its key), so a fresh item whose key is
/// one of the x keys in its block is answered "present" whatever the bits: each term is
/// c + (1 - c) · (1 - (1 - 1/word_bits)^x)^8 with c = 1 - (1 - 2^-32)^x, about x / 2^32.
/// That floor is negligible at the usual rates (about 50 items a block at 1%: 10^-8, a
/// millionth of the rate) and comes to dominate it below about 10^-9.
/// `key_floor` false leaves it out (the sizes made before it was counted).
fn poisson_block_rate(num_blocks: u64, num_items: u64, word_bits: f64, key_floor: bool) -> f64 {
    if num_blocks == 0 {
        return 1.0;
    }
    let mean = num_items as f64 / num_blocks as f64;
    if mean == 0.0 {
        return 0.0;
    }
    let word_miss: f64 = 1.0 - 1.0 / word_bits;
    // Sum the Poisson terms around the mean (12 standard deviations each side, beyond
    // which the terms are below 10^-30), each in log space with ln x! in closed form, so
    // the cost is O(sqrt(mean)) and large means neither underflow nor take long.
    let spread = 12.0 * mean.sqrt() + 30.0;
    // Far past saturation every word is full: each term's bit factor is 1 within 10^-21,
    // so the rate is 1.0 (and a count read from a crafted file cannot make this loop run
    // for minutes: found by the parser proptests).
    if mean - spread > 50.0 * word_bits {
        return 1.0;
    }
    let last = (mean + spread).ceil() as u64;
    let first = (mean - spread).max(0.0).floor() as u64;
    let key_miss_ln = (-1.0 / BLOCK_KEYS).ln_1p();
    let mut rate = 0.0;
    for x in first..=last {
        let probability = (x as f64 * mean.ln() - mean - ln_factorial(x)).exp();
        let same_key = if key_floor {
            -(x as f64 * key_miss_ln).exp_m1()
        } else {
            0.0
        };
        // The eighth power (one bit in each of the 8 lanes) squared three times, as
        // docs/format.md says (`powi`'s rounding is unspecified).
        const _: () = assert!(BLOCK_LANES == 8);
        let lane = 1.0 - word_miss.powf(x as f64);
        let bits = {
            let squared = lane * lane;
            let fourth = squared * squared;
            fourth * fourth
        };
        rate += probability * (same_key + (1.0 - same_key) * bits);
    }
    rate.min(1.0)
}

/// ln(x!): summed exactly below 16, and above by Stirling's series
/// ln x! = x ln x - x + ln(2πx)/2 + 1/(12x) - 1/(360x³) + 1/(1260x⁵), whose first omitted
/// term, 1/(1680x⁷), is below 3·10^-12 from x = 16 on.
fn ln_factorial(x: u64) -> f64 {
    if x < 16 {
        return (2..=x).map(|i| (i as f64).ln()).sum();
    }
    let x = x as f64;
    let inverse = 1.0 / x;
    let inverse_squared = inverse * inverse;
    x * x.ln() - x
        + 0.5 * (std::f64::consts::TAU * x).ln()
        + inverse * (1.0 / 12.0 - inverse_squared * (1.0 / 360.0 - inverse_squared / 1260.0))
}

/// The blocked filter is sized for this fraction of the requested false-positive rate.
/// The formula predicts the average over filters to within 2% (measured with random
/// keys: 0.997 p, 0.999 p and 1.017 p at 10%, 1% and 0.1%, 10^6 items), but one filter's
/// rate varies around it by a percent or two with its own block loads, and the promise is
/// that the measured rate is at most p. The headroom costs 0.11 bits per item at 1%.
pub const BLOCKED_HEADROOM: f64 = 0.95;

/// The number of 512-bit blocks a blocked filter needs so that, holding `expected_items`,
/// its false-positive probability ([`blocked_false_positive_rate`]) is at most
/// [`BLOCKED_HEADROOM`] · `fpp`.
///
/// With k fixed at 8 the blocked filter pays extra bits per item against the classic
/// optimum (-log2(p) / ln 2): 5.96 vs 4.79 at p = 10%, 10.21 vs 9.59 at 1%, 15.87 vs 14.38
/// at 0.1%, 23.82 vs 19.17 at 0.01%, 35.29 vs 23.96 at 0.001% (headroom included). It buys
/// one cache line per item; below about 0.01% a classic filter is the thriftier choice.
/// Below about 10^-9 the floor its 32-bit keys set (items per block / 2^32, see
/// [`blocked_false_positive_rate`]) takes over, and the blocks needed grow as 1 / p.
///
/// ```
/// let blocks = bloomery::sizing::blocked_num_blocks(1_000_000, 0.01)?;
/// assert_eq!(blocks, 19_935);
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn blocked_num_blocks(expected_items: u64, fpp: f64) -> Result<u64> {
    fewest_blocks(
        expected_items,
        fpp,
        MAX_NUM_BLOCKS,
        64.0,
        "blocked",
        "a blocked filter has at most 2^32 blocks of 512 bits (256 GiB); \
         use fewer items per filter or a higher fpp",
    )
}

/// The fewest blocks (1 ..= `max_blocks`) of eight `word_bits`-bit words at which the
/// rate ([`poisson_block_rate`]) is at most [`BLOCKED_HEADROOM`] · `fpp`; the rate falls as
/// blocks are added, so a binary search.
///
/// The size is the larger of two searches: on the bits alone (without the same-key floor)
/// at the target, and on the whole rate at 1.01 times the target. Where the floor is at
/// most about a hundredth of the target, the first is the larger: at the usual rates (to
/// about 10^-7 for the blocked filter; the tests pin 10^-1 to 10^-6) the sizes are
/// those of the bits alone, as filters, shard plans and their documented sizes were made
/// before the floor was counted. Below, the second takes over. Either way the whole rate
/// is at most 1.01 · 0.95 p < p, and the size grows with n and as p falls.
fn fewest_blocks(
    expected_items: u64,
    fpp: f64,
    max_blocks: u64,
    word_bits: f64,
    layout: &str,
    too_many: &str,
) -> Result<u64> {
    check_fpp(fpp)?;
    let key = SizedKey {
        expected_items,
        fpp: fpp.to_bits(),
        max_blocks,
        word_bits: word_bits.to_bits(),
    };
    if let Some(blocks) = KeptSizings::recall(key) {
        return Ok(blocks);
    }
    let n = expected_items.max(1);
    let target = fpp * BLOCKED_HEADROOM;
    let rate = |blocks, items, key_floor| poisson_block_rate(blocks, items, word_bits, key_floor);
    if rate(max_blocks, n, true) > target {
        // Fewer items would not help when even one item at the largest size misses it.
        let floor = rate(max_blocks, 1, true) / BLOCKED_HEADROOM;
        let problem = if floor > fpp {
            format!(
                "a {layout} filter picks an item's block and its 8 bits from 64 hash bits, \
                 and reaches no rate below {} (one item at its largest size); use a higher \
                 fpp or a classic filter",
                Rate(floor)
            )
        } else {
            too_many.into()
        };
        return Err(Error::Sizing {
            expected_items,
            fpp,
            problem,
        });
    }
    let fewest = |mut low: u64, key_floor: bool, target: f64| {
        let mut high = max_blocks;
        while low < high {
            let middle = low + (high - low) / 2;
            if rate(middle, n, key_floor) <= target {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        low
    };
    let blocks = fewest(1, false, target).max(fewest(1, true, target * 1.01));
    KeptSizings::keep(key, blocks);
    Ok(blocks)
}

/// What a block sizing depends on: [`fewest_blocks`]'s arguments but the error's words.
#[derive(Clone, Copy, PartialEq, Eq)]
struct SizedKey {
    expected_items: u64,
    fpp: u64,
    max_blocks: u64,
    word_bits: u64,
}

/// The last block sizings made ([`fewest_blocks`]), kept because one costs some 64
/// evaluations of the Poisson mixture, and the same one is asked for again and again: the
/// Redis module sizes every new key that `BF.ADD` makes from its defaults (on the server's
/// one thread), twice, and compares the layouts at its rate. The sizes are a function of
/// the key alone, so a size recalled is the one the search would give.
struct KeptSizings;

/// How many sizings [`KeptSizings`] keeps.
const SIZED_KEPT: usize = 16;

type SizedSlots = ([Option<(SizedKey, u64)>; SIZED_KEPT], usize);

static SIZED: std::sync::Mutex<SizedSlots> = std::sync::Mutex::new(([None; SIZED_KEPT], 0));

impl KeptSizings {
    /// The slots, unless another thread holds them now: then the sizing is searched (not
    /// waited for: a process forked while a thread held the lock has it held for ever). A
    /// poisoned lock only means a panic elsewhere while it was held: the slots hold whole
    /// entries either way.
    fn slots() -> Option<std::sync::MutexGuard<'static, SizedSlots>> {
        match SIZED.try_lock() {
            Ok(slots) => Some(slots),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    fn recall(key: SizedKey) -> Option<u64> {
        let slots = Self::slots()?;
        slots
            .0
            .iter()
            .flatten()
            .find(|(kept, _)| *kept == key)
            .map(|&(_, blocks)| blocks)
    }

    fn keep(key: SizedKey, blocks: u64) {
        let Some(mut slots) = Self::slots() else {
            return;
        };
        let next = slots.1;
        slots.0[next] = Some((key, blocks));
        slots.1 = (next + 1) % SIZED_KEPT;
    }

    /// Forgets every sizing kept, so that the next of each is searched.
    #[cfg(test)]
    fn forget_all() {
        // Waits: the test must not go on with sizings kept.
        let mut slots = SIZED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        slots.0 = [None; SIZED_KEPT];
    }
}

/// Bits in one block of the split-block filter (Parquet's SBBF): eight 32-bit words.
pub const SPLIT_BLOCK_BITS: u64 = 256;

/// The most blocks a split-block filter has: Parquet's `BloomFilterHeader` stores the
/// bitset's length in bytes as a Thrift `i32`, so at most (2^31 - 1) / 32 = 2^26 - 1 blocks
/// (2 GiB, about 1.6 · 10^9 items at 1%).
pub const MAX_SPLIT_BLOCKS: u64 = (1 << 26) - 1;

/// The false-positive probability of a split-block filter (Parquet's SBBF) with
/// `num_blocks` 256-bit blocks after `num_items` insertions: the Poisson mixture of
/// [`blocked_false_positive_rate`] with 32-bit words, Σ_x Pois(x; λ) · (1 - (31/32)^x)^8.
///
/// Parquet's spec quotes 1,024 blocks holding 26,214 items (10 bits per item) at "around
/// 1.26%"; the mixture gives 1.265%.
///
/// ```
/// use bloomery::sizing::split_block_false_positive_rate;
///
/// let p = split_block_false_positive_rate(1_024, 26_214);
/// assert!((p - 0.01265).abs() < 0.00001, "{p}");
/// ```
pub fn split_block_false_positive_rate(num_blocks: u64, num_items: u64) -> f64 {
    poisson_block_rate(num_blocks, num_items, 32.0, true)
}

/// The number of 256-bit blocks a split-block filter needs so that, holding
/// `expected_items`, its false-positive probability ([`split_block_false_positive_rate`])
/// is at most [`BLOCKED_HEADROOM`] · `fpp`: the blocked filter's exact sizing, for the
/// split-block layout, and the size of a split-block filter with bloomery's own hash. A
/// filter that hashes as Parquet does is rounded up to a power of two bytes, the only
/// sizes most Parquet readers take ([`parquet_num_blocks`]), which costs up to twice the
/// bits.
///
/// Bits per item, headroom included, for 10^6 items (the classic optimum is
/// -log2(p) / ln 2; Parquet's writers' formula, before their power-of-two rounding, is
/// -8 / ln(1 - p^(1/8)), [`parquet_bits_per_item`]):
///
/// | p | classic | blocked (512-bit) | split-block (256-bit) | Parquet's formula |
/// |---|---:|---:|---:|---:|
/// | 10% | 4.79 | 5.96 | 6.08 | 5.77 |
/// | 1% | 9.59 | 10.21 | 10.65 | 9.68 |
/// | 0.1% | 14.38 | 15.87 | 17.06 | 14.61 |
/// | 0.01% | 19.17 | 23.82 | 26.60 | 21.05 |
/// | 0.001% | 23.96 | 35.29 | 41.40 | 29.56 |
///
/// The 512-bit blocked layout needs fewer bits than the split-block one at every p (its
/// 64-bit words collide less), 4% fewer at 1% and 15% at 0.001%; the split-block layout
/// buys one 256-bit register per block and Parquet's bytes. Parquet's writers' formula is the
/// classic one with k = 8 and ignores the uneven block loads: a filter sized by it exactly
/// has a rate of 1.46% when 1% was asked for (its writers' power-of-two rounding usually
/// hides that). Without the 5% headroom this sizing reproduces the spec's own table
/// (10.5 bits for 1%, 16.9 for 0.1%, 41 for 0.001%).
///
/// ```
/// let blocks = bloomery::sizing::split_block_num_blocks(1_000_000, 0.01)?;
/// assert_eq!(blocks, 41_591);
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn split_block_num_blocks(expected_items: u64, fpp: f64) -> Result<u64> {
    fewest_blocks(
        expected_items,
        fpp,
        MAX_SPLIT_BLOCKS,
        32.0,
        "split-block",
        "a split-block filter has at most 2^26 - 1 blocks of 256 bits (Parquet's i32 byte \
         count, 2 GiB); use fewer items per filter or a higher fpp",
    )
}

/// The most blocks of a bitset that every Parquet reader takes: 2^22 (128 MiB). Arrow C++'s
/// reader (pyarrow; Velox, ClickHouse and Doris carry the same code) refuses any size that
/// is not a power of two bytes from 32 B to 128 MiB ("Given length of bitset is illegal"),
/// and parquet-mr's (Spark's) drops a filter over 128 MiB; their writers round up to a
/// power of two within those bounds, as the Rust `parquet` crate's do.
pub const MAX_PARQUET_READER_BLOCKS: u64 = 1 << 22;

/// Whether a split-block bitset of `num_blocks` blocks is one every Parquet reader takes:
/// a power of two bytes from 32 B (one block) to 128 MiB ([`MAX_PARQUET_READER_BLOCKS`]).
///
/// ```
/// use bloomery::sizing::parquet_readers_take;
///
/// assert!(parquet_readers_take(65_536));
/// assert!(!parquet_readers_take(41_591));
/// assert!(!parquet_readers_take(1 << 23));
/// ```
pub fn parquet_readers_take(num_blocks: u64) -> bool {
    num_blocks.is_power_of_two() && num_blocks <= MAX_PARQUET_READER_BLOCKS
}

/// The blocks of a split-block filter that hashes as Parquet does, for `expected_items` at
/// `fpp`: [`split_block_num_blocks`] rounded up to a power of two, a size every Parquet
/// reader takes ([`parquet_readers_take`]), as Parquet's writers round. That costs up to
/// twice the bits (and the rate falls below `fpp`). Where the exact size is over the
/// readers' 128 MiB, it is kept: no Parquet reader but the Rust crate takes such a filter,
/// and exporting it to Parquet's format is refused.
///
/// ```
/// use bloomery::sizing::{parquet_num_blocks, split_block_num_blocks};
///
/// assert_eq!(split_block_num_blocks(1_000_000, 0.01)?, 41_591);
/// assert_eq!(parquet_num_blocks(1_000_000, 0.01)?, 65_536); // 2 MiB
/// # Ok::<(), bloomery::Error>(())
/// ```
pub fn parquet_num_blocks(expected_items: u64, fpp: f64) -> Result<u64> {
    let exact = split_block_num_blocks(expected_items, fpp)?;
    Ok(if exact <= MAX_PARQUET_READER_BLOCKS {
        exact.next_power_of_two()
    } else {
        exact
    })
}

/// Bits per item that Parquet's writers size with for `fpp`: c = -8 / ln(1 - p^(1/8)),
/// the classic formula with k = 8 (earlier versions of parquet-format's BloomFilter.md;
/// the Java and Rust writers then round the bitset up to a power of two bytes). For
/// comparison with [`split_block_num_blocks`], which sizes exactly.
///
/// ```
/// let bits = bloomery::sizing::parquet_bits_per_item(0.01);
/// assert!((bits - 9.68).abs() < 0.01, "{bits}");
/// ```
pub fn parquet_bits_per_item(fpp: f64) -> f64 {
    -8.0 / (1.0 - fpp.powf(1.0 / 8.0)).ln()
}

/// What a blocked filter costs where it takes more than twice the memory that a filter
/// hashing as Guava does needs to meet the same rate ([`blocked_costs_more`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockedCost {
    /// The items and rate asked for.
    pub expected_items: u64,
    pub fpp: f64,
    /// The blocked filter's bytes ([`blocked_num_blocks`] blocks of 64 bytes).
    pub blocked_bytes: u64,
    /// The bytes at which a filter hashing as Guava does meets the rate
    /// ([`ClassicShape::for_rate`]).
    pub meeting_bytes: u64,
    /// The classic filter's bytes (Guava's own sizing, [`ClassicShape::for_fpp`]), where
    /// they are within a tenth of `meeting_bytes`: there the classic filter is the smaller
    /// one that (nearly) meets the rate.
    pub classic_bytes: Option<u64>,
}

impl BlockedCost {
    /// The tools' warning of it (the CLI's, the Python package's), naming the classic
    /// filter as the tool does (`classic`: `--variant classic`, `kind="classic"`) where
    /// its bytes are given.
    pub fn warning(&self, classic: &str) -> String {
        let named = self
            .classic_bytes
            .map(|bytes| format!("; {classic} takes {bytes} bytes"))
            .unwrap_or_default();
        format!(
            "a blocked filter for {} items at fpp {} takes {} bytes, {:.1} times the {} that \
             a filter hashing as Guava does needs for that rate (a blocked filter sets 8 bits \
             per item whatever the rate){named}",
            self.expected_items,
            Rate(self.fpp),
            self.blocked_bytes,
            self.blocked_bytes as f64 / self.meeting_bytes as f64,
            self.meeting_bytes
        )
    }
}

/// The least excess of a blocked filter's bytes over those that meet its rate that
/// [`blocked_costs_more`] reports: 1 MiB.
const MATTERS: u64 = 1 << 20;

/// Where a blocked filter for `expected_items` at `fpp` takes more than twice the memory
/// that a filter hashing as Guava does needs to meet the rate, and at least a MiB more,
/// what each takes; `None` where it does not (or either cannot be sized). A blocked
/// filter sets 8 bits per item whatever its rate, which costs more and more bits per item
/// as the rate falls; few items at a low rate go the other way (Guava's double hashing
/// needs many bits there to meet the rate, [`double_hashing_bits`]). The tools warn of it
/// ([`BlockedCost::warning`]: the CLI's `create` and `dedup`, the Python package's
/// constructors).
///
/// ```
/// use bloomery::sizing::blocked_costs_more;
///
/// assert_eq!(blocked_costs_more(10_000_000, 0.01), None);
/// assert_eq!(blocked_costs_more(1_000, 1e-9), None); // few items: blocked is the smaller
/// let cost = blocked_costs_more(10_000_000, 1e-8).unwrap();
/// assert!(cost.blocked_bytes > 3 * cost.meeting_bytes && cost.classic_bytes.is_some());
/// // At 1e-9, Guava's own sizing falls well short of the rate: no classic filter named.
/// assert_eq!(blocked_costs_more(10_000_000, 1e-9).unwrap().classic_bytes, None);
/// ```
pub fn blocked_costs_more(expected_items: u64, fpp: f64) -> Option<BlockedCost> {
    // 0 items are sized as 1 by every variant here (`double_hashing_bits` took 0 as given,
    // and compared a blocked filter of one item with a classic one of none).
    let sized = expected_items.max(1);
    let blocked_bytes = blocked_num_blocks(sized, fpp).ok()?.checked_mul(64)?;
    let bytes_of = |shape: ClassicShape| shape.num_words as u64 * 8;
    let meeting_bytes = ClassicShape::for_rate(sized, fpp).map(bytes_of).ok()?;
    let classic = ClassicShape::for_fpp(sized, fpp).map(bytes_of).ok()?;
    // Tiny filters are left alone: one block of 64 bytes is "8 times" a word of 8.
    let matters = blocked_bytes / 2 > meeting_bytes && blocked_bytes - meeting_bytes >= MATTERS;
    matters.then_some(BlockedCost {
        expected_items,
        fpp,
        blocked_bytes,
        meeting_bytes,
        classic_bytes: (classic.saturating_mul(10) >= meeting_bytes.saturating_mul(9)).then_some(classic),
    })
}

/// A rate as people read it, for messages: `0.01`, and `1e-30` or `5e-324` rather than
/// dozens or hundreds of decimal places (Rust's `Display` for floats never switches to an
/// exponent); the exponent form from below 10^-4 on (and from 10^16).
///
/// ```
/// use bloomery::sizing::Rate;
///
/// assert_eq!(Rate(0.01).to_string(), "0.01");
/// assert_eq!(Rate(1e-30).to_string(), "1e-30");
/// assert_eq!(Rate(0.0001).to_string(), "0.0001");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Rate(pub f64);

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let magnitude = self.0.abs();
        if magnitude != 0.0 && magnitude.is_finite() && !(1e-4..1e16).contains(&magnitude) {
            write!(f, "{:e}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_capacity_is_at_least_the_items_either_shape_was_sized_for() {
        // Never below the items, so that a filter is never said to be past its sizing when
        // it is not: for for_rate's shapes, and for Guava's (files written before it) but
        // at k = 1, where nothing bounds the items of Guava's shape.
        for p in [
            0.999999, 0.9, 0.5, 0.36, 0.3, 0.1, 0.01, 1e-3, 1e-4, 1e-6, 1e-9, 1e-12,
        ] {
            let mut n = 1u64;
            while n <= 100_000_000 {
                for n in [n, n + 1, n * 3 / 2 + 1] {
                    if let Ok(shape) = ClassicShape::for_rate(n, p) {
                        let capacity = rate_capacity(shape.num_bits(), shape.num_hashes);
                        assert!(capacity >= n, "for_rate: n {n} p {p}: {capacity}");
                    }
                    if let Ok(shape) = ClassicShape::for_fpp(n, p)
                        && shape.num_hashes > 1
                    {
                        let capacity = rate_capacity(shape.num_bits(), shape.num_hashes);
                        assert!(capacity >= n, "Guava's: n {n} p {p}: {capacity}");
                    }
                }
                n *= 7;
            }
        }
    }

    #[test]
    fn rate_shapes_meet_the_rate_for_their_hash_count() {
        // Guava's shape answers above p once its k is rounded (far above past 0.35, where
        // k is 1); for_rate's, with Guava's k, never does by the formula, and one word
        // fewer does where it added bits.
        let mut added = 0;
        for p in [
            0.999, 0.99, 0.9, 0.8, 0.7, 0.5, 0.4, 0.35, 0.3, 0.1, 0.01, 1e-3, 1e-6,
        ] {
            for n in [1, 7, 100, 1_000, 10_000, 123_457, 10_000_000] {
                let guava = ClassicShape::for_fpp(n, p).unwrap();
                let shape = ClassicShape::for_rate(n, p).unwrap();
                assert_eq!(shape.num_hashes, guava.num_hashes, "{n} at {p}");
                // The formula's rate and the floor's, c·n/m² at the most c measured.
                let c = if shape.num_hashes == 1 { 0.0 } else { FLOOR_PAIRS };
                let floor_rate = |bits: u64| c * n as f64 / (bits as f64 * bits as f64);
                let rate = |bits| false_positive_rate(bits, n, shape.num_hashes);
                let whole = rate(shape.num_bits()) + floor_rate(shape.num_bits());
                assert!(whole <= p, "{n} at {p}: {shape:?} answers {whole}");
                if shape.num_words > guava.num_words {
                    added += 1;
                    let fewer = shape.num_bits() - 64;
                    let floor = double_hashing_bits(n, p);
                    let first = rate_bits(n, p, shape.num_hashes).max(floor);
                    let short = rate(fewer) > p - floor_rate(first);
                    assert!(short || fewer < floor, "{n} at {p}: {shape:?} is not the fewest");
                }
            }
        }
        assert!(added > 30, "{added}");
        let guava = ClassicShape::for_fpp(10_000, 0.9).unwrap();
        assert!(false_positive_rate(guava.num_bits(), 10_000, 1) > 0.98);
    }

    #[test]
    fn fpp_outside_the_open_unit_interval_is_rejected() {
        for bad in [0.0, 1.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            assert!(matches!(check_fpp(bad), Err(Error::Fpp { .. })), "{bad}");
        }
        assert!(check_fpp(f64::MIN_POSITIVE).is_ok());
    }

    #[test]
    fn nan_fpp_is_named_in_the_message() {
        let message = optimal_num_bits(10, f64::NAN).unwrap_err().to_string();
        assert!(message.contains("NaN") && message.contains("(0, 1)"), "{message}");
    }

    #[test]
    fn num_hashes_must_be_1_to_255() {
        assert!(check_num_hashes(0).is_err());
        assert!(check_num_hashes(1).is_ok());
        assert!(check_num_hashes(255).is_ok());
        let message = check_num_hashes(256).unwrap_err().to_string();
        assert_eq!(message, "num_hashes must be in 1..=255, got 256");
    }

    #[test]
    fn bit_counts_beyond_the_format_are_rejected() {
        assert!(num_words_for_bits(0).is_err());
        assert_eq!(num_words_for_bits(MAX_NUM_BITS).unwrap() as u64, MAX_NUM_WORDS);
        let message = num_words_for_bits(MAX_NUM_BITS + 1).unwrap_err().to_string();
        assert!(
            message.contains("num_bits") && message.contains("2^31 - 1"),
            "{message}"
        );
    }

    #[test]
    fn too_many_items_for_the_format_is_an_error() {
        // 10^11 items at 1% need ~9.6 × 10^11 bits, beyond 2^31 - 1 words.
        assert!(matches!(
            ClassicShape::for_fpp(100_000_000_000, 0.01),
            Err(Error::Sizing { .. })
        ));
    }

    #[test]
    fn tiny_fpp_needs_more_than_255_hashes_and_is_rejected() {
        assert!(matches!(
            ClassicShape::for_fpp(10, 1e-100),
            Err(Error::Sizing { .. })
        ));
    }

    #[test]
    fn fpp_near_one_still_gives_a_one_word_filter() {
        let shape = ClassicShape::for_fpp(1, 0.99).unwrap();
        assert_eq!((shape.num_words, shape.num_hashes), (1, 1));
    }

    #[test]
    fn false_positive_rate_at_the_optimum_matches_the_target() {
        for p in [0.1, 0.01, 0.001, 1e-6] {
            let shape = ClassicShape::for_fpp(1_000_000, p).unwrap();
            let rate = false_positive_rate(shape.num_bits(), 1_000_000, shape.num_hashes);
            assert!((rate - p).abs() / p < 0.1, "p = {p}, formula gives {rate}");
        }
    }

    #[test]
    fn blocked_rate_falls_as_blocks_are_added_and_matches_the_extremes() {
        assert_eq!(blocked_false_positive_rate(100, 0), 0.0);
        let mut previous = 1.0;
        for blocks in [1, 10, 100, 1_000, 10_000, 100_000] {
            let rate = blocked_false_positive_rate(blocks, 100_000);
            assert!(rate <= previous, "{blocks} blocks: {rate} > {previous}");
            previous = rate;
        }
        // Blocks holding one item (a thousandth of them) answer falsely where a fresh
        // item has the same key (2^-32), or else finds its bit in each lane (1/64 each).
        let one = blocked_false_positive_rate(1_000_000, 1_000);
        let expected = 0.001 * (2f64.powi(-32) + (1.0f64 / 64.0).powi(8));
        assert!((one - expected).abs() < expected * 0.01, "{one} vs {expected}");
    }

    #[test]
    fn block_sizes_at_the_usual_rates_are_those_of_the_bits_alone_and_grow_with_n() {
        // The sizes filters, shard plans and documents were made with before the floor
        // was counted stay the same from 10^-1 to 10^-6 (a plan stored on Redis is found
        // again by its parameters).
        for (word_bits, sizing) in [
            (64.0, blocked_num_blocks as fn(u64, f64) -> Result<u64>),
            (32.0, split_block_num_blocks),
        ] {
            for n in [1, 1_000, 1_000_000, 1_000_000_000] {
                for p in [0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6] {
                    let target = p * BLOCKED_HEADROOM;
                    // Past the split-block filter's most blocks: refused, as before.
                    let Ok(blocks) = sizing(n, p) else {
                        assert!(word_bits == 32.0 && n == 1_000_000_000, "{n} at {p}");
                        continue;
                    };
                    assert!(poisson_block_rate(blocks, n, word_bits, false) <= target);
                    assert!(poisson_block_rate(blocks - 1, n, word_bits, false) > target || blocks == 1);
                }
            }
            // One more item never takes fewer blocks (two searches, one size: the larger).
            for p in [1.7708445668837053e-7, 1e-7, 3e-8] {
                let mut previous = 0;
                for n in 7_990..8_020 {
                    let blocks = sizing(n, p).unwrap();
                    assert!(blocks >= previous, "{n} at {p}: {blocks} < {previous}");
                    previous = blocks;
                }
            }
        }
    }

    #[test]
    fn block_sizing_keeps_the_same_key_floor_under_the_rate_asked() {
        // A fresh item whose 32-bit key is one of the keys stored in its block is answered
        // "present" whatever the bits, so no blocked or split-block filter answers falsely
        // less often than (items per block) / 2^32. Sizing without that floor gave one item
        // at 10^-12 two blocks: a floor of 1.2 · 10^-10.
        let mut sized = 0;
        for (layout, sizing) in [
            ("blocked", blocked_num_blocks as fn(u64, f64) -> Result<u64>),
            ("split-block", split_block_num_blocks),
        ] {
            for n in [1, 1_000, 1_000_000] {
                for p in [1e-8, 1e-9, 1e-10, 1e-12] {
                    let blocks = match sizing(n, p) {
                        Ok(blocks) => blocks,
                        // Past the layout's most blocks: refused, not sized short.
                        Err(error) => {
                            assert!(error.to_string().contains("at most"), "{error}");
                            continue;
                        }
                    };
                    sized += 1;
                    let floor = n as f64 / blocks as f64 / BLOCK_KEYS;
                    assert!(
                        floor <= p,
                        "{layout}, {n} items at {p}: {blocks} blocks, floor {floor}"
                    );
                }
            }
        }
        assert!(sized >= 20, "{sized}");
    }

    #[test]
    fn ln_factorial_matches_the_sum_of_logs() {
        let mut sum = 0.0f64;
        for x in 1..2_000u64 {
            sum += (x as f64).ln();
            let closed = ln_factorial(x);
            assert!(
                (closed - sum).abs() <= 1e-9 * sum.max(1.0),
                "{x}: {closed} vs {sum}"
            );
        }
        assert_eq!(ln_factorial(0), 0.0);
    }

    #[test]
    fn sizing_errors_name_the_items_and_fpp_asked_for() {
        let message = blocked_num_blocks(1_000_000_000_000_000_000, 0.01)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("cannot size a filter for 1000000000000000000 items at fpp 0.01:"),
            "{message}"
        );
        let message = ClassicShape::for_fpp(100_000_000_000, 0.01)
            .unwrap_err()
            .to_string();
        assert!(message.contains("100000000000 items at fpp 0.01"), "{message}");
        let message = ClassicShape::for_fpp(10, 1e-100).unwrap_err().to_string();
        assert!(message.contains("hash functions"), "{message}");
    }

    #[test]
    fn a_kept_sizing_is_the_one_the_search_gives() {
        // More sizings than are kept: each asked twice in a row (searched or recalled, then
        // recalled), then again once all are forgotten (searched; other tests running
        // beside this one may have kept the same sizing meanwhile, from the same search).
        // Items and rates each alone, and together: a key that left either out would
        // recall another's size.
        let asked: Vec<(u64, f64)> = (1..=SIZED_KEPT as u64)
            .flat_map(|i| {
                [
                    (i * 1_000, 0.01),
                    (1_000, 0.01 / i as f64),
                    (i * 1_000, 0.01 / i as f64),
                ]
            })
            .collect();
        // Both layouts (other word bits, other most blocks): the key tells them apart.
        let sizes = |n, p| {
            (
                blocked_num_blocks(n, p).unwrap(),
                split_block_num_blocks(n, p).unwrap(),
            )
        };
        let first: Vec<(u64, u64)> = asked
            .iter()
            .map(|&(n, p)| {
                let blocks = sizes(n, p);
                assert_eq!(sizes(n, p), blocks, "{n} {p}, again");
                blocks
            })
            .collect();
        for (&(n, p), &blocks) in asked.iter().zip(&first) {
            KeptSizings::forget_all();
            let blocked = blocked_num_blocks(n, p).unwrap();
            KeptSizings::forget_all();
            let split = split_block_num_blocks(n, p).unwrap();
            assert_eq!((blocked, split), blocks, "{n} {p}, searched");
        }
    }

    #[test]
    fn blocked_sizing_reaches_the_target_with_the_fewest_blocks() {
        // The larger of the bits-alone size at the target and the whole-rate size at 1.01
        // times it: within 1.01 times the target, and one block fewer misses it.
        for p in [0.1, 0.01, 0.001, 1e-4, 1e-5, 1e-8, 1e-9, 1e-10] {
            let blocks = blocked_num_blocks(100_000, p).unwrap();
            let target = p * BLOCKED_HEADROOM;
            assert!(
                blocked_false_positive_rate(blocks, 100_000) <= target * 1.01,
                "{p}"
            );
            assert!(blocked_false_positive_rate(blocks - 1, 100_000) > target, "{p}");
        }
    }

    /// The bits-per-item table in [`split_block_num_blocks`]'s documentation (10^6 items).
    #[test]
    fn the_layout_comparison_table_is_what_the_sizing_computes() {
        let n = 1_000_000u64;
        let mut mismatches = 0;
        let table = [
            (0.1f64, [4.79, 5.96, 6.08, 5.77]),
            (0.01, [9.59, 10.21, 10.65, 9.68]),
            (0.001, [14.38, 15.87, 17.06, 14.61]),
            (0.0001, [19.17, 23.82, 26.60, 21.05]),
            (0.00001, [23.96, 35.29, 41.40, 29.56]),
        ];
        for (p, documented) in table {
            let computed = [
                -p.log2() / std::f64::consts::LN_2,
                (blocked_num_blocks(n, p).unwrap() * BLOCK_BITS) as f64 / n as f64,
                (split_block_num_blocks(n, p).unwrap() * SPLIT_BLOCK_BITS) as f64 / n as f64,
                parquet_bits_per_item(p),
            ];
            println!("p = {p}: {computed:.2?}");
            mismatches += documented
                .iter()
                .zip(computed)
                .filter(|(documented, computed)| (*documented - computed).abs() >= 0.006)
                .count();
        }
        // A filter sized exactly by Parquet's formula exceeds its p.
        let parquet_blocks = (parquet_bits_per_item(0.01) * n as f64 / 256.0) as u64;
        let rate = split_block_false_positive_rate(parquet_blocks, n);
        println!("Parquet's formula at 1%: {rate:.5}");
        assert_eq!(mismatches, 0, "the table differs from the sizing");
        assert!((rate - 0.0146).abs() < 0.00005, "{rate}");
        println!(
            "spec example {:.5}, blocks for 10^6 at 1% {}",
            split_block_false_positive_rate(1_024, 26_214),
            split_block_num_blocks(n, 0.01).unwrap()
        );
    }

    #[test]
    fn split_block_sizing_reaches_the_target_with_the_fewest_blocks() {
        for p in [0.1, 0.01, 0.001, 1e-4, 1e-5, 1e-8, 1e-9, 1e-10] {
            let blocks = split_block_num_blocks(100_000, p).unwrap();
            let target = p * BLOCKED_HEADROOM;
            assert!(
                split_block_false_positive_rate(blocks, 100_000) <= target * 1.01,
                "{p}"
            );
            assert!(
                split_block_false_positive_rate(blocks - 1, 100_000) > target,
                "{p}"
            );
        }
        let message = split_block_num_blocks(10_000_000_000, 0.01)
            .unwrap_err()
            .to_string();
        assert!(message.contains("2^26 - 1 blocks"), "{message}");
    }
}
