//! Parsing command arguments the way Redis does, with Redis's error texts.

use crate::errors;
use crate::value::canonical_i64;
use resp::Frame;

/// An integer argument (`string2ll` rules), or Redis's "not an integer" error.
pub fn parse_i64(argument: &[u8]) -> Result<i64, Frame> {
    canonical_i64(argument).ok_or_else(|| Frame::error(errors::NOT_INTEGER))
}

/// A non-negative integer argument with a custom error for negatives.
pub fn parse_non_negative(argument: &[u8], negative_error: &'static str) -> Result<i64, Frame> {
    let value = parse_i64(argument)?;
    if value < 0 {
        return Err(Frame::error(negative_error));
    }
    Ok(value)
}

/// A float argument as `strtold` reads it in Redis: decimal or exponent forms,
/// `inf`/`-inf`/`+inf`, no spaces, no NaN.
pub fn parse_f64(argument: &[u8]) -> Result<f64, Frame> {
    parse_float_text(argument).ok_or_else(|| Frame::error(errors::NOT_FLOAT))
}

/// The float in `text`, if it is one by Redis's rules.
pub fn parse_float_text(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?;
    if text.is_empty()
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace)
    {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let value = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            // Rust accepts "nan", "inf" spellings we handled above; refuse the rest.
            if lower.contains("nan") || lower.contains("inf") {
                return None;
            }
            text.parse::<f64>().ok()?
        }
    };
    (!value.is_nan()).then_some(value)
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub fn is_keyword(argument: &[u8], keyword: &str) -> bool {
    argument.eq_ignore_ascii_case(keyword.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_like_strtold() {
        assert_eq!(parse_float_text(b"1.5"), Some(1.5));
        assert_eq!(parse_float_text(b"-1e3"), Some(-1000.0));
        assert_eq!(parse_float_text(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_float_text(b".5"), Some(0.5));
        assert_eq!(parse_float_text(b"nan"), None);
        assert_eq!(parse_float_text(b" 1"), None);
        assert_eq!(parse_float_text(b"1x"), None);
        assert_eq!(parse_float_text(b""), None);
    }
}
