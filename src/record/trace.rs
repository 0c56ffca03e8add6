//! The trace a job's events carried: Salt 3008's tracing puts a W3C
//! `traceparent` on the events it fires (the job's publication, and each
//! return's own request), which saltsight keeps on its records and links its
//! own spans to (docs/opentelemetry.md).

use serde::Serialize;

/// A W3C trace context, as Salt 3008's tracing puts it on the events it fires
/// (`traceparent: 00-<trace id>-<span id>-<flags>`): lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TraceContext {
    pub trace_id: String,
    pub span_id: String,
}

impl TraceContext {
    /// A `traceparent` header's ids; none for any other text, or for the
    /// all-zero ids W3C calls invalid.
    pub fn from_traceparent(text: &str) -> Option<Self> {
        let mut parts = text.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes().all(|b| b.is_ascii_hexdigit())
                && s.bytes().any(|b| b != b'0')
        };
        let version_ok =
            version.len() == 2 && version.bytes().all(|b| b.is_ascii_hexdigit()) && version != "ff";
        (version_ok && hex(trace, 32) && hex(span, 16) && flags.len() == 2).then(|| Self {
            trace_id: trace.to_ascii_lowercase(),
            span_id: span.to_ascii_lowercase(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_gives_its_ids_and_nothing_else_does() {
        let t = TraceContext::from_traceparent(
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
        )
        .expect("a traceparent");
        assert_eq!(t.trace_id, "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(t.span_id, "b7ad6b7169203331");
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",
        ] {
            assert_eq!(TraceContext::from_traceparent(bad), None, "{bad:?}");
        }
    }
}
