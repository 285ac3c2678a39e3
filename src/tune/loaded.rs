//! The tuned plans a device applies: the entries of the plan cache file measured on this
//! device, read once when the device opens.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;

use super::cache::{DeviceKey, PlanCacheFile};
use super::candidates::candidates;
use super::class::MatrixClass;
use crate::backend::{BackendKind, DeviceInfo};
use crate::options::Tuning;
use macko_format::MatrixKind;

/// What a device made of the plan cache, for `macko info` and for users who wonder why a plan
/// was (not) tuned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanCacheStatus {
    /// Not read: the reason (turned off, plan choices forced, nothing to tune on this backend).
    NotRead(String),
    /// Read: the file, and how many of its classes were measured on this device (and on
    /// others: kept in the file, never applied here).
    Read {
        /// The file.
        path: PathBuf,
        /// Classes applied on this device.
        applied: usize,
        /// Classes measured on other devices, drivers or library versions.
        other: usize,
    },
    /// The file is not a plan cache this library can trust: ignored, with the reason (also
    /// printed once on stderr as a warning).
    Ignored(String),
}

impl std::fmt::Display for PlanCacheStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanCacheStatus::NotRead(why) => write!(f, "not read ({why})"),
            PlanCacheStatus::Read {
                path,
                applied,
                other,
            } => write!(
                f,
                "{}: {applied} tuned class{} for this device{}",
                path.display(),
                if *applied == 1 { "" } else { "es" },
                if *other > 0 {
                    format!(", {other} for other devices or versions")
                } else {
                    String::new()
                }
            ),
            PlanCacheStatus::Ignored(why) => write!(f, "ignored: {why}"),
        }
    }
}

/// The tuned plans of one device: the tuning of each class the cache has for it.
#[derive(Debug, Clone)]
pub(crate) struct TunedPlans {
    plans: HashMap<MatrixClass, Tuning>,
    status: PlanCacheStatus,
}

impl TunedPlans {
    /// No tuned plans, for the reason given.
    pub(crate) fn none(why: impl Into<String>) -> Self {
        Self {
            plans: HashMap::new(),
            status: PlanCacheStatus::NotRead(why.into()),
        }
    }

    /// The plans in `path` for the device `info` describes. A file that cannot be trusted is
    /// ignored with a warning on stderr (once per file and reason in a process).
    pub(crate) fn load(path: PathBuf, info: &DeviceInfo) -> Self {
        if !tunable(info.backend) {
            return Self::none(format!("the {} backend has no plans to tune", info.backend));
        }
        let file = match PlanCacheFile::load(&path) {
            Ok(f) => f,
            Err(problem) => {
                warn_once(&problem.to_string());
                return Self {
                    plans: HashMap::new(),
                    status: PlanCacheStatus::Ignored(problem.to_string()),
                };
            }
        };
        let key = DeviceKey::of(info);
        let mut plans = HashMap::new();
        for e in file.entries_for(&key) {
            // Checked when the file was read (`cache::check_tuning`); parsed again here for
            // the typed form.
            if let Ok(t) = Tuning::parse(&e.tuning) {
                plans.insert(e.class, t);
            }
        }
        let other = file
            .sections()
            .filter(|(k, _)| **k != key)
            .map(|(_, e)| e.len())
            .sum();
        Self {
            status: PlanCacheStatus::Read {
                path,
                applied: plans.len(),
                other,
            },
            plans,
        }
    }

    /// The tuned plan of `class`, if the cache has one.
    pub(crate) fn get(&self, class: &MatrixClass) -> Option<&Tuning> {
        self.plans.get(class)
    }

    /// What the device made of the cache.
    pub(crate) fn status(&self) -> &PlanCacheStatus {
        &self.status
    }
}

/// Whether any format has candidates on `backend`.
fn tunable(backend: BackendKind) -> bool {
    !candidates(backend, MatrixKind::Macko).is_empty()
}

/// Prints `message` as a warning unless this process printed it already (tests and programs
/// open many devices; one line per problem is enough).
fn warn_once(message: &str) {
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let first = SEEN
        .lock()
        .map(|mut seen| {
            seen.get_or_insert_with(HashSet::new)
                .insert(message.to_string())
        })
        .unwrap_or(true);
    if first {
        eprintln!("warning: macko: {message}; the plan rules are used instead");
    }
}
