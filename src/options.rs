//! How a device is opened, and the one place the environment is read.
//!
//! Variables for users (README, "Environment variables"):
//! - `MACKO_BACKEND=cpu|wgpu|cuda` forces a backend ([`crate::Device::from_env`]);
//! - `MACKO_WGPU_SUBGROUPS=0` turns off wgpu's subgroup kernels (the workgroup-memory path);
//! - `MACKO_PLAN_CACHE=off|PATH` turns off the tuned plans of `macko tune`, or reads them from
//!   PATH instead of the user's cache directory ([`crate::tune`]);
//! - `MACKO_KERNEL_CACHE=off|DIR` turns off the CUDA kernels compiled in earlier processes, or
//!   keeps them in DIR instead of the user's cache directory ([`default_kernel_cache_dir`]).
//!
//! For maintainers, `MACKO_TUNING` forces plan choices the rules otherwise make, for the sweep
//! scripts of kernels/ and shaders/: whitespace-separated `backend.key=value` items, e.g.
//! `MACKO_TUNING="cuda.split=3 cuda.lanes=16 wgpu.x_tiles=off"`. Each item is checked; a
//! wrong one is an error naming it and the rule it broke, never silently ignored. The typed
//! form is [`DeviceOptions::tuning`].

#[cfg(feature = "cuda")]
use crate::backend::cuda::tuning::CudaTuning;
#[cfg(feature = "wgpu")]
use crate::backend::wgpu::WgpuTuning;
use crate::backend::BackendKind;
use crate::error::{Error, Result};

/// Environment variable that forces a backend (`cpu`, `wgpu` or `cuda`).
pub const ENV_BACKEND: &str = "MACKO_BACKEND";
/// Environment variable that, set to `0`, turns off the wgpu subgroup kernels.
pub const ENV_WGPU_SUBGROUPS: &str = "MACKO_WGPU_SUBGROUPS";
/// Environment variable of plan choices forced for measurements (see the module docs).
pub const ENV_TUNING: &str = "MACKO_TUNING";
/// Environment variable that turns off the plan cache (`off`) or names its file.
pub const ENV_PLAN_CACHE: &str = "MACKO_PLAN_CACHE";

/// Environment variable that turns off the on-disk cache of compiled CUDA kernels (`off`) or
/// names its directory.
pub const ENV_KERNEL_CACHE: &str = "MACKO_KERNEL_CACHE";

/// Where a device finds tuned plans ([`crate::tune`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PlanCache {
    /// `MACKO_PLAN_CACHE`'s choice where it is set, else the user's cache file
    /// ([`crate::tune::default_cache_path`]).
    #[default]
    Auto,
    /// No tuned plans: the plan rules decide every plan.
    Off,
    /// This file.
    File(std::path::PathBuf),
}

impl PlanCache {
    /// The setting a `MACKO_PLAN_CACHE` value names: `off` (or `0`, `false`, `no`) turns the
    /// cache off, empty is [`PlanCache::Auto`], anything else is a file.
    pub fn from_value(value: &str) -> Self {
        match value.trim() {
            "" => PlanCache::Auto,
            v if matches!(
                v.to_ascii_lowercase().as_str(),
                "off" | "0" | "false" | "no"
            ) =>
            {
                PlanCache::Off
            }
            v => PlanCache::File(v.into()),
        }
    }
}

/// How to open a device. `Default` is what [`crate::Device::auto`] uses.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceOptions {
    /// Open this backend, or the first that works when `None`.
    pub backend: Option<BackendKind>,
    /// wgpu: accept a software adapter (lavapipe, llvmpipe, WARP). Off for `auto`, where the
    /// CPU backend is the better choice; on when wgpu is asked for by name.
    pub allow_software_adapter: bool,
    /// wgpu: use subgroup operations where the adapter has them (`MACKO_WGPU_SUBGROUPS=0`
    /// turns them off, so the workgroup-memory kernels can be tested anywhere).
    pub wgpu_subgroups: bool,
    /// wgpu: an artificial cap on the bytes of one buffer binding, below the adapter's own, so
    /// tests can exercise the splitting of big matrices into row blocks with small ones.
    pub max_binding_bytes: Option<u64>,
    /// CUDA: ordinal of the GPU to use.
    pub cuda_ordinal: usize,
    /// Plan choices forced for measurements and tests. `None` (the default): `MACKO_TUNING`'s,
    /// or the rules' own where it is unset (so the sweep scripts reach programs and tests they
    /// do not control); `Some(Tuning::default())` forces the rules' own whatever the
    /// environment says.
    #[doc(hidden)]
    pub tuning: Option<Tuning>,
    /// Where tuned plans come from (`macko tune` writes them). Not read where a tuning is
    /// forced (`tuning` above or `MACKO_TUNING`): forced choices are for measuring the rules.
    pub plan_cache: PlanCache,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        Self {
            backend: None,
            allow_software_adapter: false,
            wgpu_subgroups: true,
            max_binding_bytes: None,
            cuda_ordinal: 0,
            tuning: None,
            plan_cache: PlanCache::Auto,
        }
    }
}

/// Forced plan choices of every backend compiled in (see the module docs).
#[doc(hidden)]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tuning {
    /// The CUDA backend's (`cuda.` items).
    #[cfg(feature = "cuda")]
    pub cuda: CudaTuning,
    /// The wgpu backend's (`wgpu.` items).
    #[cfg(feature = "wgpu")]
    pub wgpu: WgpuTuning,
}

impl Tuning {
    /// Parses the text of `MACKO_TUNING`: whitespace-separated `backend.key=value` items, the
    /// value being everything after the first `=`.
    pub fn parse(text: &str) -> Result<Self> {
        let mut t = Self::default();
        for item in text.split_whitespace() {
            t.set(item)?;
        }
        Ok(t)
    }

    /// Applies one `backend.key=value` item.
    // With no GPU backend compiled in, every item is refused before its key or value is read.
    #[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(unused_variables))]
    pub fn set(&mut self, item: &str) -> Result<()> {
        let bad = |reason: String| Error::Tuning {
            item: item.to_string(),
            reason,
        };
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| bad("expected backend.key=value".into()))?;
        let (backend, key) = name
            .split_once('.')
            .ok_or_else(|| bad("expected backend.key=value".into()))?;
        let keys = |all: &[&str]| format!("unknown key; the keys are {}", all.join(", "));
        match backend {
            #[cfg(feature = "cuda")]
            "cuda" => {
                if !CudaTuning::KEYS.contains(&key) {
                    return Err(bad(keys(CudaTuning::KEYS)));
                }
                self.cuda.set(key, value).map_err(bad)
            }
            #[cfg(feature = "wgpu")]
            "wgpu" => {
                if !WgpuTuning::KEYS.contains(&key) {
                    return Err(bad(keys(WgpuTuning::KEYS)));
                }
                self.wgpu.set(key, value).map_err(bad)
            }
            #[allow(unreachable_patterns)]
            "cuda" | "wgpu" => Err(bad(format!(
                "the {backend} backend is not compiled in (cargo feature `{backend}`)"
            ))),
            _ => Err(bad(format!(
                "unknown backend {backend:?}: tuning items start with cuda. or wgpu."
            ))),
        }
    }
}

impl DeviceOptions {
    /// Options for one backend, asked for by name: software adapters allowed.
    pub fn for_backend(kind: BackendKind) -> Self {
        Self {
            backend: Some(kind),
            allow_software_adapter: true,
            ..Self::default()
        }
    }

    /// Options from the environment: `MACKO_BACKEND`, `MACKO_WGPU_SUBGROUPS` and
    /// `MACKO_TUNING`. A variable that is set but wrong is an error naming it.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`DeviceOptions::from_env`] over any source of variables (tests pass a table).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut opts = match get(ENV_BACKEND) {
            Some(name) if !name.trim().is_empty() => Self::for_backend(name.parse()?),
            _ => Self::default(),
        };
        if let Some(v) = get(ENV_WGPU_SUBGROUPS) {
            opts.wgpu_subgroups = match v.trim().to_ascii_lowercase().as_str() {
                "" | "1" | "true" | "on" | "yes" => true,
                "0" | "false" | "off" | "no" => false,
                _ => {
                    return Err(Error::BadVariable {
                        name: ENV_WGPU_SUBGROUPS,
                        value: v,
                        expected: "1, true, on or yes (subgroups), 0, false, off or no (none)",
                    })
                }
            };
        }
        if let Some(text) = get(ENV_TUNING) {
            opts.tuning = Some(Tuning::parse(&text)?);
        }
        if let Some(v) = get(ENV_PLAN_CACHE) {
            opts.plan_cache = PlanCache::from_value(&v);
        }
        Ok(opts)
    }
}

/// The tuning a device opened with `opts` runs: its own, else `MACKO_TUNING`'s, else the
/// rules' own.
pub(crate) fn resolve_tuning(opts: &DeviceOptions) -> Result<Tuning> {
    match &opts.tuning {
        Some(t) => Ok(t.clone()),
        None => {
            std::env::var(ENV_TUNING).map_or(Ok(Tuning::default()), |text| Tuning::parse(&text))
        }
    }
}

/// The plan cache file of this user: `plans.json` in macko's folder of the platform's cache
/// directory (`$XDG_CACHE_HOME/macko` or `~/.cache/macko` on Linux, `~/Library/Caches/macko`
/// on macOS, `%LOCALAPPDATA%\macko` on Windows); `None` where the platform has none.
pub fn default_cache_path() -> Option<std::path::PathBuf> {
    dirs::cache_dir().map(|d| d.join("macko").join("plans.json"))
}

/// The folder of CUDA kernels compiled by earlier processes: `kernels` in macko's folder of the
/// platform's cache directory (beside [`default_cache_path`]); `None` where the platform has
/// none.
pub fn default_kernel_cache_dir() -> Option<std::path::PathBuf> {
    dirs::cache_dir().map(|d| d.join("macko").join("kernels"))
}

/// The folder the CUDA backend keeps compiled kernels in, `MACKO_KERNEL_CACHE`'s choice (`off`,
/// `0`, `false` or `no`: none; a path: that folder; unset or empty: the default), or `None`.
#[cfg(feature = "cuda")]
pub(crate) fn resolve_kernel_cache() -> Option<std::path::PathBuf> {
    kernel_cache_from(std::env::var(ENV_KERNEL_CACHE).ok().as_deref())
}

/// `resolve_kernel_cache` for a value of the variable (`None`: unset).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn kernel_cache_from(value: Option<&str>) -> Option<std::path::PathBuf> {
    match value.map(str::trim) {
        None | Some("") => default_kernel_cache_dir(),
        Some(v)
            if matches!(
                v.to_ascii_lowercase().as_str(),
                "off" | "0" | "false" | "no"
            ) =>
        {
            None
        }
        Some(v) => Some(v.into()),
    }
}

/// The plan cache file a device opened with `opts` reads, or why it reads none: `Err` when
/// plan choices are forced (by `opts` or `MACKO_TUNING`) or the cache is off.
pub(crate) fn resolve_plan_cache(
    opts: &DeviceOptions,
) -> std::result::Result<std::path::PathBuf, &'static str> {
    if opts.tuning.is_some() || std::env::var_os(ENV_TUNING).is_some() {
        return Err("plan choices are forced (MACKO_TUNING or the device options)");
    }
    let setting = match &opts.plan_cache {
        PlanCache::Auto => std::env::var(ENV_PLAN_CACHE)
            .map(|v| PlanCache::from_value(&v))
            .unwrap_or_default(),
        other => other.clone(),
    };
    match setting {
        PlanCache::Off => Err("turned off (MACKO_PLAN_CACHE=off or the device options)"),
        PlanCache::File(path) => Ok(path),
        PlanCache::Auto => default_cache_path().ok_or("this platform has no cache directory"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_cache_is_on_by_default_and_follows_the_variable() {
        assert_eq!(kernel_cache_from(None), default_kernel_cache_dir());
        assert_eq!(kernel_cache_from(Some(" ")), default_kernel_cache_dir());
        for off in ["off", "OFF", "0", "false", "no"] {
            assert_eq!(kernel_cache_from(Some(off)), None, "{off}");
        }
        assert_eq!(
            kernel_cache_from(Some("/tmp/k")),
            Some(std::path::PathBuf::from("/tmp/k"))
        );
        if let Some(d) = default_kernel_cache_dir() {
            assert!(d.ends_with("macko/kernels"));
        }
    }

    fn table<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn nothing_set_is_the_default() {
        assert_eq!(
            DeviceOptions::from_lookup(table(&[])).unwrap(),
            DeviceOptions::default()
        );
    }

    #[test]
    fn the_plan_cache_variable_turns_it_off_or_names_a_file() {
        for (v, want) in [
            ("off", PlanCache::Off),
            (" NO ", PlanCache::Off),
            ("0", PlanCache::Off),
            ("", PlanCache::Auto),
            ("/tmp/p.json", PlanCache::File("/tmp/p.json".into())),
        ] {
            let o = DeviceOptions::from_lookup(table(&[(ENV_PLAN_CACHE, v)])).unwrap();
            assert_eq!(o.plan_cache, want, "{v:?}");
        }
        let forced = DeviceOptions {
            tuning: Some(Tuning::default()),
            plan_cache: PlanCache::File("/tmp/p.json".into()),
            ..DeviceOptions::default()
        };
        assert!(resolve_plan_cache(&forced).is_err());
    }

    #[test]
    fn backend_and_subgroups_are_read() {
        let o = DeviceOptions::from_lookup(table(&[
            (ENV_BACKEND, " WGPU "),
            (ENV_WGPU_SUBGROUPS, "off"),
        ]))
        .unwrap();
        assert_eq!(o.backend, Some(BackendKind::Wgpu));
        assert!(o.allow_software_adapter);
        assert!(!o.wgpu_subgroups);
        assert!(matches!(
            DeviceOptions::from_lookup(table(&[(ENV_BACKEND, "tpu")])),
            Err(Error::UnknownBackend { .. })
        ));
    }

    #[test]
    fn bad_tuning_items_name_the_item_and_the_rule() {
        let mut cases = vec![
            ("split=3", "backend.key=value"),
            ("cuda.split", "backend.key=value"),
            ("tpu.split=3", "unknown backend"),
        ];
        for (item, compiled) in [
            ("cuda.no_such_key=1", cfg!(feature = "cuda")),
            ("wgpu.no_such_key=1", cfg!(feature = "wgpu")),
        ] {
            cases.push((
                item,
                if compiled {
                    "unknown key"
                } else {
                    "not compiled in"
                },
            ));
        }
        for (text, needle) in cases {
            match Tuning::parse(text) {
                Err(Error::Tuning { item, reason }) => {
                    assert_eq!(item, text);
                    assert!(reason.contains(needle), "{text}: {reason}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_wrong_subgroups_value_is_an_error_naming_the_variable() {
        for (v, on) in [
            ("0", false),
            ("off", false),
            ("NO", false),
            ("1", true),
            ("on", true),
        ] {
            let o = DeviceOptions::from_lookup(table(&[(ENV_WGPU_SUBGROUPS, v)])).unwrap();
            assert_eq!(o.wgpu_subgroups, on, "{v}");
        }
        match DeviceOptions::from_lookup(table(&[(ENV_WGPU_SUBGROUPS, "of")])) {
            Err(e @ Error::BadVariable { .. }) => {
                assert!(e.to_string().contains(ENV_WGPU_SUBGROUPS))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_tuning_of_its_own_wins_over_the_environment() {
        let own = DeviceOptions {
            tuning: Some(Tuning::default()),
            ..DeviceOptions::default()
        };
        assert_eq!(resolve_tuning(&own).unwrap(), Tuning::default());
        let from_env = DeviceOptions::from_lookup(table(&[(ENV_TUNING, "")])).unwrap();
        assert_eq!(from_env.tuning, Some(Tuning::default()));
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn cuda_items_reach_the_cuda_tuning() {
        let t = Tuning::parse("  cuda.lean=on\tcuda.lanes=16 ").unwrap();
        let mut expected = CudaTuning::default();
        expected.set("lean", "on").unwrap();
        expected.set("lanes", "16").unwrap();
        assert_eq!(t.cuda, expected);
        assert_ne!(t.cuda, CudaTuning::default());
        assert!(matches!(
            Tuning::parse("cuda.lanes=7"),
            Err(Error::Tuning { .. })
        ));
    }
}
