//! Timing on the device: each timed product (or streaming read) is one compute pass with a
//! timestamp written at its start and its end; the timestamps of many passes are resolved into
//! one buffer and read back once, and seconds = ticks × `Queue::get_timestamp_period()` ns.
//! Without `TIMESTAMP_QUERY` the host clock times each product around a wait.

use std::time::Instant;

use crate::error::Result;

use super::backend::WgpuBackend;
use super::gpu::{buffer_size, round_up};
use super::kernel::{Kernel, STREAM_UNROLL, STREAM_WORKGROUP};
use super::memory::{GpuMatrix, GpuVector};
use super::pipelines::PipelineKey;

/// Timed passes per query set (two timestamps each).
const PASSES_PER_QUERY_SET: usize = (wgpu::QUERY_SET_MAX_QUERIES / 2) as usize;

/// Bytes of the pattern the streaming-read buffers are filled with (copied on the device).
const PATTERN_BYTES: u64 = 4 << 20;

/// One buffer of the streaming read: at most one binding's worth of bytes.
struct StreamChunk {
    bind_group: wgpu::BindGroup,
    workgroups: u32,
}

impl WgpuBackend {
    pub(super) fn has_timestamps(&self) -> bool {
        self.gpu.features.contains(wgpu::Features::TIMESTAMP_QUERY)
    }

    /// Records `n` passes with `record(encoder, i, timestamp writes)`, runs them, and returns
    /// the seconds between the start and end timestamps of each.
    fn timed_passes(
        &self,
        n: usize,
        mut record: impl FnMut(
            &mut wgpu::CommandEncoder,
            usize,
            wgpu::ComputePassTimestampWrites<'_>,
        ) -> Result<()>,
    ) -> Result<Vec<f64>> {
        let mut seconds = Vec::with_capacity(n);
        let period_ns = self.gpu.queue.get_timestamp_period() as f64;
        let mut done = 0;
        while done < n {
            let batch = (n - done).min(PASSES_PER_QUERY_SET);
            let count = 2 * batch as u32;
            let queries = self.gpu.scoped("timestamp queries", 0, || {
                self.gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("product timestamps"),
                    ty: wgpu::QueryType::Timestamp,
                    count,
                })
            })?;
            let resolved = self.gpu.create_buffer(
                8 * count as u64,
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                "resolved timestamps",
            )?;
            let mut encoder = self.gpu.encoder("timed passes");
            for i in 0..batch {
                let writes = wgpu::ComputePassTimestampWrites {
                    query_set: &queries,
                    beginning_of_pass_write_index: Some(2 * i as u32),
                    end_of_pass_write_index: Some(2 * i as u32 + 1),
                };
                record(&mut encoder, done + i, writes)?;
            }
            encoder.resolve_query_set(&queries, 0..count, &resolved, 0);
            self.gpu.submit(encoder, "timed passes")?;
            let bytes = self
                .gpu
                .read(&resolved, 8 * count as u64, "reading timestamps")?;
            let ticks: Vec<u64> = bytes
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                .collect();
            seconds.extend(
                ticks
                    .chunks_exact(2)
                    .map(|t| t[1].saturating_sub(t[0]) as f64 * period_ns * 1e-9),
            );
            done += batch;
        }
        Ok(seconds)
    }

    /// `warmup` products queued with `queue(i)`, then `iters` timed ones: each recorded by
    /// `record(pass, i)` alone in a pass between two timestamps, or, where the adapter has no
    /// timestamps or there is no `record`, queued with `queue(i)` on the host clock around a
    /// wait. What the products with a sparse input are timed with.
    pub(super) fn time_recorded(
        &self,
        warmup: usize,
        iters: usize,
        queue: impl Fn(usize) -> Result<()>,
        record: Option<impl Fn(&mut wgpu::ComputePass<'_>, usize) -> Result<()>>,
    ) -> Result<Vec<f64>> {
        for i in 0..warmup {
            queue(i)?;
        }
        self.synchronize_impl()?;
        match record {
            Some(record) if self.has_timestamps() => {
                self.timed_passes(iters, |encoder, i, writes| {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some("timed product"),
                        timestamp_writes: Some(writes),
                    });
                    record(&mut pass, warmup + i)
                })
            }
            _ => {
                let mut times = Vec::with_capacity(iters);
                for i in warmup..warmup + iters {
                    let start = Instant::now();
                    queue(i)?;
                    self.synchronize_impl()?;
                    times.push(start.elapsed().as_secs_f64());
                }
                Ok(times)
            }
        }
    }

    /// `warmup` untimed products of `batch` vectors, then `iters` timed ones, cycling through
    /// `a`.
    pub(super) fn time_products(
        &self,
        a: &[&GpuMatrix],
        x: &GpuVector,
        y: &GpuVector,
        batch: usize,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        if a.is_empty() {
            return Ok(Vec::new());
        }
        let matrix = |i: usize| a[i % a.len()];
        for i in 0..warmup {
            self.spmv_impl(matrix(i), x, y, batch)?;
        }
        self.synchronize_impl()?;
        if !self.has_timestamps() {
            let mut times = Vec::with_capacity(iters);
            for i in warmup..warmup + iters {
                let start = Instant::now();
                self.spmv_impl(matrix(i), x, y, batch)?;
                self.synchronize_impl()?;
                times.push(start.elapsed().as_secs_f64());
            }
            return Ok(times);
        }
        // One pass per timed product: timestamps are written at a pass's start and end only.
        self.timed_passes(iters, |encoder, i, writes| {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("timed product"),
                timestamp_writes: Some(writes),
            });
            self.record_batch(&mut pass, matrix(warmup + i), x, y, batch)
        })
    }

    /// Buffers of `bytes` bytes (whole 16-byte words) in chunks of at most one binding, filled
    /// with a non-constant pattern, each with its bind group.
    fn stream_chunks(&self, bytes: u64) -> Result<Vec<StreamChunk>> {
        let words = bytes.div_ceil(16);
        let words_per_chunk = (self.matrix_limit / 16).clamp(1, u32::MAX as u64);
        let pattern_len = (16 * words).min(PATTERN_BYTES);
        let pattern: Vec<u8> = (0..pattern_len / 4)
            .flat_map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes())
            .collect();
        let pattern = self
            .gpu
            .upload(&pattern, wgpu::BufferUsages::COPY_SRC, "stream pattern")?;
        let max_groups = self.gpu.limits.max_compute_workgroups_per_dimension.max(1);
        let mut chunks = Vec::new();
        let mut encoder = self.gpu.encoder("stream fill");
        let mut start = 0u64;
        while start < words {
            let n = (words - start).min(words_per_chunk);
            let size = 16 * n;
            let data = self.gpu.create_buffer(
                size,
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                "stream data",
            )?;
            let mut offset = 0;
            while offset < size {
                let len = (size - offset).min(pattern_len);
                encoder.copy_buffer_to_buffer(&pattern, 0, &data, offset, len);
                offset += len;
            }
            let workgroups =
                (n.div_ceil((STREAM_WORKGROUP * STREAM_UNROLL) as u64) as u32).clamp(1, max_groups);
            let params: [u32; 4] = [n as u32, 0, 0, 0];
            let params = self.gpu.upload(
                bytemuck::cast_slice(&params),
                wgpu::BufferUsages::UNIFORM,
                "stream parameters",
            )?;
            let sums = self.gpu.create_buffer(
                buffer_size(4 * workgroups as u64),
                wgpu::BufferUsages::STORAGE,
                "stream sums",
            )?;
            let bind_group = self.gpu.scoped("stream bind group", 0, || {
                self.gpu
                    .device
                    .create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some("stream"),
                        layout: &self.pipelines.stream,
                        entries: &[
                            wgpu::BindGroupEntry {
                                binding: 0,
                                resource: params.as_entire_binding(),
                            },
                            wgpu::BindGroupEntry {
                                binding: 1,
                                resource: data.as_entire_binding(),
                            },
                            wgpu::BindGroupEntry {
                                binding: 2,
                                resource: sums.as_entire_binding(),
                            },
                        ],
                    })
            })?;
            chunks.push(StreamChunk {
                bind_group,
                workgroups,
            });
            start += n;
        }
        self.gpu.submit(encoder, "filling the stream buffers")?;
        self.gpu.wait()?;
        Ok(chunks)
    }

    /// Seconds per pass of the streaming-read kernel over `bytes` bytes (rounded up to whole
    /// 16-byte words), `iters` timed passes after `warmup`.
    pub(super) fn stream_read_impl(
        &self,
        bytes: u64,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        self.synchronize_impl()?;
        if bytes == 0 {
            return Ok(vec![0.0; iters]);
        }
        let chunks = self.stream_chunks(round_up(bytes, 16))?;
        let pipeline = self
            .pipelines
            .get(&self.gpu, PipelineKey::plain(Kernel::Stream, false))?;
        let record = |encoder: &mut wgpu::CommandEncoder,
                      writes: Option<wgpu::ComputePassTimestampWrites<'_>>| {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("stream read"),
                timestamp_writes: writes,
            });
            pass.set_pipeline(&pipeline);
            for c in &chunks {
                pass.set_bind_group(0, &c.bind_group, &[]);
                pass.dispatch_workgroups(c.workgroups, 1, 1);
            }
        };
        let mut encoder = self.gpu.encoder("stream warm-up");
        for _ in 0..warmup {
            record(&mut encoder, None);
        }
        self.gpu.submit(encoder, "stream warm-up")?;
        self.gpu.wait()?;
        if !self.has_timestamps() {
            let mut times = Vec::with_capacity(iters);
            for _ in 0..iters {
                let start = Instant::now();
                let mut encoder = self.gpu.encoder("stream read");
                record(&mut encoder, None);
                self.gpu.submit(encoder, "stream read")?;
                self.gpu.wait()?;
                times.push(start.elapsed().as_secs_f64());
            }
            return Ok(times);
        }
        self.timed_passes(iters, |encoder, _, writes| {
            record(encoder, Some(writes));
            Ok(())
        })
    }
}
