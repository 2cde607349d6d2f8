//! Progress bars on stderr for long work, through the data layer's `Progress` trait. Hidden when
//! stderr is not a terminal, so logs stay clean.

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Mutex;

use tessera_storage::progress::Progress;

pub struct Bar {
    bar: Mutex<Option<ProgressBar>>,
}

impl Bar {
    pub fn new() -> Bar {
        Bar {
            bar: Mutex::new(None),
        }
    }
}

impl Progress for Bar {
    fn start(&self, label: &str, total: u64) {
        let bar = ProgressBar::new(total);
        let style = ProgressStyle::with_template(
            "{msg:>12} [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(label.to_string());
        if let Ok(mut slot) = self.bar.lock() {
            if let Some(old) = slot.replace(bar) {
                old.finish_and_clear();
            }
        }
    }

    fn advance(&self, units: u64) {
        if let Ok(slot) = self.bar.lock() {
            if let Some(bar) = slot.as_ref() {
                bar.inc(units);
            }
        }
    }

    fn finish(&self) {
        if let Ok(mut slot) = self.bar.lock() {
            if let Some(bar) = slot.take() {
                bar.finish_and_clear();
            }
        }
    }
}
