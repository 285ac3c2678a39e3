//! What the cross-backend suite needs to force every plan: a leaf module, shared by the
//! backends' tunings.

/// A tuning that forces one non-default plan, with a predicate on the plan that says the
/// forced plan was taken (tests/plans.rs asserts it, so a forced plan that silently falls back
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
