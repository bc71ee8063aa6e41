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

// `gil_used = true`: PyO3 0.30 declares a module free-threading safe unless told otherwise, so on a
// free-threaded interpreter (3.13t and later) this makes the import turn the GIL back on (with
// Python's RuntimeWarning) instead of running this code without it. Several unsafe blocks rely on the
// GIL to keep other threads away, and stay so until they are audited for free-threading:
// `PyDict_Next` over a dict that another thread could change, with the borrowed keys and values it
// lends (codec/plain.rs), the bytearray a read fills through `as_bytes_mut` (stream.rs), and the
// interpreter internals read in codec/ and json/.
#[pymodule(gil_used = true)]
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
