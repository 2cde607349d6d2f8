//! Progress bars on stderr for long work, through the data layer's `Progress` trait. Hidden when
//! stderr is not a terminal, so logs stay clean; a bar made with [`Bar::after`] appears only once
//! its task has taken that long, so quick work shows nothing.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use tessera_storage::progress::Progress;

pub struct Bar {
    bar: Mutex<Option<Shown>>,
    /// How long a task runs before its bar is drawn.
    delay: Duration,
}

struct Shown {
    bar: ProgressBar,
    started: Instant,
    /// Whether the bar is drawn yet.
    drawn: bool,
}

impl Bar {
    pub fn new() -> Bar {
        Bar::after(Duration::ZERO)
    }

    /// A bar drawn once its task has run for `delay`.
    pub fn after(delay: Duration) -> Bar {
        Bar {
            bar: Mutex::new(None),
            delay,
        }
    }
}

impl Progress for Bar {
    fn start(&self, label: &str, total: u64) {
        let drawn = self.delay.is_zero();
        let target = if drawn {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        let style = ProgressStyle::with_template(
            "{msg:>12} [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(label.to_string());
        if let Ok(mut slot) = self.bar.lock() {
            let shown = Shown {
                bar,
                started: Instant::now(),
                drawn,
            };
            if let Some(old) = slot.replace(shown) {
                old.bar.finish_and_clear();
            }
        }
    }

    fn advance(&self, units: u64) {
        if let Ok(mut slot) = self.bar.lock() {
            if let Some(shown) = slot.as_mut() {
                shown.bar.inc(units);
                if !shown.drawn && shown.started.elapsed() >= self.delay {
                    shown.drawn = true;
                    shown.bar.set_draw_target(ProgressDrawTarget::stderr());
                }
            }
        }
    }

    fn finish(&self) {
        if let Ok(mut slot) = self.bar.lock() {
            if let Some(shown) = slot.take() {
                shown.bar.finish_and_clear();
            }
        }
    }
}
