//! Texts of the plots: file names, titles and tick labels.

use std::collections::BTreeSet;

use crate::bench::record::Record;

/// A file-name-safe form of a backend name.
pub(super) fn file_stem(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "unnamed".to_string()
    } else {
        s
    }
}

/// How a backend is named in titles.
pub(super) fn backend_title(backend: &str) -> String {
    match backend {
        "cuda" => "CUDA".to_string(),
        "wgpu" => "wgpu (WGSL)".to_string(),
        "cpu" => "CPU".to_string(),
        other => other.to_string(),
    }
}

/// The distinct device names of the records, joined.
pub(super) fn devices(records: &[&Record]) -> String {
    let names: BTreeSet<&str> = records
        .iter()
        .map(|r| r.device.trim())
        .filter(|d| !d.is_empty())
        .collect();
    if names.is_empty() {
        "unknown device".to_string()
    } else {
        names.into_iter().collect::<Vec<_>>().join(", ")
    }
}

/// "backend · device" for titles, with " · B = n" when every record is one batch of n > 1
/// vectors (a batch-1 plot reads as it always did).
pub(super) fn title_suffix(backend: &str, records: &[&Record]) -> String {
    let batches: BTreeSet<usize> = records.iter().map(|r| r.batch).collect();
    let batch = match batches.iter().collect::<Vec<_>>()[..] {
        [&b] if b > 1 => format!(" · B = {b}"),
        _ => String::new(),
    };
    format!("{} · {}{batch}", backend_title(backend), devices(records))
}

/// The part of a per-batch plot's file name that says the batch: nothing for one vector (the
/// names of the plots from before `--batch`), `_b4` for four.
pub(super) fn batch_suffix(batch: usize) -> String {
    if batch == 1 {
        String::new()
    } else {
        format!("_b{batch}")
    }
}

/// Formats a density tick: at most two decimals, no trailing zeros beyond the first.
pub(super) fn fmt_density(d: f64) -> String {
    let d = if d.abs() < 1e-9 { 0.0 } else { d };
    let s = format!("{d:.2}");
    match s.strip_suffix('0') {
        Some(t) if !t.ends_with('.') => t.to_string(),
        _ => s,
    }
}

/// Formats a y tick with as many decimals as the step needs.
pub(super) fn fmt_value(v: f64) -> String {
    let v = if v.abs() < 1e-9 { 0.0 } else { v };
    let s = format!("{v:.2}");
    let t = s.trim_end_matches('0');
    match t.strip_suffix('.') {
        Some(int) => int.to_string(),
        None => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_and_file_names() {
        assert_eq!(fmt_density(1.0), "1.0");
        assert_eq!(fmt_density(0.9), "0.9");
        assert_eq!(fmt_density(0.05), "0.05");
        assert_eq!(fmt_density(-1e-12), "0.0");
        assert_eq!(fmt_value(2.5), "2.5");
        assert_eq!(fmt_value(3.0), "3");
        assert_eq!(file_stem("cu da/1"), "cu_da_1");
        assert_eq!(batch_suffix(1), "");
        assert_eq!(batch_suffix(16), "_b16");
    }
}
