//! rpcwire's native core: newline-delimited JSON-RPC 2.0 for Python.
//!
//! `lib.rs` only wires the modules together and registers the Python module `rpcwire._rpcwire`.
//! The byte-level rules both implementations follow are in `docs/semantics.md`.

mod answer;
mod codec;
mod current;
mod dispatch;
mod envelope;
mod errors;
mod framing;
mod json;
mod log;
mod reply;
mod request;
mod stack;
mod stream_lock;
mod strings;
mod transport;

use pyo3::prelude::*;

#[pymodule]
fn _rpcwire(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<transport::StdioTransport>()?;
    module.add_function(wrap_pyfunction!(request::parse_request, module)?)?;
    module.add_function(wrap_pyfunction!(current::_current_call, module)?)?;
    module.add_function(wrap_pyfunction!(current::_current_context, module)?)?;
    module.add_function(wrap_pyfunction!(current::_set_current_context, module)?)?;
    module.add_function(wrap_pyfunction!(dispatch::dispatch, module)?)?;
    module.add_function(wrap_pyfunction!(reply::_encode_request, module)?)?;
    module.add_function(wrap_pyfunction!(reply::_parse_incoming, module)?)?;
    Ok(())
}
