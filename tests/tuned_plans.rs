//! Tuned plans (`macko::tune`): a plan filed in the cache is the plan products then run, with
//! results that agree with the f64 reference for every candidate the tuner may file; a cache
//! that cannot be trusted, or was measured elsewhere, changes nothing; the tuner's own entry
//! round-trips through the file into the device.

mod common;

use std::path::PathBuf;

use common::{assert_agrees, open_or_skip, random_dense};
use half::f16;
use macko::tune::{self, DeviceKey, MatrixClass, PlanCacheFile, PlanCacheStatus, TunedEntry};
use macko::{
    reference, BackendKind, Device, DeviceOptions, MackoMatrix, MatrixKind, PlanCache, Precision,
    Tuning,
};

/// Shapes that walk different plan rules: short rows, x wider than a tile, rows mostly padding.
const SHAPES: [(usize, usize, f64); 3] = [(37, 1001, 0.3), (130, 4099, 0.7), (5, 9000, 0.5)];

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("macko-tuned-{}-{name}.json", std::process::id()))
}

fn matrices() -> Vec<MackoMatrix> {
    SHAPES
        .iter()
        .enumerate()
        .map(|(i, &(r, c, d))| {
            MackoMatrix::from_dense(&random_dense(r, c, d, 40 + i as u64)).unwrap()
        })
        .collect()
}

fn with_cache(kind: BackendKind, path: &std::path::Path) -> DeviceOptions {
    DeviceOptions {
        plan_cache: PlanCache::File(path.to_path_buf()),
        ..DeviceOptions::for_backend(kind)
    }
}

fn rules_only(kind: BackendKind) -> DeviceOptions {
    DeviceOptions {
        plan_cache: PlanCache::Off,
        ..DeviceOptions::for_backend(kind)
    }
}

fn check_product(label: &str, dev: &Device, a: &macko::DeviceMatrix, m: &MackoMatrix) {
    let x: Vec<f16> = (0..m.cols())
        .map(|c| f16::from_f32(((c % 11) as f32 - 5.0) / 4.0))
        .collect();
    let r = reference::spmv_macko(m, &x).unwrap();
    let xd = dev.upload_vector(&x).unwrap();
    let mut y = dev.zeros(m.rows(), Precision::F32).unwrap();
    dev.spmv(a, &xd, &mut y).unwrap();
    assert_agrees(label, "tuned plan", &r, &dev.download(&y).unwrap());
}

fn entry(m: &MackoMatrix, tuning: &str) -> TunedEntry {
    TunedEntry {
        class: MatrixClass::of(m.into()),
        tuning: tuning.into(),
        tuned_us: 1.0,
        rules_us: 2.0,
        candidates: 2,
    }
}

#[test]
fn every_candidate_filed_in_the_cache_is_the_plan_that_runs_and_agrees() {
    let mats = matrices();
    for kind in [BackendKind::Wgpu, BackendKind::Cuda] {
        let Some(rules) = open_or_skip(kind.name(), &rules_only(kind)) else {
            continue;
        };
        let key = DeviceKey::of(rules.info());
        let path = temp_path(kind.name());
        for &items in &tune::candidates::candidates(kind, MatrixKind::Macko)[1..] {
            let label = format!("{kind} {items}");
            let mut file = PlanCacheFile::default();
            for m in &mats {
                file.insert(&key, entry(m, items));
            }
            file.save(&path).unwrap();
            let tuned = Device::with_options(&with_cache(kind, &path)).unwrap();
            match tuned.plan_cache() {
                PlanCacheStatus::Read { applied, .. } => {
                    assert_eq!(*applied, mats.len(), "{label}")
                }
                other => panic!("{label}: the cache was not read: {other}"),
            }
            let forced = Device::with_options(&DeviceOptions {
                tuning: Some(Tuning::parse(items).unwrap()),
                ..DeviceOptions::for_backend(kind)
            })
            .unwrap();
            for m in &mats {
                let a = tuned.upload(m).unwrap();
                // The forced plan where the device takes it for this matrix, else the rules'.
                let want = match forced.upload(m) {
                    Ok(f) => forced.plan(&f).unwrap(),
                    Err(_) => rules.plan(&rules.upload(m).unwrap()).unwrap(),
                };
                assert_eq!(tuned.plan(&a).unwrap(), want, "{label}");
                check_product(&label, &tuned, &a, m);
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn a_corrupt_foreign_or_other_device_cache_changes_no_plan() {
    let mats = matrices();
    for kind in [BackendKind::Wgpu, BackendKind::Cuda] {
        let Some(rules) = open_or_skip(kind.name(), &rules_only(kind)) else {
            continue;
        };
        let key = DeviceKey::of(rules.info());
        // A candidate that changes the plan of the first matrix on this device.
        let list = tune::candidates::candidates(kind, MatrixKind::Macko);
        let rules_plan = rules.plan(&rules.upload(&mats[0]).unwrap()).unwrap();
        let changing = list[1..]
            .iter()
            .find(|items| {
                let d = Device::with_options(&DeviceOptions {
                    tuning: Some(Tuning::parse(items).unwrap()),
                    ..DeviceOptions::for_backend(kind)
                })
                .unwrap();
                d.upload(&mats[0])
                    .is_ok_and(|a| d.plan(&a).unwrap() != rules_plan)
            })
            .expect("some candidate changes the plan");
        let path = temp_path(&format!("{}-bad", kind.name()));
        let good = {
            let mut f = PlanCacheFile::default();
            f.insert(&key, entry(&mats[0], changing));
            f
        };
        let other_version = {
            let mut f = PlanCacheFile::default();
            let other = DeviceKey {
                library: "0.0.0-elsewhere".into(),
                ..key.clone()
            };
            f.insert(&other, entry(&mats[0], changing));
            f.to_json()
        };
        let text = good.to_json();
        let cases = [
            ("truncated", text[..text.len() / 3].to_string(), true),
            ("another tool's JSON", "{\"plans\": []}".to_string(), true),
            (
                "an unknown tuning",
                text.replace(changing, &format!("{kind}.no_such_choice=on")),
                true,
            ),
            ("another library version's", other_version, false),
        ];
        for (what, contents, ignored) in cases {
            std::fs::write(&path, contents).unwrap();
            let dev = Device::with_options(&with_cache(kind, &path)).unwrap();
            match (dev.plan_cache(), ignored) {
                (PlanCacheStatus::Ignored(_), true) => {}
                (
                    PlanCacheStatus::Read {
                        applied: 0,
                        other: 1,
                        ..
                    },
                    false,
                ) => {}
                (status, _) => panic!("{kind}, {what}: {status}"),
            }
            let a = dev.upload(&mats[0]).unwrap();
            assert_eq!(dev.plan(&a).unwrap(), rules_plan, "{kind}, {what}");
            check_product(what, &dev, &a, &mats[0]);
        }
        // The same entry, in a good file, is applied: the cases above were refused for their
        // faults, not for the entry.
        good.save(&path).unwrap();
        let dev = Device::with_options(&with_cache(kind, &path)).unwrap();
        let a = dev.upload(&mats[0]).unwrap();
        assert_ne!(dev.plan(&a).unwrap(), rules_plan, "{kind}: the good file");
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn the_tuners_entry_goes_through_the_file_into_the_device() {
    let m = &matrices()[0];
    let settings = tune::TuneSettings {
        warmup: 1,
        iters: 3,
        confirm_rounds: 1,
        ..tune::TuneSettings::default()
    };
    // The CPU has nothing to tune.
    let cpu = Device::with_options(&rules_only(BackendKind::Cpu)).unwrap();
    assert_eq!(
        tune::tune_matrix(&cpu, m.into(), &settings, &mut |_| {}).unwrap(),
        None
    );
    for kind in [BackendKind::Wgpu, BackendKind::Cuda] {
        let Some(dev) = open_or_skip(kind.name(), &rules_only(kind)) else {
            continue;
        };
        let mut timed = 0;
        let outcome = tune::tune_matrix(&dev, m.into(), &settings, &mut |p| {
            if matches!(p, tune::TuneProgress::Timed { .. }) {
                timed += 1;
            }
        })
        .unwrap()
        .expect("MACKO is tuned on a GPU backend");
        assert!(
            timed >= 2,
            "{kind}: at least the rules and one candidate are timed"
        );
        assert_eq!(outcome.entry.class, MatrixClass::of(m.into()));
        assert!(outcome.entry.tuned_us > 0.0 && outcome.entry.tuned_us <= outcome.entry.rules_us);
        let path = temp_path(&format!("{}-tuner", kind.name()));
        let mut file = PlanCacheFile::default();
        file.insert(&DeviceKey::of(dev.info()), outcome.entry.clone());
        file.save(&path).unwrap();
        let tuned = Device::with_options(&with_cache(kind, &path)).unwrap();
        let forced = Device::with_options(&DeviceOptions {
            tuning: Some(Tuning::parse(&outcome.entry.tuning).unwrap()),
            ..DeviceOptions::for_backend(kind)
        })
        .unwrap();
        let a = tuned.upload(m).unwrap();
        assert_eq!(
            tuned.plan(&a).unwrap(),
            forced.plan(&forced.upload(m).unwrap()).unwrap(),
            "{kind}: {:?}",
            outcome.entry.tuning
        );
        check_product(kind.name(), &tuned, &a, m);
        std::fs::remove_file(&path).unwrap();
    }
}
