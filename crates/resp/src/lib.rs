//! RESP2 and RESP3 for slotraft: one [`Frame`] type for replies, a streaming
//! [`RequestParser`] for what clients send (multibulk and inline), an encoder that
//! writes a frame in either protocol version, and a reply parser for the client side
//! (tests, the router). No I/O happens here; callers own the sockets.

mod encode;
mod frame;
mod reply;
mod request;

pub use encode::{encode, format_double, format_i64, Protocol};
pub use frame::{BulkArray, Frame};
pub use reply::{parse_reply, reply_length, ReplyError};
pub use request::{split_inline_args, ProtocolError, RequestLimits, RequestParser, SpannedRequest};
