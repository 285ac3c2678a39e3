//! Tensor-name patterns for `--include` / `--exclude`: `*` matches any run of characters (dots
//! included), `?` matches one character, everything else matches itself. A pattern without `*`
//! or `?` is a literal tensor name.

/// A tensor-name pattern: `*` matches any run of characters (dots included), `?` exactly one;
/// anything else matches itself.
///
/// ```
/// use macko::checkpoint::Pattern;
///
/// let p = Pattern::new("encoder.layer.*.attention.self.*.weight");
/// assert!(p.matches("encoder.layer.3.attention.self.query.weight"));
/// assert!(!p.matches("encoder.layer.3.attention.self.query.bias"));
/// assert!(Pattern::new("pooler.dense.weight").is_literal());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
}

impl Pattern {
    /// A pattern from its text.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into() }
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the pattern has no wildcard, i.e. names one tensor exactly.
    pub fn is_literal(&self) -> bool {
        !self.text.contains(['*', '?'])
    }

    /// Whether `name` matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        let p: Vec<char> = self.text.chars().collect();
        let s: Vec<char> = name.chars().collect();
        // Greedy scan; on a mismatch after a `*`, let that star absorb one more character.
        let (mut pi, mut si) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while si < s.len() {
            match p.get(pi) {
                Some('*') => {
                    star = Some((pi, si));
                    pi += 1;
                }
                Some(&c) if c == '?' || c == s[si] => {
                    pi += 1;
                    si += 1;
                }
                _ => match star {
                    Some((sp, ss)) => {
                        pi = sp + 1;
                        si = ss + 1;
                        star = Some((sp, ss + 1));
                    }
                    None => return false,
                },
            }
        }
        p[pi..].iter().all(|&c| c == '*')
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    #[test]
    fn literals_match_only_themselves() {
        let p = Pattern::new("a.b");
        assert!(p.is_literal());
        assert!(p.matches("a.b"));
        assert!(!p.matches("a.bc"));
        assert!(!p.matches("xa.b"));
        assert!(!p.matches("a"));
    }

    #[test]
    fn stars_and_question_marks() {
        assert!(Pattern::new("*").matches(""));
        assert!(Pattern::new("*").matches("anything.at.all"));
        assert!(Pattern::new("*.weight").matches("x.y.weight"));
        assert!(!Pattern::new("*.weight").matches("x.y.weight.bias"));
        assert!(Pattern::new("a*b*c").matches("aXXbYYbc"));
        assert!(!Pattern::new("a*b*c").matches("aXXbYYb"));
        assert!(Pattern::new("layer.?.w").matches("layer.7.w"));
        assert!(!Pattern::new("layer.?.w").matches("layer.17.w"));
        assert!(Pattern::new("**x").matches("x"));
        assert!(Pattern::new("é*").matches("éa"));
        assert!(!Pattern::new("*?").is_literal());
    }
}
