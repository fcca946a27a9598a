//! Redis's glob matcher (`stringmatchlen`): `*`, `?`, `[...]` with ranges and `^`
//! negation, `\` escapes; byte-wise, optionally case-insensitive.

/// Whether `text` matches `pattern`.
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let mut budget = 1_000_000usize;
    match_from(pattern, text, nocase, 0, &mut budget)
}

fn fold(byte: u8, nocase: bool) -> u8 {
    if nocase {
        byte.to_ascii_lowercase()
    } else {
        byte
    }
}

/// Recursion depth and total work are bounded so a hostile pattern cannot stall
/// the server (Redis bounds nesting the same way).
fn match_from(pattern: &[u8], text: &[u8], nocase: bool, depth: usize, budget: &mut usize) -> bool {
    if depth > 1000 {
        return false;
    }
    let (mut p, mut t) = (0, 0);
    while p < pattern.len() {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        match pattern[p] {
            b'*' => {
                while p + 1 < pattern.len() && pattern[p + 1] == b'*' {
                    p += 1;
                }
                if p + 1 == pattern.len() {
                    return true;
                }
                for start in t..=text.len() {
                    if match_from(&pattern[p + 1..], &text[start..], nocase, depth + 1, budget) {
                        return true;
                    }
                    if *budget == 0 {
                        return false;
                    }
                }
                return false;
            }
            b'?' => {
                if t >= text.len() {
                    return false;
                }
                t += 1;
            }
            b'[' => {
                if t >= text.len() {
                    return false;
                }
                p += 1;
                let negate = pattern.get(p) == Some(&b'^');
                if negate {
                    p += 1;
                }
                let mut matched = false;
                loop {
                    if p >= pattern.len() {
                        // Unterminated class: Redis treats the end as closing it.
                        p -= 1;
                        break;
                    }
                    if pattern[p] == b']' {
                        break;
                    }
                    if pattern[p] == b'\\' && p + 1 < pattern.len() {
                        p += 1;
                        if pattern[p] == text[t] {
                            matched = true;
                        }
                    } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' {
                        let (mut start, mut end) =
                            (fold(pattern[p], nocase), fold(pattern[p + 2], nocase));
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let current = fold(text[t], nocase);
                        if current >= start && current <= end {
                            matched = true;
                        }
                        p += 2;
                    } else if fold(pattern[p], nocase) == fold(text[t], nocase) {
                        matched = true;
                    }
                    p += 1;
                }
                if negate {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                t += 1;
            }
            b'\\' if p + 1 < pattern.len() => {
                p += 1;
                if t >= text.len() || fold(pattern[p], nocase) != fold(text[t], nocase) {
                    return false;
                }
                t += 1;
            }
            literal => {
                if t >= text.len() || fold(literal, nocase) != fold(text[t], nocase) {
                    return false;
                }
                t += 1;
            }
        }
        p += 1;
    }
    t == text.len()
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn redis_patterns() {
        let yes =
            |pattern: &str, text: &str| glob_match(pattern.as_bytes(), text.as_bytes(), false);
        assert!(yes("h?llo", "hello"));
        assert!(yes("h*llo", "heeeello"));
        assert!(yes("h[ae]llo", "hallo"));
        assert!(!yes("h[^e]llo", "hello"));
        assert!(yes("h[a-b]llo", "hbllo"));
        assert!(yes("*", ""));
        assert!(yes("user:*:name", "user:42:name"));
        assert!(!yes("user:*:name", "user:42:mail"));
        assert!(yes("a\\*b", "a*b"));
        assert!(!yes("a\\*b", "axb"));
        assert!(glob_match(b"HELLO", b"hello", true));
        // A pathological pattern ends quickly.
        let pattern = "a*".repeat(40) + "b";
        assert!(!yes(&pattern, &"a".repeat(60)));
    }
}
