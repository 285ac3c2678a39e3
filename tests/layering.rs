//! The layering rules of ARCHITECTURE (README, "Layout"), checked on the sources themselves so
//! that a change which breaks one fails here, naming the files:
//!
//! - no import cycles between source files (a file's imports are the paths it names that lead
//!   into another file of the crate, its ancestors' files included (a file's `mod.rs` holds no
//!   types its files share: those live in leaf files); `mod x;` declarations are not imports,
//!   and neither are names taken from the crate root, `lib.rs`/`main.rs`, which only declares
//!   and re-exports);
//! - no source file over 800 lines outside tests (`tests/`, and unit-test files `*_tests.rs`);
//! - the environment is read in one place, `src/options.rs`;
//! - backends never reach `crate::device` or `crate::options` (they receive their
//!   configuration; the device layer opens them).
//!
//! Nothing here runs a kernel: it reads the `.rs` files of every crate of the workspace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Most lines a source file may have outside `tests/`.
const MAX_LINES: usize = 800;

/// One crate's sources: module path (segments below the crate root) -> file.
struct CrateSources {
    name: &'static str,
    files: BTreeMap<Vec<String>, PathBuf>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn crates() -> Vec<CrateSources> {
    [
        ("macko", "src"),
        ("macko-format", "format/src"),
        ("macko-cli", "cli/src"),
        ("macko-python", "python/src"),
    ]
    .into_iter()
    .map(|(name, dir)| {
        let mut files = BTreeMap::new();
        collect(&root().join(dir), &mut Vec::new(), &mut files);
        CrateSources { name, files }
    })
    .collect()
}

/// Every `.rs` file under `dir`, keyed by its module path (`lib.rs`/`main.rs` is the root,
/// `a/mod.rs` and `a.rs` are `a`).
fn collect(dir: &Path, prefix: &mut Vec<String>, out: &mut BTreeMap<Vec<String>, PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let Some(stem) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if path.is_dir() {
            prefix.push(stem);
            collect(&path, prefix, out);
            prefix.pop();
        } else if path.extension().is_some_and(|e| e == "rs") {
            let mut module = prefix.clone();
            if !matches!(stem.as_str(), "mod" | "lib" | "main") {
                module.push(stem);
            }
            out.insert(module, path);
        }
    }
}

/// The source without comments and string literals (so that prose naming a path is not an
/// import).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal ('"' or '\n'); lifetimes ('a) are left alone.
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands a use tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or(tree).trim().to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| {
            if p == "self" {
                prefix.trim_end_matches("::").to_string()
            } else {
                format!("{prefix}{p}")
            }
        })
        .collect()
}

/// Every path the code names, in `use` trees and inline (`crate::device::DeviceOptions`,
/// `super::plan::Plan`, `cuda::plan::CudaPlan` relative to the module).
fn named_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    // Use trees, which may span lines and nest braces.
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        let after = &rest[at + 4..];
        let end = after.find(';').unwrap_or(after.len());
        if before.is_none_or(|c| !is_ident(c)) {
            let tree: String = after[..end]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            paths.extend(expand(&tree));
        }
        rest = &after[end.min(after.len())..];
    }
    // Inline paths: any `a::b…` (those that name no module of the crate are dropped later).
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let start_ok = i == 0 || !is_ident(chars[i - 1]) && chars[i - 1] != ':';
        let word: String = chars[i..].iter().take_while(|c| is_ident(**c)).collect();
        let followed = chars.get(i + word.chars().count()) == Some(&':')
            && chars.get(i + word.chars().count() + 1) == Some(&':');
        if start_ok && !word.is_empty() && followed {
            let mut j = i;
            let mut path = String::new();
            loop {
                let seg: String = chars[j..].iter().take_while(|c| is_ident(**c)).collect();
                if seg.is_empty() {
                    break;
                }
                path.push_str(&seg);
                j += seg.chars().count();
                if chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') {
                    path.push_str("::");
                    j += 2;
                } else {
                    break;
                }
            }
            paths.push(path.trim_end_matches("::").to_string());
            i = j.max(i + 1);
        } else {
            i += word.chars().count().max(1);
        }
    }
    paths
}

/// The file module a path resolves into, seen from `module`: the longest prefix of the
/// absolute path that is a file of the crate.
fn resolve<'a>(
    module: &[String],
    is_dir_module: bool,
    path: &str,
    files: &'a BTreeMap<Vec<String>, PathBuf>,
) -> Option<&'a Vec<String>> {
    let segs: Vec<&str> = path.split("::").map(str::trim).collect();
    // `self`/`super` are relative to the module the file *is*; a non-mod.rs file `a/b.rs`
    // is module a::b, so `super` is `a`.
    let _ = is_dir_module;
    let mut abs: Vec<String> = match segs.first() {
        Some(&"crate") => Vec::new(),
        Some(&"self") | Some(&"super") => module.to_vec(),
        // A path relative to the module: it starts with one of its child modules.
        Some(first) if files.contains_key(&[module, &[first.to_string()]].concat()) => {
            module.to_vec()
        }
        _ => return None,
    };
    for s in &segs[if segs[0] == "crate" { 1 } else { 0 }..] {
        match *s {
            "self" => {}
            "super" => {
                abs.pop();
            }
            other => abs.push(other.to_string()),
        }
    }
    (0..=abs.len())
        .rev()
        .find_map(|n| files.get_key_value(&abs[..n]).map(|(k, _)| k))
}

/// The code without its `#[cfg(test)]` items (a test module's braces, or the one item after
/// the attribute), wherever they stand in the file.
fn without_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        // The item ends at its first `;` before any `{`, or at the `}` closing its braces.
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The import graph of one crate: file module -> modules of other files it names.
fn graph(c: &CrateSources) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut g = BTreeMap::new();
    for (module, path) in &c.files {
        // Unit-test files (`*_tests.rs`) are tests, as `#[cfg(test)]` items are.
        if path.to_string_lossy().ends_with("_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // Unit tests inside a file may reach anything; only the library code is layered.
        let lib_part = without_test_items(&code_only(&text));
        let is_dir = path.file_name().is_some_and(|f| f == "mod.rs");
        let targets: BTreeSet<Vec<String>> = named_paths(&lib_part)
            .iter()
            .filter_map(|p| resolve(module, is_dir, p, &c.files))
            .filter(|t| *t != module && !t.is_empty())
            .cloned()
            .collect();
        g.insert(module.clone(), targets);
    }
    g
}

/// Strongly connected components of more than one file (Tarjan).
fn cycles(g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        g: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            let Some((w, _)) = s.g.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(lw));
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn name(c: &CrateSources, m: &[String]) -> String {
    c.files
        .get(m)
        .and_then(|p| p.strip_prefix(root()).ok())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| m.join("::"))
}

#[test]
fn no_import_cycles_between_files() {
    let mut found = Vec::new();
    for c in crates() {
        for comp in cycles(&graph(&c)) {
            let names: Vec<String> = comp.iter().map(|m| name(&c, m)).collect();
            found.push(format!("{}: {}", c.name, names.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_checker_sees_a_cycle() {
    // Two files that import each other, as the checker reads them.
    let mut files = BTreeMap::new();
    files.insert(vec!["a".to_string()], PathBuf::from("a.rs"));
    files.insert(vec!["b".to_string()], PathBuf::from("b.rs"));
    let mut g = BTreeMap::new();
    for (m, code) in [("a", "use crate::b::X;"), ("b", "fn f() { super::a::y() }")] {
        let module = vec![m.to_string()];
        let t = named_paths(code)
            .iter()
            .filter_map(|p| resolve(&module, false, p, &files))
            .filter(|t| **t != module)
            .cloned()
            .collect();
        g.insert(module, t);
    }
    assert_eq!(cycles(&g).len(), 1);
    assert_eq!(
        without_test_items("use a;\n#[cfg(test)]\nmod t { use b; fn f() {} }\nuse c;"),
        "use a;\n\nuse c;"
    );
    assert_eq!(
        expand("super::{a, b::{c, d as e}, self}"),
        ["super::a", "super::b::c", "super::b::d", "super"]
    );
}

#[test]
fn no_source_file_over_800_lines() {
    let long: Vec<String> = crates()
        .iter()
        .flat_map(|c| c.files.values().cloned().collect::<Vec<_>>())
        // Unit-test files (`#[cfg(test)] mod plan_tests;`) are tests.
        .filter(|p| !p.to_string_lossy().ends_with("_tests.rs"))
        .filter_map(|p| {
            let n = std::fs::read_to_string(&p).ok()?.lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", p.display()))
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:?}");
}

#[test]
fn the_environment_is_read_in_one_place() {
    let readers: Vec<String> = crates()
        .iter()
        .filter(|c| c.name != "macko-cli")
        .flat_map(|c| c.files.values().cloned().collect::<Vec<_>>())
        .filter(|p| !p.ends_with("src/options.rs"))
        .filter(|p| {
            let code = code_only(&std::fs::read_to_string(p).unwrap_or_default());
            code.contains("env::var") || code.contains("env::vars")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(readers.is_empty(), "read the environment: {readers:?}");
}

#[test]
fn backends_do_not_reach_the_device_layer() {
    let c = &crates()[0];
    let g = graph(c);
    let bad: Vec<String> = g
        .iter()
        .filter(|(m, _)| m.first().is_some_and(|s| s == "backend"))
        .flat_map(|(m, ts)| {
            ts.iter()
                .filter(|t| matches!(t.first().map(String::as_str), Some("device" | "options")))
                .map(move |t| format!("{} -> {}", name(c, m), name(c, t)))
        })
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
}

/// Every file of the repository a comment or document names (`src/backend/cuda/plan.rs`,
/// `kernels/README.md`, …), outside the journal of past rounds, exists: paths cited in code
/// outlive the files they name when a restructure moves things.
#[test]
fn cited_files_exist() {
    const ROOTS: [&str; 11] = [
        "src", "format", "cli", "tests", "kernels", "shaders", "examples", "scripts", "docs",
        "benches", "python",
    ];
    const EXTS: [&str; 8] = [".rs", ".cu", ".cuh", ".wgsl", ".md", ".sh", ".py", ".toml"];
    let mut texts: Vec<PathBuf> = vec![root().join("README.md"), root().join("BENCHMARKS.md")];
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for p in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
            if p.is_dir() {
                if !p.ends_with("journal") {
                    walk(&p, out);
                }
            } else if EXTS.iter().any(|e| p.to_string_lossy().ends_with(e)) {
                out.push(p);
            }
        }
    }
    for r in ROOTS {
        walk(&root().join(r), &mut texts);
    }
    let mut missing = Vec::new();
    for file in &texts {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for r in ROOTS {
            let needle = format!("{r}/");
            for (at, _) in text.match_indices(&needle) {
                let before = text[..at].chars().last();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || "_./-".contains(c)) {
                    continue;
                }
                let path: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "_./-".contains(*c))
                    .collect();
                let path = path.trim_end_matches('.');
                if !EXTS.iter().any(|e| path.ends_with(e)) {
                    continue;
                }
                let beside = file.parent().map(|d| d.join(path));
                if !root().join(path).exists() && !beside.is_some_and(|p| p.exists()) {
                    missing.push(format!("{} names {path}", file.display()));
                }
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
