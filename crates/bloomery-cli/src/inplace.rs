//! Filter files updated in place (docs/format.md, "Sealed and unsealed files"): the
//! classic, blocked and split-block variants, whose inserts only set bits, are changed
//! through a shared writable mapping of the file under the writers' lock, instead of being
//! read whole, copied and written again. Memory is the pages touched, not a copy of the
//! file, and only the pages changed are written.
//!
//! The crash guarantees (docs/failure-model.md, tests/faults.rs) are the library's
//! sealing protocol (`bloomery::file`): the header marked unsealed and synced before the
//! first bit changes, bits only ever set (at every instant a superset of every finished
//! update's: never a false negative), and sealing that syncs every changed page before it
//! computes the payload checksum from the file (read, not mapped, so it adds nothing to the
//! resident memory) and writes the sealed header. A file whose writer was killed is left
//! unsealed (bits valid, checksum stale); `bloomery seal` or the next writer seals it.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

pub use bloomery::file::window_bytes;
use bloomery::file::{self, PAGE, Region, allocate, items_per_release, region_bytes};
use bloomery::format::native::Header;
use bloomery::in_place::{self, FilterMut, ItemHash, Locality};
use memmap2::MmapMut;

use crate::error::{CliError, Context, Result};
use crate::store::Locked;

/// The most bytes a header can take: 32 fixed bytes, 65,536 of parameters, the checksum,
/// rounded up to 64.
const MAX_HEADER_LEN: usize = (32 + 65_536 + 8usize).next_multiple_of(64);

/// The environment variable that asks for an update's phases: `1` (0 asks for none; the
/// other values are refused, main.rs's `check_environment`).
pub const TIMINGS: &str = "BLOOMERY_TIMINGS";

/// With `BLOOMERY_TIMINGS=1`, prints to standard error how long a phase of an update
/// took (`scripts/scale.sh` sets it for its large add); returns the time it ends, where the
/// next phase starts.
pub fn timing(phase: &str, since: Instant) -> Instant {
    if timings_wanted() {
        // Not eprintln!, which panics when standard error is full or closed.
        let _ = writeln!(
            std::io::stderr(),
            "bloomery: timing: {phase}: {:.2} s",
            since.elapsed().as_secs_f64()
        );
    }
    Instant::now()
}

/// Whether `BLOOMERY_TIMINGS` asks for an update's phases on standard error.
fn timings_wanted() -> bool {
    std::env::var_os(TIMINGS).is_some_and(|value| value == "1")
}

/// Items per batch for `add` into a payload of `payload_len` bytes: a small batch when the
/// payload fits the window; else as many as the window allows (16 bytes a hash, two
/// batches and a grouped copy held at once), so that every page is mapped once per many
/// items.
pub fn add_batch_len(payload_len: u64) -> usize {
    let window = window_bytes();
    if payload_len <= window {
        1 << 14
    } else {
        (window / 3 / 16).clamp(1 << 14, 1 << 26) as usize
    }
}

/// The most regions a batch is grouped into (a 64 GiB payload in 64 MiB regions).
const MAX_REGIONS: u64 = 1 << 10;

/// `hashes` grouped by the bits of their first word above `shift` (a stable counting sort
/// by those bits), into `out`.
fn group_by_top_bits(hashes: &[ItemHash], shift: u32, out: &mut Vec<ItemHash>) {
    let group = |hash: &ItemHash| hash[0].checked_shr(shift).unwrap_or(0) as usize;
    let groups = 1usize << (64 - shift);
    let mut starts = vec![0usize; groups + 1];
    for hash in hashes {
        starts[group(hash) + 1] += 1;
    }
    for index in 1..starts.len() {
        starts[index] += starts[index - 1];
    }
    out.clear();
    out.resize(hashes.len(), [0, 0]);
    for hash in hashes {
        let slot = &mut starts[group(hash)];
        out[*slot] = *hash;
        *slot += 1;
    }
}

/// Reads and checks the header at the start of `file` (`len` bytes long).
pub fn read_header(file: &File, len: u64, shown: &Path) -> Result<Header> {
    // Not `len as usize` first: on a 32-bit target a 12 GB file's length wraps, to 0 for one.
    let want = len.min(MAX_HEADER_LEN as u64) as usize;
    let mut bytes = vec![0u8; want];
    file.read_exact_at(&mut bytes, 0).with_path(shown)?;
    let header = Header::parse(&bytes).with_path(shown)?;
    header.check_file_len(len).with_path(shown)?;
    Ok(header)
}

/// The hashes of a large `add` into a block filter, kept on disk until the input ends:
/// one unnamed temporary file per region of the payload ([`file::spill_file`]: made
/// without a name in the filter's directory where the file system can, else named and
/// unlinked at once, a name the next writer removes if a kill came between), 8 bytes a
/// hash. The
/// payload is then updated in one pass, a region at a time ([`Writable::insert_spilled`]):
/// every page is written once per `add` instead of once per batch, and the resident memory
/// is one region and its hashes. The filter is not touched (nor unsealed) while items are
/// read, so a writer killed then leaves it sealed and unchanged.
pub struct Spill {
    files: Vec<BufWriter<File>>,
    shift: u32,
}

/// Files a CLI run may hold open besides its spill files (standard streams, the filter,
/// its lock, an input file, the runtime's own).
const OTHER_OPEN_FILES: u64 = 16;

/// How many spill files to make for `wanted` regions (a power of two): `wanted` when the
/// process may open that many, after raising its soft limit on open files toward the hard
/// one if needed (the limit is often 1024, and a 64 GiB payload has 1024 regions); else the
/// largest power of two that fits, each file then holding the hashes of several regions
/// (a larger region is resident at a time in the pass, nothing else changes).
fn spill_files(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return wanted;
    }
    // `rlim_t` is u64 here, u32 on 32-bit glibc targets.
    #[allow(clippy::useless_conversion)]
    let (mut current, most) = (u64::from(limit.rlim_cur), u64::from(limit.rlim_max));
    let needed = wanted + OTHER_OPEN_FILES;
    if current < needed {
        let raised = libc::rlimit {
            // At most the hard limit, which is an `rlim_t`.
            rlim_cur: libc::rlim_t::try_from(needed.min(most)).unwrap_or(limit.rlim_max),
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads only the struct it is given; a soft limit up to the hard
        // one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            current = needed.min(most);
        }
    }
    let room = current.saturating_sub(OTHER_OPEN_FILES).max(1);
    if room >= wanted { wanted } else { 1 << room.ilog2() }
}

impl Spill {
    /// Files for `writable`'s regions (fewer, each for several regions, when the limit on
    /// open files is lower than their number); `None` when its directory refuses them (no
    /// write permission there, a read-only or full file system). The add then takes the
    /// road of the files that do not spill, batch by batch ([`Writable::insert`], a region
    /// at a time per batch), as a small file's add needs no more than the file itself: the
    /// same bits and the same sealing protocol, the file unsealed from the first batch
    /// rather than only for the pass at the end, and its pages written once per batch
    /// rather than once. (Before, the add failed, blaming the file: `f.bloom: Permission
    /// denied`.)
    pub fn new(writable: &Writable) -> Option<Self> {
        let regions = spill_files(writable.regions());
        let mut files = Vec::with_capacity(regions as usize);
        for region in 0..regions {
            let file = file::spill_file(writable.locked.real(), region).ok()?;
            files.push(BufWriter::with_capacity(1 << 16, file));
        }
        Some(Self {
            files,
            shift: 64 - regions.trailing_zeros(),
        })
    }

    /// Keeps `hashes` (their first words) for the end.
    pub fn push(&mut self, hashes: &[ItemHash], shown: &Path) -> Result<()> {
        for hash in hashes {
            let region = hash[0].checked_shr(self.shift).unwrap_or(0) as usize;
            self.files[region]
                .write_all(&hash[0].to_le_bytes())
                .with_path(shown)?;
        }
        Ok(())
    }
}

/// A locked filter file mapped writable, for the variants updated in place.
pub struct Writable {
    locked: Locked,
    /// Before `map`: forgotten by the SIGBUS handler before the mapping goes.
    _watched: crate::sigbus::Watched,
    map: MmapMut,
    /// The header (`header()`) and its marks as this writer left them, checked before every change
    /// ([`check_unchanged`](Self::check_unchanged)).
    sealing: file::Sealing,
    /// Whether the file was unsealed when opened (a writer before this one did not finish).
    pub was_unsealed: bool,
    /// Whether this writer has changed the file (its header or bits).
    changed: bool,
}

impl Writable {
    /// The locked file as a writable mapping, if its variant is updated in place; else the
    /// lock back. A sealed file's payload checksum is checked first (as every load for
    /// update checks it: sealing must not bless damage); an unsealed file's bits are used as
    /// they are.
    pub fn open(locked: Locked) -> Result<std::result::Result<Self, Locked>> {
        let shown = locked.shown().to_owned();
        let len = locked.len();
        let header = read_header(locked.file(), len, &shown)?;
        if !in_place::updates_in_place(header.variant) {
            return Ok(Err(locked));
        }
        if !file::payload_intact(locked.file(), &header).with_path(&shown)? {
            return Err(crate::store::damaged_payload(&shown));
        }
        allocate(locked.file(), header.payload_offset as u64, header.payload_len).map_err(|error| {
            CliError::new(format!(
                "{}: cannot allocate the filter's {} bytes on disk: {error}; nothing was changed",
                shown.display(),
                header.payload_len
            ))
        })?;
        // SAFETY: the file is locked against this tool's other writers, which change it
        // only under the lock; readers map it read-only. A program that truncates it anyway
        // raises SIGBUS, which `sigbus::watch` turns into an error line naming it (the file
        // is then left unsealed, its bits valid).
        let map = unsafe { MmapMut::map_mut(locked.file()) }.with_path(&shown)?;
        let watched = crate::sigbus::watch(&shown, &map);
        let sealing =
            file::Sealing::new(locked.file(), locked.real(), header.clone(), &map).with_path(&shown)?;
        let mut writable = Self {
            locked,
            _watched: watched,
            map,
            was_unsealed: header.unsealed,
            sealing,
            changed: false,
        };
        // Every parameter checked against the payload now, before anything changes. A
        // payload this platform cannot view in place (a big-endian one: the file's words
        // are little-endian) takes the other variants' road: loaded, changed, saved whole.
        if writable.filter_in_place()?.is_none() {
            return Ok(Err(writable.locked));
        }
        Ok(Ok(writable))
    }

    /// Whether `path` names this file.
    pub fn is(&self, path: &Path) -> bool {
        self.locked.is(path)
    }

    /// The mapped payload, for telling the kernel which pages to map or let go of; used
    /// only within the calls of `self`, which holds the mapping.
    fn region(&self) -> Region {
        // SAFETY: `map` is this writer's shared mapping of the whole file, which `self`
        // keeps mapped for as long as its calls use the region.
        unsafe { Region::of(&self.map, self.sealing.header().payload_offset) }
    }

    /// The payload's length in bytes.
    pub fn payload_len(&self) -> u64 {
        self.sealing.header().payload_len
    }

    /// The filter over the mapped payload, if this platform can view it in place.
    fn filter_in_place(&mut self) -> Result<Option<Box<dyn FilterMut + '_>>> {
        let offset = self.sealing.header().payload_offset;
        in_place::view_mut(self.sealing.header(), &mut self.map[offset..]).with_path(self.locked.shown())
    }

    /// The filter over the mapped payload (which [`open`](Self::open) found this platform
    /// can view in place).
    pub fn filter(&mut self) -> Result<Box<dyn FilterMut + '_>> {
        let offset = self.sealing.header().payload_offset;
        let shown = self.locked.shown();
        in_place::view_mut(self.sealing.header(), &mut self.map[offset..])
            .with_path(shown)?
            .ok_or_else(|| {
                CliError::new(format!(
                    "{}: the payload cannot be mapped in place",
                    shown.display()
                ))
            })
    }

    /// Refuses to write more when the file is no longer what this writer left: another
    /// program (which takes no lock) rewrote it (`cp other.bloom f.bloom` truncates and
    /// writes this very inode), cut it short, or put another file at its name. Writing this
    /// writer's header over such a file sealed it as valid over the other file's bits:
    /// `verify` said ok while every item of both was absent. The file is left as the other
    /// program made it, never sealed by this writer.
    fn check_unchanged(&mut self) -> Result<()> {
        let refused = match self.sealing.check(self.locked.file()) {
            Ok(()) => return Ok(()),
            Err(refused) => refused,
        };
        Err(self.refusal(refused))
    }

    /// A refused header write's error line: another program's change, and what it means
    /// for this update; or the I/O error.
    fn refusal(&self, refused: file::SealError) -> CliError {
        let shown = self.locked.shown();
        let foreign = match refused {
            file::SealError::Io(error) => return CliError::new(format!("{}: {error}", shown.display())),
            file::SealError::Foreign(foreign) => foreign,
        };
        let then = if self.changed {
            "not sealed over what that program wrote, and this update's changes may be missing \
             from it: run the update again once that program is done (`bloomery verify` says \
             what the file holds now)"
        } else {
            "this update wrote nothing to it: run it again once that program is done"
        };
        CliError::new(format!(
            "{}: {} during this update {}; {then}",
            shown.display(),
            foreign.what(),
            foreign.seen()
        ))
    }

    /// Marks the file unsealed (and makes the mark durable) before the first bit changes;
    /// nothing when it is already. Either way, first checks that no other program changed
    /// the file meanwhile ([`check_unchanged`](Self::check_unchanged)): every change calls
    /// this, so an update stops at its next batch.
    pub fn unseal(&mut self) -> Result<()> {
        self.check_unchanged()?;
        self.changed = true;
        self.sealing
            .unseal(self.locked.file())
            .map_err(|refused| self.refusal(refused))
    }

    /// Adds a batch of hashes (marking the file unsealed first). A payload larger than
    /// the resident window ([`window_bytes`]) is updated a region at a time: the hashes of a
    /// block filter are grouped by the region of the payload their block is in, each region
    /// is mapped in one call, filled, and let go of, so the resident memory stays near the
    /// window and every page is mapped once per batch; a classic filter's items (whose bits
    /// are anywhere) go in slices that touch at most a window of pages, each let go of
    /// after. `scratch` is reused between batches.
    pub fn insert(&mut self, hashes: &[ItemHash], scratch: &mut Vec<ItemHash>) -> Result<()> {
        self.unseal()?;
        let window = window_bytes();
        let payload_len = self.sealing.header().payload_len;
        let region = self.region();
        let mut filter = self.filter()?;
        if payload_len <= window {
            filter.insert_hashes(hashes);
            return Ok(());
        }
        match filter.locality() {
            locality @ Locality::Scattered { .. } => {
                let per_slice = items_per_release(window, locality);
                for slice in hashes.chunks(per_slice) {
                    filter.insert_hashes(slice);
                    region.release(0, payload_len);
                }
            }
            Locality::Ordered => {
                let regions = payload_len
                    .div_ceil(region_bytes(window))
                    .clamp(1, MAX_REGIONS)
                    .next_power_of_two();
                let shift = 64 - regions.trailing_zeros();
                group_by_top_bits(hashes, shift, scratch);
                let mut start = 0;
                while start < scratch.len() {
                    let group = scratch[start][0].checked_shr(shift).unwrap_or(0);
                    let end = start
                        + scratch[start..]
                            .partition_point(|hash| hash[0].checked_shr(shift).unwrap_or(0) == group);
                    // The bytes of the payload this group's blocks lie in (to within a
                    // block at either end: block = (h >> 32) * blocks >> 32 grows with h).
                    let from = (group * payload_len / regions).saturating_sub(PAGE);
                    let to = ((group + 1) * payload_len / regions + PAGE).min(payload_len);
                    let pages = (to - from) / PAGE;
                    if (end - start) as u64 >= 4 * pages {
                        // Dense enough that nearly every page is written: map them in one
                        // call instead of one fault each.
                        region.populate(from, to);
                    }
                    filter.insert_hashes(&scratch[start..end]);
                    region.release(from, to);
                    start = end;
                }
            }
        }
        Ok(())
    }

    /// Whether a large `add` should keep its hashes on disk until the input ends
    /// ([`Spill`]): a block filter whose payload is larger than the window.
    pub fn spills(&mut self) -> Result<bool> {
        let big = self.sealing.header().payload_len > window_bytes();
        Ok(big && self.filter()?.locality() == Locality::Ordered)
    }

    /// The regions a block filter's payload is grouped into.
    fn regions(&self) -> u64 {
        self.sealing
            .header()
            .payload_len
            .div_ceil(region_bytes(window_bytes()))
            .clamp(1, MAX_REGIONS)
            .next_power_of_two()
    }

    /// Adds the hashes `spill` kept, in one pass over the payload, a region at a time
    /// (marking the file unsealed first): each region's hashes read back, its pages mapped
    /// in one call when dense, filled, and let go of.
    pub fn insert_spilled(&mut self, spill: Spill) -> Result<()> {
        let shown = self.locked.shown().to_owned();
        self.unseal()?;
        let payload_len = self.sealing.header().payload_len;
        // One group of regions a file (one region each unless the limit on open files
        // made fewer files than regions).
        let regions = spill.files.len() as u64;
        let region = self.region();
        let mut filter = self.filter()?;
        let mut bytes = Vec::new();
        let mut hashes: Vec<ItemHash> = Vec::new();
        // Where the pass's time goes (BLOOMERY_TIMINGS): reading back, mapping, inserting.
        let mut spent = [Duration::ZERO; 3];
        for (group, file) in spill.files.into_iter().enumerate() {
            let started = Instant::now();
            // What reached the file, then what its buffer still holds: every hash pushed,
            // even when the disk filled up (a failed write leaves its bytes in the buffer),
            // so no flush that could fail stands between them and the filter.
            let (mut file, buffered) = file.into_parts();
            let buffered = buffered.unwrap_or_else(|panicked| panicked.into_inner());
            file.rewind().with_path(&shown)?;
            bytes.clear();
            file.read_to_end(&mut bytes).with_path(&shown)?;
            bytes.extend_from_slice(&buffered);
            drop(file);
            hashes.clear();
            hashes.extend(
                bytes
                    .chunks_exact(8)
                    .map(|word| [u64::from_le_bytes(word.try_into().expect("8 bytes")), 0]),
            );
            if hashes.is_empty() {
                continue;
            }
            let group = group as u64;
            let from = (group * payload_len / regions).saturating_sub(PAGE);
            let to = ((group + 1) * payload_len / regions + PAGE).min(payload_len);
            let read = Instant::now();
            spent[0] += read - started;
            if hashes.len() as u64 >= (to - from) / PAGE {
                region.populate(from, to);
            }
            let mapped = Instant::now();
            spent[1] += mapped - read;
            filter.insert_hashes(&hashes);
            region.release(from, to);
            spent[2] += mapped.elapsed();
        }
        if timings_wanted() {
            let [read, mapped, inserted] = spent.map(|spent| spent.as_secs_f64());
            let _ = writeln!(
                std::io::stderr(),
                "bloomery: timing: of the pass: hashes read back {read:.2} s, pages mapped {mapped:.2} s, \
                 bits set and pages let go {inserted:.2} s"
            );
        }
        Ok(())
    }

    /// Says for each hash of a batch whether its item might be present, changing nothing
    /// (`dedup` prints a batch's new lines before it adds them). A payload larger than the
    /// resident window is let go of after each window's worth of pages.
    pub fn contains_reporting(&mut self, hashes: &[ItemHash], present: &mut [bool]) -> Result<()> {
        let window = window_bytes();
        let payload_len = self.sealing.header().payload_len;
        let region = self.region();
        let filter = self.filter()?;
        if payload_len <= window {
            filter.contains_hashes(hashes, present);
            return Ok(());
        }
        let per_slice = items_per_release(window, filter.locality());
        for (slice, answers) in hashes.chunks(per_slice).zip(present.chunks_mut(per_slice)) {
            filter.contains_hashes(slice, answers);
            region.release(0, payload_len);
        }
        Ok(())
    }

    /// Adds every item of the filter of `header` and `payload` (a mapped file's, whose
    /// pages `theirs` lets go of), which must put items at the same bits: ORs its payload
    /// in, marking the file unsealed first; a region at a time, each let go of after, when
    /// the payload is larger than the window. Nothing changes when they differ.
    pub fn union(&mut self, header: &Header, payload: &[u8], theirs: Region) -> Result<()> {
        let shown = self.locked.shown().to_owned();
        self.filter()?.check_union(header, payload).with_path(&shown)?;
        self.unseal()?;
        let window = window_bytes();
        let payload_len = self.sealing.header().payload_len;
        let mine = self.region();
        let offset = self.sealing.header().payload_offset;
        let step = if payload_len <= window {
            payload_len.max(1)
        } else {
            region_bytes(window)
        } as usize;
        let target = &mut self.map[offset..];
        for (start, (mine_piece, their_piece)) in
            target.chunks_mut(step).zip(payload.chunks(step)).enumerate()
        {
            in_place::or_payload(mine_piece, their_piece);
            if payload_len > window {
                let from = (start * step) as u64;
                let to = from + mine_piece.len() as u64;
                mine.release(from, to);
                theirs.release(from, to);
            }
        }
        Ok(())
    }

    /// Seals the file: every changed page synced, the payload checksum computed from the
    /// file, then the sealed header written and synced. Releases the lock.
    pub fn seal(mut self) -> Result<()> {
        let file = self.locked.file();
        self.sealing
            .seal(file, &self.map)
            .map_err(|refused| self.refusal(refused))
    }
}
