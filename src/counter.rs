//! Counts a stage keeps where it lives, each declared once with its metric name
//! and help: [`counts!`] makes the struct (atomic fields, so the scrape reads
//! them from another task without a copy) and its [`Counts`] description, which
//! `metrics` encodes at scrape. Adding a count is one line in the stage's block.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

/// One count, updated by its stage and read at scrape.
#[derive(Debug, Default)]
pub struct Count(AtomicU64);

impl Count {
    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// For a gauge: the value now.
    pub fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// For a float gauge: the value now (kept as its bits).
    pub fn set_f64(&self, value: f64) {
        self.set(value.to_bits());
    }

    pub fn get_f64(&self) -> f64 {
        f64::from_bits(self.get())
    }
}

/// How a count is exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (`_total` in the exposition).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Goes up and down, not a whole number: `value` holds an `f64`'s bits.
    FloatGauge,
    /// A gauge kept in microseconds, exposed in seconds (Prometheus' base unit).
    Seconds,
}

/// A count as the scrape sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Described {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub value: u64,
}

/// A set of counts that describes itself.
pub trait Counts: Send + Sync + Debug {
    /// Each exposed count, in declaration order.
    fn each(&self, f: &mut dyn FnMut(Described));
}

/// Declares a stage's counts:
///
/// ```
/// saltsight::counts! {
///     /// The example stage's counts.
///     pub struct ExampleCounts {
///         /// Exposed as a counter.
///         counter widgets = "saltsight_widgets", "Widgets made";
///         /// Exposed as a gauge.
///         gauge queued = "saltsight_widgets_queued", "Widgets waiting";
///         /// Set in microseconds, exposed as a gauge in seconds.
///         seconds took = "saltsight_widget_duration_seconds", "How long the last took";
///         /// Exposed as a gauge of an `f64` (`set_f64`).
///         float ratio = "saltsight_widgets_ratio", "Widgets per gadget";
///         /// Kept for the stage itself and tests, not exposed.
///         internal attempts;
///     }
/// }
/// let counts = ExampleCounts::default();
/// counts.widgets.inc();
/// let mut names = Vec::new();
/// saltsight::counter::Counts::each(&counts, &mut |d| names.push((d.name, d.value)));
/// assert_eq!(
///     names[..3],
///     [
///         ("saltsight_widgets", 1),
///         ("saltsight_widgets_queued", 0),
///         ("saltsight_widget_duration_seconds", 0),
///     ]
/// );
/// ```
#[macro_export]
macro_rules! counts {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $kind:ident $field:ident $(= $metric:literal, $help:literal)?; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        $vis struct $name {
            $( $(#[$fmeta])* pub $field: $crate::counter::Count, )*
        }

        impl $crate::counter::Counts for $name {
            fn each(&self, f: &mut dyn FnMut($crate::counter::Described)) {
                $( $crate::counts!(@each self, f, $kind $field $(= $metric, $help)?); )*
            }
        }
    };
    (@each $self:ident, $f:ident, counter $field:ident = $metric:literal, $help:literal) => {
        $f($crate::counter::Described {
            name: $metric,
            help: $help,
            kind: $crate::counter::Kind::Counter,
            value: $self.$field.get(),
        })
    };
    (@each $self:ident, $f:ident, gauge $field:ident = $metric:literal, $help:literal) => {
        $f($crate::counter::Described {
            name: $metric,
            help: $help,
            kind: $crate::counter::Kind::Gauge,
            value: $self.$field.get(),
        })
    };
    (@each $self:ident, $f:ident, float $field:ident = $metric:literal, $help:literal) => {
        $f($crate::counter::Described {
            name: $metric,
            help: $help,
            kind: $crate::counter::Kind::FloatGauge,
            value: $self.$field.get(),
        })
    };
    (@each $self:ident, $f:ident, seconds $field:ident = $metric:literal, $help:literal) => {
        $f($crate::counter::Described {
            name: $metric,
            help: $help,
            kind: $crate::counter::Kind::Seconds,
            value: $self.$field.get(),
        })
    };
    (@each $self:ident, $f:ident, internal $field:ident) => {};
}
