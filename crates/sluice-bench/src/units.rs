//! Leaf helpers for units: parsing durations, rates, byte sizes and ratios as the flags and
//! scenario files write them, and printing UTC times. Imports nothing of the bench but its
//! limits, so every module may use it.
//!
//! Guarantees: every parser refuses values outside the bench's limits (`limits`) with a
//! message that names the accepted forms; none panics on any input.

use std::time::Duration;

use crate::limits;

/// Parses `1.5s`, `500ms`, `2m`, `1h`, `250us` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("not a duration: {s:?} (try 5s, 500ms, 2m)"))?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => {
            return Err(format!(
                "unknown duration unit {unit:?} in {s:?} (use us, ms, s, m, h)"
            ))
        }
    };
    let max = limits::MAX_DURATION;
    if !secs.is_finite() || secs < 0.0 || secs > max.as_secs_f64() {
        return Err(format!(
            "duration {s:?} out of range (0 .. {} s)",
            max.as_secs()
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a rate in msg/s; `max`, `unthrottled` or 0 mean unthrottled. Accepts `10k`, `1.5m`.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    if t == "max" || t == "unthrottled" {
        return Ok(0);
    }
    let (num, mult) = match t.strip_suffix('k') {
        Some(n) => (n, 1e3),
        None => match t.strip_suffix('m') {
            Some(n) => (n, 1e6),
            None => (t.as_str(), 1.0),
        },
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("not a rate: {s:?} (msg/s, e.g. 10000, 10k, max)"))?;
    let r = v * mult;
    if !r.is_finite() || r < 0.0 || r > limits::MAX_RATE_MSG_S as f64 {
        return Err(format!(
            "rate {s:?} out of range (0 .. {} msg/s)",
            limits::MAX_RATE_MSG_S
        ));
    }
    Ok(r.round() as u64)
}

/// Parses a byte size: `100MiB`, `4KiB`, `1GiB`, `100MB`, `512k`, or a bare number of bytes.
/// Binary (KiB, MiB, GiB and the short k, m, g) and decimal (KB, MB, GB) units are accepted.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("not a size: {s:?} (try 100MiB, 4KiB, 1GB)"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        u => {
            return Err(format!(
                "unknown size unit {u:?} in {s:?} (use B, KiB, MiB, GiB, KB, MB, GB)"
            ))
        }
    };
    let b = v * mult;
    if !b.is_finite() || b < 0.0 || b > limits::MAX_BACKLOG_BYTES as f64 {
        return Err(format!(
            "size {s:?} out of range (0 .. {} GiB)",
            limits::MAX_BACKLOG_BYTES >> 30
        ));
    }
    Ok(b.round() as u64)
}

/// Parses the backlog drain ratio (0..1).
pub fn parse_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("not a ratio: {s:?} (0..1, e.g. 1.0)"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("ratio {s:?} out of range (0 .. 1)"));
    }
    Ok(v)
}

/// Seconds since the Unix epoch as a UTC `YYYY-MM-DDTHH:MM:SSZ` string.
pub fn utc_string(unix_s: f64) -> String {
    let secs = unix_s.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (proleptic Gregorian), after Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Bytes as MiB.
pub fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_rates_parse() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1000h").is_err());
        assert_eq!(parse_rate("10k"), Ok(10_000));
        assert_eq!(parse_rate("max"), Ok(0));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("1e12").is_err());
    }

    #[test]
    fn sizes_and_ratios_parse() {
        assert_eq!(parse_bytes("100MiB"), Ok(100 << 20));
        assert_eq!(parse_bytes("4KiB"), Ok(4096));
        assert_eq!(parse_bytes("2m"), Ok(2 << 20));
        assert_eq!(parse_bytes("1.5KB"), Ok(1500));
        assert_eq!(parse_bytes("77"), Ok(77));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("5 parsecs").is_err());
        assert!(parse_bytes("999999GiB").is_err());
        assert_eq!(parse_ratio("0.5"), Ok(0.5));
        assert!(parse_ratio("1.5").is_err());
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_string(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_string(951_782_400.0), "2000-02-29T00:00:00Z");
        assert_eq!(utc_string(1_767_225_599.0), "2025-12-31T23:59:59Z");
    }
}
