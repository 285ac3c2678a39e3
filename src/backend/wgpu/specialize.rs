//! Shader modules specialized on our side: the WGSL parsed by naga, its `override` constants
//! given their pipeline's values, and the branches those values rule out removed, before wgpu
//! and the driver see the module.
//!
//! Why: the MACKO subgroup kernel (shaders/macko_sg.wgsl) keeps every tuning variant in one
//! source, chosen by overrides, and calls its row loop from many branches that the overrides
//! decide. Drivers inline every call before they fold the constants, so they first build the
//! product of all variants: on Mesa's lavapipe (the software Vulkan driver CI tests on) one
//! pipeline of that kernel took 11 s to build, against 20 ms for the dense kernel. With the
//! ruled-out branches gone here, the driver builds only the variant its pipeline runs. What
//! runs is the same code: an `if` is replaced by the branch its constant condition takes.

use std::borrow::Cow;
use std::collections::HashMap;

use naga::{BinaryOperator, Block, Expression, Handle, Literal, Module, Statement, UnaryOperator};

/// Why a module could not be specialized (a bug in a kernel source or its constants: the
/// message names the kernel and naga's complaint).
#[derive(Debug)]
pub(super) struct SpecializeError(pub String);

/// `source` (WGSL with a compute entry point `main`) with its overrides set to `constants` and
/// the branches on constant conditions reduced to the branch taken.
pub(super) fn specialize(
    label: &str,
    source: &str,
    constants: &[(&str, f64)],
) -> Result<Module, SpecializeError> {
    let fail =
        |what: &str, e: &dyn std::fmt::Display| SpecializeError(format!("{label}: {what}: {e}"));
    let module = naga::front::wgsl::parse_str(source).map_err(|e| fail("parse", &e))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| fail("validate", &e))?;
    let mut values = naga::back::PipelineConstants::default();
    for &(name, value) in constants {
        values.insert(name.to_string(), value);
    }
    let (module, _) = naga::back::pipeline_constants::process_overrides(
        &module,
        &info,
        Some((naga::ShaderStage::Compute, "main")),
        &values,
    )
    .map_err(|e| fail("set overrides", &e))?;
    let mut module = match module {
        Cow::Owned(m) => m,
        Cow::Borrowed(m) => m.clone(),
    };
    prune_module(&mut module);
    // The pruned branches' expressions are now evaluated by no statement, which naga's
    // validator rejects: compaction removes them, and the functions no longer called.
    naga::compact::compact(&mut module, naga::compact::KeepUnused::No);
    Ok(module)
}

/// Prunes the branches on constant conditions in every function and entry point of `module`.
fn prune_module(module: &mut Module) {
    let mut functions = std::mem::take(&mut module.functions);
    for (_, f) in functions.iter_mut() {
        prune_function(f, module);
    }
    module.functions = functions;
    let mut entry_points = std::mem::take(&mut module.entry_points);
    for ep in entry_points.iter_mut() {
        prune_function(&mut ep.function, module);
    }
    module.entry_points = entry_points;
}

/// Prunes `f`'s body, and forgets the names of the expressions only the pruned branches
/// evaluated: compaction keeps every named expression, and these would be left evaluated by
/// no statement.
fn prune_function(f: &mut naga::Function, module: &Module) {
    let pruner = Pruner {
        exprs: &f.expressions,
        locals: &f.local_variables,
        module,
    };
    pruner.block(&mut f.body, true);
    let mut evaluated = vec![false; f.expressions.len()];
    mark_evaluated(&f.body, &mut evaluated);
    f.named_expressions
        .retain(|h, _| evaluated.get(h.index()).copied().unwrap_or(false));
}

/// Marks the expressions the statements of `block` evaluate: those of its `Emit` ranges and the
/// results of its calls, atomics and subgroup operations, in nested blocks too.
fn mark_evaluated(block: &Block, evaluated: &mut [bool]) {
    fn mark(evaluated: &mut [bool], h: naga::Handle<Expression>) {
        if let Some(e) = evaluated.get_mut(h.index()) {
            *e = true;
        }
    }
    for stmt in block.iter() {
        match stmt {
            Statement::Emit(range) => range.clone().for_each(|h| mark(evaluated, h)),
            Statement::Call {
                result: Some(r), ..
            }
            | Statement::Atomic {
                result: Some(r), ..
            } => mark(evaluated, *r),
            Statement::WorkGroupUniformLoad { result, .. }
            | Statement::SubgroupBallot { result, .. }
            | Statement::SubgroupGather { result, .. }
            | Statement::SubgroupCollectiveOperation { result, .. } => mark(evaluated, *result),
            other => {
                for b in nested_blocks(other) {
                    mark_evaluated(b, evaluated);
                }
            }
        }
    }
}

/// The blocks directly inside `stmt`: a block's, an `if`'s branches, a loop's body and
/// continuing block, a switch's cases.
fn nested_blocks(stmt: &Statement) -> Vec<&Block> {
    match stmt {
        Statement::Block(b) => vec![b],
        Statement::If { accept, reject, .. } => vec![accept, reject],
        Statement::Loop {
            body, continuing, ..
        } => vec![body, continuing],
        Statement::Switch { cases, .. } => cases.iter().map(|c| &c.body).collect(),
        _ => Vec::new(),
    }
}

/// What pruning a function knows: its expressions, the module (for constants), and the
/// unnamed locals holding a known value where the statement being pruned runs.
///
/// naga lowers a runtime `a && b` to an unnamed local set by an `if` (`if a { t = b } else
/// { t = false }`) and the condition to a load of it; so `OVERRIDE && runtime` folds in two
/// steps: the `if` on the override is pruned to a store of a constant, which makes the load
/// known to the `if` after it.
struct Pruner<'a> {
    exprs: &'a naga::Arena<Expression>,
    locals: &'a naga::Arena<naga::LocalVariable>,
    module: &'a Module,
}

impl Pruner<'_> {
    /// Replaces each `if` in `block` (and the blocks inside it) whose condition is constant by
    /// the branch it takes, as a nested block. Statements after a spliced branch that always
    /// leaves the block (ends in `return`, `break`, `continue` or `discard`) can never run and
    /// are dropped where `may_cut`: not in the body of a loop with a `continuing` block or a
    /// `break if`, which may use expressions the body emits after such a branch (WGSL lets a
    /// `break` skip a declaration the continuing block uses).
    ///
    /// A local's known value is read at the `if` that loads it, not where the load is emitted:
    /// sound because naga stores each short-circuit local only inside its own lowering `if`,
    /// which comes before the load.
    fn block(&self, block: &mut Block, may_cut: bool) {
        let mut known: HashMap<Handle<naga::LocalVariable>, bool> = HashMap::new();
        let old = std::mem::take(block);
        for (stmt, span) in old.span_into_iter() {
            let (stmt, leaves) = match stmt {
                Statement::If {
                    condition,
                    mut accept,
                    mut reject,
                } => match self.constant_bool(condition, &known) {
                    Some(taken) => {
                        let mut branch = if taken { accept } else { reject };
                        self.block(&mut branch, true);
                        self.learn(&branch, &mut known);
                        let leaves = branch.last().is_some_and(is_terminator);
                        (Statement::Block(branch), leaves)
                    }
                    None => {
                        self.block(&mut accept, true);
                        self.block(&mut reject, true);
                        let stmt = Statement::If {
                            condition,
                            accept,
                            reject,
                        };
                        forget_stored(&stmt, self.exprs, &mut known);
                        (stmt, false)
                    }
                },
                Statement::Block(mut inner) => {
                    self.block(&mut inner, true);
                    let leaves = inner.last().is_some_and(is_terminator);
                    let stmt = Statement::Block(inner);
                    forget_stored(&stmt, self.exprs, &mut known);
                    (stmt, leaves)
                }
                Statement::Loop {
                    mut body,
                    mut continuing,
                    break_if,
                } => {
                    let bare = continuing.is_empty() && break_if.is_none();
                    self.block(&mut body, bare);
                    self.block(&mut continuing, true);
                    let stmt = Statement::Loop {
                        body,
                        continuing,
                        break_if,
                    };
                    forget_stored(&stmt, self.exprs, &mut known);
                    (stmt, false)
                }
                Statement::Switch {
                    selector,
                    mut cases,
                } => {
                    for case in cases.iter_mut() {
                        self.block(&mut case.body, true);
                    }
                    let stmt = Statement::Switch { selector, cases };
                    forget_stored(&stmt, self.exprs, &mut known);
                    (stmt, false)
                }
                other => {
                    self.learn(&Block::from_vec(vec![other.clone()]), &mut known);
                    (other, false)
                }
            };
            block.push(stmt, span);
            if leaves && may_cut {
                break;
            }
        }
    }

    /// Updates `known` past the statements of `block` (run in sequence, none skipped): a
    /// store of a constant bool to an unnamed local makes it known, any other store to a local
    /// unknown.
    fn learn(&self, block: &Block, known: &mut HashMap<Handle<naga::LocalVariable>, bool>) {
        for stmt in block.iter() {
            match *stmt {
                Statement::Store { pointer, value } => {
                    if let Expression::LocalVariable(v) = self.exprs[pointer] {
                        match self.constant_bool(value, known) {
                            Some(b) if self.locals[v].name.is_none() => {
                                known.insert(v, b);
                            }
                            _ => {
                                known.remove(&v);
                            }
                        }
                    }
                }
                // A block always runs: what it stores is known after it.
                Statement::Block(ref b) => self.learn(b, known),
                ref other => forget_stored(other, self.exprs, known),
            }
        }
    }

    /// The value of a boolean expression known without running the shader: literals,
    /// constants, loads of known locals, and `!`, `&&`, `||` of them (`false && e` is false and
    /// `true || e` true whatever `e` is). naga's constant evaluator has already folded the
    /// operations whose operands are all constant.
    fn constant_bool(
        &self,
        h: Handle<Expression>,
        known: &HashMap<Handle<naga::LocalVariable>, bool>,
    ) -> Option<bool> {
        match self.exprs[h] {
            Expression::Literal(Literal::Bool(b)) => Some(b),
            Expression::Constant(c) => {
                match self.module.global_expressions[self.module.constants[c].init] {
                    Expression::Literal(Literal::Bool(b)) => Some(b),
                    _ => None,
                }
            }
            Expression::Load { pointer } => match self.exprs[pointer] {
                Expression::LocalVariable(v) => known.get(&v).copied(),
                _ => None,
            },
            Expression::Unary {
                op: UnaryOperator::LogicalNot,
                expr,
            } => self.constant_bool(expr, known).map(|b| !b),
            Expression::Binary {
                op: op @ (BinaryOperator::LogicalAnd | BinaryOperator::LogicalOr),
                left,
                right,
            } => {
                let absorbing = op == BinaryOperator::LogicalOr;
                let (l, r) = (
                    self.constant_bool(left, known),
                    self.constant_bool(right, known),
                );
                if l == Some(absorbing) || r == Some(absorbing) {
                    Some(absorbing)
                } else {
                    // Both known and neither absorbing: both are the other value.
                    l.and(r).map(|_| !absorbing)
                }
            }
            _ => None,
        }
    }
}

/// Forgets every local `stmt` may store to (anywhere inside it).
fn forget_stored(
    stmt: &Statement,
    exprs: &naga::Arena<Expression>,
    known: &mut HashMap<Handle<naga::LocalVariable>, bool>,
) {
    if known.is_empty() {
        return;
    }
    match stmt {
        Statement::Store { pointer, .. } => {
            if let Expression::LocalVariable(v) = exprs[*pointer] {
                known.remove(&v);
            }
        }
        // A pointer to a local passed to a function may be stored through.
        Statement::Call { arguments, .. } => {
            for &a in arguments {
                if let Expression::LocalVariable(v) = exprs[a] {
                    known.remove(&v);
                }
            }
        }
        other => {
            for b in nested_blocks(other) {
                for s in b.iter() {
                    forget_stored(s, exprs, known);
                }
            }
        }
    }
}

/// Whether a statement always leaves its block.
fn is_terminator(stmt: &Statement) -> bool {
    matches!(
        stmt,
        Statement::Return { .. } | Statement::Break | Statement::Continue | Statement::Kill
    )
}

#[cfg(test)]
mod tests {
    use super::specialize;

    /// A kernel with two overrides, a runtime condition mixed with each, and a branch that
    /// returns: which helper functions survive tells which branches were pruned.
    const KERNEL: &str = "
override A: bool = true;
override B: bool = false;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
fn when_a() -> u32 { return 1u; }
fn when_b() -> u32 { return 2u; }
fn otherwise() -> u32 { return 3u; }
fn after_return() -> u32 { return 4u; }
@compute @workgroup_size(1)
fn main(@builtin(local_invocation_index) t: u32) {
    let runtime = t == 0u;
    if B && runtime {
        out[0] = when_b();
    } else {
        out[0] = otherwise();
    }
    if !A || runtime {
        out[1] = 5u;
    } else {
        out[1] = when_a();
    }
    if A {
        let named = t + 7u;
        out[2] = named;
        return;
    }
    out[3] = after_return();
}
";

    fn functions(a: bool, b: bool) -> Vec<String> {
        let constants = [("A", f64::from(u8::from(a))), ("B", f64::from(u8::from(b)))];
        let module = specialize("test", KERNEL, &constants).expect("specializes");
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .expect("the specialized module validates");
        let mut names: Vec<String> = module
            .functions
            .iter()
            .filter_map(|(_, f)| f.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_false_conjunct_removes_its_branch() {
        // B false: `B && runtime` is false, only `otherwise` is called; A true: `!A || runtime`
        // is `runtime`, both its branches stay, and the code after `if A { return }` goes.
        assert_eq!(functions(true, false), ["otherwise", "when_a"]);
    }

    #[test]
    fn runtime_conditions_keep_both_branches() {
        // B true: `B && runtime` is `runtime`; A false: `!A || runtime` is true, and `if A`
        // is skipped, so the code after it stays.
        assert_eq!(
            functions(false, true),
            ["after_return", "otherwise", "when_b"]
        );
    }

    /// A `break` on a constant in a loop whose continuing block uses a value the body declares
    /// after it: the declaration must stay (the module must validate).
    #[test]
    fn a_break_before_what_the_continuing_block_uses_keeps_it() {
        let kernel = "
override A: bool = true;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main(@builtin(local_invocation_index) t: u32) {
    var i = t;
    loop {
        if A {
            break;
        }
        let y = i + 1u;
        continuing {
            out[y] = 1u;
            i = y;
            break if y > 3u;
        }
    }
}
";
        for a in [0.0, 1.0] {
            let module = specialize("loop", kernel, &[("A", a)]).expect("specializes");
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("A = {a}: {e:?}"));
        }
    }

    #[test]
    fn bad_sources_and_constants_are_errors_naming_the_kernel() {
        let e = specialize("broken", "fn main( {", &[]).expect_err("parse error");
        assert!(e.0.starts_with("broken: parse"), "{}", e.0);
        let e = specialize("test", KERNEL, &[("NO_SUCH", 1.0)]).expect_err("unknown constant");
        assert!(e.0.starts_with("test: set overrides"), "{}", e.0);
    }
}
