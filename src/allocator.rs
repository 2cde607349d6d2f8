//! The process's allocator: the system's, with Tessera's own end when memory runs out. Rust's
//! default answer to a failed allocation is a message and an abort (a core dump, status 134);
//! here it is the usual one-line error and status 1. Buffers reserved inside
//! [`tessera_storage::memory::fallibly`] are left to their callers, which name what did not
//! fit. LLVM, the code generator, is C++ and allocates outside Rust: its failures end the
//! process the same way ([`catch_code_generator_failures`]) instead of aborting.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{c_char, c_void};

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

// The C++ runtime's and LLVM's hooks for failures (C++ functions with C-compatible arguments,
// linked with LLVM): `std::set_new_handler` (called when `operator new` finds no memory; it
// would otherwise throw `std::bad_alloc`, which Rust cannot catch and aborts on),
// `llvm::install_bad_alloc_error_handler` (LLVM's own allocations) and
// `LLVMInstallFatalErrorHandler` (an error LLVM cannot recover from).
extern "C" {
    #[link_name = "_ZSt15set_new_handlerPFvvE"]
    fn set_new_handler(handler: Option<extern "C" fn()>) -> Option<extern "C" fn()>;
    #[link_name = "_ZN4llvm31install_bad_alloc_error_handlerEPFvPvPKcbES0_"]
    fn install_bad_alloc_error_handler(
        handler: extern "C" fn(*mut c_void, *const c_char, bool),
        data: *mut c_void,
    );
    fn LLVMInstallFatalErrorHandler(handler: extern "C" fn(*const c_char));
}

/// Makes the code generator's failures end the process with a one-line error: out of memory
/// (status 1), or an internal error of LLVM's (status 70), where it would abort.
pub fn catch_code_generator_failures() {
    // SAFETY: installs handlers that never return (they end the process) and allocate nothing.
    unsafe {
        set_new_handler(Some(code_generator_out_of_memory));
        install_bad_alloc_error_handler(llvm_out_of_memory, std::ptr::null_mut());
        LLVMInstallFatalErrorHandler(llvm_fatal_error);
    }
}

extern "C" fn code_generator_out_of_memory() {
    exit_with(
        &[b"error: out of memory: the code generator (LLVM) could not allocate memory (the query needs more memory than this process may use)\n"],
        1,
    )
}

extern "C" fn llvm_out_of_memory(_: *mut c_void, _: *const c_char, _: bool) {
    code_generator_out_of_memory()
}

extern "C" fn llvm_fatal_error(reason: *const c_char) {
    // SAFETY: LLVM passes a NUL-terminated message (or none).
    let reason = match reason.is_null() {
        true => &b"(no reason given)"[..],
        false => unsafe { std::ffi::CStr::from_ptr(reason) }.to_bytes(),
    };
    exit_with(
        &[
            b"error: internal error in the code generator (LLVM): ",
            reason,
            b"\n",
        ],
        70,
    )
}

/// Writes `parts` to standard error and ends the process with `status` at once (no destructor
/// runs; none could allocate, and LLVM's state may be broken).
fn exit_with(parts: &[&[u8]], status: i32) -> ! {
    // SAFETY: writes bytes from live buffers to standard error, then ends the process.
    unsafe {
        for part in parts {
            libc::write(2, part.as_ptr().cast(), part.len());
        }
        libc::_exit(status)
    }
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
    exit_with(&[&line[..length]], 1)
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
