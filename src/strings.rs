//! A cache of short Python strings: the object keys and method names that every message repeats.
//!
//! Requests of one service carry the same few keys (`"text"`, `"uri"`, `"arguments"`…) and method
//! names over and over. Reusing the `str` objects skips creating them, and a reused `str` keeps its
//! hash, so inserting it into a dict does not hash it again. The cache is direct-mapped (one slot
//! per hash value, the newest string wins) and belongs to one `serve` call, so it needs no lock.

use pyo3::prelude::*;
use pyo3::types::PyString;

/// Slots of the cache; distinct keys of one service are far fewer.
const SLOTS: usize = 1024;

/// Longer strings are rarely repeated keys; they are created afresh.
const MAX_CACHED_LEN: usize = 48;

/// Reused `str` objects, by content.
#[derive(Default)]
pub(crate) struct StringCache {
    /// Empty until the first lookup, so a cache that is never used costs nothing. A slot is a pointer
    /// (the entry lives in its own box once used), so that the table of a transport whose services use
    /// a few keys stays small: a pointer a slot instead of a whole entry.
    slots: Vec<Option<Box<Slot>>>,
}

struct Slot {
    /// The string's UTF-8 bytes, compared without asking Python for them (a lookup that asks Python
    /// costs more than the rest of a hit: bench/README.md).
    text: Box<str>,
    /// `words(text)`: for a text of at most 16 bytes, equal words mean equal texts, and no bytes
    /// are compared (cheaper than hashing every byte and a `memcmp` call: bench/README.md).
    words: (u64, u64, usize),
    string: Py<PyString>,
}

impl StringCache {
    /// The `str` whose UTF-8 form is `text` (which must hold no escapes: it is used as is).
    pub(crate) fn get<'py>(&mut self, py: Python<'py>, text: &str) -> Bound<'py, PyString> {
        if text.len() > MAX_CACHED_LEN {
            return PyString::new(py, text);
        }
        if self.slots.is_empty() {
            self.slots.resize_with(SLOTS, || None);
        }
        let words = words(text.as_bytes());
        let slot = &mut self.slots[slot_of(words)];
        match slot {
            Some(cached) if cached.words == words && (text.len() <= 16 || *cached.text == *text) => {
                cached.string.bind(py).clone()
            }
            _ => {
                let string = PyString::new(py, text);
                let entry = Slot { text: text.into(), words, string: string.clone().unbind() };
                match slot {
                    Some(cached) => **cached = entry,
                    None => *slot = Some(Box::new(entry)),
                }
                string
            }
        }
    }
}

/// The first and the last eight bytes of `bytes` (overlapping, or zero-padded when shorter) and its
/// length: all of a text of at most 16 bytes, read without a loop.
fn words(bytes: &[u8]) -> (u64, u64, usize) {
    let len = bytes.len();
    let read = |at: usize, width: usize| {
        let mut word = [0u8; 8];
        word[..width].copy_from_slice(&bytes[at..at + width]);
        u64::from_le_bytes(word)
    };
    match len {
        8.. => (read(0, 8), read(len - 8, 8), len),
        4..=7 => (read(0, 4), read(len - 4, 4), len),
        1..=3 => (u64::from(bytes[0]) | u64::from(bytes[len / 2]) << 8 | u64::from(bytes[len - 1]) << 16, 0, len),
        0 => (0, 0, 0),
    }
}

/// The slot of a text from its words: one multiplication mixes them, the top bits pick the slot.
fn slot_of((first, last, len): (u64, u64, usize)) -> usize {
    let mixed = (first ^ last.rotate_left(31) ^ (len as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // The truncation is the point: the top bits pick the slot.
    #[allow(clippy::cast_possible_truncation)]
    let slot = (mixed >> (64 - SLOTS.trailing_zeros())) as usize;
    slot
}

#[cfg(test)]
mod tests {
    use super::{slot_of, words, SLOTS};

    #[test]
    fn texts_up_to_16_bytes_have_words_of_their_own() {
        let mut texts: Vec<Vec<u8>> = vec![Vec::new()];
        for length in 1..=16 {
            for at in 0..length {
                for byte in [b'a', b'b', 0, 0xFF] {
                    let mut text = b"abcdefghijklmnop"[..length].to_vec();
                    text[at] = byte;
                    texts.push(text);
                }
            }
        }
        texts.sort();
        texts.dedup();
        let mut seen = std::collections::HashMap::new();
        for text in &texts {
            assert!(slot_of(words(text)) < SLOTS);
            if let Some(other) = seen.insert(words(text), text) {
                panic!("{text:?} and {other:?} share their words");
            }
        }
    }
}
