//! One `Device` shared by many threads: each thread uploads its own matrix and vectors,
//! multiplies and downloads, round after round, while the others do the same on the same
//! device. Every result must equal what the same work gives on one thread (bit for bit: same
//! device, same matrix, same x, same kernel) and agree with the f64 reference; afterwards the
//! device must still work single-threaded, so a failure under contention that poisons later
//! calls (a staging buffer left mapped, say) shows too.
//!
//! Runs on every backend present: the CPU always, wgpu (lavapipe in CI, Vulkan on a GPU
//! machine), CUDA. Without one, the test prints why and skips it, unless
//! `MACKO_REQUIRE_BACKENDS` names it.

mod common;

use std::thread;

use common::{assert_agrees, open_or_skip, random_dense, random_x};

use half::f16;
use macko::{reference, BackendKind, Device, DeviceOptions, HostVector, MackoMatrix, Precision};

/// Threads sharing the device.
const THREADS: usize = 8;
/// Rounds of upload, multiply and download per thread.
const ROUNDS: usize = 48;
/// Downloads of each y (all must be equal): downloads are where threads wait on the device
/// at once, and where a wait that misses its own completion showed.
const DOWNLOADS: usize = 4;
/// Distinct x vectors per thread (round r uses x number r % XS).
const XS: usize = 3;
/// Every this many rounds a thread uploads its matrix again (the matrix is over 256 KiB, so on
/// wgpu the upload goes through the mapped upload staging buffer, not the queue).
const REUPLOAD_EVERY: usize = 4;
/// The shape of each thread's matrix.
const ROWS: usize = 520;
const COLS: usize = 768;

/// `Device` must be shareable between threads; this fails to compile otherwise.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Device>();
};

/// One thread's work: its matrix, its x vectors and their references.
struct Work {
    matrix: MackoMatrix,
    xs: Vec<Vec<f16>>,
    refs: Vec<reference::Reference>,
}

impl Work {
    fn new(thread: usize) -> Self {
        let seed = 1000 + thread as u64 * 17;
        let dense = random_dense(ROWS, COLS, 0.5, seed);
        let matrix = MackoMatrix::from_dense(&dense).unwrap();
        let xs: Vec<Vec<f16>> = (0..XS)
            .map(|k| random_x(COLS, seed + k as u64 + 1))
            .collect();
        let refs = xs
            .iter()
            .map(|x| reference::spmv_macko(&matrix, x).unwrap())
            .collect();
        Self { matrix, xs, refs }
    }
}

/// The CPU, wgpu (any adapter, lavapipe included) and CUDA, where present.
fn devices() -> Vec<(String, Device)> {
    [BackendKind::Cpu, BackendKind::Wgpu, BackendKind::Cuda]
        .into_iter()
        .filter_map(|kind| {
            let label = kind.name().to_string();
            open_or_skip(&label, &DeviceOptions::for_backend(kind)).map(|d| (label, d))
        })
        .collect()
}

/// The y precision of round `round`: f32 and f16 in turn.
fn precision(round: usize) -> Precision {
    if round % 2 == 0 {
        Precision::F32
    } else {
        Precision::F16
    }
}

/// Runs `work`'s rounds on `dev` and returns every downloaded y, or the first error (with the
/// round it happened in).
fn run_rounds(dev: &Device, work: &Work) -> Result<Vec<HostVector>, String> {
    let fail = |round: usize, what: &str, e: macko::Error| format!("round {round}, {what}: {e}");
    let mut a = dev
        .upload(&work.matrix)
        .map_err(|e| fail(0, "upload A", e))?;
    let mut ys = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        if round > 0 && round % REUPLOAD_EVERY == 0 {
            a = dev
                .upload(&work.matrix)
                .map_err(|e| fail(round, "upload A", e))?;
        }
        let x = dev
            .upload_vector(&work.xs[round % XS])
            .map_err(|e| fail(round, "upload x", e))?;
        let mut y = dev
            .zeros(ROWS, precision(round))
            .map_err(|e| fail(round, "zeros", e))?;
        dev.spmv(&a, &x, &mut y)
            .map_err(|e| fail(round, "spmv", e))?;
        if round % 3 == 1 {
            dev.synchronize()
                .map_err(|e| fail(round, "synchronize", e))?;
        }
        let first = dev.download(&y).map_err(|e| fail(round, "download", e))?;
        for again in 1..DOWNLOADS {
            let y_again = dev.download(&y).map_err(|e| fail(round, "download", e))?;
            if y_again != first {
                return Err(format!(
                    "round {round}: download {again} differs from the first"
                ));
            }
        }
        ys.push(first);
    }
    Ok(ys)
}

/// Runs `f` on every work at once, one thread each, and returns each thread's result in order
/// (a thread that panicked as an error).
fn on_threads<T: Send>(
    works: &[Work],
    f: impl Fn(&Work) -> Result<T, String> + Sync,
) -> Vec<Result<T, String>> {
    thread::scope(|s| {
        let handles: Vec<_> = works.iter().map(|w| s.spawn(|| f(w))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the thread panicked".into()))
            })
            .collect()
    })
}

/// Asserts that `got` (from thread `t`) equals the single-threaded `want` and the reference.
fn check(label: &str, t: usize, work: &Work, got: &[HostVector], want: &[HostVector]) {
    for (round, (g, w)) in got.iter().zip(want).enumerate() {
        let what = format!("thread {t}, round {round}");
        assert_agrees(label, &what, &work.refs[round % XS], g);
        assert!(
            g == w,
            "{label}, {what}: differs from the single-threaded result"
        );
    }
}

#[test]
fn threads_sharing_one_device_get_the_single_threaded_results() {
    let works: Vec<Work> = (0..THREADS).map(Work::new).collect();
    for (label, dev) in devices() {
        let alone: Vec<Vec<HostVector>> = works
            .iter()
            .map(|w| run_rounds(&dev, w).unwrap_or_else(|e| panic!("{label}, alone: {e}")))
            .collect();
        let shared = on_threads(&works, |w| run_rounds(&dev, w));
        let failures: Vec<String> = shared
            .iter()
            .enumerate()
            .filter_map(|(t, r)| r.as_ref().err().map(|e| format!("thread {t}: {e}")))
            .collect();
        // Whatever happened under contention, the device must still work on one thread.
        let after = run_rounds(&dev, &works[0]);
        assert!(
            failures.is_empty(),
            "{label}: {} of {THREADS} threads failed: {}; single-threaded afterwards: {}",
            failures.len(),
            failures.join("; "),
            match &after {
                Ok(_) => "works".to_string(),
                Err(e) => format!("fails ({e})"),
            }
        );
        for (t, r) in shared.iter().enumerate() {
            if let Ok(got) = r {
                check(&label, t, &works[t], got, &alone[t]);
            }
        }
        let after = after.unwrap_or_else(|e| panic!("{label}, single-threaded afterwards: {e}"));
        check(&label, 0, &works[0], &after, &alone[0]);
        println!(
            "{label}: {THREADS} threads × {ROUNDS} rounds on one device, all equal to one thread's"
        );
    }
}

/// Threads timing products at once, each checking its own result.
const TIMERS: usize = 4;
/// Timed calls per thread, and products per call.
const TIMED_CALLS: usize = 6;
const TIMED_ITERS: usize = 3;

/// One thread's timing rounds: every call returns `TIMED_ITERS` finite, positive seconds, and y
/// afterwards holds the product (the timed products write it).
fn time_rounds(dev: &Device, work: &Work) -> Result<(HostVector, usize), String> {
    fn e(what: &'static str) -> impl Fn(macko::Error) -> String {
        move |e| format!("{what}: {e}")
    }
    let a = dev.upload(&work.matrix).map_err(e("upload A"))?;
    let copy = dev.upload(&work.matrix).map_err(e("upload A"))?;
    let x = dev.upload_vector(&work.xs[0]).map_err(e("upload x"))?;
    let mut y = dev.zeros(ROWS, Precision::F32).map_err(e("zeros"))?;
    let mut timed = 0;
    for call in 0..TIMED_CALLS {
        let times = dev
            .time_spmv(&[&a, &copy], &x, &mut y, 1, TIMED_ITERS)
            .map_err(e("time_spmv"))?;
        if times.len() != TIMED_ITERS || !times.iter().all(|s| s.is_finite() && *s > 0.0) {
            return Err(format!("call {call}: times {times:?}"));
        }
        timed += times.len();
    }
    Ok((dev.download(&y).map_err(e("download"))?, timed))
}

/// Issue 27: `time_spmv` from several threads at once on one device (the device timer: CUDA
/// events, wgpu timestamp queries, the CPU's clock). Every timing is a finite, positive number
/// of seconds, every y is the product, and the device works single-threaded afterwards.
#[test]
fn threads_timing_products_at_once_get_sane_times_and_right_products() {
    let works: Vec<Work> = (0..TIMERS).map(|t| Work::new(100 + t)).collect();
    for (label, dev) in devices() {
        let results = on_threads(&works, |w| time_rounds(&dev, w));
        let mut timed = 0;
        for (t, r) in results.iter().enumerate() {
            match r {
                Ok((y, n)) => {
                    assert_agrees(
                        &label,
                        &format!("thread {t}, timed y"),
                        &works[t].refs[0],
                        y,
                    );
                    timed += n;
                }
                Err(e) => panic!("{label}, thread {t}: {e}"),
            }
        }
        assert_eq!(timed, TIMERS * TIMED_CALLS * TIMED_ITERS);
        if let Err(e) = time_rounds(&dev, &works[0]) {
            panic!("{label}: single-threaded timing afterwards fails: {e}");
        }
    }
}
