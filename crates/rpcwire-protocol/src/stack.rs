//! How much of the current thread's stack is left, for the two recursive walks (the scanner's and
//! the codec's) to stop before they overflow it.
//!
//! A fixed depth cap cannot be right for every thread: a worker thread started after
//! `threading.stack_size(256 * 1024)` has a thirty-second of the main thread's usual 8 MiB. So each
//! walk asks, for each container it enters past the first [`UNCHECKED_LEVELS`], whether the stack
//! pointer is still above this thread's [`StackFloor`]: the lowest address of the stack plus
//! [`RESERVE`]. The floor is looked up once per thread (`pthread_getattr_np` reads
//! `/proc/self/maps` on the main thread) and cached; a walk reads it once, and each check is then
//! one comparison.
//!
//! Where the stack's bounds cannot be learnt (a platform other than Linux, Android and macOS, or a
//! failing call) the floor is 0 and only the fixed caps hold: `max_depth` (at most 512) when
//! decoding, 2,000 levels when encoding.
//!
//! No Python here: the scanner (`json::scan`) and the binding's codec both check it.

use std::cell::Cell;

/// Stack left untouched below the last container entered: room for one more level of the deepest
/// walk, the Python code the encoder may call there (a list subclass's `__iter__`, a dict
/// subclass's `items()`) and building the error.
///
/// Measured on x86-64, Python 3.11, release build, from the depth reached in 256 and 512 KiB
/// threads: a level takes 640 bytes when encoding a list, 800 a list subclass, 840 a dict or a
/// dict subclass, and 368 when decoding a line. A dict subclass whose `items()` logs and sorts
/// with a Python key function crashed a 256 KiB thread with a 4 KiB reserve and not with 16 KiB;
/// 64 KiB is four times that, and leaves a 256 KiB thread room for about 300 levels of lists,
/// 230 of dicts and all 512 levels of decoding.
pub const RESERVE: usize = 64 * 1024;

/// Levels entered before the stack is first looked at: the usual message nests less than this,
/// so it never pays for the lookup (a thread-local read) nor the checks. They take at most 7 KiB
/// (8 levels of 840 bytes), which any thread that could call us has. With them, and the check out
/// of line (`above_floor`), the stack checks cost nothing measurable (bench/README.md).
pub const UNCHECKED_LEVELS: usize = 8;

/// Where a walk over nested containers must stop on this thread's stack: the lowest address it
/// may reach, looked up when the walk first goes deeper than [`UNCHECKED_LEVELS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackFloor(usize);

/// `StackFloor` not looked up yet.
const NOT_LOOKED_UP: usize = usize::MAX;

thread_local! {
    /// This thread's floor, once learnt (0 when it cannot be); `NOT_LOOKED_UP` until then.
    static FLOOR: Cell<usize> = const { Cell::new(NOT_LOOKED_UP) };
}

impl Default for StackFloor {
    fn default() -> Self {
        Self::new()
    }
}

impl StackFloor {
    /// A floor looked up only when needed.
    pub const fn new() -> Self {
        Self(NOT_LOOKED_UP)
    }

    /// Whether a walk that has entered `depth` containers may enter one more from the caller's
    /// frame: always below [`UNCHECKED_LEVELS`], else only while the frame is above the floor.
    #[inline]
    pub fn has_room(&mut self, depth: usize) -> bool {
        depth < UNCHECKED_LEVELS || self.above_floor()
    }

    /// Out of line, so that the shallow check above stays small enough to inline into the walks.
    #[inline(never)]
    fn above_floor(&mut self) -> bool {
        if self.0 == NOT_LOOKED_UP {
            self.0 = floor_of_this_thread();
        }
        let marker = 0u8;
        // The address of a local is (within a few bytes) the stack pointer; stacks grow down on
        // every platform Python runs on.
        std::hint::black_box(&raw const marker).addr() > self.0
    }
}

/// The calling thread's floor: the bottom of its stack plus [`RESERVE`], 0 when unknown.
fn floor_of_this_thread() -> usize {
    FLOOR.with(|floor| {
        if floor.get() == NOT_LOOKED_UP {
            floor.set(stack_bottom().map_or(0, |bottom| bottom.saturating_add(RESERVE)));
        }
        floor.get()
    })
}

/// The lowest address of the calling thread's stack.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn stack_bottom() -> Option<usize> {
    // SAFETY: `attr` is initialised by `pthread_getattr_np` before it is read and destroyed once;
    // `pthread_attr_getstack` writes only to the two locals it is given.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &raw mut attr) != 0 {
            return None;
        }
        let mut address: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let found = libc::pthread_attr_getstack(&raw const attr, &raw mut address, &raw mut size) == 0;
        libc::pthread_attr_destroy(&raw mut attr);
        (found && !address.is_null()).then(|| address.addr())
    }
}

/// The lowest address of the calling thread's stack.
#[cfg(target_os = "macos")]
fn stack_bottom() -> Option<usize> {
    // SAFETY: both functions only read the calling thread's own descriptor.
    unsafe {
        let thread = libc::pthread_self();
        let top = libc::pthread_get_stackaddr_np(thread).addr();
        top.checked_sub(libc::pthread_get_stacksize_np(thread))
    }
}

/// Unknown here: only the fixed depth caps hold.
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos")))]
fn stack_bottom() -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::{floor_of_this_thread, StackFloor, RESERVE, UNCHECKED_LEVELS};

    fn depth_reached(floor: &mut StackFloor, depth: usize) -> usize {
        if floor.has_room(depth) {
            depth_reached(floor, std::hint::black_box(depth + 1))
        } else {
            depth
        }
    }

    #[test]
    fn a_small_thread_stops_before_its_stack_ends() {
        for size in [256 * 1024, 512 * 1024] {
            let reached = std::thread::Builder::new()
                .stack_size(size)
                .spawn(|| depth_reached(&mut StackFloor::new(), 0))
                .unwrap()
                .join()
                .unwrap();
            assert!(reached > UNCHECKED_LEVELS, "{size}: {reached}");
        }
    }

    #[test]
    fn the_floor_is_below_the_stack_pointer_and_cached() {
        let floor = floor_of_this_thread();
        assert!(floor >= RESERVE);
        assert_eq!(floor, floor_of_this_thread());
        assert!(StackFloor::new().has_room(UNCHECKED_LEVELS));
    }
}
