//! A fixed-size random sample of temporal traces that merges exactly.
//!
//! A fleet yields far more traces (one per process run) than partitioning needs, so only
//! `capacity` of them are kept, each cut to its first `max_length` functions (LLVM keeps 100
//! traces of at most 10000 functions: `--temporal-profile-trace-reservoir-size`,
//! `--temporal-profile-max-trace-length`). LLVM's reservoir draws from a random generator as
//! traces stream in, so the sample depends on the arrival order and merging two reservoirs only
//! approximates sampling their union. Here every trace gets a key, a hash of the seed and the
//! trace itself (process id, time of its first sample, functions), and the sample is the
//! `capacity` traces with the smallest keys ("bottom-k" sampling). That is a uniform random
//! sample for a given seed, independent of arrival order, and the bottom `k` of a union is the
//! bottom `k` of the parts' bottom `k`s: merging samples gives exactly the sample of all inputs
//! read at once.
//!
//! Samples are saved as text (see [`TraceSample::write`]) so that fleets can sample per host and
//! merge later.

use std::fmt::Write as _;
use std::path::Path;

use md5::{Digest, Md5};

use crate::error::{Error, Result};

/// One process's functions in the order they first ran.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TemporalTrace {
    /// Process id (0 when the input has none).
    pub pid: i64,
    /// Time of the process's first sample in the binary (perf's sample time, 0 when absent).
    pub start_time: u64,
    /// Symbol names, each once.
    pub functions: Vec<String>,
}

/// How traces are sampled. Samples merge only when these agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplingParams {
    pub seed: u64,
    /// Traces kept.
    pub capacity: usize,
    /// Functions kept per trace (the first ones).
    pub max_length: usize,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams { seed: 0, capacity: 100, max_length: 10_000 }
    }
}

/// The sampled traces, smallest key first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceSample {
    params: SamplingParams,
    /// Non-empty traces offered (the sampled stream's size).
    seen: u64,
    entries: Vec<(u64, TemporalTrace)>,
}

const HEADER: &str = "# profgen temporal traces v1";

impl TraceSample {
    pub fn new(params: SamplingParams) -> Self {
        TraceSample { params, seen: 0, entries: Vec::new() }
    }

    pub fn params(&self) -> SamplingParams {
        self.params
    }

    /// Non-empty traces offered to this sample and to the samples merged into it.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The kept traces, in key order.
    pub fn traces(&self) -> impl ExactSizeIterator<Item = &TemporalTrace> {
        self.entries.iter().map(|(_, t)| t)
    }

    /// Offers one trace: cut to `max_length`, kept if its key is among the `capacity` smallest.
    /// Empty traces are ignored.
    pub fn offer(&mut self, mut trace: TemporalTrace) {
        trace.functions.truncate(self.params.max_length);
        if trace.functions.is_empty() {
            return;
        }
        self.seen += 1;
        let key = sample_key(self.params.seed, &trace);
        self.insert((key, trace));
    }

    fn insert(&mut self, entry: (u64, TemporalTrace)) {
        let at = self.entries.partition_point(|e| *e <= entry);
        if at < self.params.capacity {
            self.entries.insert(at, entry);
            self.entries.truncate(self.params.capacity);
        }
    }

    /// Adds `other`'s traces: the result is the sample of both inputs read together.
    pub fn merge(&mut self, other: TraceSample) -> std::result::Result<(), String> {
        if other.params != self.params {
            return Err(format!(
                "traces were sampled with {} but this run samples with {}",
                describe(&other.params),
                describe(&self.params)
            ));
        }
        self.seen += other.seen;
        for entry in other.entries {
            self.insert(entry);
        }
        Ok(())
    }

    /// Text form: a header line, the parameters, then per trace a `trace` line (pid, start time,
    /// number of functions) followed by one function name per line.
    pub fn write(&self) -> String {
        let p = &self.params;
        let mut out = String::new();
        let _ = writeln!(out, "{HEADER}");
        let _ = writeln!(
            out,
            "seed {} capacity {} max-length {} seen {}",
            p.seed, p.capacity, p.max_length, self.seen
        );
        for (_, t) in &self.entries {
            let _ = writeln!(out, "trace {} {} {}", t.pid, t.start_time, t.functions.len());
            for f in &t.functions {
                let _ = writeln!(out, "{f}");
            }
        }
        out
    }

    /// Reads [`TraceSample::write`]'s text; errors name `path` and the line.
    pub fn read(bytes: &[u8], path: &Path) -> Result<TraceSample> {
        let text = std::str::from_utf8(bytes).map_err(|e| Error::Malformed {
            path: path.to_path_buf(),
            offset: e.valid_up_to() as u64,
            what: "not UTF-8 text: not a trace file".into(),
        })?;
        let bad = |line: usize, what: String| Error::BadLine {
            path: path.to_path_buf(),
            line: line as u64 + 1,
            what,
        };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, h)) if h == HEADER => {}
            _ => {
                return Err(bad(0, format!("not a trace file: the first line must be `{HEADER}`")));
            }
        }
        let (n, params_line) =
            lines.next().ok_or_else(|| bad(1, "missing the parameter line".into()))?;
        let fields: Vec<&str> = params_line.split(' ').collect();
        let number = |i: usize, name: &str| -> Result<u64> {
            match (fields.get(i), fields.get(i + 1)) {
                (Some(&k), Some(v)) if k == name => {
                    v.parse().map_err(|_| bad(n, format!("`{name}` needs a number, not `{v}`")))
                }
                _ => Err(bad(
                    n,
                    format!(
                        "expected `seed S capacity C max-length L seen N`, found `{params_line}`"
                    ),
                )),
            }
        };
        let params = SamplingParams {
            seed: number(0, "seed")?,
            capacity: number(2, "capacity")? as usize,
            max_length: number(4, "max-length")? as usize,
        };
        let seen = number(6, "seen")?;
        let mut sample = TraceSample::new(params);
        while let Some((n, line)) = lines.next() {
            let f: Vec<&str> = line.split(' ').collect();
            let parsed = match f.as_slice() {
                ["trace", pid, time, len] => pid
                    .parse::<i64>()
                    .ok()
                    .zip(time.parse::<u64>().ok())
                    .zip(len.parse::<usize>().ok()),
                _ => None,
            };
            let Some(((pid, start_time), len)) = parsed else {
                return Err(bad(n, format!("expected `trace PID TIME FUNCTIONS`, found `{line}`")));
            };
            if len == 0 || len > params.max_length {
                return Err(bad(
                    n,
                    format!(
                        "a trace has 1 to max-length ({}) functions, not {len}",
                        params.max_length
                    ),
                ));
            }
            let mut functions = Vec::with_capacity(len);
            for _ in 0..len {
                let Some((_, name)) = lines.next() else {
                    return Err(bad(
                        n,
                        format!("the file ends inside this trace of {len} functions"),
                    ));
                };
                functions.push(name.to_string());
            }
            let trace = TemporalTrace { pid, start_time, functions };
            let key = sample_key(params.seed, &trace);
            sample.insert((key, trace));
        }
        if (sample.entries.len() as u64) > seen {
            return Err(bad(
                1,
                format!(
                    "`seen {seen}` is less than the {} traces in the file",
                    sample.entries.len()
                ),
            ));
        }
        sample.seen = seen;
        Ok(sample)
    }
}

fn describe(p: &SamplingParams) -> String {
    format!("seed {}, {} traces of at most {} functions", p.seed, p.capacity, p.max_length)
}

/// The sampling key: the low 64 bits of the MD5 of the seed and the whole trace.
fn sample_key(seed: u64, t: &TemporalTrace) -> u64 {
    let mut h = Md5::new();
    h.update(seed.to_le_bytes());
    h.update(t.pid.to_le_bytes());
    h.update(t.start_time.to_le_bytes());
    for f in &t.functions {
        h.update(f.as_bytes());
        h.update([0]);
    }
    let digest = h.finalize();
    u64::from_le_bytes(digest[..8].try_into().expect("MD5 digests have 16 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(pid: i64, names: &[&str]) -> TemporalTrace {
        TemporalTrace {
            pid,
            start_time: pid as u64 * 1000,
            functions: names.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn many(n: i64) -> Vec<TemporalTrace> {
        (0..n).map(|i| trace(i, &["main", if i % 3 == 0 { "a" } else { "b" }, "c"])).collect()
    }

    fn params(seed: u64, capacity: usize) -> SamplingParams {
        SamplingParams { seed, capacity, max_length: 2 }
    }

    #[test]
    fn traces_are_cut_to_max_length_and_empty_ones_ignored() {
        let mut s = TraceSample::new(params(1, 10));
        s.offer(trace(1, &["main", "a", "c"]));
        s.offer(trace(2, &[]));
        assert_eq!(s.seen(), 1);
        assert_eq!(s.traces().next().unwrap().functions, vec!["main", "a"]);
    }

    #[test]
    fn the_sample_does_not_depend_on_the_arrival_order() {
        let mut forward = TraceSample::new(params(5, 8));
        let mut backward = TraceSample::new(params(5, 8));
        for t in many(50) {
            forward.offer(t);
        }
        for t in many(50).into_iter().rev() {
            backward.offer(t);
        }
        assert_eq!(forward, backward);
        assert_eq!(forward.traces().len(), 8);
        assert_eq!(forward.seen(), 50);
    }

    #[test]
    fn the_seed_picks_the_sample() {
        let pids = |seed| {
            let mut s = TraceSample::new(params(seed, 8));
            many(50).into_iter().for_each(|t| s.offer(t));
            s.traces().map(|t| t.pid).collect::<Vec<_>>()
        };
        assert_eq!(pids(1), pids(1));
        assert_ne!(pids(1), pids(2));
    }

    #[test]
    fn merging_samples_equals_sampling_everything_at_once() {
        let all = many(60);
        let mut whole = TraceSample::new(params(9, 7));
        all.iter().cloned().for_each(|t| whole.offer(t));
        // Any split into parts, merged in any order, gives the same sample.
        for split in [0, 1, 13, 30, 59, 60] {
            let mut a = TraceSample::new(params(9, 7));
            let mut b = TraceSample::new(params(9, 7));
            all[..split].iter().cloned().for_each(|t| a.offer(t));
            all[split..].iter().cloned().for_each(|t| b.offer(t));
            let mut ab = a.clone();
            ab.merge(b.clone()).unwrap();
            b.merge(a).unwrap();
            assert_eq!(ab, whole, "split at {split}");
            assert_eq!(b, whole, "split at {split}, merged the other way");
        }
    }

    #[test]
    fn identical_traces_count_as_many_times_as_they_occur() {
        let mut s = TraceSample::new(params(3, 4));
        for _ in 0..3 {
            s.offer(trace(7, &["main"]));
        }
        assert_eq!(s.traces().len(), 3);
        assert_eq!(s.seen(), 3);
    }

    #[test]
    fn merge_refuses_other_parameters() {
        let mut a = TraceSample::new(params(1, 4));
        let b = TraceSample::new(params(2, 4));
        assert_eq!(
            a.merge(b).unwrap_err(),
            "traces were sampled with seed 2, 4 traces of at most 2 functions but this run \
             samples with seed 1, 4 traces of at most 2 functions"
        );
    }

    #[test]
    fn text_round_trip() {
        let mut s = TraceSample::new(params(4, 5));
        many(9).into_iter().for_each(|t| s.offer(t));
        let text = s.write();
        assert!(text.starts_with(
            "# profgen temporal traces v1\nseed 4 capacity 5 max-length 2 seen 9\ntrace "
        ));
        assert_eq!(TraceSample::read(text.as_bytes(), Path::new("t.traces")).unwrap(), s);
    }

    #[test]
    fn malformed_text_names_file_and_line() {
        let err = |text: &str| {
            TraceSample::read(text.as_bytes(), Path::new("t.traces")).unwrap_err().to_string()
        };
        assert_eq!(
            err("hello\n"),
            "t.traces:1: not a trace file: the first line must be `# profgen temporal traces v1`"
        );
        let head = "# profgen temporal traces v1\nseed 1 capacity 2 max-length 3 seen 1\n";
        assert_eq!(
            err(&format!("{head}trace 1 2 2\nmain\n")),
            "t.traces:3: the file ends inside this trace of 2 functions"
        );
        assert_eq!(
            err(&format!("{head}trace 1 2 4\n")),
            "t.traces:3: a trace has 1 to max-length (3) functions, not 4"
        );
        assert_eq!(
            err(&format!("{head}trace x 2 1\nmain\n")),
            "t.traces:3: expected `trace PID TIME FUNCTIONS`, found `trace x 2 1`"
        );
        assert_eq!(
            err("# profgen temporal traces v1\nseed 1 capacity x\n"),
            "t.traces:2: `capacity` needs a number, not `x`"
        );
    }
}
