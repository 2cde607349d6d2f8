//! Progress reporting for long data work (generation, loading), without tying the data layer
//! to a terminal: the command line implements `Progress` with a progress bar.

/// Receives progress of one long task. Implementations must tolerate calls from many threads.
pub trait Progress: Send + Sync {
    /// A new task with `total` units of work (rows, bytes: the task says which in `label`).
    fn start(&self, label: &str, total: u64);
    /// `units` more units are done.
    fn advance(&self, units: u64);
    /// The task is done.
    fn finish(&self);
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _label: &str, _total: u64) {}
    fn advance(&self, _units: u64) {}
    fn finish(&self) {}
}
