//! The reply frame. One type covers RESP2 and RESP3; the encoder maps RESP3-only
//! shapes (map, set, double, boolean, null) onto their RESP2 equivalents.

use bytes::Bytes;

/// A reply (or, on the client side, any received value).
///
/// Integers are signed, as in the protocol. Error frames hold the whole error line
/// without the leading `-`, code included (`WRONGTYPE Operation against ...`).
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Simple(Bytes),
    Error(Bytes),
    Integer(i64),
    Bulk(Bytes),
    /// The null bulk string (`$-1` in RESP2, `_` in RESP3).
    Null,
    /// The null array (`*-1` in RESP2, `_` in RESP3).
    NullArray,
    Array(Vec<Frame>),
    /// RESP3 map; flattened to an array of 2N elements in RESP2.
    Map(Vec<(Frame, Frame)>),
    /// RESP3 set; an array in RESP2.
    Set(Vec<Frame>),
    /// RESP3 double; a bulk string in RESP2.
    Double(f64),
    /// RESP3 boolean; integer 1/0 in RESP2.
    Boolean(bool),
    /// RESP3 big number; a bulk string in RESP2.
    BigNumber(Bytes),
    /// RESP3 verbatim string with its three-letter format (`txt`, `mkd`); bulk in RESP2.
    Verbatim(Bytes),
    /// RESP3 out-of-band push; an array in RESP2.
    Push(Vec<Frame>),
}

impl Frame {
    pub const OK: Frame = Frame::Simple(Bytes::from_static(b"OK"));

    pub fn simple(text: &'static str) -> Frame {
        Frame::Simple(Bytes::from_static(text.as_bytes()))
    }

    /// An error from a static text that already carries its code (`ERR ...`).
    pub fn error(text: &'static str) -> Frame {
        Frame::Error(Bytes::from_static(text.as_bytes()))
    }

    /// An error built at run time; `text` carries its code.
    pub fn error_owned(text: String) -> Frame {
        Frame::Error(Bytes::from(text))
    }

    pub fn bulk(data: impl Into<Bytes>) -> Frame {
        Frame::Bulk(data.into())
    }

    pub fn bulk_from_slice(data: &[u8]) -> Frame {
        Frame::Bulk(Bytes::copy_from_slice(data))
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_))
    }

    /// The bytes of a simple string, bulk string or verbatim string.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Frame::Simple(b) | Frame::Bulk(b) | Frame::Error(b) | Frame::BigNumber(b) => Some(b),
            Frame::Verbatim(b) => Some(b.get(4..).unwrap_or_default()),
            _ => None,
        }
    }
}
