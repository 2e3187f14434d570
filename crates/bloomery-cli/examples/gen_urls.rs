//! Writes COUNT URL-like lines to standard output, fast enough to feed `bloomery` 10^9
//! items from a pipe (no input file on disk): scripts/scale.sh. Independent of the
//! library: a splitmix64 stream from SEED, one line per number. KIND names the path
//! (`item`, `probe`, ...), so lines of different kinds never coincide: probes made with
//! another kind are fresh items for certain.
//!
//! Usage: cargo run --release -p bloomery-cli --example gen_urls -- COUNT [SEED] [KIND]

use std::io::{self, Write};

fn main() {
    let mut args = std::env::args().skip(1);
    let count: u64 = args
        .next()
        .and_then(|count| count.parse::<f64>().ok())
        .map(|count| count as u64)
        .expect("usage: gen_urls COUNT [SEED] [KIND]");
    let seed: u64 = args.next().and_then(|seed| seed.parse().ok()).unwrap_or(1);
    let kind = args.next().unwrap_or_else(|| "item".to_owned());
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut out = io::stdout().lock();
    let digits = b"0123456789abcdef";
    // Lines go into one large buffer, written when full: no per-line call or allocation.
    let mut buffer: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut decimal = [0u8; 20];
    for index in 0..count {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        buffer.extend_from_slice(b"https://shop");
        buffer.push(b'0' + (z % 10) as u8);
        buffer.push(b'0' + (z / 10 % 5) as u8);
        buffer.extend_from_slice(b".example.com/");
        buffer.extend_from_slice(kind.as_bytes());
        buffer.push(b'/');
        // The index makes every line of a run distinct; the hash makes them look random.
        let mut hex = [0u8; 16];
        for (slot, shift) in hex.iter_mut().zip((0..64).step_by(4).rev()) {
            *slot = digits[((z >> shift) & 15) as usize];
        }
        buffer.extend_from_slice(&hex);
        buffer.extend_from_slice(b"?n=");
        let mut rest = index;
        let mut start = decimal.len();
        loop {
            start -= 1;
            decimal[start] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        buffer.extend_from_slice(&decimal[start..]);
        buffer.push(b'\n');
        if buffer.len() >= (1 << 20) - 128 {
            if out.write_all(&buffer).is_err() {
                return; // the reader went away
            }
            buffer.clear();
        }
    }
    let _ = out.write_all(&buffer).and_then(|()| out.flush());
}
