//! Parallel aggregation of one input stream: the reading thread decodes records and tracks
//! mappings (both inherently sequential), copies each sample into a batch, and hands full batches
//! to worker threads, which translate addresses and count distinct samples into their own maps;
//! the maps are merged at the end. Each batch carries the address map that was current when its
//! samples were read, so the result equals a sequential run's whatever the scheduling.
//!
//! Memory stays bounded: the channel holds at most a few batches per worker.

use super::samples::{AggregatedSamples, Aggregator, SampleOptions, SampleStats};
use crate::addr::{Branch, RuntimeAddr};
use crate::binary::Binary;
use crate::input::Sample;
use crate::mapping::AddressMap;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

/// Samples per batch: large enough to make channel traffic negligible.
const BATCH_SAMPLES: usize = 4096;

/// The fixed-size part of a copied sample; its call chain and branches follow in the batch's
/// shared vectors.
struct SampleHead {
    pid: Option<i32>,
    tid: Option<i32>,
    ip: RuntimeAddr,
    period: u64,
    repeat: u64,
    has_callchain: bool,
    callchain_len: u32,
    branches_len: u32,
}

struct Batch {
    map: Arc<AddressMap>,
    heads: Vec<SampleHead>,
    callchains: Vec<RuntimeAddr>,
    branches: Vec<Branch<RuntimeAddr>>,
}

impl Batch {
    fn new(map: Arc<AddressMap>) -> Self {
        Batch {
            map,
            heads: Vec::with_capacity(BATCH_SAMPLES),
            callchains: Vec::new(),
            branches: Vec::new(),
        }
    }

    fn aggregate_into(&self, agg: &mut Aggregator<'_>) {
        let (mut c, mut b) = (0, 0);
        for h in &self.heads {
            let (cn, bn) = (h.callchain_len as usize, h.branches_len as usize);
            let s = Sample {
                pid: h.pid,
                tid: h.tid,
                time: None,
                attr_index: 0,
                ip: h.ip,
                period: h.period,
                repeat: h.repeat,
                callchain: &self.callchains[c..c + cn],
                branches: &self.branches[b..b + bn],
                has_callchain: h.has_callchain,
            };
            agg.add(&self.map, &s);
            c += cn;
            b += bn;
        }
    }
}

/// The reading side: collects samples into batches and sends them to the workers.
pub struct BatchSender {
    tx: SyncSender<Batch>,
    batch: Batch,
}

impl BatchSender {
    /// Queues `s`, to be translated with `map` (the mapping state when `s` was read).
    pub fn add(&mut self, map: &AddressMap, s: &Sample<'_>) {
        if self.batch.map.generation() != map.generation() {
            self.flush();
            self.batch.map = Arc::new(map.clone());
        }
        let b = &mut self.batch;
        b.heads.push(SampleHead {
            pid: s.pid,
            tid: s.tid,
            ip: s.ip,
            period: s.period,
            repeat: s.repeat,
            has_callchain: s.has_callchain,
            callchain_len: s.callchain.len() as u32,
            branches_len: s.branches.len() as u32,
        });
        b.callchains.extend_from_slice(s.callchain);
        b.branches.extend_from_slice(s.branches);
        if b.heads.len() >= BATCH_SAMPLES {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.batch.heads.is_empty() {
            return;
        }
        let next = Batch::new(self.batch.map.clone());
        let full = std::mem::replace(&mut self.batch, next);
        // Workers only stop when the sender is dropped, so the receiving end is alive.
        let _ = self.tx.send(full);
    }
}

fn work<'b>(
    binary: &'b Binary,
    opts: SampleOptions,
    rx: &Mutex<Receiver<Batch>>,
) -> Aggregator<'b> {
    let mut agg = Aggregator::new(binary, opts);
    loop {
        // A poisoned lock means another worker panicked; the scope re-raises that panic.
        let next = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => break,
        };
        match next {
            Ok(batch) => batch.aggregate_into(&mut agg),
            Err(_) => break,
        }
    }
    agg
}

/// Runs `read` on this thread with a [`BatchSender`] while `workers` threads aggregate the
/// batches; returns `read`'s result and the merged samples and statistics.
pub fn aggregate_in_parallel<T>(
    binary: &Binary,
    opts: SampleOptions,
    workers: usize,
    initial_map: &AddressMap,
    read: impl FnOnce(&mut BatchSender) -> T,
) -> (T, AggregatedSamples, SampleStats) {
    let (tx, rx) = sync_channel::<Batch>(workers * 4);
    let rx = Mutex::new(rx);
    std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..workers.max(1)).map(|_| scope.spawn(|| work(binary, opts, &rx))).collect();
        let mut sender = BatchSender { tx, batch: Batch::new(Arc::new(initial_map.clone())) };
        let out = read(&mut sender);
        sender.flush();
        drop(sender);
        let mut samples = AggregatedSamples::default();
        let mut stats = SampleStats::default();
        for h in handles {
            let agg = match h.join() {
                Ok(agg) => agg,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            stats.merge(&agg.stats);
            samples.merge(agg.samples);
        }
        (out, samples, stats)
    })
}
