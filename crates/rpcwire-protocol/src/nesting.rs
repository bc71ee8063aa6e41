//! How deeply a JSON text nests, counted on its bytes without decoding it: what a client checks its
//! messages against before it sends them (a server with its `max_depth` would refuse them).
//!
//! The count is `rpcwire.pure.codec.nests_deeper`'s, byte for byte, on any input (JSON or not), so
//! that both cores refuse the same messages: a backslash escapes the byte after it only when that is
//! a quote or another backslash (in a string or not), a quote that is not escaped opens or closes a
//! string, `[`/`{` open and `]`/`}` close a level outside strings. The answer for a text whose
//! brackets do not balance follows the pure twin's steps (a few rounds that each take away the
//! innermost `[]` pairs, then a run of opening brackets or one pass), which is why they are spelt
//! out below rather than folded into a single depth count.

/// How many rounds of taking away the innermost level run before the last test: the pure twin's.
const ROUNDS: i64 = 4;

/// Whether arrays and objects nest deeper than `max_depth` in `text` (strings' brackets not counted).
#[must_use]
pub fn nests_deeper(text: &[u8], max_depth: i64) -> bool {
    let opening = text.iter().filter(|&&byte| byte == b'[' || byte == b'{').count();
    // Each level needs an opening bracket of its own: a text with no more of them is shallow enough.
    if i64::try_from(opening).is_ok_and(|opening| opening <= max_depth) {
        return false;
    }
    let mut brackets = structure(text);
    let mut max_depth = max_depth;
    for _ in 0..max_depth.clamp(0, ROUNDS) {
        if brackets.is_empty() {
            return false;
        }
        take_innermost(&mut brackets);
        max_depth -= 1;
    }
    if brackets.is_empty() {
        return false;
    }
    let Ok(limit) = usize::try_from(max_depth) else {
        return true; // no level allowed at all, and one is there
    };
    if longest_opening_run(&brackets) > limit {
        return true;
    }
    let mut depth: i64 = 0;
    let mut deepest = i64::MIN;
    for &bracket in &brackets {
        depth += if bracket == b'[' { 1 } else { -1 };
        deepest = deepest.max(depth);
    }
    deepest > max_depth
}

/// The brackets of `text` outside its strings, `{`/`}` as `[`/`]`.
fn structure(text: &[u8]) -> Vec<u8> {
    let mut brackets = Vec::new();
    let mut in_string = false;
    let mut at = 0;
    while at < text.len() {
        match text[at] {
            b'\\' => {
                let run = text[at..].iter().take_while(|&&byte| byte == b'\\').count();
                at += run;
                if run % 2 == 1 && text.get(at) == Some(&b'"') {
                    at += 1; // an escaped quote
                }
                continue;
            }
            b'"' => in_string = !in_string,
            b'[' | b'{' if !in_string => brackets.push(b'['),
            b']' | b'}' if !in_string => brackets.push(b']'),
            _ => {}
        }
        at += 1;
    }
    brackets
}

/// Take away every `[]` pair, left to right, in one pass over what was there (as `bytes.replace`).
fn take_innermost(brackets: &mut Vec<u8>) {
    let mut kept = 0;
    let mut at = 0;
    while at < brackets.len() {
        if brackets[at] == b'[' && brackets.get(at + 1) == Some(&b']') {
            at += 2;
            continue;
        }
        brackets[kept] = brackets[at];
        kept += 1;
        at += 1;
    }
    brackets.truncate(kept);
}

fn longest_opening_run(brackets: &[u8]) -> usize {
    brackets.split(|&bracket| bracket == b']').map(<[u8]>::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::nests_deeper;

    #[test]
    fn counts_levels_outside_strings() {
        assert!(!nests_deeper(br#"{"a":[1,[2]]}"#, 3));
        assert!(nests_deeper(br#"{"a":[1,[2]]}"#, 2));
        assert!(!nests_deeper(br#"{"a":"[[[[[[","b":[]}"#, 2));
        assert!(nests_deeper(br#"{"a":"\"[[[[","b":[[]]}"#, 2));
        assert!(!nests_deeper(br#"{"a":"\\","b":"[[[["}"#, 1));
    }

    #[test]
    fn deep_text_past_the_rounds() {
        let deep = [b"[".repeat(200), b"]".repeat(200)].concat();
        assert!(nests_deeper(&deep, 199));
        assert!(!nests_deeper(&deep, 200));
        let wide = b"[[]]".repeat(100);
        assert!(!nests_deeper(&wide, 2));
        assert!(nests_deeper(&wide, 1));
    }

    #[test]
    fn unbalanced_and_odd_limits() {
        assert!(nests_deeper(b"[[[", 0));
        assert!(nests_deeper(b"]]][[[", 2));
        assert!(!nests_deeper(b"", -1));
        assert!(nests_deeper(b"[", -1));
        assert!(!nests_deeper(b"\"[[[", 1)); // a string that never ends hides the rest
    }
}
