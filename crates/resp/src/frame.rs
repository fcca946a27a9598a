//! The reply frame. One type covers RESP2 and RESP3; the encoder maps RESP3-only
//! shapes (map, set, double, boolean, null) onto their RESP2 equivalents.

use bytes::Bytes;

/// A reply (or, on the client side, any received value).
///
/// Integers are signed, as in the protocol. Error frames hold the whole error line
/// without the leading `-`, code included (`WRONGTYPE Operation against ...`).
#[derive(Debug, Clone)]
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
    /// A RESP3 double written as this text (Redis's "human" long-double form,
    /// `13.36138933897018433`, for GEO coordinates); a bulk string in RESP2.
    DoubleText(Bytes),
    /// RESP3 boolean; integer 1/0 in RESP2.
    Boolean(bool),
    /// RESP3 big number; a bulk string in RESP2.
    BigNumber(Bytes),
    /// RESP3 verbatim string with its three-letter format (`txt`, `mkd`); bulk in RESP2.
    Verbatim(Bytes),
    /// RESP3 out-of-band push; an array in RESP2.
    Push(Vec<Frame>),
    /// An array of bulk strings kept in wire form (the same in RESP2 and
    /// RESP3): long replies of many small elements (LRANGE) are written once,
    /// with no frame per element.
    Bulks(BulkArray),
}

/// The elements of an array of bulk strings, written as the protocol writes
/// them (`$<len>\r\n<bytes>\r\n` each) behind one count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkArray {
    count: usize,
    wire: Vec<u8>,
}

impl BulkArray {
    /// An empty array with room for `bytes` of elements (headers included).
    pub fn with_capacity(bytes: usize) -> BulkArray {
        BulkArray {
            count: 0,
            wire: Vec::with_capacity(bytes),
        }
    }

    pub fn push(&mut self, element: &[u8]) {
        let mut digits = [0u8; 20];
        let length = crate::encode::format_i64(element.len() as i64, &mut digits);
        self.wire.reserve(element.len() + length.len() + 5);
        self.wire.push(b'$');
        self.wire.extend_from_slice(length);
        self.wire.extend_from_slice(b"\r\n");
        self.wire.extend_from_slice(element);
        self.wire.extend_from_slice(b"\r\n");
        self.count += 1;
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The elements in wire form, without the array header.
    pub fn wire(&self) -> &[u8] {
        &self.wire
    }

    /// The elements, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut rest = self.wire.as_slice();
        std::iter::from_fn(move || {
            let header_end = rest.iter().position(|byte| *byte == b'\r')?;
            let length: usize = std::str::from_utf8(rest.get(1..header_end)?)
                .ok()?
                .parse()
                .ok()?;
            let element = rest.get(header_end + 2..header_end + 2 + length)?;
            rest = rest.get(header_end + 4 + length..)?;
            Some(element)
        })
    }

    /// One bulk frame per element.
    pub fn to_frames(&self) -> Vec<Frame> {
        self.iter().map(Frame::bulk_from_slice).collect()
    }
}

impl FromIterator<Vec<u8>> for BulkArray {
    fn from_iter<I: IntoIterator<Item = Vec<u8>>>(elements: I) -> BulkArray {
        let mut array = BulkArray::default();
        for element in elements {
            array.push(&element);
        }
        array
    }
}

/// Structural equality, except that [`Frame::Bulks`] equals the array of
/// bulk frames it stands for: the two are the same reply on the wire.
impl PartialEq for Frame {
    fn eq(&self, other: &Frame) -> bool {
        use Frame::*;
        match (self, other) {
            (Simple(first), Simple(second))
            | (Error(first), Error(second))
            | (Bulk(first), Bulk(second))
            | (BigNumber(first), BigNumber(second))
            | (DoubleText(first), DoubleText(second))
            | (Verbatim(first), Verbatim(second)) => first == second,
            (Integer(first), Integer(second)) => first == second,
            (Null, Null) | (NullArray, NullArray) => true,
            (Array(first), Array(second))
            | (Set(first), Set(second))
            | (Push(first), Push(second)) => first == second,
            (Map(first), Map(second)) => first == second,
            (Double(first), Double(second)) => first == second,
            (Boolean(first), Boolean(second)) => first == second,
            (Bulks(first), Bulks(second)) => first == second,
            (Bulks(bulks), Array(items)) | (Array(items), Bulks(bulks)) => {
                bulks.len() == items.len()
                    && bulks
                        .iter()
                        .zip(items)
                        .all(|(element, item)| matches!(item, Bulk(data) if data[..] == *element))
            }
            _ => false,
        }
    }
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
            Frame::Simple(b)
            | Frame::Bulk(b)
            | Frame::Error(b)
            | Frame::BigNumber(b)
            | Frame::DoubleText(b) => Some(b),
            Frame::Verbatim(b) => Some(b.get(4..).unwrap_or_default()),
            _ => None,
        }
    }
}
