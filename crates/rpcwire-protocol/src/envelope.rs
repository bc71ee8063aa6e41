//! The JSON-RPC 2.0 envelope: which messages are requests, which are invalid and why, and the
//! ids answers echo (the answers themselves are built in `answer`).
//!
//! A line is checked in one pass of the strict scanner: the `jsonrpc`, `method` and `id` members
//! are borrowed from the input and the `id` is echoed from its raw text. `params` is read by the
//! caller's reader in the same pass (`codec` builds its Python objects there, so its text is
//! scanned once); `parse_message` keeps its raw text, with no Python involved. Duplicate member
//! names: the last one wins, as in `json.loads`.
//! The rules are spelled out in `docs/semantics.md`.

use crate::errors::SyntaxError;
use crate::json::{write_escaped_str, JsonStr, Scanner};

/// The longest message accepted (see `rpcwire.DEFAULT_MAX_MESSAGE_BYTES`): a line of `serve`, a body
/// of `dispatch`.
pub const DEFAULT_MAX_MESSAGE_BYTES: i64 = 64 * 1024 * 1024;

/// The nesting limit of incoming JSON (see `rpcwire.DEFAULT_MAX_DEPTH`).
pub const DEFAULT_MAX_DEPTH: u16 = 128;

/// The deepest `max_depth` accepted: `rpcwire.pure` decodes with `json`, which recurses on the
/// interpreter's stack, so both stay well inside the default recursion limit of 1,000.
pub const MAX_MAX_DEPTH: usize = 512;

/// The most entries a batch may have (see `rpcwire.DEFAULT_MAX_BATCH`): geth's limit. It bounds
/// what the transport's own answers add to a batch: each entry is answered in at most ~80 bytes
/// plus its echoed id (`1,` in, a -32600 of 76 bytes out), so at most ~80 KB beyond the input.
pub const DEFAULT_MAX_BATCH: u16 = 1_000;

/// The most entries a server's batch is given room for before it is read (then it grows as it must).
const BATCH_ROOM: usize = 128;

/// What one message may hold (the `StdioTransport` keyword arguments of the same names).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_depth: usize,
    /// `None`: batches of any length.
    pub max_batch: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_depth: usize::from(DEFAULT_MAX_DEPTH), max_batch: Some(usize::from(DEFAULT_MAX_BATCH)) }
    }
}

/// A valid request id, as written in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Id<'a> {
    Null,
    /// Any JSON number (the specification allows fractions too), as its literal text.
    Number(&'a str),
    String(JsonStr<'a>),
    /// An id already encoded as an answer writes it (a `Request`'s `id_json`), written as is.
    Json(&'a [u8]),
}

impl Id<'_> {
    /// Append the id as the answer carries it: a number exactly as it was written (the
    /// specification: the same value; `1e3`, `1.50` and `-0` keep their text), a string in the
    /// canonical form `json.dumps` of the decoded string gives.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Id::Null => out.extend_from_slice(b"null"),
            Id::Number(text) => extend_short(out, text.as_bytes()),
            Id::String(text) if !text.escaped => {
                // Without escapes the raw text holds no quote, backslash or control character,
                // so it is already what the encoder would write.
                out.push(b'"');
                out.extend_from_slice(text.raw.as_bytes());
                out.push(b'"');
            }
            Id::String(text) => write_escaped_str(out, &text.decode().0),
            Id::Json(json) => out.extend_from_slice(json),
        }
    }
}

/// Append `bytes`, most often a few (a number id): up to 16 of them in two overlapping pieces of the
/// same width, without the call to `memcpy` that `extend_from_slice` makes of a length not known
/// before.
#[inline]
fn extend_short(out: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len();
    if n > 16 {
        out.extend_from_slice(bytes);
        return;
    }
    out.reserve(n);
    let len = out.len();
    // SAFETY: `n` bytes of room were reserved after `len`; each piece read lies inside `bytes` and each
    // written inside that room (the two of a width overlap when `n` is less than twice it), and together
    // they cover all `n`, which are then counted.
    unsafe {
        let src = bytes.as_ptr();
        let dst = out.as_mut_ptr().add(len);
        if n >= 8 {
            dst.cast::<u64>().write_unaligned(src.cast::<u64>().read_unaligned());
            dst.add(n - 8).cast::<u64>().write_unaligned(src.add(n - 8).cast::<u64>().read_unaligned());
        } else if n >= 4 {
            dst.cast::<u32>().write_unaligned(src.cast::<u32>().read_unaligned());
            dst.add(n - 4).cast::<u32>().write_unaligned(src.add(n - 4).cast::<u32>().read_unaligned());
        } else if n >= 2 {
            dst.cast::<u16>().write_unaligned(src.cast::<u16>().read_unaligned());
            dst.add(n - 2).cast::<u16>().write_unaligned(src.add(n - 2).cast::<u16>().read_unaligned());
        } else if n == 1 {
            *dst = *src;
        }
        out.set_len(len + n);
    }
}

/// A valid request or notification; `P` is what the params reader made of `params`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call<'a, P = &'a str> {
    pub method: JsonStr<'a>,
    /// `params` (an array or an object), if present: its raw JSON text by default.
    pub params: Option<P>,
    /// `None` for a notification (no `id` member).
    pub id: Option<Id<'a>>,
}

/// What a response carries: its `result`, or its `error` object (as read, not yet checked), or why
/// it is no valid response (its id is still the one it names: that call gets an error, not silence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<P> {
    Result(P),
    Error(P),
    Invalid(&'static str),
}

/// One message (or one entry of a batch) as a server reads it, after the envelope check: a call, or
/// why it is none. (A message without `method` is invalid to a server, whatever else it holds: a
/// server reads no responses, so this type has no place for one; a client's is [`ClientEntry`].)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry<'a, P = &'a str> {
    Call(Call<'a, P>),
    /// Answered with -32600; `id` is the request's id when that was valid, else `null`.
    Invalid {
        id: Option<Id<'a>>,
        reason: &'static str,
    },
}

/// One message (or one entry of a batch) as a client reads it ([`parse_incoming_with`]): the server's own
/// calls and the invalid entries as a server reads them, and responses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEntry<'a, P = &'a str> {
    Call(Call<'a, P>),
    /// A message without `method` but with `result` or `error`, and a valid id.
    Response {
        id: Id<'a>,
        outcome: Outcome<P>,
    },
    /// Neither a call nor a response (for the client to log and drop); `id` as in [`Entry::Invalid`].
    Invalid {
        id: Option<Id<'a>>,
        reason: &'static str,
    },
}

impl<'a, P> From<Entry<'a, P>> for ClientEntry<'a, P> {
    fn from(entry: Entry<'a, P>) -> Self {
        match entry {
            Entry::Call(call) => ClientEntry::Call(call),
            Entry::Invalid { id, reason } => ClientEntry::Invalid { id, reason },
        }
    }
}

/// A whole line as a server reads it: one message or a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a, P = &'a str> {
    Single(Entry<'a, P>),
    Batch(Vec<Entry<'a, P>>),
    /// A batch with more entries than `max_batch`: reading stopped where the entry past the limit
    /// begins, so neither its entries nor the rest of the line were read.
    BatchOverLimit,
}

/// A whole line as a client reads it: one message or a batch (of any length: a client reads whatever
/// batch answers its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMessage<'a, P = &'a str> {
    Single(ClientEntry<'a, P>),
    Batch(Vec<ClientEntry<'a, P>>),
}

/// The envelope of one line (a [`Message`] or a [`ClientMessage`]), and the digits of its longest
/// integer literal.
#[derive(Debug)]
pub struct Parsed<M> {
    pub message: M,
    pub longest_integer: usize,
}

/// A member that must have one type: absent, present with that type, or present with another.
enum Member<T> {
    Absent,
    Valid(T),
    Wrong,
}

/// Check the envelope of one line (a single message or a batch), keeping `params` as raw text.
pub fn parse_message(text: &str, limits: Limits) -> Result<Parsed<Message<'_>>, SyntaxError> {
    parse_message_with(text, limits, |scanner| {
        let start = scanner.value_start();
        scanner.value()?;
        Ok(scanner.span_from(start))
    })
}

/// Check the envelope of one line as a server reads it; `read_params` reads each `params` that is an
/// array or an object (the scanner is at its first byte, and must be after its last when it returns).
///
/// Reading params here rather than from their text afterwards scans them once instead of twice.
pub fn parse_message_with<'a, P, E: From<SyntaxError>>(
    text: &'a str,
    limits: Limits,
    mut read_params: impl FnMut(&mut Scanner<'a>) -> Result<P, E>,
) -> Result<Parsed<Message<'a, P>>, E> {
    let mut scanner = Scanner::new(text, limits.max_depth);
    let message = if scanner.peek() == Some(b'[') {
        // Room for as many entries as the line could hold at 32 bytes each, up to `BATCH_ROOM`: a usual
        // batch is gathered without growing (and copying) its entries again and again.
        let mut entries = Vec::with_capacity((text.len() / 32 + 1).min(BATCH_ROOM));
        if scanner.open(b'[')? {
            loop {
                if limits.max_batch.is_some_and(|max_batch| entries.len() == max_batch) {
                    // Stop before the entry past the limit: an over-long batch costs no more
                    // memory or time than `max_batch` entries do, however long the line.
                    return Ok(Parsed { message: Message::BatchOverLimit, longest_integer: scanner.longest_integer });
                }
                entries.push(parse_entry(&mut scanner, &mut read_params)?);
                if !scanner.more(b']')? {
                    break;
                }
            }
        }
        Message::Batch(entries)
    } else {
        Message::Single(parse_entry(&mut scanner, &mut read_params)?)
    };
    scanner.finish()?;
    Ok(Parsed { message, longest_integer: scanner.longest_integer })
}

/// Check the envelope of one line as a client reads it, nested at most `max_depth` deep: requests and
/// notifications (the server's own calls) as `parse_message_with` checks them, and responses; a batch of
/// any length. `read_value` reads `params`, a `result` (any value) and an `error` that is an object.
pub fn parse_incoming_with<'a, P, E: From<SyntaxError>>(
    text: &'a str,
    max_depth: usize,
    mut read_value: impl FnMut(&mut Scanner<'a>) -> Result<P, E>,
) -> Result<Parsed<ClientMessage<'a, P>>, E> {
    let mut scanner = Scanner::new(text, max_depth);
    let message = if scanner.peek() == Some(b'[') {
        let mut entries = Vec::new();
        if scanner.open(b'[')? {
            loop {
                entries.push(parse_entry(&mut scanner, &mut read_value)?);
                if !scanner.more(b']')? {
                    break;
                }
            }
        }
        ClientMessage::Batch(entries)
    } else {
        ClientMessage::Single(parse_entry(&mut scanner, &mut read_value)?)
    };
    scanner.finish()?;
    Ok(Parsed { message, longest_integer: scanner.longest_integer })
}

/// What a reader makes of an entry: a server's [`Entry`] or a client's [`ClientEntry`]. The role is the
/// type, so a server's entries have no place for a response rather than a branch that must not be taken.
trait Role<'a, P>: Sized {
    /// Whether `result` and `error` are read: a client's reader reads them, a server's skips them.
    const READS_RESPONSES: bool;

    fn call(call: Call<'a, P>) -> Self;

    fn invalid(id: Option<Id<'a>>, reason: &'static str) -> Self;

    /// A message with a valid or absent `id`, no `method`, and a `result` or an `error` (only read when
    /// [`Self::READS_RESPONSES`]).
    fn response(version_ok: bool, id: Option<Id<'a>>, result: Member<P>, error: Member<P>) -> Self;
}

impl<'a, P> Role<'a, P> for Entry<'a, P> {
    const READS_RESPONSES: bool = false;

    fn call(call: Call<'a, P>) -> Self {
        Entry::Call(call)
    }

    fn invalid(id: Option<Id<'a>>, reason: &'static str) -> Self {
        Entry::Invalid { id, reason }
    }

    /// (Never asked, as a server reads neither member; were it, this is the server's answer to a message
    /// without `method`, as the reasons' order in `parse_entry` gives it.)
    fn response(version_ok: bool, id: Option<Id<'a>>, _: Member<P>, _: Member<P>) -> Self {
        let reason = if version_ok { "method is not a string" } else { "jsonrpc is not \"2.0\"" };
        Entry::Invalid { id, reason }
    }
}

impl<'a, P> Role<'a, P> for ClientEntry<'a, P> {
    const READS_RESPONSES: bool = true;

    fn call(call: Call<'a, P>) -> Self {
        ClientEntry::Call(call)
    }

    fn invalid(id: Option<Id<'a>>, reason: &'static str) -> Self {
        ClientEntry::Invalid { id, reason }
    }

    fn response(version_ok: bool, id: Option<Id<'a>>, result: Member<P>, error: Member<P>) -> Self {
        let Some(id) = id else { return ClientEntry::Invalid { id: None, reason: "a response without an id" } };
        let outcome = match (version_ok, result, error) {
            (true, Member::Valid(result), Member::Absent) => Outcome::Result(result),
            (true, Member::Absent, Member::Valid(error)) => Outcome::Error(error),
            (false, ..) => Outcome::Invalid("jsonrpc is not \"2.0\""),
            (true, Member::Valid(_), Member::Valid(_)) => Outcome::Invalid("a response with both result and error"),
            (true, ..) => Outcome::Invalid("error is not an object"),
        };
        ClientEntry::Response { id, outcome }
    }
}

fn parse_entry<'a, P, E: From<SyntaxError>, R: Role<'a, P>>(
    scanner: &mut Scanner<'a>,
    read_params: &mut impl FnMut(&mut Scanner<'a>) -> Result<P, E>,
) -> Result<R, E> {
    if scanner.peek() != Some(b'{') {
        scanner.value()?;
        return Ok(R::invalid(None, "not an object"));
    }
    let mut version_ok = false;
    let mut method = Member::Absent;
    let mut params = Member::Absent;
    let mut id = Member::Absent;
    let mut result = Member::Absent;
    let mut error = Member::Absent;
    if scanner.open(b'{')? {
        loop {
            // A name as nearly every peer writes it is told here, inline; `member_name` reads any other.
            let name = match known_name(scanner) {
                Some(name) => name,
                None => member_name(scanner)?,
            };
            scanner.skip_whitespace();
            let peek = scanner.rest().first().copied();
            // Each branch reads the whole value or none of it: `consumed` says which.
            let consumed = match name {
                Name::Jsonrpc => {
                    let (ok, consumed) = if scanner.eat(br#""2.0""#) {
                        (true, true)
                    } else if peek == Some(b'"') {
                        (scanner.string()?.decodes_to("2.0"), true)
                    } else {
                        (false, false)
                    };
                    version_ok = ok;
                    consumed
                }
                Name::Method if peek == Some(b'"') => {
                    method = Member::Valid(scanner.string()?);
                    true
                }
                Name::Method => {
                    method = Member::Wrong;
                    false
                }
                Name::Params if matches!(peek, Some(b'[' | b'{')) => {
                    params = Member::Valid(read_params(scanner)?);
                    true
                }
                Name::Params => {
                    params = Member::Wrong;
                    false
                }
                Name::Id => {
                    let (value, consumed) = match peek {
                        Some(b'"') => (Member::Valid(Id::String(scanner.string()?)), true),
                        Some(b'n') => (Member::Valid(Id::Null), false),
                        Some(b'-' | b'0'..=b'9') => (Member::Valid(Id::Number(scanner.number()?.0)), true),
                        _ => (Member::Wrong, false),
                    };
                    id = value;
                    consumed
                }
                Name::Result if R::READS_RESPONSES => {
                    result = Member::Valid(read_params(scanner)?);
                    true
                }
                Name::Error if R::READS_RESPONSES && peek == Some(b'{') => {
                    error = Member::Valid(read_params(scanner)?);
                    true
                }
                Name::Error if R::READS_RESPONSES => {
                    error = Member::Wrong;
                    false
                }
                Name::Result | Name::Error | Name::Other => false,
            };
            // What the branch did not read (a `null` id, a value of the wrong type, an unknown member's)
            // is checked here.
            if !consumed {
                scanner.value()?;
            }
            if !scanner.more(b'}')? {
                break;
            }
        }
    }
    let id = match id {
        Member::Absent => None,
        Member::Valid(id) => Some(id),
        Member::Wrong => return Ok(R::invalid(None, "id is not a string, a number or null")),
    };
    if matches!(method, Member::Absent) && !(matches!(result, Member::Absent) && matches!(error, Member::Absent)) {
        return Ok(R::response(version_ok, id, result, error));
    }
    // The reasons are checked in the same order as `rpcwire.pure` checks them.
    let reason = match (version_ok, method, params) {
        (true, Member::Valid(method), Member::Absent) => return Ok(R::call(Call { method, params: None, id })),
        (true, Member::Valid(method), Member::Valid(params)) => {
            return Ok(R::call(Call { method, params: Some(params), id }))
        }
        (false, _, _) => "jsonrpc is not \"2.0\"",
        (true, Member::Absent | Member::Wrong, _) => "method is not a string",
        (true, Member::Valid(_), Member::Wrong) => "params is not an array or an object",
    };
    Ok(R::invalid(id, reason))
}

/// The members of a message that mean something to the envelope.
#[derive(Clone, Copy)]
enum Name {
    Jsonrpc,
    Method,
    Params,
    Id,
    Result,
    Error,
    Other,
}

/// The names as nearly every peer writes them, with the `:` right after: recognised by their bytes.
const KNOWN_NAMES: [(&[u8], Name); 6] = [
    (br#""jsonrpc":"#, Name::Jsonrpc),
    (br#""method":"#, Name::Method),
    (br#""params":"#, Name::Params),
    (br#""id":"#, Name::Id),
    (br#""result":"#, Name::Result),
    (br#""error":"#, Name::Error),
];

/// A member's name written as in [`KNOWN_NAMES`] right where the cursor is (no whitespace before it),
/// matched byte for byte and consumed with its `:`; `None` (nothing consumed) for any other.
///
/// Inline in the member loop (no call, no whitespace skipped first): it is the path of nearly every
/// member of nearly every message.
#[allow(clippy::inline_always)] // each arm's literal must arrive as a constant for its comparison to be inlined
#[inline(always)]
fn known_name(scanner: &mut Scanner<'_>) -> Option<Name> {
    let rest = scanner.rest();
    if rest.first() != Some(&b'"') {
        return None;
    }
    // The first letter tells which of them it can be: one comparison, of a constant length
    // (each arm its own, so that it is inlined rather than a call to `memcmp`).
    match rest.get(1) {
        Some(b'j') => eat_known(scanner, 0),
        Some(b'm') => eat_known(scanner, 1),
        Some(b'p') => eat_known(scanner, 2),
        Some(b'i') => eat_known(scanner, 3),
        Some(b'r') => eat_known(scanner, 4),
        Some(b'e') => eat_known(scanner, 5),
        _ => None,
    }
}

/// Read a member's name and the `:` after it, when [`known_name`] did not: a name after whitespace is
/// matched as there; any other (escaped, spaced before its `:`, unknown) is read and compared decoded.
#[cold]
fn member_name(scanner: &mut Scanner<'_>) -> Result<Name, SyntaxError> {
    scanner.skip_whitespace();
    if let Some(name) = known_name(scanner) {
        return Ok(name);
    }
    let key = scanner.key()?;
    let known = KNOWN_NAMES.iter().find(|(literal, _)| key.decodes_to(literal_name(literal)));
    Ok(known.map_or(Name::Other, |&(_, name)| name))
}

/// The name `KNOWN_NAMES[index]` if the text goes on with it (consumed then).
#[allow(clippy::inline_always)] // the index must arrive as a constant for the comparison to be inlined
#[inline(always)]
fn eat_known(scanner: &mut Scanner<'_>, index: usize) -> Option<Name> {
    let (literal, name) = KNOWN_NAMES[index];
    scanner.eat(literal).then_some(name)
}

/// `"jsonrpc":` -> `jsonrpc`.
fn literal_name(literal: &[u8]) -> &str {
    std::str::from_utf8(&literal[1..literal.len() - 2]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{
        parse_incoming_with, parse_message, Call, ClientEntry, ClientMessage, Entry, Id, Limits, Message, Outcome,
    };
    use crate::errors::SyntaxError;
    use crate::json::JsonStr;

    fn depth(max_depth: usize) -> Limits {
        Limits { max_depth, ..Limits::default() }
    }

    fn single(text: &str) -> Entry<'_> {
        match parse_message(text, Limits::default()).expect("valid JSON").message {
            Message::Single(entry) => entry,
            other => panic!("not a single message: {other:?}"),
        }
    }

    fn plain(raw: &str) -> JsonStr<'_> {
        JsonStr { raw, escaped: false }
    }

    fn answer_id(text: &str) -> String {
        let id = match single(text) {
            Entry::Call(call) => call.id,
            Entry::Invalid { id, .. } => id,
        };
        let mut out = Vec::new();
        id.unwrap_or(Id::Null).write_json(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_request_borrows_its_members() {
        let entry = single(r#"{"jsonrpc":"2.0","method":"add","params":[1, 2],"id":7,"extra":{"x":[]}}"#);
        let expected = Call { method: plain("add"), params: Some("[1, 2]"), id: Some(Id::Number("7")) };
        assert_eq!(entry, Entry::Call(expected));
    }

    #[test]
    fn names_are_known_however_they_are_written() {
        let expected = Entry::Call(Call { method: plain("n"), params: Some("[1]"), id: Some(Id::Number("2")) });
        for text in [
            r#"{"jsonrpc":"2.0","method":"n","params":[1],"id":2}"#,
            r#"{ "jsonrpc" : "2.0" , "method" :"n", "params": [1] ,"id" : 2 }"#,
            r#"{"\u006asonrpc":"2.0","meth\u006fd":"n","par\u0061ms":[1],"i\u0064":2}"#,
            r#"{"methodx":"m","method":"n","paramsx":5,"params":[1],"idx":[],"id":2,"jsonrpcx":1,"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":[1],"id":2,"result":1,"error":2,"":0,"j":1}"#,
        ] {
            assert_eq!(single(text), expected, "{text}");
        }
        for (text, reason) in [
            (r#"{"jsonrpc":"2.00","method":"n"}"#, "jsonrpc is not \"2.0\""),
            (r#"{"jsonrpc":"2.0 ","method":"n"}"#, "jsonrpc is not \"2.0\""),
            (r#"{"jsonrpc":"2.0","jsonrpc":"2","method":"n"}"#, "jsonrpc is not \"2.0\""),
            (r#"{"jsonrpc":"\u0032.0","method":1}"#, "method is not a string"),
        ] {
            assert_eq!(single(text), Entry::Invalid { id: None, reason }, "{text}");
        }
    }

    #[test]
    fn a_notification_has_no_id() {
        let entry = single(r#"{"method":"ping","jsonrpc":"2.0"}"#);
        assert_eq!(entry, Entry::Call(Call { method: plain("ping"), params: None, id: None }));
    }

    #[test]
    fn invalid_envelopes_keep_a_valid_id() {
        for (text, id) in [
            (r#"{"jsonrpc":"2.0","method":1,"id":3}"#, Some(Id::Number("3"))),
            (r#"{"jsonrpc":"2.0","method":"m","params":null,"id":"a"}"#, Some(Id::String(plain("a")))),
            (r#"{"jsonrpc":"2.0","method":"m","params":"x"}"#, None),
            (r#"{"jsonrpc":"1.0","method":"m","id":null}"#, Some(Id::Null)),
            (r#"{"jsonrpc":2.0,"method":"m","id":1}"#, Some(Id::Number("1"))),
            (r#"{"method":"m","id":1.5e3}"#, Some(Id::Number("1.5e3"))),
            (r#"{"jsonrpc":"2.0","method":"m","id":true}"#, None),
            (r#"{"jsonrpc":"2.0","method":"m","id":{}}"#, None),
            (r#"{"jsonrpc":"2.0","method":"m","id":[1]}"#, None),
            ("[]", None),
            ("5", None),
        ] {
            let expected =
                if text == "[]" { Message::Batch(vec![]) } else { Message::Single(Entry::Invalid { id, reason: "" }) };
            let mut message = parse_message(text, Limits::default()).unwrap().message;
            if let Message::Single(Entry::Invalid { reason, .. }) = &mut message {
                assert!(!reason.is_empty());
                *reason = "";
            }
            assert_eq!(message, expected, "{text}");
        }
    }

    #[test]
    fn escaped_member_names_and_values_count_decoded() {
        let entry = single(r#"{"jsonr\u0070c":"2\u002e0","\u006dethod":"a\/b","id":"\u00e9"}"#);
        let Entry::Call(call) = entry else { panic!("expected a call") };
        assert!(call.method.decodes_to("a/b"));
        assert_eq!(answer_id(r#"{"jsonr\u0070c":"2\u002e0","\u006dethod":"a\/b","id":"\u00e9"}"#), "\"é\"");
    }

    #[test]
    fn the_last_duplicate_member_wins() {
        assert_eq!(answer_id(r#"{"jsonrpc":"2.0","method":"m","id":1,"id":2}"#), "2");
        let entry = single(r#"{"jsonrpc":"2.0","method":5,"method":"m","params":1,"params":{}}"#);
        assert_eq!(entry, Entry::Call(Call { method: plain("m"), params: Some("{}"), id: None }));
        assert!(matches!(single(r#"{"jsonrpc":"2.0","jsonrpc":"1","method":"m"}"#), Entry::Invalid { .. }));
    }

    #[test]
    fn extend_short_appends_every_length() {
        let text: Vec<u8> = (0..40u8).map(|i| b'0' + i % 10).collect();
        for n in 0..=text.len() {
            let mut out = b"ab".to_vec();
            super::extend_short(&mut out, &text[..n]);
            assert_eq!(&out[..2], b"ab");
            assert_eq!(&out[2..], &text[..n], "{n}");
        }
    }

    #[test]
    fn numbers_are_echoed_as_written_and_strings_canonically() {
        let big = r#"{"jsonrpc":"2.0","method":"m","id":1267650600228229401496703205376}"#;
        assert_eq!(answer_id(big), "1267650600228229401496703205376");
        for number in ["-0", "1.5", "1e3", "1E+03", "-0.0", "1.50", "1e400"] {
            assert_eq!(answer_id(&format!(r#"{{"jsonrpc":"2.0","method":"m","id":{number}}}"#)), number);
        }
        assert_eq!(answer_id(r#"{"jsonrpc":"2.0","method":"m","id":"tab\there\ud800"}"#), r#""tab\there\ud800""#);
    }

    #[test]
    fn a_batch_checks_each_entry_and_the_whole_line_is_json() {
        let parsed = parse_message(
            r#"[{"jsonrpc":"2.0","method":"a","id":1}, 1, {"jsonrpc":"2.0","method":"b"}]"#,
            Limits::default(),
        );
        let Message::Batch(entries) = parsed.unwrap().message else { panic!("expected a batch") };
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[1], Entry::Invalid { id: None, reason: "not an object" });
        assert!(parse_message(r#"[{"jsonrpc":"2.0","method":"a","id":1}, {"#, Limits::default()).is_err());
        assert!(parse_message(r#"{"jsonrpc":"2.0","method":"a"} x"#, Limits::default()).is_err());
    }

    #[test]
    fn a_batch_over_the_limit_is_not_read_past_it() {
        let limits = Limits { max_batch: Some(2), ..Limits::default() };
        let Message::Batch(entries) = parse_message("[1, 2]", limits).unwrap().message else { panic!("a batch") };
        assert_eq!(entries.len(), 2);
        // The third entry is never read: what follows it does not matter.
        assert_eq!(parse_message("[1, 2, 3]", limits).unwrap().message, Message::BatchOverLimit);
        assert_eq!(parse_message("[1, 2, {not json", limits).unwrap().message, Message::BatchOverLimit);
        assert!(parse_message("[1, {not json", limits).is_err());
        let unlimited = Limits { max_batch: None, ..Limits::default() };
        let long = format!("[{}1]", "1,".repeat(5_000));
        let Message::Batch(entries) = parse_message(&long, unlimited).unwrap().message else { panic!("a batch") };
        assert_eq!(entries.len(), 5_001);
    }

    #[test]
    fn depth_counts_the_envelope_and_the_batch() {
        let params = |depth: usize| "[".repeat(depth) + &"]".repeat(depth);
        let line = |depth: usize| format!(r#"{{"jsonrpc":"2.0","method":"m","params":{}}}"#, params(depth));
        assert!(parse_message(&line(127), depth(128)).is_ok());
        assert!(parse_message(&line(128), depth(128)).is_err());
        assert!(parse_message(&format!("[{}]", line(126)), depth(128)).is_ok());
        assert!(parse_message(&format!("[{}]", line(127)), depth(128)).is_err());
    }

    fn read_raw<'a>(scanner: &mut crate::json::Scanner<'a>) -> Result<&'a str, SyntaxError> {
        let start = scanner.value_start();
        scanner.value()?;
        Ok(scanner.span_from(start))
    }

    fn incoming(text: &str) -> ClientEntry<'_> {
        match parse_incoming_with(text, 128, read_raw).expect("valid JSON").message {
            ClientMessage::Single(entry) => entry,
            other @ ClientMessage::Batch(_) => panic!("not a single message: {other:?}"),
        }
    }

    #[test]
    fn a_client_reads_responses_and_the_servers_own_calls() {
        let result = incoming(r#"{"jsonrpc":"2.0","result":{"a":[1]},"id":1e3}"#);
        assert_eq!(result, ClientEntry::Response { id: Id::Number("1e3"), outcome: Outcome::Result(r#"{"a":[1]}"#) });
        let error = incoming(r#"{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}"#);
        let expected = Outcome::Error(r#"{"code":-1,"message":"m"}"#);
        assert_eq!(error, ClientEntry::Response { id: Id::String(plain("x")), outcome: expected });
        let call = incoming(r#"{"jsonrpc":"2.0","method":"m","id":2,"result":1}"#);
        assert_eq!(call, ClientEntry::Call(Call { method: plain("m"), params: None, id: Some(Id::Number("2")) }));
        for (text, reason) in [
            (r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#, "a response with both result and error"),
            (r#"{"jsonrpc":"2.0","id":1,"error":5}"#, "error is not an object"),
            (r#"{"result":5,"id":1}"#, "jsonrpc is not \"2.0\""),
        ] {
            let expected = ClientEntry::Response { id: Id::Number("1"), outcome: Outcome::Invalid(reason) };
            assert_eq!(incoming(text), expected, "{text}");
        }
        let no_id = ClientEntry::Invalid { id: None, reason: "a response without an id" };
        assert_eq!(incoming(r#"{"jsonrpc":"2.0","result":5}"#), no_id);
        let not_a_call = ClientEntry::Invalid { id: Some(Id::Number("1")), reason: "method is not a string" };
        assert_eq!(incoming(r#"{"jsonrpc":"2.0","id":1}"#), not_a_call);
        // To a server, a response is an invalid request (its id echoed).
        assert!(matches!(single(r#"{"jsonrpc":"2.0","id":1,"result":1}"#), Entry::Invalid { id: Some(_), .. }));
    }

    #[test]
    fn a_client_reads_a_batch_of_any_length_and_its_depth_limit() {
        let long = format!("[{}1]", r#"{"jsonrpc":"2.0","id":1,"result":1},"#.repeat(5_000));
        let ClientMessage::Batch(entries) = parse_incoming_with(&long, 128, read_raw).unwrap().message else {
            panic!("a batch")
        };
        assert_eq!(entries.len(), 5_001);
        assert_eq!(entries[5_000], ClientEntry::Invalid { id: None, reason: "not an object" });
        let nested = r#"{"jsonrpc":"2.0","id":1,"result":[[1]]}"#;
        assert!(parse_incoming_with(nested, 3, read_raw).is_ok());
        assert!(parse_incoming_with(nested, 2, read_raw).is_err());
    }
}
