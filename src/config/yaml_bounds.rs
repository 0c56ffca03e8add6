//! A bound on what a YAML document expands to, checked on the parser's events
//! before the document is loaded: `yaml-rust2`'s loader copies an anchored node
//! for every alias, so a few hundred bytes of nested aliases ("billion laughs")
//! would expand to gigabytes. The master's config is read by saltsight with the
//! rights of whoever runs it; a config that big is refused with a clear error.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Nodes a document may expand to, aliases counted as often as they are used
/// (a master config has hundreds).
pub const MAX_NODES: u64 = 1_000_000;
/// Sequences and mappings nested at most.
pub const MAX_DEPTH: usize = 256;

/// Why a document is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "it expands to more than {MAX_NODES} nodes (aliases counted as often as they are used)"
    )]
    TooLarge,
    #[error("it nests sequences and mappings more than {MAX_DEPTH} deep")]
    TooDeep,
    #[error("{0}")]
    Syntax(String),
}

/// Checks `text` against [`MAX_NODES`] and [`MAX_DEPTH`] without building it.
pub fn check(text: &str) -> Result<(), Refused> {
    let mut counter = Counter::default();
    Parser::new_from_str(text)
        .load(&mut counter, true)
        .map_err(|e| Refused::Syntax(e.to_string()))?;
    counter.refused.map_or(Ok(()), Err)
}

#[derive(Default)]
struct Counter {
    /// Nodes each anchor expands to, by anchor id.
    anchors: Vec<u64>,
    /// Open sequences and mappings: (anchor id, nodes so far).
    open: Vec<(usize, u64)>,
    total: u64,
    refused: Option<Refused>,
}

impl Counter {
    fn add(&mut self, nodes: u64) {
        self.total = self.total.saturating_add(nodes);
        if let Some((_, count)) = self.open.last_mut() {
            *count = count.saturating_add(nodes);
        }
        if self.total > MAX_NODES {
            self.refused.get_or_insert(Refused::TooLarge);
        }
    }

    fn anchor(&mut self, id: usize, nodes: u64) {
        if id == 0 {
            return;
        }
        if self.anchors.len() <= id {
            self.anchors.resize(id + 1, 0);
        }
        self.anchors[id] = nodes;
    }
}

impl MarkedEventReceiver for Counter {
    fn on_event(&mut self, event: Event, _: Marker) {
        if self.refused.is_some() {
            return;
        }
        match event {
            Event::Scalar(_, _, anchor, _) => {
                self.anchor(anchor, 1);
                self.add(1);
            }
            Event::Alias(id) => {
                let nodes = self.anchors.get(id).copied().unwrap_or(1);
                self.add(nodes);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if self.open.len() >= MAX_DEPTH {
                    self.refused = Some(Refused::TooDeep);
                    return;
                }
                self.open.push((anchor, 1));
                self.total = self.total.saturating_add(1);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((anchor, nodes)) = self.open.pop() {
                    self.anchor(anchor, nodes);
                    if let Some((_, parent)) = self.open.last_mut() {
                        *parent = parent.saturating_add(nodes);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_normal_config_with_aliases_passes() {
        let text = "defaults: &d {a: 1, b: [1, 2]}\nfile_roots:\n  base: [/srv/salt]\nother: *d\n";
        assert_eq!(check(text), Ok(()));
    }

    #[test]
    fn nested_aliases_are_refused_before_they_expand() {
        // Nine levels of ten: 10^9 nodes from under 400 bytes.
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            let list = [prev.as_str(); 10].join(", ");
            text.push_str(&format!("a{i}: &a{i} [{list}]\n"));
        }
        assert!(text.len() < 700);
        let started = std::time::Instant::now();
        assert_eq!(check(&text), Err(Refused::TooLarge));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn deep_nesting_is_refused() {
        // The parser's own recursion limit may come first; either way, refused.
        let text = format!("{}{}", "[".repeat(300), "]".repeat(300));
        assert!(check(&text).is_err());
        let text = format!("{}{}", "[".repeat(257), "]".repeat(257));
        assert!(check(&text).is_err());
    }
}
