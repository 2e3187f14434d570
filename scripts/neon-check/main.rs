//! Runs the NEON block kernel against the scalar reference, for `scripts/check-neon.sh`:
//! the real `kernel.rs`, `scalar.rs` and `neon.rs`, copied beside this file into
//! `blocked/`, cross-compiled for aarch64 and run under qemu. Exits 1 on any difference.

mod bits {
    /// The library's marker trait, which `kernel.rs` implements for `Block`.
    #[allow(clippy::missing_safety_doc)]
    pub unsafe trait Zeroable {}
}

mod blocked {
    pub mod kernel;
    mod neon;
    mod scalar;
    pub use kernel::{Block, Kernel};
}

use blocked::{Block, Kernel};

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn main() {
    let kernels = Kernel::available();
    let fast = *kernels.last().expect("the scalar kernel is always there");
    assert_eq!(fast.name(), "neon", "kernels here: {:?}", kernels);
    let scalar = Kernel::scalar();
    let mut state = 7;
    let mut checks = 0u64;
    for &num_blocks in &[1usize, 2, 3, 7, 64, 1000, 4096] {
        for &items in &[1usize, 10, 500, 5000] {
            let hashes: Vec<u64> = (0..items).map(|_| splitmix(&mut state)).collect();
            let probes: Vec<u64> = (0..2 * items).map(|_| splitmix(&mut state)).collect();
            let mut reference = vec![Block::default(); num_blocks];
            let mut single = vec![Block::default(); num_blocks];
            let mut batch = vec![Block::default(); num_blocks];
            for &hash in &hashes {
                let expected = scalar.insert(&mut reference, hash);
                assert_eq!(fast.insert(&mut single, hash), expected, "insert of {hash:#x}");
                checks += 1;
            }
            fast.insert_batch(&mut batch, &hashes);
            assert!(single == reference && batch == reference, "blocks differ after inserts");
            let all: Vec<u64> = hashes.iter().chain(&probes).copied().collect();
            let mut results = vec![false; all.len()];
            fast.contains_batch(&reference, &all, &mut results);
            for (&hash, &batched) in all.iter().zip(&results) {
                let expected = scalar.contains(&reference, hash);
                assert_eq!(fast.contains(&reference, hash), expected, "lookup of {hash:#x}");
                assert_eq!(batched, expected, "batch lookup of {hash:#x}");
                checks += 2;
            }
            assert!(hashes.iter().all(|&hash| fast.contains(&reference, hash)), "a false negative");
        }
    }
    println!("neon kernel: {checks} inserts and lookups, every answer and every block equal to the scalar kernel's");
}
