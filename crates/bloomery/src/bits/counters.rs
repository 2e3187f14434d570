//! 4-bit counters, two per byte (the low nibble is the even counter), for the counting
//! filter. A counter that reaches 15 saturates: it is never incremented or decremented
//! again, because after an overflow its true count is unknown, and decrementing a counter
//! that undercounts could make it 0 while items still need it (a false negative).

/// The largest value of a 4-bit counter; a counter at this value is saturated.
pub const SATURATED: u8 = 15;

/// A fixed number of 4-bit saturating counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterVec {
    bytes: Vec<u8>,
    len: u64,
}

impl super::TryClone for CounterVec {
    fn try_clone(&self) -> crate::Result<Self> {
        Ok(Self {
            bytes: super::try_copy_bytes(&self.bytes)?,
            len: self.len,
        })
    }
}

impl CounterVec {
    /// `len` counters at zero. Panics when their bytes exceed the address space (as a
    /// `Vec` does; [`try_zeroed`](Self::try_zeroed) answers an error instead).
    pub fn zeroed(len: u64) -> Self {
        let bytes = usize::try_from(len.div_ceil(2)).expect("the counters' bytes exceed the address space");
        Self {
            bytes: vec![0; bytes],
            len,
        }
    }

    /// As [`zeroed`](Self::zeroed), or [`Error::OutOfMemory`](crate::Error::OutOfMemory)
    /// when the system refuses the memory.
    pub fn try_zeroed(len: u64) -> crate::Result<Self> {
        let bytes = len.div_ceil(2);
        let bytes = usize::try_from(bytes).map_err(|_| crate::Error::OutOfMemory { bytes })?;
        Ok(Self {
            bytes: super::try_zeroed_vec(bytes)?,
            len,
        })
    }

    /// Sets every counter to zero.
    pub fn clear(&mut self) {
        self.bytes.fill(0);
    }

    /// Counters from their packed bytes (two per byte, low nibble first); `None` when the
    /// byte count does not match `len`, or when `len` is odd and the last byte's unused high
    /// nibble is not zero.
    pub fn from_bytes(bytes: Vec<u8>, len: u64) -> Option<Self> {
        let unused_nibble_is_zero = len.is_multiple_of(2) || bytes.last().is_some_and(|&last| last >> 4 == 0);
        (bytes.len() as u64 == len.div_ceil(2) && unused_nibble_is_zero).then_some(Self { bytes, len })
    }

    /// The packed bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The number of counters.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are no counters.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Counter `index`. Panics unless `index < len()` (an odd count's last byte has a
    /// spare nibble, which is not a counter).
    #[inline]
    pub fn get(&self, index: u64) -> u8 {
        assert!(index < self.len, "counter {index} of {}", self.len);
        let byte = self.bytes[(index / 2) as usize];
        if index.is_multiple_of(2) {
            byte & 0x0f
        } else {
            byte >> 4
        }
    }

    #[inline]
    fn put(&mut self, index: u64, value: u8) {
        assert!(index < self.len, "counter {index} of {}", self.len);
        let byte = &mut self.bytes[(index / 2) as usize];
        *byte = if index.is_multiple_of(2) {
            (*byte & 0xf0) | value
        } else {
            (*byte & 0x0f) | (value << 4)
        };
    }

    /// Adds one unless saturated; returns the value before. Panics unless `index < len()`.
    #[inline]
    pub fn increment(&mut self, index: u64) -> u8 {
        let value = self.get(index);
        if value < SATURATED {
            self.put(index, value + 1);
        }
        value
    }

    /// Takes one away unless saturated or zero. Panics unless `index < len()`.
    #[inline]
    pub fn decrement(&mut self, index: u64) {
        let value = self.get(index);
        if value > 0 && value < SATURATED {
            self.put(index, value - 1);
        }
    }

    /// How many counters are saturated.
    pub fn saturated(&self) -> u64 {
        (0..self.len)
            .filter(|&index| self.get(index) == SATURATED)
            .count() as u64
    }

    /// How many counters are not zero.
    pub fn nonzero(&self) -> u64 {
        // Not `u64::from(flag)` sums: this machine's rustc 1.95 miscompiles counters
        // updated that way in release builds (rust-lang/rust#158206).
        self.bytes
            .iter()
            .map(|&byte| match (byte & 0x0f != 0, byte >> 4 != 0) {
                (true, true) => 2,
                (true, false) | (false, true) => 1,
                (false, false) => 0,
            })
            .sum()
    }

    /// Adds `other`'s counters (saturating at 15). The lengths must be equal.
    pub fn add(&mut self, other: &CounterVec) {
        assert_eq!(self.len, other.len, "counter arrays differ in size");
        for index in 0..self.len {
            let sum = (self.get(index) + other.get(index)).min(SATURATED);
            self.put(index, sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_counters_are_independent() {
        let mut counters = CounterVec::zeroed(3);
        counters.increment(1);
        counters.increment(1);
        counters.increment(2);
        assert_eq!([counters.get(0), counters.get(1), counters.get(2)], [0, 2, 1]);
        counters.decrement(1);
        assert_eq!([counters.get(0), counters.get(1), counters.get(2)], [0, 1, 1]);
        assert_eq!(counters.nonzero(), 2);
    }

    #[test]
    fn a_saturated_counter_never_moves_again() {
        let mut counters = CounterVec::zeroed(2);
        for _ in 0..20 {
            counters.increment(0);
        }
        assert_eq!(counters.get(0), SATURATED);
        assert_eq!(counters.get(1), 0);
        for _ in 0..20 {
            counters.decrement(0);
        }
        assert_eq!(counters.get(0), SATURATED);
        assert_eq!(counters.saturated(), 1);
    }

    #[test]
    fn the_spare_nibble_of_an_odd_count_is_not_a_counter() {
        // Three counters in two bytes: index 3 is the last byte's unused high nibble,
        // which `from_bytes` requires to be zero. Writing it made bytes the type refuses.
        let mut counters = CounterVec::zeroed(3);
        let touched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| counters.increment(3)));
        assert!(touched.is_err());
        assert!(CounterVec::from_bytes(counters.as_bytes().to_vec(), 3).is_some());
        assert!(std::panic::catch_unwind(|| CounterVec::zeroed(3).get(3)).is_err());
    }

    #[test]
    fn adding_saturates() {
        let mut a = CounterVec::zeroed(1);
        let mut b = CounterVec::zeroed(1);
        for _ in 0..10 {
            a.increment(0);
            b.increment(0);
        }
        a.add(&b);
        assert_eq!(a.get(0), SATURATED);
    }
}
