//! The lock around one of a transport's streams: only one thread reads, only one writes at a time.
//!
//! Two things a plain mutex gets wrong here:
//! - Waiting must not block signals. The holder may be blocked for seconds in a `write` to a full
//!   pipe (with the GIL released); a thread waiting for the lock waits with the GIL released too,
//!   in slices of [`WAIT_SLICE`], and runs Python's signal handlers between them, so SIGINT's
//!   `KeyboardInterrupt` stops it promptly (`threading.Lock` waits the same way).
//! - A stream that calls back into its own transport from the same thread (an output stream whose
//!   `write()` logs through a handler that writes notifications) would wait for itself forever. That
//!   is refused with `RuntimeError`, as `io.BufferedWriter` refuses a re-entrant call.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// How long a waiting thread stays away from Python's signal handlers at most.
const WAIT_SLICE: Duration = Duration::from_millis(20);

/// A number that tells the current thread from every other live thread, and is never 0: on Unix the
/// thread's `pthread_t` (the address of its descriptor, which `pthread_self` reads from a register:
/// no call into the dynamic loader, where a thread-local of this library takes one, twice a line).
#[cfg(unix)]
fn current_thread() -> usize {
    // SAFETY: `pthread_self` has no preconditions and cannot fail.
    let thread = unsafe { libc::pthread_self() };
    // `pthread_t` is an integer of a pointer's size (Linux) or a pointer (macOS): `as` takes either whole.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let thread = thread as usize;
    thread
}

/// A number that tells the current thread from every other live thread, and is never 0.
#[cfg(not(unix))]
fn current_thread() -> usize {
    thread_local!(static MARK: u8 = const { 0 });
    MARK.with(|mark| std::ptr::from_ref(mark) as usize)
}

pub(crate) struct StreamLock<T> {
    inner: Mutex<T>,
    /// `current_thread()` of the holder, 0 when free.
    owner: AtomicUsize,
    /// What the refusal of a re-entrant call says.
    reentrant_message: &'static str,
}

impl<T: Send> StreamLock<T> {
    pub(crate) fn new(value: T, reentrant_message: &'static str) -> Self {
        Self { inner: Mutex::new(value), owner: AtomicUsize::new(0), reentrant_message }
    }

    /// Take the lock; waits with the GIL released, running signal handlers every [`WAIT_SLICE`].
    ///
    /// Inline, its waiting and its refusal out of line: it is taken twice a line by the sequential loop,
    /// nearly always free.
    #[inline]
    pub(crate) fn lock(&self, py: Python<'_>) -> PyResult<StreamGuard<'_, T>> {
        let me = current_thread();
        // Only this thread ever stores its own mark, so seeing it means this thread holds the lock.
        if self.owner.load(Ordering::Relaxed) == me {
            return Err(self.reentrant());
        }
        let guard = match self.inner.try_lock() {
            Some(guard) => guard,
            None => self.wait(py)?,
        };
        self.owner.store(me, Ordering::Relaxed);
        Ok(StreamGuard { lock: self, guard })
    }

    /// Wait for the lock held by another thread, the GIL released, signal handlers run between slices.
    #[cold]
    #[inline(never)]
    fn wait(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, T>> {
        loop {
            if let Some(guard) = py.detach(|| self.inner.try_lock_for(WAIT_SLICE)) {
                return Ok(guard);
            }
            py.check_signals()?;
        }
    }

    #[cold]
    #[inline(never)]
    fn reentrant(&self) -> PyErr {
        PyRuntimeError::new_err(self.reentrant_message)
    }
}

pub(crate) struct StreamGuard<'a, T> {
    lock: &'a StreamLock<T>,
    guard: MutexGuard<'a, T>,
}

impl<T> Drop for StreamGuard<'_, T> {
    fn drop(&mut self) {
        // Before `guard` unlocks (fields drop after this body).
        self.lock.owner.store(0, Ordering::Relaxed);
    }
}

impl<T> Deref for StreamGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for StreamGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}
