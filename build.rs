//! Gives this crate the interpreter cfgs that pyo3's build script gives pyo3 (`Py_3_14`, `PyPy`,
//! `GraalPy`, `Py_LIMITED_API`...) for the Python it is built for: src/codec.rs reads `CPython`'s
//! `str` layout only where pyo3 exposes it.
fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
