//! Bytes off the master's event publisher: where it is, how its stream splits into
//! frames, the reader task, and the capture format. No Salt meaning lives here.

pub mod endpoint;
pub mod framing;
mod hold;
pub mod message;
pub mod msgpack;
mod outbox;
pub mod pace;
pub mod reader;
pub mod recording;
pub mod spill;

pub use endpoint::Endpoint;
pub use reader::{BusGap, BusMessage, BusReader, Frame, GapReason, ReaderConfig, ReaderStats};
