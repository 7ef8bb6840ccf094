//! The attributes field of a v2 batch header (an i16) as typed flags.
//!
//! | bits | meaning |
//! |------|---------|
//! | 0-2  | compression codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (5-7 undefined) |
//! | 3    | timestamp type: 0 CreateTime, 1 LogAppendTime |
//! | 4    | transactional |
//! | 5    | control batch (transaction markers) |
//! | 6    | delete horizon: `baseTimestamp` holds it (KIP-534, set by a log cleaner) |
//!
//! Bits 7-15 are unused; they are kept as they are when other bits change.

use std::fmt;

/// The attributes of a batch. Flags are themselves `Attributes` values with one bit set,
/// combined with [`Attributes::with`] and tested with [`Attributes::contains`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Attributes(pub i16);

impl Attributes {
    /// Bits 0-2: the codec id (not a flag: see [`Attributes::compression`]).
    pub const COMPRESSION: Attributes = Attributes(0b111);
    /// Bit 3: timestamps are the broker's append time (`maxTimestamp` holds it).
    pub const LOG_APPEND_TIME: Attributes = Attributes(1 << 3);
    pub const TRANSACTIONAL: Attributes = Attributes(1 << 4);
    pub const CONTROL: Attributes = Attributes(1 << 5);
    /// Bit 6 (KIP-534): `baseTimestamp` is the batch's delete horizon.
    pub const DELETE_HORIZON: Attributes = Attributes(1 << 6);

    /// Whether every bit of `flag` is set.
    #[inline]
    pub const fn contains(self, flag: Attributes) -> bool {
        self.0 & flag.0 == flag.0
    }

    /// These attributes with the bits of `flag` set.
    #[inline]
    #[must_use]
    pub const fn with(self, flag: Attributes) -> Self {
        Attributes(self.0 | flag.0)
    }

    /// These attributes with the bits of `flag` cleared.
    #[inline]
    #[must_use]
    pub const fn without(self, flag: Attributes) -> Self {
        Attributes(self.0 & !flag.0)
    }

    /// The codec id in bits 0-2 (0-7; Kafka defines 0-4).
    #[inline]
    pub const fn compression_id(self) -> i16 {
        self.0 & Self::COMPRESSION.0
    }

    /// The codec, or `None` for ids 5-7, which Kafka does not define.
    #[inline]
    pub const fn compression(self) -> Option<Compression> {
        Compression::from_id(self.compression_id())
    }

    /// These attributes with `codec` in bits 0-2 and every other bit kept.
    #[inline]
    #[must_use]
    pub const fn with_compression(self, codec: Compression) -> Self {
        Attributes(self.without(Self::COMPRESSION).0 | codec as i16)
    }

    #[inline]
    pub const fn timestamp_type(self) -> TimestampType {
        match self.contains(Self::LOG_APPEND_TIME) {
            true => TimestampType::LogAppendTime,
            false => TimestampType::CreateTime,
        }
    }

    #[inline]
    pub const fn is_transactional(self) -> bool {
        self.contains(Self::TRANSACTIONAL)
    }

    #[inline]
    pub const fn is_control(self) -> bool {
        self.contains(Self::CONTROL)
    }

    #[inline]
    pub const fn has_delete_horizon(self) -> bool {
        self.contains(Self::DELETE_HORIZON)
    }
}

impl fmt::Debug for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attributes")
            .field("compression_id", &self.compression_id())
            .field("timestamp_type", &self.timestamp_type())
            .field("transactional", &self.is_transactional())
            .field("control", &self.is_control())
            .field("delete_horizon", &self.has_delete_horizon())
            .finish()
    }
}

/// The codec of a batch's records (Kafka's `CompressionType` ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    /// The codec with Kafka id `id`, or `None` when Kafka defines none (5-7, or outside
    /// bits 0-2).
    #[inline]
    pub const fn from_id(id: i16) -> Option<Self> {
        match id {
            0 => Some(Self::None),
            1 => Some(Self::Gzip),
            2 => Some(Self::Snappy),
            3 => Some(Self::Lz4),
            4 => Some(Self::Zstd),
            _ => None,
        }
    }

    /// Kafka's id of this codec.
    #[inline]
    pub const fn id(self) -> i16 {
        self as i16
    }
}

/// What a batch's timestamps mean (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// The producer's timestamps.
    CreateTime,
    /// The broker's append time, in `maxTimestamp` (records' own deltas are ignored).
    LogAppendTime,
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: [Attributes; 4] = [
        Attributes::LOG_APPEND_TIME,
        Attributes::TRANSACTIONAL,
        Attributes::CONTROL,
        Attributes::DELETE_HORIZON,
    ];

    #[test]
    fn every_flag_is_its_own_bit_and_leaves_the_others_alone() {
        // Goal: each flag is one bit, above the codec bits, distinct from the others; setting
        // or clearing it changes that bit only, whatever else is set (bits 7-15 included).
        for (i, flag) in FLAGS.into_iter().enumerate() {
            assert_eq!(flag.0.count_ones(), 1);
            assert_eq!(flag.0, 1 << (3 + i), "bit {} in Kafka's order", 3 + i);
            assert_eq!(flag.compression_id(), 0);
            for base in [Attributes(0), Attributes(-1), Attributes(0x0f83)] {
                let set = base.with(flag);
                assert!(set.contains(flag));
                assert_eq!(set.0 & !flag.0, base.0 & !flag.0, "other bits kept");
                let cleared = base.without(flag);
                assert!(!cleared.contains(flag));
                assert_eq!(cleared.0 | flag.0, set.0);
            }
        }
        let named = |a: Attributes| {
            (
                a.timestamp_type() == TimestampType::LogAppendTime,
                a.is_transactional(),
                a.is_control(),
                a.has_delete_horizon(),
            )
        };
        assert_eq!(
            named(Attributes::LOG_APPEND_TIME),
            (true, false, false, false)
        );
        assert_eq!(
            named(Attributes::TRANSACTIONAL),
            (false, true, false, false)
        );
        assert_eq!(named(Attributes::CONTROL), (false, false, true, false));
        assert_eq!(
            named(Attributes::DELETE_HORIZON),
            (false, false, false, true)
        );
        assert_eq!(named(Attributes(0)), (false, false, false, false));
    }

    #[test]
    fn codec_ids_are_kafkas_and_live_in_bits_0_to_2() {
        // Goal: ids 0-4 name Kafka's codecs, 5-7 none; setting a codec keeps every flag.
        let all = [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ];
        for (id, codec) in all.into_iter().enumerate() {
            assert_eq!(codec.id(), id as i16);
            assert_eq!(Compression::from_id(id as i16), Some(codec));
            let flags = Attributes::TRANSACTIONAL.with(Attributes::DELETE_HORIZON);
            let a = Attributes(0b111).with(flags).with_compression(codec);
            assert_eq!(a.compression(), Some(codec));
            assert_eq!(a.compression_id(), id as i16);
            assert!(a.contains(flags));
        }
        for id in 5..8 {
            assert_eq!(Attributes(id).compression(), None);
            assert_eq!(Attributes(id).compression_id(), id);
        }
        assert_eq!(Attributes(0x10 | 3).compression(), Some(Compression::Lz4));
    }
}
