//! The `stdout` output: records as JSON lines on standard output (the journal,
//! under systemd), or one readable line each for a person at a terminal
//! (`record::text`). It has no keys of its own.

use std::io::{BufWriter, Write};

use serde::Deserialize;

use super::SinkError;
use super::output::{OpenContext, Output, OutputError, OutputKind};
use crate::config::spool::SpoolConfig;
use crate::record::Record;

/// `type = "stdout"`.
pub struct Stdout;

pub use super::output::StdoutFormat;

/// No keys besides `type` and `name`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdoutSection {}

impl OutputKind for Stdout {
    const TYPE: &'static str = "stdout";
    type Section = StdoutSection;
    type Settings = ();

    fn resolve(_: StdoutSection, _: &SpoolConfig, _: &mut Vec<String>) -> Option<()> {
        Some(())
    }

    fn describe(_: &str, _: &(), _: &SpoolConfig) -> String {
        "stdout (JSON lines)".into()
    }

    fn open(
        name: &str,
        _: &(),
        context: &mut OpenContext<'_>,
    ) -> Result<Box<dyn Output>, SinkError> {
        // Only the first stdout output writes; another would double every line.
        let out = context
            .stdout
            .take()
            .unwrap_or_else(|| Box::new(std::io::sink()));
        Ok(Box::new(StdoutOutput {
            name: name.to_owned(),
            // Held up to the size the outputs write in (not std's 8 KiB) when
            // not flushed at each read: a replay hands on an event at a time,
            // and the kernel takes a file's bytes in 64 KiB writes for a
            // third of the CPU it spends on 8 KiB ones. Live, each read's
            // lines are one write.
            out: BufWriter::with_capacity(super::WRITE_EVERY_BYTES, out),
            lines: Vec::new(),
            flush_each: context.flush_each,
            format: context.stdout_format,
        }))
    }
}

struct StdoutOutput {
    name: String,
    out: BufWriter<Box<dyn Write + Send>>,
    lines: Vec<u8>,
    flush_each: bool,
    format: StdoutFormat,
}

impl Output for StdoutOutput {
    fn name(&self) -> &str {
        &self.name
    }

    fn queue(&mut self, record: &Record, _: &[u8]) -> Result<(), OutputError> {
        // JSON lines are written from the outputs' own (`flush`'s `lines`).
        if self.format == StdoutFormat::Text {
            self.lines
                .extend_from_slice(crate::record::text::line(record).as_bytes());
            self.lines.push(b'\n');
        }
        Ok(())
    }

    fn flush(&mut self, json_lines: &[u8]) -> Result<(), OutputError> {
        let fatal = |e| OutputError::Fatal(SinkError::Stdout(e));
        let lines = match self.format {
            StdoutFormat::Json => json_lines,
            StdoutFormat::Text => &self.lines,
        };
        self.out.write_all(lines).map_err(fatal)?;
        self.lines.clear();
        if self.flush_each {
            self.out.flush().map_err(fatal)?;
        }
        Ok(())
    }

    fn seal(&mut self, _: tokio::time::Instant, all: bool) -> Result<(), OutputError> {
        if all {
            self.out
                .flush()
                .map_err(|e| OutputError::Fatal(SinkError::Stdout(e)))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A stdout that notes the size of each write it is given.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<usize>>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("not poisoned").push(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The sizes of the writes stdout makes for 30 reads of a 2 KB line each.
    fn writes_of_thirty_reads(flush_each: bool) -> Vec<usize> {
        let writes = Writes::default();
        let (spool, counts) = (SpoolConfig::default(), Arc::default());
        let mut stdout: Option<Box<dyn Write + Send>> = Some(Box::new(writes.clone()));
        let mut context = OpenContext {
            spool: &spool,
            counts: &counts,
            stdout: &mut stdout,
            flush_each,
            stdout_format: StdoutFormat::Json,
            deliveries: &mut Vec::new(),
        };
        let mut output = Stdout::open("stdout", &(), &mut context).expect("opens");
        let line = [vec![b'x'; 2000], vec![b'\n']].concat();
        for _ in 0..30 {
            output.flush(&line).expect("written");
        }
        output
            .seal(tokio::time::Instant::now(), true)
            .expect("sealed");
        writes.0.lock().expect("not poisoned").clone()
    }

    #[test]
    fn live_each_reads_lines_are_one_write_and_a_replays_are_gathered() {
        assert_eq!(writes_of_thirty_reads(true), vec![2001; 30]);
        // 60,030 bytes: one write, not one per 8 KiB.
        assert_eq!(writes_of_thirty_reads(false), vec![30 * 2001]);
    }
}
