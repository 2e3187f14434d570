//! A progress line with items per second on stderr, only when stderr is a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// How many items pass between updates of the bar (updates are cheap, not free).
const UPDATE_EVERY: u64 = 1 << 14;

pub struct Progress {
    bar: Option<ProgressBar>,
    count: u64,
}

impl Progress {
    /// A spinner labelled `what`, or nothing when stderr is not a terminal.
    pub fn new(what: &'static str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) =
                ProgressStyle::with_template("{spinner} {msg}: {human_pos} items, {per_sec}, {elapsed}")
            {
                bar.set_style(style);
            }
            bar.set_message(what);
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self { bar, count: 0 }
    }

    /// `count` more items.
    #[inline]
    pub fn tick_by(&mut self, count: u64) {
        let before = self.count / UPDATE_EVERY;
        self.count += count;
        if self.count / UPDATE_EVERY != before
            && let Some(bar) = &self.bar
        {
            bar.set_position(self.count);
        }
    }

    /// Removes the bar.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.set_position(self.count);
            bar.finish_and_clear();
        }
    }
}
