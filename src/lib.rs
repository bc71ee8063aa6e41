//! rpcwire's native core: newline-delimited JSON-RPC 2.0 for Python.
//!
//! `lib.rs` only wires the modules together and registers the Python module `rpcwire._rpcwire`. The
//! Python-free protocol (JSON scanner, framing, envelope, float repr, limits) is the `rpcwire-protocol`
//! crate (crates/rpcwire-protocol); the modules here bind it to Python.
//! The byte-level rules both implementations follow are in `docs/semantics.md`.

mod answer;
mod bound;
#[cfg(unix)]
mod client;
mod codec;
mod current;
mod decoder;
mod dispatch;
mod errors;
mod log;
mod outgoing;
mod reply;
mod request;
mod stream;
mod stream_lock;
mod strings;
mod transport;

use pyo3::prelude::*;

// `gil_used = false`: the module is free-threading safe, so a free-threaded interpreter (3.13t and later)
// imports it without turning the GIL back on. What relied on the GIL to keep other threads away was
// audited (issue 32) and holds without it, on free-threaded builds through `cfg(Py_GIL_DISABLED)` paths
// where the GIL build's code must stay as it is:
// - the encoders (codec/plain.rs, codec/encode.rs) walk a dict inside a critical section on it, holding
//   each key and value they write (owned references), and take a list's items as owned references
//   (`PyList_GetItemRef`), its length read again each time; `Plain`'s `KeyCache`, whose addresses stand
//   for keys only while nothing is freed, is not used there; a container open is held by its parent,
//   so the circular-container checks' addresses stay unique;
// - a `str`'s cached UTF-8 form is not read as plain memory (codec/encode_str.rs, 3.13t);
// - the reused bytearray a Python stream reads into is read inside a critical section on it (stream.rs);
// - `FrameDecoder` takes a lock around each call (decoder.rs), as `StdioTransport` does around each of
//   its streams (stream_lock.rs).
// Left to the client's own work: `ClientPipe._call` (client.rs) looks at the output's lock with
// `_locked()` and then writes without holding it, which only the GIL makes one step; without it another
// thread may take the lock and write between the two (its write should take the lock without waiting,
// or give up).
#[pymodule(gil_used = false)]
fn _rpcwire(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<transport::StdioTransport>()?;
    module.add_class::<decoder::FrameDecoder>()?;
    #[cfg(unix)]
    module.add_class::<client::ClientPipe>()?;
    module.add_function(wrap_pyfunction!(bound::_bind, module)?)?;
    module.add_function(wrap_pyfunction!(request::parse_request, module)?)?;
    module.add_function(wrap_pyfunction!(current::_current_call, module)?)?;
    module.add_function(wrap_pyfunction!(current::_current_context, module)?)?;
    module.add_function(wrap_pyfunction!(current::_set_current_context, module)?)?;
    module.add_function(wrap_pyfunction!(dispatch::dispatch, module)?)?;
    module.add_function(wrap_pyfunction!(request::read_text_object, module)?)?;
    module.add_function(wrap_pyfunction!(outgoing::_encode_request, module)?)?;
    module.add_function(wrap_pyfunction!(outgoing::_encode_frame, module)?)?;
    module.add_function(wrap_pyfunction!(outgoing::_nests_deeper, module)?)?;
    module.add_function(wrap_pyfunction!(reply::_parse_incoming, module)?)?;
    Ok(())
}
