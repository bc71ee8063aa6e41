//! The `KeyCache`: the JSON text of `str` keys `Plain` wrote before in one pass, found by the key's
//! address (a list of dicts repeats its keys), one per thread, emptied between passes by a pass number.

/// Slots of the `KeyCache`, and the longest text (quotes included) one holds.
const KEY_SLOTS: usize = 256;
const KEY_TEXT: usize = 32;

/// The JSON text of `str` keys written before in one `Plain` pass, found by the key's address.
///
/// The members of a list of dicts share their keys (the same `str` objects, interned or made once):
/// a key met again is copied from here instead of being checked and escaped again. An address
/// stands for one `str` for the whole pass, since nothing is freed while `Plain` runs; a slot
/// written in an earlier pass is told apart by the pass number kept in its tag's top 16 bits
/// (above any user-space address), and every slot is emptied when that number wraps around.
///
/// One per thread, so that a pass neither makes nor moves it: passes never nest on a thread, since
/// no Python code (which could encode again) runs during one.
///
/// Free-threaded builds do not use it: there another thread may free a key once written, and a new
/// key be made at its address within the pass (`Plain::str_key`).
#[cfg_attr(any(PyPy, GraalPy, Py_LIMITED_API), allow(dead_code))] // there `Plain` always stops
pub(super) struct KeyCache {
    /// The key's address, with the pass number in the top 16 bits; 0 for an empty slot.
    tags: [usize; KEY_SLOTS],
    lengths: [u8; KEY_SLOTS],
    /// Written up to the slot's length; the rest is never read as text (only copied with it).
    texts: [std::mem::MaybeUninit<[u8; KEY_TEXT]>; KEY_SLOTS],
    /// The number of the pass running (or last run), in the top 16 bits.
    pass: usize,
}

#[cfg_attr(any(PyPy, GraalPy, Py_LIMITED_API), allow(dead_code))] // there `Plain` always stops
const PASS_SHIFT: usize = 48;

thread_local! {
    static KEY_CACHE: std::cell::UnsafeCell<KeyCache> = const {
        std::cell::UnsafeCell::new(KeyCache {
            tags: [0; KEY_SLOTS],
            lengths: [0; KEY_SLOTS],
            texts: [std::mem::MaybeUninit::uninit(); KEY_SLOTS],
            pass: 0,
        })
    };
}

// The hot path of every key and value is written inline on purpose: measured with callgrind
// (bench/README.md), a call per key or value is what this encoder saves.
#[cfg_attr(any(PyPy, GraalPy, Py_LIMITED_API), allow(dead_code))] // there `Plain` always stops
#[allow(clippy::inline_always)]
impl KeyCache {
    /// This thread's cache, for a new pass. The pointer is valid for as long as the thread lives;
    /// the caller uses it for one pass alone.
    pub(super) fn for_new_pass() -> *mut KeyCache {
        KEY_CACHE.with(|cache| {
            let cache = cache.get();
            // SAFETY: this thread's own cache, and no other pass runs on this thread (see above).
            unsafe {
                (*cache).pass = (*cache).pass.wrapping_add(1 << PASS_SHIFT);
                if (*cache).pass == 0 {
                    (*cache).pass = 1 << PASS_SHIFT;
                    (*cache).tags = [0; KEY_SLOTS];
                }
            }
            cache
        })
    }

    /// The slot of the key at `address`, and its tag in this pass. The address is mixed (Fibonacci
    /// hashing) before its top bits pick the slot: keys made one after another sit at nearby
    /// addresses, which the low bits alone would send to the same few slots.
    #[inline(always)]
    pub(super) fn slot(&self, address: usize) -> (usize, usize) {
        const SLOT_BITS: u32 = KEY_SLOTS.trailing_zeros();
        let mixed = (address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // The top `SLOT_BITS` bits: below `KEY_SLOTS`.
        #[allow(clippy::cast_possible_truncation)]
        let slot = (mixed >> (64 - SLOT_BITS)) as usize;
        (slot, address | self.pass)
    }

    /// Append the text of the key at `address` if it is here.
    #[inline(always)]
    pub(super) fn write(&self, out: &mut Vec<u8>, address: usize) -> bool {
        let (slot, tag) = self.slot(address);
        if self.tags[slot] != tag {
            return false;
        }
        let length = usize::from(self.lengths[slot]);
        out.reserve(KEY_TEXT);
        // SAFETY: `reserve` made room for `KEY_TEXT` bytes past the length; the whole slot is
        // copied (a fixed size, no call), and only its first `length` bytes, which `keep` wrote in
        // this pass, become part of `out`.
        unsafe {
            let end = out.len();
            std::ptr::copy_nonoverlapping(self.texts[slot].as_ptr().cast::<u8>(), out.as_mut_ptr().add(end), KEY_TEXT);
            out.set_len(end + length);
        }
        true
    }

    /// Keep `text`, the text just written for the key at `address`, if it is short enough.
    #[inline]
    pub(super) fn keep(&mut self, address: usize, text: &[u8]) {
        if text.len() > KEY_TEXT || address >> PASS_SHIFT != 0 {
            return;
        }
        let (slot, tag) = self.slot(address);
        self.tags[slot] = tag;
        // `text.len()` is at most `KEY_TEXT`.
        #[allow(clippy::cast_possible_truncation)]
        let length = text.len() as u8;
        self.lengths[slot] = length;
        // SAFETY: `text` holds at most `KEY_TEXT` bytes, the size of the slot.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), self.texts[slot].as_mut_ptr().cast::<u8>(), text.len());
        }
    }
}
