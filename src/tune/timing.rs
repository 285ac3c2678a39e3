//! The tuner: times a matrix's candidate plans on a device and picks the fastest, with every
//! candidate's product checked against the f64 reference before it is timed.
//!
//! Method (the benchmark's, BENCHMARKS.md): device timers ([`Device::time_spmv`]), warm-up
//! first, copies of the matrix rotated until they exceed any L2 cache, the median of many
//! products. A candidate only replaces the rules' plan if it wins by [`TuneSettings::min_gain`]
//! in rounds that alternate the two, so that noise and clock drift do not file a plan that is
//! no faster.

use std::time::Instant;

use macko_format::{reference, MatrixRef, OutputPrecision};

use super::cache::TunedEntry;
use super::candidates::candidates;
use super::class::MatrixClass;
use crate::device::{Device, DeviceMatrix};
use crate::dispatch::Plan;
use crate::error::{Error, Result};
use crate::options::Tuning;
use crate::{synthetic, Precision};

/// How the tuner measures.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneSettings {
    /// Untimed products before each measurement.
    pub warmup: usize,
    /// Timed products per measurement (the median is kept).
    pub iters: usize,
    /// Alternating rounds of the rules' plan and the winner that confirm a win.
    pub confirm_rounds: usize,
    /// The fraction by which a candidate must beat the rules' plan in the confirming rounds
    /// (0.02: 2 % faster) to be filed; otherwise the rules' plan is filed.
    pub min_gain: f64,
    /// Copies of the matrix are made until they hold this many bytes (more than any L2 cache),
    /// so that products read from memory.
    pub rotation_bytes: u64,
    /// The most copies.
    pub max_copies: usize,
    /// Seed of the activation vector.
    pub seed: u64,
}

impl Default for TuneSettings {
    fn default() -> Self {
        Self {
            warmup: 10,
            iters: 40,
            confirm_rounds: 3,
            min_gain: 0.02,
            rotation_bytes: 256 << 20,
            max_copies: 8,
            seed: 7,
        }
    }
}

/// What the tuner is doing, for a progress display.
#[derive(Debug, Clone, PartialEq)]
pub enum TuneProgress {
    /// A candidate was timed: its median in microseconds.
    Timed {
        /// Its tuning items (empty: the rules' plan).
        tuning: String,
        /// Median microseconds per product.
        micros: f64,
    },
    /// A candidate was not timed, and why (its plan equals one already timed, or the device
    /// refused it for this matrix).
    Skipped {
        /// Its tuning items.
        tuning: String,
        /// Why.
        reason: String,
    },
    /// The winner and the rules' plan are being timed again, alternately.
    Confirming {
        /// The winner's items.
        tuning: String,
    },
}

/// The tuner's result for one matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneOutcome {
    /// The entry to file.
    pub entry: TunedEntry,
    /// Every distinct plan timed: its tuning items and median microseconds.
    pub timed: Vec<(String, f64)>,
    /// Seconds the tuning took on the host clock.
    pub seconds: f64,
}

/// Times the candidate plans of `m` on `dev` and returns the fastest as a cache entry, or
/// `None` where nothing is tuned for this device and format (the CPU; formats other than
/// binary16 MACKO). Each distinct candidate's product is checked against the f64 reference
/// first; a disagreement is an error (a bug in macko), never a filed plan.
pub fn tune_matrix(
    dev: &Device,
    m: MatrixRef<'_>,
    settings: &TuneSettings,
    progress: &mut dyn FnMut(TuneProgress),
) -> Result<Option<TuneOutcome>> {
    let list = candidates(dev.kind(), m.kind());
    if list.is_empty() {
        return Ok(None);
    }
    let start = Instant::now();
    let mut bench = Bench::new(dev, m, settings)?;
    // Round 1: each candidate alone.
    for &items in list {
        bench.try_candidate(items, progress)?;
    }
    let rules_us = bench
        .time_of("")
        .ok_or_else(|| tuner_error(dev.kind(), "the rules' own plan could not be timed"))?;
    // Round 2: the best single change combined with each other one that beat the rules.
    let mut better: Vec<(String, f64)> = bench
        .timed
        .iter()
        .filter(|(t, us)| !t.is_empty() && *us < rules_us)
        .cloned()
        .collect();
    better.sort_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((best, _)) = better.first().cloned() {
        for (other, _) in &better[1..] {
            if let Some(combined) = combine(&best, other) {
                bench.try_candidate(&combined, progress)?;
            }
        }
    }
    let (winner, _) = bench
        .timed
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .cloned()
        .unwrap_or_default();
    let (tuning, tuned_us, rules_us) = if winner.is_empty() {
        (winner, rules_us, rules_us)
    } else {
        progress(TuneProgress::Confirming {
            tuning: winner.clone(),
        });
        let (mut w, mut r) = (Vec::new(), Vec::new());
        for _ in 0..settings.confirm_rounds.max(1) {
            r.push(bench.measure("")?);
            w.push(bench.measure(&winner)?);
        }
        let (w, r) = (median(&mut w), median(&mut r));
        if w < r * (1.0 - settings.min_gain) {
            (winner, w, r)
        } else {
            (String::new(), r, r)
        }
    };
    Ok(Some(TuneOutcome {
        entry: TunedEntry {
            class: MatrixClass::of(m),
            tuning,
            tuned_us,
            rules_us,
            candidates: bench.timed.len() as u32,
        },
        timed: bench.timed,
        seconds: start.elapsed().as_secs_f64(),
    }))
}

/// `a` and `b` as one tuning, unless they set the same key (then `None`: one would undo the
/// other).
fn combine(a: &str, b: &str) -> Option<String> {
    let keys = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .filter_map(|i| i.split_once('=').map(|(k, _)| k.to_string()))
            .collect()
    };
    let ka = keys(a);
    if keys(b).iter().any(|k| ka.contains(k)) {
        return None;
    }
    Some(format!("{a} {b}"))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn tuner_error(backend: crate::BackendKind, message: &str) -> Error {
    Error::Backend {
        backend,
        message: format!("tuner: {message}"),
    }
}

/// The state of one matrix's tuning: its vectors, reference and the plans timed so far.
struct Bench<'a> {
    dev: &'a Device,
    m: MatrixRef<'a>,
    settings: &'a TuneSettings,
    x: crate::DeviceVector,
    y: crate::DeviceVector,
    reference: reference::Reference,
    copies: usize,
    /// Plans timed, with their tuning items, so that a candidate giving the same plan is
    /// skipped.
    plans: Vec<(Plan, String)>,
    timed: Vec<(String, f64)>,
}

impl<'a> Bench<'a> {
    fn new(dev: &'a Device, m: MatrixRef<'a>, settings: &'a TuneSettings) -> Result<Self> {
        let (rows, cols) = m.shape();
        let x_host = synthetic::activations(cols, settings.seed);
        let reference = reference::spmv(m, &x_host)?;
        let bytes = m.bytes().max(1);
        let copies = usize::try_from(settings.rotation_bytes.div_ceil(bytes))
            .unwrap_or(usize::MAX)
            .clamp(1, settings.max_copies.max(1));
        Ok(Self {
            dev,
            m,
            settings,
            x: dev.upload_vector(&x_host)?,
            y: dev.zeros(rows, Precision::F32)?,
            reference,
            copies,
            plans: Vec::new(),
            timed: Vec::new(),
        })
    }

    fn time_of(&self, items: &str) -> Option<f64> {
        self.timed
            .iter()
            .find(|(t, _)| t == items)
            .map(|(_, us)| *us)
    }

    /// Uploads `m` with `items`' tuning, or says why the device refused this candidate.
    fn upload(&self, tuning: &Tuning) -> Result<std::result::Result<DeviceMatrix, String>> {
        match self.dev.upload_tuned(self.m, tuning) {
            Ok(a) => Ok(Ok(a)),
            Err(
                e @ (Error::TooLarge { .. } | Error::Unsupported { .. } | Error::Tuning { .. }),
            ) => Ok(Err(e.to_string())),
            Err(e) => Err(e),
        }
    }

    /// Times one candidate unless the device refuses it or its plan was timed already; checks
    /// its product against the reference first.
    fn try_candidate(&mut self, items: &str, progress: &mut dyn FnMut(TuneProgress)) -> Result<()> {
        let skipped = |reason: String| TuneProgress::Skipped {
            tuning: items.to_string(),
            reason,
        };
        let tuning = Tuning::parse(items)?;
        let first = match self.upload(&tuning)? {
            Ok(a) => a,
            Err(reason) => {
                progress(skipped(reason));
                return Ok(());
            }
        };
        let plan = self.dev.plan(&first)?;
        if let Some((_, same)) = self.plans.iter().find(|(p, _)| *p == plan) {
            let same = if same.is_empty() { "the rules'" } else { same };
            progress(skipped(format!("the same plan as {same}")));
            return Ok(());
        }
        self.check(&first, items)?;
        let us = self.time(first, &tuning)?;
        self.plans.push((plan, items.to_string()));
        self.timed.push((items.to_string(), us));
        progress(TuneProgress::Timed {
            tuning: items.to_string(),
            micros: us,
        });
        Ok(())
    }

    /// The product of `a` against the f64 reference: a disagreement is a bug, reported.
    fn check(&mut self, a: &DeviceMatrix, items: &str) -> Result<()> {
        self.dev.spmv(a, &self.x, &mut self.y)?;
        let got = self.dev.download(&self.y)?.to_f64();
        match self
            .reference
            .first_disagreement(&got, OutputPrecision::F32)
        {
            None => Ok(()),
            Some((r, g, want, tol)) => Err(tuner_error(
                self.dev.kind(),
                &format!(
                "the plan of tuning {items:?} gives row {r} = {g}, but the reference is {want} \
                 (tolerance {tol:e}): a bug in macko, please report it"
                ),
            )),
        }
    }

    /// Median microseconds per product over rotated copies, the first being `first`.
    fn time(&mut self, first: DeviceMatrix, tuning: &Tuning) -> Result<f64> {
        let mut mats = vec![first];
        for _ in 1..self.copies {
            mats.push(self.dev.upload_tuned(self.m, tuning)?);
        }
        let refs: Vec<&DeviceMatrix> = mats.iter().collect();
        let mut times = self.dev.time_spmv(
            &refs,
            &self.x,
            &mut self.y,
            self.settings.warmup,
            self.settings.iters.max(1),
        )?;
        Ok(median(&mut times) * 1e6)
    }

    /// Times `items` again (the confirming rounds).
    fn measure(&mut self, items: &str) -> Result<f64> {
        let tuning = Tuning::parse(items)?;
        let first = self.dev.upload_tuned(self.m, &tuning)?;
        self.time(first, &tuning)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_never_set_a_key_twice() {
        assert_eq!(
            combine("cuda.flat=on", "cuda.lanes=16").as_deref(),
            Some("cuda.flat=on cuda.lanes=16")
        );
        assert_eq!(combine("cuda.split=2 cuda.flat=off", "cuda.flat=on"), None);
    }

    #[test]
    fn the_median_is_the_middle_value() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert!(median(&mut []).is_nan());
    }
}
