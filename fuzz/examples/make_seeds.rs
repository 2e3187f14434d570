//! Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/) from real files:
//! the `variant_files` example's files (one per variant), their format-version-1 forms,
//! the test vectors of docs/format.md, the Guava files and the RedisBloom dumps of the
//! library's tests.
//!
//! ```text
//! cargo run --release -p bloomery --example variant_files -- /tmp/bloomery-seeds 300
//! cd fuzz && cargo +nightly run --release --example make_seeds -- /tmp/bloomery-seeds
//! ```
//!
//! (`scripts/fuzz.sh --seed` runs both.) The committed corpora are these seeds plus what
//! the campaigns found, minimized with `cargo fuzz cmin`.

use std::fs;
use std::path::{Path, PathBuf};

use bloomery::BloomFilter;
use bloomery_fuzz::{KNOWN_VARIANTS, build_envelope, build_envelope_with_checksum, split_envelope};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const VARIANTS: [&str; 10] = [
    "classic",
    "blocked",
    "counting",
    "scalable",
    "retouched",
    "allowlisted",
    "rotating",
    "split-block",
    "redisbloom",
    "scalable-blocked",
];

fn main() -> Result<()> {
    let files = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: make_seeds VARIANT_FILES_DIR")?,
    );
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus = fuzz.join("corpus");

    // Native files: every variant in version 2 and 1, and the documented vectors.
    let mut native: Vec<(String, Vec<u8>)> = Vec::new();
    for name in VARIANTS {
        let bytes = fs::read(files.join(format!("{name}.bloom")))?;
        native.push((format!("{name}-v2"), bytes.clone()));
        if let Some(v1) = version_1(name, &bytes) {
            native.push((format!("{name}-v1"), v1));
        }
    }
    let format_md = fs::read_to_string(fuzz.join("../docs/format.md"))?;
    for name in vector_names(&format_md) {
        native.push((format!("vector-{name}"), vector(&format_md, &name)?));
    }

    write_all(&corpus.join("native_file"), native.iter().cloned())?;

    // The structure-aware target: a control byte, then the file. 0x00 keeps version 2
    // and the variant; 0x01 asks for version 1; 0x02 keeps the raw variant code; 0x04
    // sets the unsealed mark, 0x0c with the input's own payload checksum (stale); the high
    // nibble is the number of inserts minus one.
    let mut envelopes = Vec::new();
    for (name, bytes) in &native {
        let control: u8 = if name.ends_with("-v1") { 0x31 } else { 0x30 };
        envelopes.push((name.clone(), prefixed(&[control], bytes)));
    }
    // The first code no variant has (it stays unknown when a variant is added: seeds are
    // made again then).
    let unknown_code = KNOWN_VARIANTS + 1;
    let (params, payload) = split_envelope(&native[0].1);
    let unknown = build_envelope(2, unknown_code, params, payload);
    envelopes.push((
        format!("unknown-code-{unknown_code}"),
        prefixed(&[0x02], &unknown),
    ));
    // Unsealed files (docs/format.md, "Sealed and unsealed files"): the variants updated
    // in place with the mark, their checksum right or stale (0 where a writer left
    // another); the mark on a variant written whole, and with version 1, refused.
    for name in [
        "classic-v2",
        "blocked-v2",
        "split-block-v2",
        "vector-blocked-3-blocks",
    ] {
        let bytes = &native
            .iter()
            .find(|(seed, _)| seed == name)
            .ok_or("no such seed")?
            .1;
        envelopes.push((format!("{name}-unsealed"), prefixed(&[0x34], bytes)));
        let (params, payload) = split_envelope(bytes);
        let code = u16::from_le_bytes([bytes[10], bytes[11]]);
        let stale = build_envelope_with_checksum(2, code, params, payload, 0);
        envelopes.push((format!("{name}-unsealed-stale"), prefixed(&[0x3c], &stale)));
    }
    for (name, control) in [("counting-v2", 0x34), ("classic-v1", 0x35)] {
        let bytes = &native
            .iter()
            .find(|(seed, _)| seed == name)
            .ok_or("no such seed")?
            .1;
        envelopes.push((format!("{name}-unsealed"), prefixed(&[control], bytes)));
    }
    write_all(&corpus.join("native_envelope"), envelopes)?;

    // Guava bytes: the library's test files, and the classic seed's words.
    let mut guava = Vec::new();
    let guava_dir = fuzz.join("../crates/bloomery/tests/data/guava/filters");
    let mut names: Vec<PathBuf> = fs::read_dir(&guava_dir)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<std::io::Result<_>>()?;
    names.sort();
    for path in names {
        let stem = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or_default();
        let wanted = path.extension().is_some_and(|ext| ext == "bin")
            && (!stem.contains("n5000") || stem.starts_with("ascii"));
        if wanted {
            guava.push((format!("guava-{stem}"), fs::read(&path)?));
        }
    }
    let classic = bloomery::any::open(&native[0].1)?;
    guava.push(("classic-v2".into(), bloomery::any::to_guava_bytes(&*classic)?));
    let mut trailing = BloomFilter::from_guava_bytes(&guava[0].1)?.to_guava_bytes();
    trailing.extend_from_slice(b"next");
    guava.push(("trailing".into(), trailing));
    write_all(&corpus.join("guava_bytes"), guava)?;

    // Dump pieces: 4 control bytes (flags, piece length - 1 as u16, damaged piece), then
    // a raw file (flags 0) or a structure-aware envelope input (flags 1).
    let mut dumps = Vec::new();
    for (name, bytes) in native.iter().filter(|(name, _)| name.ends_with("-v2")) {
        dumps.push((format!("{name}-256"), prefixed(&[0, 255, 0, 0], bytes)));
        dumps.push((
            format!("{name}-512-envelope"),
            prefixed(&[1, 255, 1, 0, 0x10], bytes),
        ));
    }
    dumps.push((
        "classic-short-piece".into(),
        prefixed(&[0b1001, 63, 0, 1], &native[0].1),
    ));
    dumps.push((
        "classic-one-piece".into(),
        prefixed(&[0, 255, 255, 0], &native[0].1),
    ));
    write_all(&corpus.join("dump_pieces"), dumps)?;

    // Parquet bloom filters: the split-block seed's bits as Parquet writes them (the
    // variant_files example's split-block filter hashes as Parquet does), with the header
    // in the long form of its field ids and with an unknown field (a binary) before the
    // unions, as another writer may; and the smallest filter.
    let split_block = bloomery::any::open(
        &native
            .iter()
            .find(|(name, _)| name == "split-block-v2")
            .ok_or("no split-block seed")?
            .1,
    )?;
    let parquet = bloomery::any::to_parquet_bytes(&*split_block, true)?;
    let (header_len, _) = bloomery::format::parquet::read_header(&parquet)?;
    let bitset = &parquet[header_len..];
    let mut long_ids = vec![0x05, 0x02];
    long_ids.extend_from_slice(&parquet[1..header_len - 13]);
    for id in [4u8, 6, 8] {
        long_ids.extend_from_slice(&[0x0c, id, 0x1c, 0x00, 0x00]);
    }
    long_ids.push(0);
    long_ids.extend_from_slice(bitset);
    let mut unknown = parquet[..header_len - 13].to_vec();
    unknown.extend_from_slice(&[0x98, 3, b'x', b'y', b'z', 0x0c, 0x04, 0x1c, 0x00, 0x00]);
    unknown.extend_from_slice(&[0x1c, 0x1c, 0x00, 0x00, 0x1c, 0x1c, 0x00, 0x00, 0x00]);
    unknown.extend_from_slice(bitset);
    let mut smallest = bloomery::format::parquet::encode_header(32);
    smallest.extend_from_slice(&[0xa5; 32]);
    let seeds = [
        ("split-block".to_string(), parquet.clone()),
        ("split-block-long-ids".to_string(), long_ids),
        ("split-block-unknown-field".to_string(), unknown),
        ("one-block".to_string(), smallest),
    ];
    for (name, bytes) in &seeds {
        let _ = bloomery::SplitBlockBloomFilter::from_parquet_bytes(bytes)
            .map_err(|error| format!("seed {name} is refused: {error}"))?;
    }
    write_all(&corpus.join("parquet_bytes"), seeds)?;

    // RedisBloom-layout dumps: control 0x00, then RedisBloom's own BF.SCANDUMP pieces (the
    // library's fixtures, in their iterator, length, bytes layout) and those of the
    // redisbloom seed; control 0x01 + 2 * change, then a filter to make (capacity u16,
    // error rate index, growth and NONSCALING, items, piece length - 1 as u16, the piece
    // changed, a byte value) and items of its own, one a line.
    let mut chunks = Vec::new();
    let fixtures = fuzz.join("../crates/bloomery/tests/data/redisbloom");
    let mut dumps: Vec<PathBuf> = fs::read_dir(&fixtures)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<std::io::Result<_>>()?;
    dumps.sort();
    for path in dumps {
        if path.extension().is_some_and(|ext| ext == "scandump") {
            let stem = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or_default();
            chunks.push((format!("redisbloom-{stem}"), prefixed(&[0], &fs::read(&path)?)));
        }
    }
    let redisbloom = bloomery::any::open(
        &native
            .iter()
            .find(|(name, _)| name == "redisbloom-v2")
            .ok_or("no redisbloom seed")?
            .1,
    )?;
    let redisbloom = redisbloom
        .as_any()
        .downcast_ref::<bloomery::redisbloom::RedisBloomFilter>()
        .ok_or("the redisbloom seed is not a RedisBloom filter")?;
    let mut stream = piece(1, &redisbloom.scandump_header());
    let mut iterator = 1;
    while let Some((next, data)) = redisbloom.scandump_chunk(iterator, 4096) {
        stream.extend_from_slice(&piece(next, data));
        iterator = next;
    }
    chunks.push(("variant-files-redisbloom".into(), prefixed(&[0], &stream)));
    for change in 0..8u8 {
        let made = [1 | change << 1, 99, 0, 3, 0x02, 120, 200, 0, 3, 5];
        chunks.push((
            format!("built-change-{change}"),
            prefixed(&made, b"apple\nbanana\ncherry"),
        ));
    }
    chunks.push((
        "built-nonscaling".into(),
        prefixed(&[1, 9, 0, 1, 0x04, 40, 15, 0, 0, 0], b"x"),
    ));
    write_all(&corpus.join("redisbloom_chunks"), chunks)?;
    Ok(())
}

/// One piece in the RedisBloom fixtures' layout: iterator u64, length u64, the bytes.
fn piece(iterator: u64, data: &[u8]) -> Vec<u8> {
    let mut out = iterator.to_le_bytes().to_vec();
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// The names of the test vectors of docs/format.md, in order.
fn vector_names(format_md: &str) -> Vec<String> {
    format_md
        .split("<!-- vector ")
        .skip(1)
        .filter_map(|rest| rest.split(':').next())
        .map(str::to_owned)
        .collect()
}

fn prefixed(prefix: &[u8], bytes: &[u8]) -> Vec<u8> {
    let mut out = prefix.to_vec();
    out.extend_from_slice(bytes);
    out
}

fn write_all(dir: &Path, seeds: impl IntoIterator<Item = (String, Vec<u8>)>) -> Result<()> {
    fs::create_dir_all(dir)?;
    let mut count = 0;
    for (name, bytes) in seeds {
        fs::write(dir.join(format!("seed-{name}")), bytes)?;
        count += 1;
    }
    println!("{}: {count} seeds", dir.display());
    Ok(())
}

/// The same filter in format version 1 (docs/format.md, "Version 1"): the version field
/// changed and, for rotating filters, the per-generation shapes dropped (they are the
/// classic sizing, which version 1 implies); blocked filters get version 1's foldhash
/// hasher, which readers refuse with a message.
fn version_1(name: &str, bytes: &[u8]) -> Option<Vec<u8>> {
    let (params, payload) = split_envelope(bytes);
    let mut params = params.to_vec();
    match name {
        "blocked" => params[12..16].copy_from_slice(&1u32.to_le_bytes()),
        // Added in version 2: no version-1 form to seed.
        "split-block" | "redisbloom" | "scalable-blocked" => return None,
        "rotating" => {
            let kept = u32::from_le_bytes(params[28..32].try_into().ok()?) as usize;
            let mut v1 = params[..32].to_vec();
            for generation in 0..kept {
                let start = 32 + generation * 28;
                v1.extend_from_slice(&params[start..start + 16]);
            }
            params = v1;
        }
        _ => {}
    }
    let code = u16::from_le_bytes([bytes[10], bytes[11]]);
    Some(build_envelope(1, code, &params, payload))
}

/// The hex test vector `name` of docs/format.md.
fn vector(format_md: &str, name: &str) -> Result<Vec<u8>> {
    let start = format_md
        .find(&format!("<!-- vector {name}:"))
        .ok_or("no such vector")?;
    let block = &format_md[start..];
    let body = &block[block.find("```text\n").ok_or("no text block")? + 8..];
    let hex: String = body[..body.find("```").ok_or("unclosed")?]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    (0..hex.len())
        .step_by(2)
        .map(|i| Ok(u8::from_str_radix(&hex[i..i + 2], 16)?))
        .collect()
}
