//! Virtual unwinder on arbitrary LBR + call stack contents over real corpus binaries: sample
//! normalisation (`normalize_hybrid_sample`) then `Unwinder::unwind`, as the driver runs them.
//!
//! Input layout: byte 0 picks the binary (bit 0) and the context shaping options (bits 1-7),
//! byte 1 the call stack length, byte 2 its depth: 0 keeps the stack as given, `d` repeats its
//! callers (all frames after the leaf) until it is `512 * d` frames deep, up to 130,560, so
//! stacks deeper than every bound are reachable. Then 3-byte addresses: the call stack, then LBR
//! (from, to) pairs. An address is mostly an offset into the binary's executable segment (tags 0
//! and 1 snap it to an instruction start), sometimes an address outside it. Trailing bytes after
//! the last whole address select profgen's default unwinding (prolog/epilog recovery, tail-call
//! frames); without them the llvm-compatible one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profgen::addr::Vaddr;
use profgen::aggregate::unwinder::{
    NormalizeStats, UnwindOptions, Unwinder, normalize_hybrid_sample,
};
use profgen::binary::{Binary, LoadOptions};
use profgen::llvm::ContextShape;
use std::path::Path;
use std::sync::OnceLock;

/// A pseudo-probe binary (contexts keyed by addresses) and a DWARF-only one (symbolized frames).
const BINARIES: [&str; 2] =
    ["perf-samples/inline_chain/inline_chain", "perf-samples/ip-inline-pie/prog"];

fn binaries() -> &'static [Binary] {
    static LOADED: OnceLock<Vec<Binary>> = OnceLock::new();
    LOADED.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        BINARIES
            .iter()
            .map(|b| {
                Binary::load(&root.join(b), &LoadOptions::default()).expect("corpus binary loads")
            })
            .collect()
    })
}

fn addr(binary: &Binary, b: &[u8]) -> Vaddr {
    let v = u64::from(u16::from_le_bytes([b[1], b[2]]));
    let exec = binary.segments().iter().find(|s| s.executable).expect("an executable segment");
    let inside = Vaddr(exec.vaddr.0 + v % exec.memsz.max(1));
    match b[0] & 3 {
        // Snapped to the next instruction start, as real samples are.
        0 | 1 => binary.insts_in(inside, Vaddr(inside.0 + 16)).next().unwrap_or(inside),
        2 => inside,
        _ => Vaddr(v << (b[0] >> 2)),
    }
}

fuzz_target!(|data: &[u8]| {
    let [flags, stack_len, depth, rest @ ..] = data else {
        return;
    };
    let binary = &binaries()[usize::from(flags & 1)];
    // Bytes past the last whole address (ignored by the addresses) choose profgen's default
    // unwinding (prolog/epilog recovery, tail-call frames) over the llvm-compatible one.
    let default_mode = rest.len() % 3 != 0;
    let opts = UnwindOptions {
        probe_based: binary.probes().is_some(),
        context: ContextShape {
            compress_recursion: i32::from((flags >> 1) & 7) - 1,
            max_context_depth: i32::from(flags >> 4) - 1,
        },
        tail_call_frames: default_mode,
    };
    let addrs: Vec<Vaddr> = rest.chunks_exact(3).map(|b| addr(binary, b)).collect();
    let (stack, branch_addrs) = addrs.split_at(usize::from(*stack_len).min(addrs.len()));
    let mut callchain = stack.to_vec();
    if let [_, callers @ ..] = stack
        && !callers.is_empty()
    {
        let deep = 512 * usize::from(*depth);
        while callchain.len() < deep {
            callchain.extend_from_slice(callers);
        }
    }
    let branches: Vec<(Vaddr, Vaddr)> =
        branch_addrs.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    let mut stats = NormalizeStats::default();
    let repeat = u64::from(*stack_len) << 56;
    if let Some(sample) =
        normalize_hybrid_sample(binary, &callchain, &branches, repeat, default_mode, &mut stats)
    {
        let mut unwinder = Unwinder::new(binary, opts);
        // Twice: the second pass meets the context keys the first one cached; counts saturate.
        unwinder.unwind(&sample, repeat);
        unwinder.unwind(&sample, u64::MAX);
        let _ = unwinder.finish();
    }
});
