//! rpcwire's protocol without Python: JSON-RPC 2.0 as bytes.
//!
//! The strict JSON scanner and writer (`json`, with Python's `repr(float)`), the framing of a stream
//! into messages (`framing`: lines, `Content-Length` frames, a sans-I/O `Decoder`), the envelope of a
//! message (`envelope`: requests, invalid entries and why, responses as a client reads them, ids, the
//! limits), decimal to binary for the scanner's numbers (`decimal`), how deeply a text nests counted
//! on its bytes (`nesting`, a client's check of what it sends) and the stack check of the scanner's
//! recursion (`stack`). Nothing here knows about Python: the `PyO3` crate `rpcwire` binds it
//! (its `codec` builds Python objects in the scanner's pass), `cargo test` tests it, and the fuzz
//! targets (`fuzz/`) depend on it directly. The rules are spelled out in `docs/semantics.md`.

pub mod decimal;
pub mod envelope;
pub mod errors;
pub mod framing;
pub mod json;
pub mod nesting;
pub mod stack;
