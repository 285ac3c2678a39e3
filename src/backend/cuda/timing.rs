//! Timing with CUDA events: every product of a measurement is queued between its own pair of
//! timing-enabled events (cudarc creates events with timing disabled unless asked), all of them
//! on the one stream before a single synchronisation; the elapsed times are read afterwards.
//!
//! A product shorter than the host's launch time would otherwise be timed with the GPU idle
//! between its start event and its kernel, waiting for the host: so a spin kernel first holds
//! the stream for longer than the host needs to queue the whole sequence, after which the
//! products run back to back and each event pair brackets GPU time only.

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream};

use super::errors::cuda_error;
use super::memory::DeviceArray;
use crate::error::Result;

/// Upper bound on the copies of the streaming-read buffer, however small it is.
const MAX_STREAM_COPIES: u64 = 64;

/// Start/end event pairs for `n` measurements, created before anything is queued so that event
/// creation stays out of the measured stream.
pub(crate) fn event_pairs(ctx: &Arc<CudaContext>, n: usize) -> Result<Vec<(CudaEvent, CudaEvent)>> {
    let timed = || {
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| cuda_error("creating a timing event", e))
    };
    (0..n).map(|_| Ok((timed()?, timed()?))).collect()
}

/// Host time allowed for queueing one timed product and its two events, generously: cudarc's
/// launch path costs a few microseconds.
const QUEUE_NS_PER_RUN: u64 = 20_000;
/// The longest the stream is held before a timed sequence.
const MAX_HOLD_NS: u64 = 200_000_000;

/// How long to hold the stream so that the host can queue `iters` timed runs first.
pub(crate) fn hold_ns(iters: usize) -> u64 {
    (iters as u64)
        .saturating_mul(QUEUE_NS_PER_RUN)
        .saturating_add(100_000)
        .min(MAX_HOLD_NS)
}

/// Queues `warmup` untimed runs of `run(i)`, then holds the stream with `hold(ns)` while it
/// queues `iters` runs each between its own event pair, waits once, and returns the seconds of
/// each timed run.
pub(crate) fn time_queued(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    warmup: usize,
    iters: usize,
    hold: impl FnOnce(u64) -> Result<()>,
    mut run: impl FnMut(usize) -> Result<()>,
) -> Result<Vec<f64>> {
    let events = event_pairs(ctx, iters)?;
    for i in 0..warmup {
        run(i)?;
    }
    if iters > 0 {
        hold(hold_ns(iters))?;
    }
    for (i, (start, end)) in events.iter().enumerate() {
        start
            .record(stream)
            .map_err(|e| cuda_error("recording a timing event", e))?;
        run(warmup + i)?;
        end.record(stream)
            .map_err(|e| cuda_error("recording a timing event", e))?;
    }
    stream
        .synchronize()
        .map_err(|e| cuda_error("waiting for the timed products", e))?;
    events
        .iter()
        .map(|(start, end)| {
            start
                .elapsed_ms(end)
                .map(|ms| f64::from(ms) * 1e-3)
                .map_err(|e| cuda_error("reading a timing event", e))
        })
        .collect()
}

/// How many copies of a `bytes`-byte buffer the streaming read rotates through, so that the
/// copies together are at least three times the L2 cache and a pass never finds its data there.
pub(crate) fn stream_copies(bytes: u64, l2_bytes: u64) -> u64 {
    (3 * l2_bytes)
        .div_ceil(bytes.max(1))
        .clamp(1, MAX_STREAM_COPIES)
}

/// The buffers of a streaming-read measurement.
pub(crate) struct StreamBuffers {
    /// Copies of the data, each `4·words` u32.
    pub copies: Vec<DeviceArray<u32>>,
    /// 16-byte words per copy.
    pub words: u64,
    /// One word per block.
    pub out: DeviceArray<u32>,
}

impl StreamBuffers {
    /// `copies` buffers of `bytes` bytes (rounded up to 16) filled with a non-zero pattern, and
    /// the per-block output.
    pub fn new(stream: &Arc<CudaStream>, bytes: u64, copies: u64, blocks: u32) -> Result<Self> {
        let words = bytes.div_ceil(16).max(1);
        let len = usize::try_from(words * 4).map_err(|_| {
            super::errors::internal("streaming-read buffer larger than the address space")
        })?;
        let mut buffers = Vec::new();
        for _ in 0..copies {
            let mut buf = DeviceArray::<u32>::zeros(stream, len, "a streaming-read buffer")?;
            fill_pattern(stream, buf.buf_mut())?;
            buffers.push(buf);
        }
        let out = DeviceArray::<u32>::zeros(stream, blocks as usize, "streaming-read output")?;
        Ok(Self {
            copies: buffers,
            words,
            out,
        })
    }
}

/// Fills a buffer with 0x5a bytes: the read should not see the zeros a fresh allocation has.
fn fill_pattern(stream: &Arc<CudaStream>, buf: &mut CudaSlice<u32>) -> Result<()> {
    use cudarc::driver::DevicePtrMut;
    let bytes = buf.len() * 4;
    let (ptr, _sync) = buf.device_ptr_mut(stream);
    // SAFETY: `ptr` is a live allocation of `bytes` bytes on `stream`; the memset is queued on
    // that stream, before any read of the buffer.
    unsafe { cudarc::driver::result::memset_d8_async(ptr, 0x5a, bytes, stream.cu_stream()) }
        .map_err(|e| cuda_error("filling a streaming-read buffer", e))
}

#[cfg(test)]
mod tests {
    use super::{hold_ns, stream_copies};

    #[test]
    fn the_stream_is_held_long_enough_to_queue_but_bounded() {
        assert_eq!(hold_ns(0), 100_000);
        assert!(hold_ns(100) >= 100 * 10_000);
        assert_eq!(hold_ns(usize::MAX), 200_000_000);
    }

    #[test]
    fn stream_copies_exceed_the_cache() {
        let l2 = 50 << 20;
        assert_eq!(stream_copies(1 << 30, l2), 1);
        assert_eq!(stream_copies(50 << 20, l2), 3);
        assert_eq!(stream_copies(1, l2), 64);
        assert!(stream_copies(5 << 20, l2) * (5 << 20) >= 3 * l2);
    }
}
