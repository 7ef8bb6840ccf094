//! The seeded generator the broker's randomized unit tests share, so a failure names a seed
//! that replays it. Test-only; not for anything that needs real randomness.

/// xorshift64*: small, deterministic, good enough to pick sizes and values.
#[derive(Debug, Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// A generator for `seed` (any value: zero, which xorshift would never leave, is mapped
    /// away from).
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        debug_assert!(self.0 != 0, "a zero state stays zero");
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Mostly small values, sometimes the ones at varint and sign boundaries.
    pub(crate) fn len(&mut self) -> usize {
        const EDGES: [usize; 8] = [0, 1, 126, 127, 128, 16_383, 16_384, 70_000];
        match self.below(4) {
            0 => EDGES[self.below(EDGES.len() as u64) as usize],
            _ => self.below(40) as usize,
        }
    }

    /// Any i64, often -1 or `i64::MAX`.
    pub(crate) fn i64(&mut self) -> i64 {
        match self.below(4) {
            0 => -1,
            1 => i64::MAX,
            _ => self.next() as i64,
        }
    }

    /// Any i32, often -1, 0 or `i32::MAX`.
    pub(crate) fn i32(&mut self) -> i32 {
        match self.below(5) {
            0 => -1,
            1 => 0,
            2 => i32::MAX,
            _ => self.next() as i32,
        }
    }
}
