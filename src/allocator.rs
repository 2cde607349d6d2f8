//! The process's allocator: the system's, with Tessera's own end when memory runs out. Rust's
//! default answer to a failed allocation is a message and an abort (a core dump, status 134);
//! here it is the usual one-line error and status 1. Buffers reserved inside
//! [`tessera_storage::memory::fallibly`] are left to their callers, which name what did not
//! fit.

use std::alloc::{GlobalAlloc, Layout, System};

pub struct Allocator;

// SAFETY: every call is passed to the system allocator unchanged; only a null result from one
// that is not fallible is acted on, by ending the process.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        checked(System.alloc(layout), layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        checked(System.alloc_zeroed(layout), layout.size())
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        checked(System.realloc(pointer, layout, new_size), new_size)
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        System.dealloc(pointer, layout)
    }
}

fn checked(pointer: *mut u8, size: usize) -> *mut u8 {
    if pointer.is_null() && !tessera_storage::memory::in_fallible_allocation() {
        out_of_memory(size);
    }
    pointer
}

/// Writes the error and leaves, allocating nothing (there is no memory to allocate).
fn out_of_memory(size: usize) -> ! {
    let mut line = [0u8; 160];
    let mut length = 0;
    for part in [
        &b"error: out of memory: an allocation of "[..],
        decimal(size, &mut [0u8; 20]),
        &b" bytes failed (the data or the query needs more memory than this process may use)\n"[..],
    ] {
        let end = (length + part.len()).min(line.len());
        line[length..end].copy_from_slice(&part[..end - length]);
        length = end;
    }
    // SAFETY: writes bytes from a live buffer to standard error, then ends the process at once
    // (no destructor runs, none could allocate).
    unsafe {
        libc::write(2, line.as_ptr().cast(), length);
        libc::_exit(1)
    }
}

/// `value` in decimal digits, written into the end of `buffer`.
fn decimal(mut value: usize, buffer: &mut [u8; 20]) -> &[u8] {
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            return &buffer[start..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::decimal;

    #[test]
    fn sizes_are_written_in_decimal() {
        assert_eq!(decimal(0, &mut [0; 20]), b"0");
        assert_eq!(decimal(12_000_000, &mut [0; 20]), b"12000000");
        assert_eq!(
            decimal(usize::MAX, &mut [0; 20]),
            usize::MAX.to_string().as_bytes()
        );
    }
}
