//! Filters changed in place: the classic, blocked and split-block filters over a payload
//! the caller lends mutably (a file mapped writable), so a tool adds items to a filter file
//! of any size without reading or copying it: only the pages an insert touches are read
//! and written.
//!
//! Inserting only sets bits. A file whose update stops part way (a crash, `kill -9`)
//! therefore holds a superset of the bits it held before: every item added before is
//! still present, never a false negative. The format marks such a file unsealed (its
//! payload checksum is stale, docs/format.md); writing the marks is the tool's business
//! ([`Header::to_bytes`]). The other variants change more than bits on insert (counters,
//! item lists, new sub-filters or generations) and are not offered here.
//!
//! Hashing is split from inserting ([`ItemHasher`]), so one thread can hash items while
//! another inserts, and a caller can order a large batch by where its bits are
//! ([`Locality`]) before inserting it.
//!
//! ```
//! use bloomery::any::{self, Spec};
//! use bloomery::format::native::{self, Header, Variant};
//! use bloomery::in_place;
//!
//! let filter = any::create(&Spec::new(Variant::Blocked, 1_000, 0.01))?;
//! let mut file = filter.envelope().to_vec();
//! // The payload must be aligned for the blocks; a memory map always is. Copy it to
//! // memory that is (a Vec<u8> need not be).
//! let header = Header::parse(&file)?;
//! let mut blocks = vec![bloomery::blocked::Block::default(); file.len() / 64];
//! let aligned = unsafe { std::slice::from_raw_parts_mut(blocks.as_mut_ptr().cast::<u8>(), file.len()) };
//! aligned.copy_from_slice(&file);
//! let mut in_place = in_place::view_mut(&header, &mut aligned[header.payload_offset..])?.unwrap();
//! let hash = in_place.hasher().hash(b"apple");
//! in_place.insert_hashes(&[hash]);
//! assert!(in_place.view().contains(b"apple"));
//! # Ok::<(), bloomery::Error>(())
//! ```

use std::ops::Range;

use crate::any::{DynFilter, FilterView};
use crate::blocked::Block;
use crate::blocked::BlockedBloomFilterMut;
use crate::blocked::BlockedBloomFilterView;
use crate::classic::BloomFilterMut;
use crate::classic::BloomFilterView;
use crate::error::{Error, Result};
use crate::format::native::{Header, Variant};
use crate::hash::{hash_item, xxh3_64_item};
use crate::split_block::SplitBlockBloomFilterView;
use crate::split_block::{SplitBlockBloomFilterMut, SplitBlockHasher};

/// An item's hash as the in-place filters take it: a block filter's 64-bit hash in the
/// first word (the second is 0), or the classic filter's murmur3_128 `(h1, h2)`.
pub type ItemHash = [u64; 2];

/// How a filter hashes an item's bytes: a small copyable value, so that threads other than
/// the one inserting can hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemHasher {
    /// XXH3-64 with the blocked filter's seed.
    Blocked {
        /// The filter's seed.
        seed: u64,
    },
    /// The split-block filter's hasher (Parquet's XXH64 with seed 0, or XXH3-64 with a
    /// seed).
    SplitBlock(SplitBlockHasher),
    /// murmur3_128 (Guava's).
    Classic,
}

impl ItemHasher {
    /// The hash of the item with these bytes.
    #[inline]
    pub fn hash(self, item: &[u8]) -> ItemHash {
        match self {
            ItemHasher::Blocked { seed } => [xxh3_64_item(item, seed), 0],
            ItemHasher::SplitBlock(hasher) => [hasher.hash(item), 0],
            ItemHasher::Classic => {
                let (h1, h2) = hash_item(item);
                [h1, h2]
            }
        }
    }
}

/// Where an insert's bits are in the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locality {
    /// In one block, whose place in the payload grows with the hash's first word: a batch
    /// ordered by it (or grouped by its high bits) visits the payload once, front to back;
    /// the group of the top `b` bits of the first word is the `b`-bit slice of the payload
    /// it covers (to within a block).
    Ordered,
    /// In up to `probes` places anywhere in the payload.
    Scattered {
        /// The places one insert touches, at most.
        probes: u32,
    },
}

/// A filter whose inserts only set bits, changing a borrowed payload in place.
pub trait FilterMut: Send + Sync {
    /// The variant.
    fn variant(&self) -> Variant;

    /// How items are hashed for [`insert_hashes`](Self::insert_hashes).
    fn hasher(&self) -> ItemHasher;

    /// Where an insert's bits are.
    fn locality(&self) -> Locality;

    /// Adds every item by its hash (block filters prefetch ahead).
    fn insert_hashes(&mut self, hashes: &[ItemHash]);

    /// Adds every item in order and says for each whether it set a bit (`new`, one slot
    /// per hash): an item given twice in a batch is new at most once. Panics if the lengths
    /// differ.
    fn insert_hashes_reporting(&mut self, hashes: &[ItemHash], new: &mut [bool]);

    /// Whether each hash's item might be present, as the bits are now, changing nothing:
    /// for a caller that acts on the answers before the bits change (`bloomery dedup`
    /// prints a line before it keeps it, so that a line kept was printed).
    fn contains_hashes(&self, hashes: &[ItemHash], present: &mut [bool]);

    /// Adds the item with these bytes; returns whether it set a bit (a caller's single
    /// inserts: hashed and inserted in one call, without a batch around it).
    fn insert(&mut self, item: &[u8]) -> bool;

    /// A read-only view of the bits as they are now (lookups, statistics).
    fn view(&self) -> Box<dyn FilterView + '_>;

    /// Whether the item with these bytes might be present, as [`view`](Self::view) answers,
    /// without making a boxed view (a caller's single lookups).
    fn contains(&self, item: &[u8]) -> bool;

    /// Checks that the filter of `header` and `payload` (a checked header and an aligned
    /// payload, such as a mapped file's) puts every item at the same bits as this one: the
    /// same variant, shape and hashing. Then its items are added by OR-ing its payload into
    /// this one's, byte for byte (a union; [`or_payload`] does it).
    fn check_union(&self, header: &Header, payload: &[u8]) -> Result<()>;

    /// Adds every item of the filter of `header` and `payload` (as
    /// [`check_union`](Self::check_union) takes them): checks them as it does, then ORs
    /// that payload into this one's. Nothing changes when they differ.
    fn union(&mut self, header: &Header, payload: &[u8]) -> Result<()> {
        self.union_range(header, payload, 0..payload.len())
    }

    /// As [`union`](Self::union) for bytes `range` of the two payloads only, for a caller
    /// that ORs a large payload a region at a time (letting go of each region's pages
    /// before the next): the whole of `header` and `payload` is checked, then
    /// `payload[range]` is ORed into the same bytes of this one's. Nothing changes when they
    /// differ or the range is not inside the payload.
    fn union_range(&mut self, header: &Header, payload: &[u8], range: Range<usize>) -> Result<()>;
}

/// A filter's file form in memory aligned for its words and blocks (a `Vec<u8>` need not
/// be, a memory map always is): the other side of [`FilterMut::check_union`] and
/// [`FilterMut::union`] for a filter in memory.
///
/// ```
/// use bloomery::any::{self, Spec};
/// use bloomery::format::native::{Header, Variant};
/// use bloomery::in_place::{self, AlignedFile};
///
/// let spec = Spec::new(Variant::SplitBlock, 1_000, 0.01);
/// let mut theirs = any::create(&spec)?;
/// theirs.insert(b"pear")?;
/// // Mine: a file of the same shape, in aligned memory as a memory map would hold it.
/// let mut mine = AlignedFile::of(any::create(&spec)?.as_ref());
/// let header = mine.header().clone();
/// let mut in_place = in_place::view_mut(&header, mine.payload_mut())?.unwrap();
/// let theirs = AlignedFile::of(theirs.as_ref());
/// in_place.union(theirs.header(), theirs.payload())?;
/// assert!(in_place.contains(b"pear"));
///
/// let other_shape = AlignedFile::of(any::create(&Spec::new(Variant::SplitBlock, 100_000, 0.01))?.as_ref());
/// assert!(in_place.union(other_shape.header(), other_shape.payload()).is_err());
/// # Ok::<(), bloomery::Error>(())
/// ```
pub struct AlignedFile {
    /// 64-byte units: the alignment of every variant's words and blocks.
    memory: Vec<Block>,
    header: Header,
}

impl AlignedFile {
    /// `filter`'s file form (docs/format.md), written into aligned memory.
    pub fn of(filter: &dyn DynFilter) -> Self {
        let envelope = filter.envelope();
        let len = usize::try_from(envelope.len()).expect("a filter in memory has an addressable length");
        let mut memory = vec![Block::default(); len.div_ceil(64)];
        let bytes = &mut crate::bits::bytes_mut(&mut memory)[..len];
        envelope
            .write_to(&mut &mut bytes[..])
            .expect("the memory holds the whole envelope");
        let header = Header::parse(bytes).expect("a filter's own envelope parses");
        Self { memory, header }
    }

    /// The checked header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The payload, aligned for its words.
    pub fn payload(&self) -> &[u8] {
        let range = self.payload_range();
        // SAFETY: Blocks are plain u64s without padding; the view covers their memory.
        let bytes =
            unsafe { std::slice::from_raw_parts(self.memory.as_ptr().cast::<u8>(), self.memory.len() * 64) };
        &bytes[range]
    }

    /// The payload, aligned for its words, to change in place ([`view_mut`]).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.payload_range();
        &mut crate::bits::bytes_mut(&mut self.memory)[range]
    }

    fn payload_range(&self) -> std::ops::Range<usize> {
        let start = self.header.payload_offset;
        start..start + self.header.payload_len as usize
    }
}

/// ORs `theirs` into `mine` (the same length): the union of two filters
/// [`FilterMut::check_union`] accepted, or of a range of their payloads.
pub fn or_payload(mine: &mut [u8], theirs: &[u8]) {
    assert_eq!(mine.len(), theirs.len(), "payloads of one shape");
    for (mine, theirs) in mine.chunks_mut(8).zip(theirs.chunks(8)) {
        if mine.len() == 8 {
            let word = u64::from_ne_bytes((&*mine).try_into().expect("8 bytes"))
                | u64::from_ne_bytes(theirs.try_into().expect("8 bytes"));
            mine.copy_from_slice(&word.to_ne_bytes());
        } else {
            for (byte, their_byte) in mine.iter_mut().zip(theirs) {
                *byte |= their_byte;
            }
        }
    }
}

/// ORs bytes `range` of `theirs` into the same bytes of `mine` (payloads of one shape,
/// checked by the caller).
fn or_range(mine: &mut [u8], theirs: &[u8], range: Range<usize>) -> Result<()> {
    match (mine.get_mut(range.clone()), theirs.get(range.clone())) {
        (Some(mine), Some(theirs)) => {
            or_payload(mine, theirs);
            Ok(())
        }
        _ => Err(incompatible(format!(
            "bytes {}..{} are not inside a payload of {} bytes",
            range.start,
            range.end,
            theirs.len()
        ))),
    }
}

fn incompatible(reason: String) -> Error {
    Error::Incompatible { reason }
}

fn same_variant(mine: Variant, header: &Header) -> Result<()> {
    if header.variant == mine {
        Ok(())
    } else {
        Err(incompatible(format!(
            "variants differ: {} vs {}",
            mine.name(),
            header.variant.name()
        )))
    }
}

fn unaligned() -> Error {
    incompatible("the other payload is not aligned for its words".into())
}

/// Whether files of `variant` can be changed in place ([`view_mut`]): the classic, blocked
/// and split-block variants, whose inserts only set bits.
pub fn updates_in_place(variant: Variant) -> bool {
    matches!(variant, Variant::Classic | Variant::Blocked | Variant::SplitBlock)
}

/// The filter described by a checked `header`, over its `payload` in place: every
/// parameter is checked against the payload, as a load checks it (not the payload
/// checksum: that is the caller's, as for [`crate::any::view`]). `None` for variants that
/// cannot be changed in place ([`updates_in_place`]) and for a payload not aligned for its
/// words or blocks (a memory map always is). The payload must be exactly the header's
/// `payload_len` bytes (an error otherwise, as for [`crate::any::from_parts`]).
pub fn view_mut<'a>(header: &Header, payload: &'a mut [u8]) -> Result<Option<Box<dyn FilterMut + 'a>>> {
    header.check_payload_len(payload)?;
    Ok(match header.variant {
        Variant::Classic => BloomFilterMut::from_parts(&header.params, payload)?
            .map(|filter| Box::new(filter) as Box<dyn FilterMut + 'a>),
        Variant::Blocked => {
            BlockedBloomFilterMut::from_parts_of_version(header.version, &header.params, payload)?
                .map(|filter| Box::new(filter) as Box<dyn FilterMut + 'a>)
        }
        Variant::SplitBlock => {
            SplitBlockBloomFilterMut::from_parts_of_version(header.version, &header.params, payload)?
                .map(|filter| Box::new(filter) as Box<dyn FilterMut + 'a>)
        }
        _ => None,
    })
}

/// Hashes a chunk at a time, for the block filters' batch calls, which take 64-bit hashes.
const CHUNK: usize = 512;

/// Calls `each(offset, first words)` for each chunk of `hashes`.
fn first_words(hashes: &[ItemHash], mut each: impl FnMut(usize, &[u64])) {
    let mut words = Vec::with_capacity(hashes.len().min(CHUNK));
    for (index, chunk) in hashes.chunks(CHUNK).enumerate() {
        words.clear();
        words.extend(chunk.iter().map(|hash| hash[0]));
        each(index * CHUNK, &words);
    }
}

/// The block filters' in-place implementation (they differ only in hasher and type).
macro_rules! block_filter_mut {
    ($filter:ident, $variant:expr, $hasher:expr, $check:expr) => {
        impl FilterMut for $filter<'_> {
            fn variant(&self) -> Variant {
                $variant
            }

            fn hasher(&self) -> ItemHasher {
                let hasher: fn(&Self) -> ItemHasher = $hasher;
                hasher(self)
            }

            fn locality(&self) -> Locality {
                Locality::Ordered
            }

            fn insert_hashes(&mut self, hashes: &[ItemHash]) {
                first_words(hashes, |_, words| self.insert_hash_batch(words));
            }

            fn insert_hashes_reporting(&mut self, hashes: &[ItemHash], new: &mut [bool]) {
                assert_eq!(hashes.len(), new.len(), "one answer per hash");
                first_words(hashes, |offset, words| {
                    self.insert_hash_batch_reporting(words, &mut new[offset..offset + words.len()]);
                });
            }

            fn contains_hashes(&self, hashes: &[ItemHash], present: &mut [bool]) {
                assert_eq!(hashes.len(), present.len(), "one answer per hash");
                let view = $filter::view(self);
                for (slot, hash) in present.iter_mut().zip(hashes) {
                    *slot = view.contains_hash(hash[0]);
                }
            }

            fn insert(&mut self, item: &[u8]) -> bool {
                let [hash, _] = FilterMut::hasher(self).hash(item);
                self.insert_hash(hash)
            }

            fn view(&self) -> Box<dyn FilterView + '_> {
                Box::new($filter::view(self))
            }

            fn contains(&self, item: &[u8]) -> bool {
                FilterView::contains(&$filter::view(self), item)
            }

            fn check_union(&self, header: &Header, payload: &[u8]) -> Result<()> {
                same_variant($variant, header)?;
                let check: fn(&Self, &Header, &[u8]) -> Result<()> = $check;
                check(self, header, payload)
            }

            fn union_range(&mut self, header: &Header, payload: &[u8], range: Range<usize>) -> Result<()> {
                self.check_union(header, payload)?;
                or_range(self.payload_mut(), payload, range)
            }
        }
    };
}

block_filter_mut!(
    BlockedBloomFilterMut,
    Variant::Blocked,
    |filter| ItemHasher::Blocked { seed: filter.seed() },
    |filter, header, payload| {
        let other = BlockedBloomFilterView::from_parts_of_version(header.version, &header.params, payload)?
            .ok_or_else(unaligned)?;
        let mine = filter.view();
        if mine.blocks().len() != other.blocks().len() {
            return Err(incompatible(format!(
                "num_blocks differ: {} vs {}",
                mine.blocks().len(),
                other.blocks().len()
            )));
        }
        if mine.seed() != other.seed() {
            return Err(incompatible(format!(
                "seeds differ: {} vs {}",
                mine.seed(),
                other.seed()
            )));
        }
        Ok(())
    }
);
block_filter_mut!(
    SplitBlockBloomFilterMut,
    Variant::SplitBlock,
    |filter| ItemHasher::SplitBlock(filter.hasher()),
    |filter, header, payload| {
        let other =
            SplitBlockBloomFilterView::from_parts_of_version(header.version, &header.params, payload)?
                .ok_or_else(unaligned)?;
        crate::split_block::check_same_shape(
            (filter.view().blocks().len(), filter.hasher()),
            (other.blocks().len(), other.hasher()),
        )
    }
);

impl FilterMut for BloomFilterMut<'_> {
    fn variant(&self) -> Variant {
        Variant::Classic
    }

    fn hasher(&self) -> ItemHasher {
        ItemHasher::Classic
    }

    fn locality(&self) -> Locality {
        Locality::Scattered {
            probes: self.num_hashes(),
        }
    }

    fn insert_hashes(&mut self, hashes: &[ItemHash]) {
        for &[h1, h2] in hashes {
            self.insert_hash((h1, h2));
        }
    }

    fn insert_hashes_reporting(&mut self, hashes: &[ItemHash], new: &mut [bool]) {
        assert_eq!(hashes.len(), new.len(), "one answer per hash");
        for (slot, &[h1, h2]) in new.iter_mut().zip(hashes) {
            *slot = self.insert_hash((h1, h2));
        }
    }

    fn contains_hashes(&self, hashes: &[ItemHash], present: &mut [bool]) {
        assert_eq!(hashes.len(), present.len(), "one answer per hash");
        let view = BloomFilterMut::view(self);
        for (slot, &[h1, h2]) in present.iter_mut().zip(hashes) {
            *slot = view.contains_hash((h1, h2));
        }
    }

    fn insert(&mut self, item: &[u8]) -> bool {
        self.insert_hash(hash_item(item))
    }

    fn view(&self) -> Box<dyn FilterView + '_> {
        Box::new(BloomFilterMut::view(self))
    }

    fn contains(&self, item: &[u8]) -> bool {
        FilterView::contains(&BloomFilterMut::view(self), item)
    }

    fn check_union(&self, header: &Header, payload: &[u8]) -> Result<()> {
        same_variant(Variant::Classic, header)?;
        let other = BloomFilterView::from_parts(&header.params, payload)?.ok_or_else(unaligned)?;
        crate::classic::check_compatible(BloomFilterMut::view(self).shape(), other.shape())
    }

    fn union_range(&mut self, header: &Header, payload: &[u8], range: Range<usize>) -> Result<()> {
        self.check_union(header, payload)?;
        or_range(self.payload_mut(), payload, range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::any::{self, Spec};
    use crate::blocked::Block;
    use crate::split_block::SplitBlockBloomFilter;

    /// `bytes` copied to 64-byte-aligned memory, as a memory map gives them.
    fn aligned(bytes: &[u8]) -> Vec<Block> {
        let mut blocks = vec![Block::default(); bytes.len().div_ceil(64)];
        as_bytes(&mut blocks)[..bytes.len()].copy_from_slice(bytes);
        blocks
    }

    fn as_bytes(blocks: &mut [Block]) -> &mut [u8] {
        // SAFETY: blocks are plain u64s; the byte view covers exactly their memory.
        unsafe { std::slice::from_raw_parts_mut(blocks.as_mut_ptr().cast::<u8>(), blocks.len() * 64) }
    }

    /// A spec of each of `variants` for `expected_items` at 1%, then a split-block filter
    /// hashed with XXH3 and a seed (not Parquet's XXH64).
    fn specs_and_split_block_xxh3(variants: &[Variant], expected_items: u64) -> Vec<Spec> {
        let mut xxh3 = Spec::new(Variant::SplitBlock, expected_items, 0.01);
        xxh3.split_block_parquet = false;
        xxh3.seed = 9;
        let specs = variants
            .iter()
            .map(|&variant| Spec::new(variant, expected_items, 0.01));
        specs.chain([xxh3]).collect()
    }

    #[test]
    fn in_place_inserts_give_the_bits_and_answers_of_owned_ones() {
        for spec in specs_and_split_block_xxh3(&Variant::ALL, 2_000) {
            let variant = spec.variant;
            let mut owned = any::create(&spec).unwrap();
            let file = owned.envelope().to_vec();
            let header = Header::parse(&file).unwrap();
            let mut memory = aligned(&file);
            let bytes = &mut as_bytes(&mut memory)[..file.len()];
            let Some(mut in_place) = view_mut(&header, &mut bytes[header.payload_offset..]).unwrap() else {
                assert!(!updates_in_place(variant), "{variant:?}");
                continue;
            };
            assert!(updates_in_place(variant), "{variant:?}");
            assert_eq!(in_place.variant(), variant);
            let items: Vec<Vec<u8>> = (0..3_000u32).map(|i| format!("item {i}").into_bytes()).collect();
            let mut hashes: Vec<ItemHash> = items.iter().map(|item| in_place.hasher().hash(item)).collect();
            // Twice the first item in the batch: new once.
            hashes.insert(1, hashes[0]);
            let mut new = vec![false; hashes.len()];
            in_place.insert_hashes_reporting(&hashes[..1_500], &mut new[..1_500]);
            in_place.insert_hashes(&hashes[1_500..]);
            assert!(new[0] && !new[1], "{variant:?}");
            let mut expected_new = Vec::new();
            for item in &items[..1_499] {
                expected_new.push(owned.insert(item).unwrap());
            }
            for item in &items[1_499..] {
                owned.insert(item).unwrap();
            }
            let reported: Vec<bool> = new[..1_500]
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != 1)
                .map(|(_, &n)| n)
                .collect();
            assert_eq!(reported, expected_new, "{variant:?}");
            // Lookups by hash change nothing and answer as the view does (every item added
            // so far present; items never added as the view says).
            let probes: Vec<Vec<u8>> = (0..4_000u32).map(|i| format!("item {i}").into_bytes()).collect();
            let probe_hashes: Vec<ItemHash> =
                probes.iter().map(|item| in_place.hasher().hash(item)).collect();
            let mut present = vec![false; probes.len()];
            in_place.contains_hashes(&probe_hashes, &mut present);
            assert!(present[..3_000].iter().all(|&present| present), "{variant:?}");
            let view = in_place.view();
            let expected: Vec<bool> = probes.iter().map(|item| view.contains(item)).collect();
            drop(view);
            assert_eq!(present, expected, "{variant:?}");
            // Single inserts, new items and items already in: the owned filter's answers.
            for i in (0..4_000u32).step_by(3) {
                let item = format!("item {i}").into_bytes();
                assert_eq!(
                    in_place.insert(&item),
                    owned.insert(&item).unwrap(),
                    "{variant:?} {i}"
                );
            }
            let view = in_place.view();
            assert!(items.iter().all(|item| view.contains(item)), "{variant:?}");
            assert_eq!(view.stats(), owned.stats(), "{variant:?}");
            drop(view);
            drop(in_place);
            let payload = &bytes[header.payload_offset..];
            assert_eq!(
                payload,
                &owned.envelope().to_vec()[header.payload_offset..],
                "{variant:?}"
            );
        }
    }

    /// What `in_place` says of a union with the file of a new filter made from `spec`.
    fn union_with_new(in_place: &dyn FilterMut, spec: &Spec) -> Result<()> {
        union_with(in_place, any::create(spec).unwrap().as_ref())
    }

    fn union_with(in_place: &dyn FilterMut, other: &dyn DynFilter) -> Result<()> {
        let file = other.envelope().to_vec();
        let header = Header::parse(&file).unwrap();
        let mut memory = aligned(&file);
        in_place.check_union(&header, &as_bytes(&mut memory)[header.payload_offset..file.len()])
    }

    /// Two filters of `spec`, with 300 items each: "mine {i}" and "theirs {i}".
    fn mine_and_theirs(spec: &Spec) -> (Box<dyn DynFilter>, Box<dyn DynFilter>) {
        let (mut mine, mut theirs) = (any::create(spec).unwrap(), any::create(spec).unwrap());
        for i in 0..300u32 {
            mine.insert(format!("mine {i}").as_bytes()).unwrap();
            theirs.insert(format!("theirs {i}").as_bytes()).unwrap();
        }
        (mine, theirs)
    }

    #[test]
    fn a_union_in_place_is_the_owned_union_and_other_shapes_are_refused() {
        let variants = [Variant::Classic, Variant::Blocked, Variant::SplitBlock];
        for spec in specs_and_split_block_xxh3(&variants, 1_000) {
            let variant = spec.variant;
            let (mut mine, theirs) = mine_and_theirs(&spec);
            let (file, their_file) = (mine.envelope().to_vec(), theirs.envelope().to_vec());
            let (header, their_header) = (Header::parse(&file).unwrap(), Header::parse(&their_file).unwrap());
            let mut memory = aligned(&file);
            let mut their_memory = aligned(&their_file);
            let bytes = &mut as_bytes(&mut memory)[header.payload_offset..file.len()];
            let their_bytes = &as_bytes(&mut their_memory)[their_header.payload_offset..their_file.len()];
            let in_place = view_mut(&header, bytes).unwrap().unwrap();
            in_place.check_union(&their_header, their_bytes).unwrap();
            drop(in_place);
            or_payload(bytes, their_bytes);
            mine.union(theirs.as_ref()).unwrap();
            assert_eq!(
                &*bytes,
                &mine.envelope().to_vec()[header.payload_offset..],
                "{variant:?}"
            );
            // Another shape, another hasher, another variant: refused.
            let in_place = view_mut(&header, bytes).unwrap().unwrap();
            if variant == Variant::SplitBlock {
                // The same blocks, the other hasher (their sizing differs too).
                let split = mine.as_any().downcast_ref::<SplitBlockBloomFilter>().unwrap();
                let other_hasher = match split.hasher() {
                    SplitBlockHasher::Parquet => SplitBlockHasher::Xxh3 { seed: spec.seed },
                    SplitBlockHasher::Xxh3 { .. } => SplitBlockHasher::Parquet,
                };
                let other =
                    SplitBlockBloomFilter::with_num_blocks_and_hasher(split.num_blocks(), other_hasher)
                        .unwrap();
                let message = union_with(in_place.as_ref(), &other).unwrap_err().to_string();
                assert!(message.contains("hashers differ"), "{message}");
            }
            let bigger = Spec {
                expected_items: 100_000,
                ..spec
            };
            assert!(union_with_new(in_place.as_ref(), &bigger).is_err(), "{variant:?}");
            let counting = Spec::new(Variant::Counting, 1_000, 0.01);
            let message = union_with_new(in_place.as_ref(), &counting)
                .unwrap_err()
                .to_string();
            assert!(message.contains("variants differ"), "{message}");
        }
    }

    #[test]
    fn union_adds_the_other_filters_items_and_a_refused_one_changes_nothing() {
        let variants = [Variant::Classic, Variant::Blocked, Variant::SplitBlock];
        for spec in specs_and_split_block_xxh3(&variants, 1_000) {
            let variant = spec.variant;
            let (mut mine, theirs) = mine_and_theirs(&spec);
            let file = mine.envelope().to_vec();
            let header = Header::parse(&file).unwrap();
            let their_file = theirs.envelope().to_vec();
            let their_header = Header::parse(&their_file).unwrap();
            let mut their_memory = aligned(&their_file);
            let their_payload = &as_bytes(&mut their_memory)[their_header.payload_offset..their_file.len()];
            // By the other's file form in a plain aligned copy, and through AlignedFile.
            let mut by_file = aligned(&file);
            let by_file_bytes = &mut as_bytes(&mut by_file)[header.payload_offset..file.len()];
            let mut in_place = view_mut(&header, by_file_bytes).unwrap().unwrap();
            // In two ranges, as a caller letting go of pages between regions does; a range
            // outside the payload is refused.
            let (len, middle) = (their_payload.len(), their_payload.len() / 2 / 64 * 64);
            assert!(
                in_place
                    .union_range(&their_header, their_payload, 0..len + 1)
                    .is_err()
            );
            in_place
                .union_range(&their_header, their_payload, middle..len)
                .unwrap();
            in_place
                .union_range(&their_header, their_payload, 0..middle)
                .unwrap();
            drop(in_place);
            let mut by_filter = AlignedFile::of(mine.as_ref());
            assert_eq!(by_filter.header(), &header);
            let mut in_place = view_mut(&header, by_filter.payload_mut()).unwrap().unwrap();
            let their_form = AlignedFile::of(theirs.as_ref());
            assert_eq!(their_form.payload(), their_payload);
            in_place.union(their_form.header(), their_form.payload()).unwrap();
            // Refused: another shape, another variant; the bits stay as they were.
            let before = in_place.view().stats();
            let refused = |in_place: &mut dyn FilterMut, spec: &Spec| {
                let other = AlignedFile::of(any::create(spec).unwrap().as_ref());
                in_place
                    .union(other.header(), other.payload())
                    .unwrap_err()
                    .to_string()
            };
            let bigger = Spec {
                expected_items: 100_000,
                ..spec
            };
            assert!(
                refused(in_place.as_mut(), &bigger).contains("differ"),
                "{variant:?}"
            );
            let counting = Spec::new(Variant::Counting, 1_000, 0.01);
            let message = refused(in_place.as_mut(), &counting);
            assert!(message.contains("variants differ"), "{message}");
            assert_eq!(in_place.view().stats(), before, "{variant:?}");
            for i in 0..300u32 {
                assert!(in_place.contains(format!("mine {i}").as_bytes()), "{variant:?}");
                assert!(in_place.contains(format!("theirs {i}").as_bytes()), "{variant:?}");
            }
            drop(in_place);
            mine.union(theirs.as_ref()).unwrap();
            let expected = &mine.envelope().to_vec()[header.payload_offset..];
            assert_eq!(&*by_file_bytes, expected, "{variant:?}");
            assert_eq!(by_filter.payload(), expected, "{variant:?}");
        }
    }

    #[test]
    fn a_payload_longer_than_its_header_says_is_refused() {
        // A mapping of a file that another program lengthened after its header was read:
        // the classic filter's size is its payload's, so the longer payload would be a
        // filter of other bits (a block filter's, of more blocks).
        for variant in [Variant::Classic, Variant::Blocked, Variant::SplitBlock] {
            let filter = any::create(&Spec::new(variant, 1_000, 0.01)).unwrap();
            let mut file = filter.envelope().to_vec();
            let header = Header::parse(&file).unwrap();
            file.resize(file.len() + 64, 0);
            let mut memory = aligned(&file);
            let bytes = &mut as_bytes(&mut memory)[..file.len()];
            let error = view_mut(&header, &mut bytes[header.payload_offset..])
                .err()
                .map(|error| error.to_string());
            assert!(
                error.is_some_and(|error| error.contains("trailing")),
                "{variant:?}"
            );
        }
    }

    #[test]
    fn an_unaligned_payload_is_declined_and_bad_parameters_refused() {
        let filter = any::create(&Spec::new(Variant::Blocked, 100, 0.01)).unwrap();
        let file = filter.envelope().to_vec();
        let header = Header::parse(&file).unwrap();
        let mut memory = aligned(&file);
        let bytes = as_bytes(&mut memory);
        let payload_len = header.payload_len as usize;
        let offset = header.payload_offset;
        assert!(view_mut(&header, &mut bytes[offset + 8..offset + 8 + payload_len - 64]).is_err());
        let mut shifted = vec![0u8; payload_len + 128];
        let start = shifted.as_ptr().align_offset(64) + 8;
        assert!(
            view_mut(&header, &mut shifted[start..start + payload_len])
                .unwrap()
                .is_none()
        );
    }
}
