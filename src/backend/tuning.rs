//! What the backends' tunings share (a leaf module): the parsers of `MACKO_TUNING` values, so
//! that `cuda.lean=ON` and `wgpu.x_tiles=ON` read alike, and what the cross-backend suite
//! needs to force every plan.

/// A tuning that forces one non-default plan, with a predicate on the plan that says the
/// forced plan was taken (tests/plans/ asserts it, so a forced plan that silently falls back
/// to the default fails).
#[doc(hidden)]
pub struct ForcedPlan<T, P> {
    /// Name of the case in test output.
    pub name: &'static str,
    /// The tuning that forces it.
    pub tuning: T,
    /// Whether a plan is the forced one.
    pub taken: fn(&P) -> bool,
}

/// An on/off value, any case: `on`/`1`/`true`/`yes` or `off`/`0`/`false`/`no`; `None` for
/// `auto` or empty (the rules decide).
#[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
pub(crate) fn switch(value: &str) -> Result<Option<bool>, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "auto" => Ok(None),
        "1" | "on" | "true" | "yes" => Ok(Some(true)),
        "0" | "off" | "false" | "no" => Ok(Some(false)),
        _ => Err("expected on, off or auto".into()),
    }
}

/// A whole number within `range`.
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
pub(crate) fn number(value: &str, range: std::ops::RangeInclusive<u32>) -> Result<u32, String> {
    match value.trim().parse::<u32>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number from {} to {}",
            range.start(),
            range.end()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_read_alike_in_any_case() {
        for (v, want) in [
            ("ON", Some(true)),
            ("yes", Some(true)),
            ("1", Some(true)),
            ("Off", Some(false)),
            ("no", Some(false)),
            ("auto", None),
            ("", None),
        ] {
            assert_eq!(switch(v), Ok(want), "{v}");
        }
        assert!(switch("maybe").is_err());
        assert_eq!(number("16", 1..=32), Ok(16));
        assert!(number("0", 1..=32).is_err());
        assert!(number("x", 1..=32).is_err());
    }
}
