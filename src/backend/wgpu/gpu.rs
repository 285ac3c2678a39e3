//! The opened device and everything that talks to it directly: error capture (error scopes,
//! the uncaptured-error handler, device loss), waiting, buffer creation, and uploads and
//! downloads through reused staging buffers.
//!
//! wgpu reports most errors asynchronously and, by default, panics on those nobody captured.
//! Here every call that can fail (allocation, shader and pipeline creation, submission) runs
//! inside error scopes and becomes an `Err`; anything that still escapes is recorded by the
//! handler installed at open and returned by the next call, as is the loss of the device.

use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::backend::BackendKind;
use crate::error::{Error, Result};

use super::adapter::Opened;

/// Largest chunk moved through a staging buffer at once; staging buffers grow to this size on
/// demand and are reused by every later upload or download.
const STAGING_MAX: u64 = 16 << 20;
/// Smallest staging buffer worth keeping.
const STAGING_MIN: u64 = 64 << 10;
/// Writes up to this size go through `Queue::write_buffer` (wgpu's own staging, applied before
/// the next submission) instead of a mapped staging buffer and a wait: uniform parameters and
/// small vectors are written on every upload.
const SMALL_WRITE: usize = 256 << 10;

/// How long a map may take after the device has finished the work before it. The callback
/// is due once the poll returns; only another thread, preempted while running it, can delay
/// it, so this bound is only reached by a map that will never complete.
const MAP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long to wait for a map callback before polling the device again.
const MAP_RECHECK: Duration = Duration::from_millis(5);

/// What a map callback reports.
type MapResult = std::result::Result<(), wgpu::BufferAsyncError>;

/// Locks a mutex even if a panicking thread poisoned it: the data behind these locks (a
/// staging buffer, a pending encoder) stays consistent between statements.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An error of this backend's API.
pub(super) fn backend_error(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: BackendKind::Wgpu,
        message: message.into(),
    }
}

/// Errors that reached no error scope, and the loss of the device.
#[derive(Default)]
struct Health {
    lost: Mutex<Option<String>>,
    uncaptured: Mutex<Vec<String>>,
}

impl Health {
    /// Err once the device is lost (for good), or with the errors captured since the last call
    /// (once).
    fn check(&self) -> Result<()> {
        if let Some(reason) = lock(&self.lost).as_ref() {
            return Err(backend_error(format!("the device was lost: {reason}")));
        }
        let errors = std::mem::take(&mut *lock(&self.uncaptured));
        if !errors.is_empty() {
            return Err(backend_error(errors.join("; ")));
        }
        Ok(())
    }
}

/// Rounds `n` up to a multiple of `to` (a power of two).
pub(super) fn round_up(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}

/// Size of a buffer holding `len` bytes: whole 16-byte words (kernels read vec4<u32>), never
/// empty (a binding must have a size).
pub(super) fn buffer_size(len: u64) -> u64 {
    round_up(len.max(1), 16)
}

/// The opened device and its queue, with what the adapter reported.
pub(super) struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub features: wgpu::Features,
    health: Arc<Health>,
    upload_staging: Mutex<Option<wgpu::Buffer>>,
    readback_staging: Mutex<Option<wgpu::Buffer>>,
}

impl Gpu {
    /// Takes over an opened device: installs the uncaptured-error handler (replacing wgpu's
    /// panicking default) and the device-lost callback before anything else touches it.
    pub fn new(opened: Opened) -> Self {
        let health = Arc::new(Health::default());
        let on_error = Arc::clone(&health);
        opened
            .device
            .on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                lock(&on_error.uncaptured).push(e.to_string());
            }));
        let on_lost = Arc::clone(&health);
        opened
            .device
            .set_device_lost_callback(move |reason, message| {
                let detail = if message.is_empty() {
                    String::new()
                } else {
                    format!(": {message}")
                };
                *lock(&on_lost.lost) = Some(format!("{reason:?}{detail}"));
            });
        Self {
            device: opened.device,
            queue: opened.queue,
            adapter: opened.adapter,
            limits: opened.limits,
            features: opened.features,
            health,
            upload_staging: Mutex::new(None),
            readback_staging: Mutex::new(None),
        }
    }

    /// Err if the device is lost or an error escaped the scopes since the last check.
    pub fn check(&self) -> Result<()> {
        self.health.check()
    }

    /// Runs `f` inside out-of-memory, validation and internal error scopes and turns what they
    /// caught into an `Err`: `OutOfMemory` (naming `what` and `bytes`) or `Backend`.
    pub fn scoped<T>(&self, what: &str, bytes: u64, f: impl FnOnce() -> T) -> Result<T> {
        self.check()?;
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let internal = self.device.push_error_scope(wgpu::ErrorFilter::Internal);
        let out = f();
        let internal = pollster::block_on(internal.pop());
        let validation = pollster::block_on(validation.pop());
        let oom = pollster::block_on(oom.pop());
        if oom.is_some() {
            return Err(Error::OutOfMemory {
                backend: BackendKind::Wgpu,
                bytes,
                what: what.to_string(),
            });
        }
        if let Some(e) = validation.or(internal) {
            return Err(backend_error(format!("{what}: {e}")));
        }
        self.check()?;
        Ok(out)
    }

    /// Blocks until every submission so far is done (and map callbacks have run).
    pub fn wait(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| backend_error(format!("waiting for the device failed: {e}")))?;
        self.check()
    }

    /// Submits one encoder's commands (errors in recording surface here).
    pub fn submit(&self, encoder: wgpu::CommandEncoder, what: &str) -> Result<()> {
        self.scoped(what, 0, || {
            self.queue.submit([encoder.finish()]);
        })
    }

    pub fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    /// The largest buffer the adapter allows.
    pub fn max_buffer(&self) -> u64 {
        self.limits.max_buffer_size
    }

    /// A buffer of `size` bytes (already rounded by the caller), zero-filled by wgpu.
    pub fn create_buffer(
        &self,
        size: u64,
        usage: wgpu::BufferUsages,
        what: &str,
    ) -> Result<wgpu::Buffer> {
        if size > self.max_buffer() {
            return Err(Error::TooLarge {
                backend: BackendKind::Wgpu,
                what: what.to_string(),
                needed: size,
                limit: self.max_buffer(),
            });
        }
        self.scoped(what, size, || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(what),
                size,
                usage,
                mapped_at_creation: false,
            })
        })
    }

    /// A storage buffer holding `data` (zero-padded to whole 16-byte words).
    pub fn upload(
        &self,
        data: &[u8],
        usage: wgpu::BufferUsages,
        what: &str,
    ) -> Result<wgpu::Buffer> {
        let buffer = self.create_buffer(
            buffer_size(data.len() as u64),
            usage | wgpu::BufferUsages::COPY_DST,
            what,
        )?;
        self.write(&buffer, data, what)?;
        Ok(buffer)
    }

    /// A staging buffer of at least `size` bytes from `slot`, made or grown on demand.
    fn staging(
        &self,
        slot: &mut Option<wgpu::Buffer>,
        size: u64,
        usage: wgpu::BufferUsages,
        what: &str,
    ) -> Result<wgpu::Buffer> {
        if let Some(b) = slot.as_ref().filter(|b| b.size() >= size) {
            return Ok(b.clone());
        }
        let size = size
            .next_power_of_two()
            .clamp(STAGING_MIN, STAGING_MAX.max(size));
        let b = self.create_buffer(size, usage, what)?;
        *slot = Some(b.clone());
        Ok(b)
    }

    /// Maps `buffer[..size]` and waits for this map's own callback (the wait also covers the
    /// buffer's last use). The returned guard unmaps the buffer when dropped, on every path: a
    /// map that failed or timed out still marks the buffer as mapped in wgpu, and left so it
    /// would fail every later map of the same (shared) staging buffer.
    pub(super) fn map<'b>(
        &'b self,
        buffer: &'b wgpu::Buffer,
        mode: wgpu::MapMode,
        size: u64,
    ) -> Result<Mapped<'b>> {
        let (tx, rx) = mpsc::channel();
        buffer.slice(..size).map_async(mode, move |r| {
            let _ = tx.send(r);
        });
        let mapped = Mapped { gpu: self, buffer };
        self.await_map(&rx)?;
        Ok(mapped)
    }

    /// Polls the device until the map callback behind `rx` has run, or `MAP_TIMEOUT` passed.
    ///
    /// Whichever thread polls runs the callbacks that are due, so after this thread's poll
    /// returns, its callback may still be about to run on another thread: hence the loop
    /// rather than one look right after the poll.
    pub(super) fn await_map(&self, rx: &mpsc::Receiver<MapResult>) -> Result<()> {
        let deadline = Instant::now() + MAP_TIMEOUT;
        loop {
            self.wait()?;
            match rx.recv_timeout(MAP_RECHECK) {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => {
                    return Err(backend_error(format!(
                        "mapping a staging buffer failed: {e}"
                    )))
                }
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(_) => {
                    return Err(backend_error(format!(
                        "mapping a staging buffer did not complete within {} s",
                        MAP_TIMEOUT.as_secs()
                    )))
                }
            }
        }
    }

    /// Unmaps `buffer`, whatever state its map is in: mapped, still pending (the map is
    /// aborted), or failed. wgpu reports unmapping a buffer that is not mapped as a validation
    /// error; that one is expected after a failed map, so it is caught here and dropped rather
    /// than handed to the next call as someone else's error.
    fn unmap(&self, buffer: &wgpu::Buffer) {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        buffer.unmap();
        let _ = pollster::block_on(scope.pop());
    }

    /// Copies `data` into `dst` from offset 0: small data through the queue, the rest through
    /// the upload staging buffer in chunks of at most `STAGING_MAX` bytes. `dst` must be at least `data.len()` rounded up to 4 bytes.
    pub fn write(&self, dst: &wgpu::Buffer, data: &[u8], what: &str) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        if data.len() <= SMALL_WRITE {
            let mut padded = data.to_vec();
            padded.resize(
                round_up(data.len() as u64, wgpu::COPY_BUFFER_ALIGNMENT) as usize,
                0,
            );
            return self.scoped(what, padded.len() as u64, || {
                self.queue.write_buffer(dst, 0, &padded);
            });
        }
        let mut slot = lock(&self.upload_staging);
        for (i, chunk) in data.chunks(STAGING_MAX as usize).enumerate() {
            let n = round_up(chunk.len() as u64, wgpu::COPY_BUFFER_ALIGNMENT);
            let staging = self.staging(
                &mut slot,
                n,
                wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                "upload staging",
            )?;
            {
                let _mapped = self.map(&staging, wgpu::MapMode::Write, n)?;
                let mut view = staging
                    .slice(..n)
                    .get_mapped_range_mut()
                    .map_err(|e| backend_error(format!("staging buffer not mapped: {e}")))?;
                view.slice(..chunk.len()).copy_from_slice(chunk);
                view.slice(chunk.len()..).fill(0);
                // The view drops before `_mapped` unmaps (reverse order of declaration).
            }
            let mut encoder = self.encoder("upload");
            encoder.copy_buffer_to_buffer(&staging, 0, dst, i as u64 * STAGING_MAX, n);
            self.submit(encoder, what)?;
        }
        Ok(())
    }

    /// Reads the first `len` bytes of `src` back, through the readback staging buffer.
    pub fn read(&self, src: &wgpu::Buffer, len: u64, what: &str) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len as usize);
        let mut slot = lock(&self.readback_staging);
        let mut offset = 0u64;
        while offset < len {
            let chunk = (len - offset).min(STAGING_MAX);
            let n = round_up(chunk, wgpu::COPY_BUFFER_ALIGNMENT);
            let staging = self.staging(
                &mut slot,
                n,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                "readback staging",
            )?;
            let mut encoder = self.encoder("download");
            encoder.copy_buffer_to_buffer(src, offset, &staging, 0, n);
            self.submit(encoder, what)?;
            {
                let _mapped = self.map(&staging, wgpu::MapMode::Read, n)?;
                let view = staging
                    .slice(..n)
                    .get_mapped_range()
                    .map_err(|e| backend_error(format!("staging buffer not mapped: {e}")))?;
                out.extend_from_slice(&view[..chunk as usize]);
            }
            offset += chunk;
        }
        Ok(out)
    }
}

/// A buffer this thread has asked to map (and, once `Gpu::map` returns it, mapped), unmapped
/// when dropped: after the copy through it, on an error, or when a panic unwinds.
///
/// The staging buffers are shared by every thread of the device; each is used by one thread at a
/// time (its mutex is held from the map to the unmap), and none is ever left mapped.
pub(super) struct Mapped<'b> {
    gpu: &'b Gpu,
    buffer: &'b wgpu::Buffer,
}

impl Drop for Mapped<'_> {
    fn drop(&mut self) {
        self.gpu.unmap(self.buffer);
    }
}

/// Pending work: the encoder products are recorded into, the one compute pass they share, and
/// how many it holds.
///
/// Queued products share one pass because every pass costs wgpu two more command buffers and
/// its own tracking when the encoder is finished (about 3 µs per product of host time on a 2-core
/// VM, most of it in `finish`). Within a pass wgpu-core still tracks usage per dispatch and puts
/// a barrier before each dispatch whose buffers a previous one wrote (y, the partial sums), so
/// products stay ordered: a y read as the next product's x included.
#[derive(Default)]
pub(super) struct Pending {
    /// Declared before `encoder`: a pass must end before its encoder is finished.
    pass: Option<wgpu::ComputePass<'static>>,
    encoder: Option<wgpu::CommandEncoder>,
    pub(super) products: usize,
}

impl Pending {
    /// The pass the next product is recorded into, begun (with its encoder) if none is open.
    pub(super) fn pass(&mut self, gpu: &Gpu) -> &mut wgpu::ComputePass<'static> {
        let encoder = &mut self.encoder;
        self.pass.get_or_insert_with(|| {
            encoder
                .get_or_insert_with(|| gpu.encoder("products"))
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("queued products"),
                    timestamp_writes: None,
                })
                // The pass locks the encoder until it is dropped (in `take`).
                .forget_lifetime()
        })
    }

    /// Ends the pass and hands over the encoder, if any products were recorded.
    pub(super) fn take(&mut self) -> Option<wgpu::CommandEncoder> {
        self.pass = None;
        self.products = 0;
        self.encoder.take()
    }
}
