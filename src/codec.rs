//! JSON ⇄ Python, each in one pass with no intermediate tree, one concern a file:
//!
//! | module | owns |
//! | --- | --- |
//! | `decode` | JSON text into Python objects: the `Decoder`, its `ItemStack`, numbers |
//! | `decode_str` | JSON strings into `str` objects, at their final width |
//! | `encode` | Python objects into JSON: the entry point, the full `Encoder` (`json`'s checks, errors, guards) |
//! | `plain` | the fast encoder of plain values, which runs no Python code |
//! | `key_cache` | the per-thread cache of the keys `plain` wrote in a pass |
//! | `encode_str` | a `str` written as a JSON string from its own storage |
//!
//! Decoding walks text that the envelope check already validated and builds Python objects as it
//! goes (as `json.loads` would build them: `int` of any size, `float`, `str` possibly holding lone
//! surrogates, `list`, `dict` where the last duplicate key wins).
//!
//! Encoding writes the exact bytes of `json.dumps(value, ensure_ascii=False, separators=(",", ":"),
//! allow_nan=False)`: the same type checks in the same order, the same key coercions, the same
//! error types and messages, the same guard against circular containers and deep recursion. Both
//! implementations therefore write identical bytes and fail identically.

mod decode;
mod decode_str;
mod encode;
mod encode_str;
mod key_cache;
mod plain;

pub(crate) use decode::{decode, decode_value, exceeds_int_digit_limit, float_from_json, int_from_json};
pub(crate) use decode_str::decode_str;
pub(crate) use encode::encode;
pub(crate) use encode_str::encode_str;
