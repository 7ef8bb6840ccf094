//! Length-prefixed framing: every Kafka request and response is a big-endian i32 size
//! followed by that many bytes.

use crate::error::ProtocolError;

/// Bytes in the size prefix.
pub const SIZE_PREFIX_BYTES: usize = 4;

/// Checks whether `buf` holds a whole frame. Returns the body length when it does,
/// `Ok(None)` when more bytes are needed, and an error for a length that can never be valid
/// (zero, negative, or above `frame_bytes_max`), which the caller answers by closing.
pub fn check(buf: &[u8], frame_bytes_max: usize) -> Result<Option<usize>, ProtocolError> {
    let Some(prefix) = buf.get(..SIZE_PREFIX_BYTES) else {
        return Ok(None);
    };
    let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if size <= 0 {
        return Err(ProtocolError::InvalidLength(size));
    }
    let size = size as usize;
    if size > frame_bytes_max {
        return Err(ProtocolError::FrameTooLarge {
            size,
            max: frame_bytes_max,
        });
    }
    if buf.len() < SIZE_PREFIX_BYTES + size {
        return Ok(None);
    }
    Ok(Some(size))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: partial prefixes and bodies ask for more bytes; bad lengths are errors.
    #[test]
    fn check_frames() {
        assert!(check(&[0, 0], 100).unwrap().is_none());
        assert!(check(&[0, 0, 0, 3, 1, 2], 100).unwrap().is_none());
        assert_eq!(check(&[0, 0, 0, 3, 1, 2, 3], 100).unwrap(), Some(3));
        assert!(matches!(
            check(&[0, 0, 0, 0], 100),
            Err(ProtocolError::InvalidLength(0))
        ));
        assert!(matches!(
            check(&[0xff, 0, 0, 0], 100),
            Err(ProtocolError::InvalidLength(_))
        ));
        assert!(matches!(
            check(&[0, 0, 1, 0], 100),
            Err(ProtocolError::FrameTooLarge { size: 256, .. })
        ));
    }
}
