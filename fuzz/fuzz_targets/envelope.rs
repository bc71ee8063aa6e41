//! `envelope::parse_message` (and the strict scanner under it) on any text, against serde_json.
//!
//! - It never panics, whatever the text and the depth limit.
//! - It accepts exactly the RFC 8259 JSON texts (serde_json's `IgnoredAny`, a grammar check that
//!   lets lone surrogates and numbers of any size through) nested at most `max_depth` deep.
//! - Where it accepts and serde_json can build a `Value` (no lone surrogate), the envelope is what
//!   the rules of docs/semantics.md give for that value: the same calls and invalid entries, the
//!   same reasons, the same method, params and id (duplicate members: the last wins), and the id is
//!   written back as the answer carries it: a number as written (serde_json's `arbitrary_precision`
//!   keeps its text), a string in canonical form (what `json.dumps` writes; serde_json writes the same).
//! - A batch is read up to `max_batch` entries and no further.
//! - Where it accepts, the digits of the longest integer literal it reports (what Python's digit limit, 4,300
//!   digits by default, is checked against) are those of the longest in the whole text: a member no one
//!   reads, a batch entry, an id, params.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use serde_json::Value;

use rpcwire_protocol::envelope::{self, Entry, Id, Message};

/// How deeply arrays and objects nest in a valid JSON text.
fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth -= 1,
            _ => {}
        }
    }
    deepest
}

/// The digits of the longest integer literal (no fraction, no exponent; the sign not counted) outside the
/// strings of a valid JSON text.
fn longest_integer(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut longest, mut at, mut in_string, mut escaped) = (0, 0, false, false);
    while at < bytes.len() {
        let byte = bytes[at];
        at += 1;
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'-' | b'0'..=b'9' => {
                let start = at - 1;
                while bytes.get(at).is_some_and(|byte| matches!(byte, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')) {
                    at += 1;
                }
                let number = &bytes[start..at];
                if !number.iter().any(|byte| matches!(byte, b'.' | b'e' | b'E')) {
                    longest = longest.max(number.iter().filter(|byte| byte.is_ascii_digit()).count());
                }
            }
            _ => {}
        }
    }
    longest
}

/// What docs/semantics.md says one message (or batch entry) is.
#[derive(Debug, PartialEq)]
enum Expected {
    Call { method: Vec<u8>, params: Option<Value>, id: Option<Vec<u8>> },
    Invalid { id: Option<Vec<u8>>, reason: &'static str },
}

/// The id as the answer must carry it: a number as written, a string as `json.dumps` writes it.
fn answer_id(id: &Value) -> Vec<u8> {
    match id {
        Value::Number(number) => number.to_string().into_bytes(),
        other => serde_json::to_vec(other).expect("an id encodes"),
    }
}

fn oracle(message: &Value) -> Expected {
    let Value::Object(members) = message else {
        return Expected::Invalid { id: None, reason: "not an object" };
    };
    let id = match members.get("id") {
        None => None,
        Some(id @ (Value::Null | Value::String(_) | Value::Number(_))) => Some(answer_id(id)),
        Some(_) => return Expected::Invalid { id: None, reason: "id is not a string, a number or null" },
    };
    if members.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Expected::Invalid { id, reason: "jsonrpc is not \"2.0\"" };
    }
    let Some(Value::String(method)) = members.get("method") else {
        return Expected::Invalid { id, reason: "method is not a string" };
    };
    let params = match members.get("params") {
        None => None,
        Some(params @ (Value::Array(_) | Value::Object(_))) => Some(params.clone()),
        Some(_) => return Expected::Invalid { id, reason: "params is not an array or an object" },
    };
    Expected::Call { method: method.as_bytes().to_vec(), params, id }
}

fn written(id: Option<&Id<'_>>) -> Option<Vec<u8>> {
    id.map(|id| {
        let mut out = Vec::new();
        id.write_json(&mut out);
        // A number is echoed exactly as written (unit-tested in the protocol crate's envelope.rs). The oracle's
        // number is serde_json's own text of the same value (`51e400` is `51e+400` to it), so ours goes through
        // it too.
        if let (Id::Number(_), Ok(Value::Number(number))) = (id, serde_json::from_slice::<Value>(&out)) {
            return number.to_string().into_bytes();
        }
        out
    })
}

fn seen(entry: &Entry<'_>) -> Expected {
    match entry {
        Entry::Call(call) => Expected::Call {
            method: call.method.decode().0.into_owned(),
            params: call.params.map(|raw| serde_json::from_str(raw).expect("params are one JSON value")),
            id: written(call.id.as_ref()),
        },
        Entry::Invalid { id, reason } => Expected::Invalid { id: written(id.as_ref()), reason },
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&limit, text)) = data.split_first() else { return };
    let max_depth = if limit & 0x80 == 0 { usize::from(limit & 0x1F) + 1 } else { 128 };
    // Bits 5-6: no batch limit, or a limit of 1, 2 or 3 entries.
    let max_batch = match (limit >> 5) & 0x3 {
        0 => None,
        small => Some(usize::from(small)),
    };
    let text = String::from_utf8_lossy(text);
    let parsed = envelope::parse_message(&text, envelope::Limits { max_depth, max_batch });

    let grammar = serde_json::from_str::<IgnoredAny>(&text);
    if let Err(error) = &grammar {
        if error.to_string().starts_with("recursion limit exceeded") {
            return; // deeper than serde_json goes: only "no panic" is checked
        }
    }
    if let Ok(envelope::Parsed { message: Message::BatchOverLimit, .. }) = &parsed {
        // Read up to the entry past the limit only: the entries before it were valid JSON.
        assert!(text.trim_start().starts_with('['), "{text:?}");
        let values = serde_json::from_str::<Vec<IgnoredAny>>(&text);
        assert!(values.is_err() || values.is_ok_and(|values| values.len() > max_batch.unwrap()), "{text:?}");
        return;
    }
    let expect_ok = grammar.is_ok() && nesting_depth(&text) <= max_depth;
    assert_eq!(parsed.is_ok(), expect_ok, "{text:?} (max_depth {max_depth}): {parsed:?} vs {grammar:?}");
    if let Ok(parsed) = &parsed {
        assert_eq!(parsed.longest_integer, longest_integer(&text), "{text:?}: the longest integer");
    }
    let (Ok(parsed), Ok(value)) = (parsed, serde_json::from_str::<Value>(&text)) else { return };
    match (&value, &parsed.message) {
        (Value::Array(values), Message::Batch(entries)) => {
            assert_eq!(values.len(), entries.len(), "{text:?}");
            assert!(max_batch.is_none_or(|max_batch| entries.len() <= max_batch), "{text:?}");
            for (value, entry) in values.iter().zip(entries) {
                assert_eq!(seen(entry), oracle(value), "{text:?}");
            }
        }
        (Value::Array(_), _) | (_, Message::Batch(_) | Message::BatchOverLimit) => {
            panic!("{text:?}: batch or not? {:?}", parsed.message)
        }
        (value, Message::Single(entry)) => assert_eq!(seen(entry), oracle(value), "{text:?}"),
    }
});
