//! The lock-free filter under real threads.

use bloomery::{AtomicBloomFilter, BloomFilter};

const THREADS: u64 = 8;
const ITEMS_PER_THREAD: u64 = 50_000;

#[test]
fn threads_inserting_disjoint_sets_end_with_the_single_threaded_bits() {
    let shared = AtomicBloomFilter::with_fpp(THREADS * ITEMS_PER_THREAD, 0.01).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let shared = &shared;
            scope.spawn(move || {
                // Interleave the items so threads contend for the same words.
                for i in 0..ITEMS_PER_THREAD {
                    shared.insert(&(i * THREADS + thread));
                }
            });
        }
    });

    let mut single = BloomFilter::with_fpp(THREADS * ITEMS_PER_THREAD, 0.01).unwrap();
    for item in 0..THREADS * ITEMS_PER_THREAD {
        single.insert(&item);
    }
    let concurrent: BloomFilter = shared.into();
    assert_eq!(concurrent.bit_count(), single.bit_count());
    assert!(
        concurrent == single,
        "the concurrent filter's bits differ from the single-threaded one's"
    );
}

#[test]
fn each_bit_change_is_reported_by_one_thread_only() {
    // Every thread inserts the same items: for each item, the threads that report a change
    // together set its bits once, so the changes reported sum to at most the bits set.
    let shared = AtomicBloomFilter::with_fpp(10_000, 0.01).unwrap();
    let changed: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let shared = &shared;
                scope.spawn(move || (0..10_000u64).filter(|item| shared.insert(item)).count() as u64)
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap()).sum()
    });
    assert!(changed <= shared.bit_count());
    assert!(changed >= 9_000, "only {changed} inserts reported a change");
    assert!((0..10_000u64).all(|item| shared.contains(&item)));
}
