//! The plan cache file: tuned plans per device, read at device open and written by `macko
//! tune`. JSON, one section per device key (backend, device name, driver, library version),
//! each a list of matrix classes with the tuning that won and the times behind it:
//!
//! ```json
//! { "macko_plan_cache": 1,
//!   "devices": [ { "backend": "cuda", "device": "NVIDIA H100 80GB HBM3 (sm_90)",
//!                  "driver": "CUDA 13.0", "library": "0.1.0",
//!                  "plans": [ { "kind": "macko", "rows": 4096, "cols": 4096, "fill": 50,
//!                               "tuning": "cuda.flat=on", "tuned_us": 11.9,
//!                               "rules_us": 12.6, "candidates": 9 } ] } ] }
//! ```
//!
//! Nothing in it is trusted blindly: a file that is not this format (another program's JSON,
//! a later format version, a truncated write, a bad entry) is refused as a whole with the
//! reason, and the caller warns and uses the plan rules. A tuning is only ever one the
//! `MACKO_TUNING` parser accepts for the section's backend, so a cached plan is always one of
//! the plans the agreement suite forces; a section of another device, driver or library
//! version is kept in the file but never applied.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::class::{MatrixClass, FILL_STEP_PERCENT};
use crate::backend::DeviceInfo;
use crate::error::{Error, Result};
use crate::options::Tuning;

/// The marker and format version of the file's top-level object.
const MARKER: &str = "macko_plan_cache";
const VERSION: u64 = 1;
/// A cache file larger than this is refused unread: 31 shapes × 20 fills × 3 backends is
/// under 1 MiB.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Which device a section's plans were measured on: they apply only to a device with the same
/// backend, name, driver and library version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceKey {
    /// `cuda`, `wgpu` or `cpu`.
    pub backend: String,
    /// The device's name as [`DeviceInfo::name`] gives it.
    pub device: String,
    /// The driver, as the device's `driver` property gives it (empty where it has none).
    pub driver: String,
    /// The version of this library that measured the plans (kernels change between versions).
    pub library: String,
}

impl DeviceKey {
    /// The key of a device described by `info`, for this library version.
    pub fn of(info: &DeviceInfo) -> Self {
        let driver = info
            .properties
            .iter()
            .find(|(k, _)| k == "driver")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        Self {
            backend: info.backend.name().to_string(),
            device: info.name.clone(),
            driver,
            library: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// One tuned class: the tuning (`MACKO_TUNING` items, empty for the rules' own plan) that
/// was fastest, and the medians behind the choice.
#[derive(Debug, Clone, PartialEq)]
pub struct TunedEntry {
    /// The class of matrices it applies to.
    pub class: MatrixClass,
    /// The winning tuning's items, e.g. `cuda.flat=on`; empty where the rules' plan won.
    pub tuning: String,
    /// Median microseconds per product of the winner.
    pub tuned_us: f64,
    /// Median microseconds per product of the rules' own plan, measured beside it.
    pub rules_us: f64,
    /// Distinct plans timed.
    pub candidates: u32,
}

/// The contents of a plan cache file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanCacheFile {
    sections: Vec<(DeviceKey, Vec<TunedEntry>)>,
}

/// Why a cache file was not used: the path and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheProblem {
    /// The file.
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for CacheProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "plan cache {}: {}", self.path, self.reason)
    }
}

impl PlanCacheFile {
    /// Reads `path`: empty where there is no file yet, a [`CacheProblem`] where there is one
    /// that is not a plan cache of this format.
    pub fn load(path: &Path) -> std::result::Result<Self, CacheProblem> {
        let problem = |reason: String| CacheProblem {
            path: path.display().to_string(),
            reason,
        };
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(problem(format!("cannot be read: {e}"))),
        };
        if !meta.is_file() {
            return Err(problem("is not a regular file".into()));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(problem(format!(
                "holds {} bytes, more than a plan cache ever needs ({MAX_FILE_BYTES})",
                meta.len()
            )));
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| problem(format!("cannot be read: {e}")))?;
        Self::parse(&text).map_err(problem)
    }

    /// Parses the text of a cache file; `Err` names the first rule it breaks.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let root: Value =
            serde_json::from_str(text).map_err(|e| format!("is not valid JSON ({e})"))?;
        let obj = root.as_object().ok_or("is not a JSON object")?;
        match obj.get(MARKER).and_then(Value::as_u64) {
            Some(VERSION) => {}
            Some(v) => {
                return Err(format!(
                    "is format version {v}; this library reads version {VERSION}"
                ))
            }
            None => return Err(format!("is not a macko plan cache (no \"{MARKER}\" entry)")),
        }
        let devices = obj
            .get("devices")
            .and_then(Value::as_array)
            .ok_or("has no \"devices\" list")?;
        let mut sections = Vec::with_capacity(devices.len());
        for (i, d) in devices.iter().enumerate() {
            sections.push(parse_section(d).map_err(|e| format!("device {i}: {e}"))?);
        }
        Ok(Self { sections })
    }

    /// The entries measured on the device `key`.
    pub fn entries_for(&self, key: &DeviceKey) -> &[TunedEntry] {
        self.sections
            .iter()
            .find(|(k, _)| k == key)
            .map_or(&[], |(_, e)| e.as_slice())
    }

    /// Entries of every section, for listings.
    pub fn sections(&self) -> impl Iterator<Item = (&DeviceKey, &[TunedEntry])> {
        self.sections.iter().map(|(k, e)| (k, e.as_slice()))
    }

    /// Adds or replaces the entry of `entry.class` for the device `key`.
    pub fn insert(&mut self, key: &DeviceKey, entry: TunedEntry) {
        let pos = match self.sections.iter().position(|(k, _)| k == key) {
            Some(p) => p,
            None => {
                self.sections.push((key.clone(), Vec::new()));
                self.sections.len() - 1
            }
        };
        let entries = &mut self.sections[pos].1;
        match entries.iter_mut().find(|e| e.class == entry.class) {
            Some(e) => *e = entry,
            None => entries.push(entry),
        }
        entries.sort_by_key(|e| e.class);
    }

    /// The file's text.
    pub fn to_json(&self) -> String {
        let devices: Vec<Value> = self
            .sections
            .iter()
            .map(|(k, entries)| {
                json!({
                    "backend": k.backend,
                    "device": k.device,
                    "driver": k.driver,
                    "library": k.library,
                    "plans": entries.iter().map(entry_json).collect::<Vec<_>>(),
                })
            })
            .collect();
        let mut root = Map::new();
        root.insert(MARKER.into(), json!(VERSION));
        root.insert("devices".into(), Value::Array(devices));
        // Pretty, so that a user can read which plans were chosen.
        serde_json::to_string_pretty(&Value::Object(root)).unwrap_or_default() + "\n"
    }

    /// Writes the file: a temporary beside it renamed over it, so that a reader never sees
    /// half a file, with the directory made first.
    pub fn save(&self, path: &Path) -> Result<()> {
        let fail = |reason: String| Error::PlanCache {
            path: path.display().to_string(),
            reason,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| fail(format!("cannot make its directory: {e}")))?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, self.to_json())
            .map_err(|e| fail(format!("cannot be written: {e}")))?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            fail(format!("cannot be replaced: {e}"))
        })
    }
}

fn entry_json(e: &TunedEntry) -> Value {
    json!({
        "kind": e.class.kind.kind().as_str(),
        "rows": e.class.rows,
        "cols": e.class.cols,
        "fill": e.class.fill_percent,
        "tuning": e.tuning,
        "tuned_us": e.tuned_us,
        "rules_us": e.rules_us,
        "candidates": e.candidates,
    })
}

fn text<'a>(o: &'a Map<String, Value>, key: &str) -> std::result::Result<&'a str, String> {
    o.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("\"{key}\" is missing or not a string"))
}

fn whole(o: &Map<String, Value>, key: &str) -> std::result::Result<u64, String> {
    o.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("\"{key}\" is missing or not a whole number"))
}

fn micros(o: &Map<String, Value>, key: &str) -> std::result::Result<f64, String> {
    match o.get(key).and_then(Value::as_f64) {
        Some(us) if us.is_finite() && us > 0.0 => Ok(us),
        _ => Err(format!("\"{key}\" is missing or not a positive time")),
    }
}

fn parse_section(d: &Value) -> std::result::Result<(DeviceKey, Vec<TunedEntry>), String> {
    let o = d.as_object().ok_or("is not an object")?;
    let key = DeviceKey {
        backend: text(o, "backend")?.to_string(),
        device: text(o, "device")?.to_string(),
        driver: text(o, "driver")?.to_string(),
        library: text(o, "library")?.to_string(),
    };
    let plans = o
        .get("plans")
        .and_then(Value::as_array)
        .ok_or("has no \"plans\" list")?;
    let mut entries: Vec<TunedEntry> = Vec::with_capacity(plans.len());
    for (i, p) in plans.iter().enumerate() {
        let e = parse_entry(&key.backend, p).map_err(|e| format!("plan {i}: {e}"))?;
        if entries.iter().any(|x| x.class == e.class) {
            return Err(format!(
                "plan {i}: a second entry for {}",
                e.class.describe()
            ));
        }
        entries.push(e);
    }
    Ok((key, entries))
}

fn parse_entry(backend: &str, p: &Value) -> std::result::Result<TunedEntry, String> {
    let o = p.as_object().ok_or("is not an object")?;
    let kind_name = text(o, "kind")?;
    let kind = macko_format::MatrixKind::parse(kind_name)
        .ok_or_else(|| format!("\"kind\" {kind_name:?} is no matrix kind"))?;
    let fill = whole(o, "fill")?;
    if fill == 0 || fill > 100 || fill % u64::from(FILL_STEP_PERCENT) != 0 {
        return Err(format!(
            "\"fill\" {fill} is not a multiple of {FILL_STEP_PERCENT} from {FILL_STEP_PERCENT} to 100"
        ));
    }
    let tuning = text(o, "tuning")?.to_string();
    check_tuning(backend, &tuning)?;
    let candidates = u32::try_from(whole(o, "candidates")?)
        .map_err(|_| "\"candidates\" is out of range".to_string())?;
    Ok(TunedEntry {
        class: MatrixClass {
            kind: super::class::MatrixKindKey::of(kind),
            rows: whole(o, "rows")?,
            cols: whole(o, "cols")?,
            fill_percent: fill as u32,
        },
        tuning,
        tuned_us: micros(o, "tuned_us")?,
        rules_us: micros(o, "rules_us")?,
        candidates,
    })
}

/// Checks that `items` is a tuning of `backend` alone that the `MACKO_TUNING` parser accepts.
/// Items of a backend not compiled in are left unchecked: this build never applies them, and
/// keeps them in the file for the build that does.
pub(super) fn check_tuning(backend: &str, items: &str) -> std::result::Result<(), String> {
    let prefix = format!("{backend}.");
    if let Some(bad) = items.split_whitespace().find(|i| !i.starts_with(&prefix)) {
        return Err(format!(
            "tuning item {bad:?} is not one of the {backend} backend"
        ));
    }
    let compiled = (backend == "cuda" && cfg!(feature = "cuda"))
        || (backend == "wgpu" && cfg!(feature = "wgpu"));
    if compiled {
        Tuning::parse(items).map_err(|e| e.to_string())?;
    } else if !items.trim().is_empty() && backend == "cpu" {
        return Err("the cpu backend has no tuning".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::BackendKind;
    use macko_format::MatrixKind;

    fn key() -> DeviceKey {
        DeviceKey::of(&DeviceInfo {
            backend: BackendKind::Cpu,
            name: "test device".into(),
            properties: vec![("driver".into(), "1.2".into())],
        })
    }

    fn entry(rows: u64, tuning: &str) -> TunedEntry {
        TunedEntry {
            class: MatrixClass::new(MatrixKind::Macko, rows, 64, 0.5 * rows as f64 * 64.0),
            tuning: tuning.into(),
            tuned_us: 10.0,
            rules_us: 20.0,
            candidates: 3,
        }
    }

    #[test]
    fn a_file_round_trips_and_keeps_sections_apart() {
        let mut f = PlanCacheFile::default();
        let k = key();
        let other = DeviceKey {
            library: "0.0.0-other".into(),
            ..k.clone()
        };
        f.insert(&k, entry(128, ""));
        f.insert(&k, entry(64, ""));
        f.insert(&other, entry(64, ""));
        let back = PlanCacheFile::parse(&f.to_json()).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.entries_for(&k).len(), 2);
        assert_eq!(back.entries_for(&k)[0].class.rows, 64, "sorted by class");
        assert_eq!(back.entries_for(&other).len(), 1);
        // A replaced class stays one entry.
        f.insert(&k, entry(64, ""));
        assert_eq!(f.entries_for(&k).len(), 2);
    }

    #[test]
    fn foreign_and_corrupt_files_are_refused_with_the_rule() {
        let good = {
            let mut f = PlanCacheFile::default();
            f.insert(&key(), entry(64, ""));
            f.to_json()
        };
        let cases = [
            ("", "not valid JSON"),
            ("[1, 2]", "not a JSON object"),
            ("{\"other_tool\": 1}", "not a macko plan cache"),
            (
                &good.replace("\"macko_plan_cache\": 1", "\"macko_plan_cache\": 7"),
                "version 7",
            ),
            (&good[..good.len() / 2], "not valid JSON"),
            (
                &good.replace("\"fill\": 50", "\"fill\": 52"),
                "multiple of 5",
            ),
            (
                &good.replace("\"fill\": 50", "\"fill\": 0"),
                "multiple of 5",
            ),
            (
                &good.replace("\"kind\": \"macko\"", "\"kind\": \"blocked\""),
                "no matrix kind",
            ),
            (
                &good.replace("\"tuned_us\": 10.0", "\"tuned_us\": -1.0"),
                "positive time",
            ),
            (
                &good.replace("\"tuning\": \"\"", "\"tuning\": \"wgpu.x_pad=on\""),
                "not one of the cpu",
            ),
            (
                &good.replace("\"tuning\": \"\"", "\"tuning\": \"cpu.fast=on\""),
                "no tuning",
            ),
            (
                &good.replace("\"rows\": 64", "\"rows\": \"64\""),
                "\"rows\"",
            ),
        ];
        for (text, needle) in cases {
            match PlanCacheFile::parse(text) {
                Err(e) => assert!(e.contains(needle), "{needle}: {e}"),
                Ok(_) => panic!("accepted a file that should fail with {needle:?}"),
            }
        }
        assert!(PlanCacheFile::parse(&good).is_ok());
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn a_tuning_the_parser_refuses_is_refused_in_a_file() {
        assert!(check_tuning("cuda", "cuda.flat=on cuda.split=2").is_ok());
        assert!(check_tuning("cuda", "cuda.flat=sometimes")
            .unwrap_err()
            .contains("expected on, off or auto"));
        assert!(check_tuning("cuda", "cuda.nope=1")
            .unwrap_err()
            .contains("unknown key"));
    }

    #[test]
    fn a_missing_file_is_an_empty_cache_and_a_directory_is_refused() {
        let dir = std::env::temp_dir().join(format!("macko-cache-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(
            PlanCacheFile::load(&dir.join("none.json")).unwrap(),
            PlanCacheFile::default()
        );
        assert!(PlanCacheFile::load(&dir)
            .unwrap_err()
            .reason
            .contains("regular file"));
        let path = dir.join("sub").join("plans.json");
        let mut f = PlanCacheFile::default();
        f.insert(&key(), entry(64, ""));
        f.save(&path).unwrap();
        assert_eq!(PlanCacheFile::load(&path).unwrap(), f);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
