//! How values print in the HTML report: escaped text, milliseconds, counts, a dash for what
//! was not measured.

/// Text for HTML: `&`, `<`, `>` and `"` escaped (the page quotes attributes with `"`).
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Milliseconds with three decimals.
pub fn ms(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into())
}

/// A count, or a dash when it was not measured.
pub fn count(v: Option<i64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "–".into())
}
