//! Which allocations may fail: a large buffer reserved with `try_reserve` inside [`fallibly`]
//! is its caller's to report, with what did not fit (a query's buffer, a column being read);
//! every other failed allocation ends the process with a one-line error, where Rust's default
//! is to abort (the binary's allocator asks [`in_fallible_allocation`] which one failed).

use std::cell::Cell;

thread_local! {
    // Constant-initialized and without a destructor: reading it never allocates, which the
    // allocator relies on.
    static FALLIBLE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `reserve`, whose failed allocations its caller reports (through `try_reserve`).
pub fn fallibly<T>(reserve: impl FnOnce() -> T) -> T {
    let before = FALLIBLE.with(|f| f.replace(true));
    let result = reserve();
    FALLIBLE.with(|f| f.set(before));
    result
}

/// Whether the allocation under way on this thread is one whose failure is reported by its
/// caller.
pub fn in_fallible_allocation() -> bool {
    FALLIBLE.try_with(Cell::get).unwrap_or(false)
}
